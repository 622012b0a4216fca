#!/usr/bin/env python3
"""Writes the fuzz seed files beside this script: small valid .npy and
.safetensors files (no numpy needed). Rerun after changing a seed."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def npy(descr, shape, fortran=False, version=1, data=None, itemsize=1):
    shape_text = "(%s,)" % shape[0] if len(shape) == 1 else "(%s)" % ", ".join(map(str, shape))
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape_text)
    fmt, prefix = ("<H", 10) if version == 1 else ("<I", 12)
    pad = (64 - (prefix + len(d) + 1) % 64) % 64
    header = d + " " * pad + "\n"
    n = 1
    for s in shape:
        n *= s
    body = data if data is not None else bytes(i % 251 for i in range(n * itemsize))
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack(fmt, len(header)) + header.encode() + body


def safetensors(tensors, metadata=None, pad_to=8):
    header, blob = {}, b""
    for name, (dtype, shape, itemsize) in tensors.items():
        n = itemsize
        for s in shape:
            n *= s
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + n]}
        blob += bytes(i % 253 for i in range(n))
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((pad_to - len(text) % pad_to) % pad_to)
    return struct.pack("<Q", len(text)) + text + blob


def write(folder, name, data):
    with open(os.path.join(HERE, folder, name), "wb") as f:
        f.write(data)


write("npy", "f4_2x3.npy", npy("<f4", [2, 3], itemsize=4))
write("npy", "i8_fortran_2x3x2.npy", npy("<i8", [2, 3, 2], fortran=True, itemsize=8))
write("npy", "b1_scalar.npy", npy("|b1", [], itemsize=1))
write("npy", "u2_empty_0x4.npy", npy("<u2", [0, 4], itemsize=2))
write("npy", "c8_v2.npy", npy("<c8", [3], version=2, itemsize=8))
write("npy", "f2_v3.npy", npy("<f2", [5], version=3, itemsize=2))
write("npy", "u1_big_endian_marker.npy", npy(">u1", [7], itemsize=1))

write("safetensors", "multi.safetensors", safetensors(
    {"w": ("F32", [2, 3], 4), "b": ("BF16", [3], 2), "mask": ("BOOL", [4], 1),
     "e": ("F8_E4M3", [0, 2], 1)}, metadata={"format": "pt"}))
write("safetensors", "empty.safetensors", safetensors({}))
write("safetensors", "scalar_i64.safetensors", safetensors({"step": ("I64", [], 8)}))
write("safetensors", "c64_f8e5m2.safetensors", safetensors(
    {"z": ("C64", [2], 8), "q": ("F8_E5M2", [2, 2], 1), "u": ("U16", [3], 2)}))
