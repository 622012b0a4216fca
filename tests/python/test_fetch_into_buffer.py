"""fetch_into into buffer-protocol destinations without __dlpack__:
bytearray, array.array, memoryview (of numpy arrays too), mmap. Typed
buffers must match the stored dtype and shape; a 1-D contiguous byte buffer
takes the bytes of any tensor of exactly its size. Runs in both venvs."""

import array
import mmap

import numpy as np
import pytest

import tensord

SOURCE = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5


def assert_invalid(raised, *words):
    assert raised.value.code == tensord.StatusCode.INVALID_ARGUMENT
    for word in words:
        assert word in raised.value.message, raised.value.message


def test_bytearray_takes_the_raw_bytes(client, name):
    info = client.put(name, SOURCE)
    out = bytearray(24)
    assert client.fetch_into(name, out).version == info.version
    np.testing.assert_array_equal(np.frombuffer(out, np.float32).reshape(2, 3), SOURCE)


def test_raw_bytes_come_in_row_major_order_from_a_strided_version(client, name):
    client.put(name, SOURCE.T)  # stored with its transposed strides
    out = mmap.mmap(-1, 24)
    client.fetch_into(name, out)
    np.testing.assert_array_equal(np.frombuffer(out, np.float32).reshape(3, 2), SOURCE.T)
    out.close()


def test_raw_bytes_of_the_wrong_size_are_refused_untouched(client, name):
    client.put(name, SOURCE)
    out = bytearray(b"\xaa" * 20)
    with pytest.raises(tensord.Error) as raised:
        client.fetch_into(name, out)
    assert_invalid(raised, "bytearray holds 20 bytes", "24 bytes", name)
    assert out == bytearray(b"\xaa" * 20)


def test_array_array_is_typed_by_its_format(client, name):
    client.put(name, SOURCE.reshape(6))
    out = array.array("f", [0.0] * 6)
    client.fetch_into(name, out)
    assert list(out) == list(SOURCE.reshape(6))
    wrong_dtype = array.array("d", [9.0] * 6)
    with pytest.raises(tensord.Error) as raised:
        client.fetch_into(name, wrong_dtype)
    assert_invalid(raised, "float32", "float64")
    assert list(wrong_dtype) == [9.0] * 6


def test_typed_buffer_shape_must_match(client, name):
    client.put(name, SOURCE)
    flat = array.array("f", [9.0] * 6)
    with pytest.raises(tensord.Error) as raised:
        client.fetch_into(name, flat)
    assert_invalid(raised, "float32[6]", "float32[2,3]")
    assert list(flat) == [9.0] * 6
    # A memoryview cast gives the flat array the stored shape.
    client.fetch_into(name, memoryview(flat).cast("B").cast("f", [2, 3]))
    assert list(flat) == list(SOURCE.reshape(6))


def test_memoryview_of_numpy_arrays_any_strides(client, name):
    client.put(name, SOURCE)
    out = np.zeros((2, 3), np.float32)
    client.fetch_into(name, memoryview(out))
    np.testing.assert_array_equal(out, SOURCE)
    wide = np.zeros((2, 6), np.float32)
    client.fetch_into(name, memoryview(wide[:, ::2]))
    np.testing.assert_array_equal(wide[:, ::2], SOURCE)
    assert not wide[:, 1::2].any()
    client.put(name + "/i64", np.arange(4, dtype=np.int64))
    ints = np.zeros(4, np.int64)
    client.fetch_into(name + "/i64", memoryview(ints))
    np.testing.assert_array_equal(ints, np.arange(4))


def test_read_only_buffers_are_refused(client, name):
    client.put(name, SOURCE)
    with pytest.raises(ValueError, match="bytes is read-only"):
        client.fetch_into(name, bytes(24))
    with pytest.raises(ValueError, match="memoryview is read-only"):
        client.fetch_into(name, memoryview(bytearray(24)).toreadonly())
    frozen = np.zeros((2, 3), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        client.fetch_into(name, memoryview(frozen))


def test_unusable_buffers_are_refused(client, name):
    client.put(name, SOURCE)
    with pytest.raises(TypeError, match="buffer protocol, got list"):
        client.fetch_into(name, [0.0] * 6)
    big_endian = np.zeros((2, 3), ">f4")
    with pytest.raises(ValueError, match="big-endian"):
        client.fetch_into(name, memoryview(big_endian))
    assert not big_endian.any()
    # A strided byte view is typed uint8, not raw bytes.
    spaced = bytearray(48)
    with pytest.raises(tensord.Error) as raised:
        client.fetch_into(name, memoryview(spaced)[::2])
    assert_invalid(raised, "uint8")
    assert spaced == bytearray(48)


def test_versions_and_missing_names(client, name):
    client.put(name, np.ones(2, np.float64))
    second = client.put(name, np.full(2, 3.0, np.float64))
    out = bytearray(16)
    assert client.fetch_into(name, out, version=second.version).version == second.version
    assert np.frombuffer(out, np.float64).tolist() == [3.0, 3.0]
    with pytest.raises(tensord.Error) as gone:
        client.fetch_into(name, out, version=second.version - 1)
    assert gone.value.code == tensord.StatusCode.NOT_FOUND
    with pytest.raises(tensord.Error) as raised:
        client.fetch_into(name + "/missing", bytearray(16))
    assert raised.value.code == tensord.StatusCode.NOT_FOUND
