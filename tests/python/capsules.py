"""Reads DLPack capsules with ctypes, to check what __dlpack__ produced
without consuming it (its destructor still runs the deleter)."""

import ctypes

_api = ctypes.pythonapi
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p

READ_ONLY = 1 << 0
IS_COPIED = 1 << 1


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("dtype_code", ctypes.c_uint8),
        ("dtype_bits", ctypes.c_uint8),
        ("dtype_lanes", ctypes.c_uint16),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


def name_of(capsule) -> str:
    for name in ("dltensor", "dltensor_versioned", "used_dltensor", "used_dltensor_versioned"):
        if _api.PyCapsule_IsValid(capsule, name.encode()):
            return name
    raise AssertionError(f"{capsule!r} has no DLPack capsule name")


def versioned(capsule) -> DLManagedTensorVersioned:
    pointer = _api.PyCapsule_GetPointer(capsule, b"dltensor_versioned")
    return DLManagedTensorVersioned.from_address(pointer)


def legacy(capsule) -> DLManagedTensor:
    pointer = _api.PyCapsule_GetPointer(capsule, b"dltensor")
    return DLManagedTensor.from_address(pointer)
