"""The tensord module against a real server, with numpy as producer and
consumer. Runs in both venvs (numpy 1.24 legacy capsules, numpy 2 versioned)."""

import gc

import numpy as np
import pytest

import capsules
import tensord
from lifetime import DeleterLedger, wait_for_no_leases
from tensord_server import wait_until

NUMPY_DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8"]


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_numpy_roundtrip(client, name, dtype):
    source = (np.arange(24) - 7).astype(dtype).reshape(2, 3, 4)
    info = client.put(name, source)
    assert (info.name, info.dtype, info.shape) == (name, dtype, (2, 3, 4))
    fetched = np.from_dlpack(client.fetch(name))
    assert fetched.dtype == source.dtype
    np.testing.assert_array_equal(fetched, source)


def test_zero_d_and_zero_size(client, name):
    client.put(name + "/scalar", np.array(-2.5, dtype=np.float64))
    scalar = np.from_dlpack(client.fetch(name + "/scalar"))
    assert scalar.shape == () and scalar == -2.5
    info = client.put(name + "/empty", np.zeros((3, 0, 2), dtype=np.int32))
    assert info.total_bytes == 0
    empty = np.from_dlpack(client.fetch(name + "/empty"))
    assert empty.shape == (3, 0, 2) and empty.dtype == np.int32


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a[:, ::2],
        lambda a: a.T,
        lambda a: a[::-1, 1:],
    ],
    ids=["step", "transpose", "negative"],
)
def test_non_contiguous_put(client, name, view):
    source = view(np.arange(48, dtype=np.int32).reshape(6, 8))
    assert not source.flags.c_contiguous
    info = client.put(name, source)
    assert info.shape == source.shape
    np.testing.assert_array_equal(np.from_dlpack(client.fetch(name)), source)


def test_a_put_in_several_streams_stores_every_byte_as_one_version(client, name):
    source = np.random.default_rng(5).integers(0, 255, size=(40 << 20) + 77, dtype=np.uint8)
    first = client.put(name, source, streams=2, send_crc32c=True)
    second = client.put(name, source[::-1], streams=3)
    assert second.version > first.version
    np.testing.assert_array_equal(np.from_dlpack(client.fetch(name)), source[::-1])
    with pytest.raises(tensord.Error, match="streams 9 is more than 8"):
        client.put(name, source, streams=9)


def test_stat_list_delete_and_versions(client, name):
    first = client.put(name + "/a", np.ones(4, dtype=np.float32))
    # A reader's hold keeps the first version fetchable after the next put.
    held = np.from_dlpack(client.fetch(name + "/a"))
    second = client.put(name + "/a", np.zeros(4, dtype=np.float32))
    client.put(name + "/b", np.ones(2, dtype=np.uint8))
    assert second.version > first.version
    assert client.stat(name + "/a").version == second.version
    assert client.stat(name + "/a").crc32c == second.crc32c
    assert [info.name for info in client.list(name + "/")] == [name + "/a", name + "/b"]
    if client.local:
        older = client.fetch(name + "/a", version=first.version)
        assert older.version == first.version
        np.testing.assert_array_equal(np.from_dlpack(older), held)
        del older
    del held
    with pytest.raises(tensord.Error) as gone:
        wait_until(lambda: client.stat(name + "/a", version=first.version) and False, "version to go")
    assert gone.value.code == tensord.StatusCode.NOT_FOUND
    assert str(first.version) in gone.value.message
    with pytest.raises(tensord.Error) as stale:
        client.delete(name + "/a", version=first.version)
    assert stale.value.code == tensord.StatusCode.FAILED_PRECONDITION
    assert client.delete(name + "/a") == second.version
    assert [info.name for info in client.list(name + "/")] == [name + "/b"]


def test_errors_carry_code_and_name(client, name):
    with pytest.raises(tensord.Error) as missing:
        client.fetch(name + "/missing")
    assert missing.value.code == tensord.StatusCode.NOT_FOUND
    assert name + "/missing" in missing.value.message
    with pytest.raises(tensord.Error) as bad_name:
        client.put("../escape", np.ones(1, dtype=np.int8))
    assert bad_name.value.code == tensord.StatusCode.INVALID_ARGUMENT
    assert "../escape" in str(bad_name.value)
    with pytest.raises(ValueError, match="-3"):
        client.fetch(name, version=-3)
    with pytest.raises(TypeError, match="list"):
        client.put(name, [1, 2, 3])


def test_bad_client_arguments(tcp_server):
    with pytest.raises(ValueError, match="'sideways'"):
        tensord.Client(tcp_server.address, path="sideways")
    with pytest.raises(ValueError, match="-1"):
        tensord.Client(tcp_server.address, timeout=-1)


def test_unreachable_server_is_unavailable():
    # Port 1 on loopback: nothing listens there; the call fails fast or at its deadline.
    client = tensord.Client("127.0.0.1:1", path="remote", timeout=5)
    with pytest.raises(tensord.Error) as error:
        client.stat("x")
    assert error.value.code in (tensord.StatusCode.UNAVAILABLE, tensord.StatusCode.DEADLINE_EXCEEDED)


def test_dlpack_argument_checks(client, name):
    client.put(name, np.arange(3, dtype=np.int64))
    tensor = client.fetch(name)
    assert tensor.__dlpack_device__() == (1, 0)
    with pytest.raises(ValueError, match="stream"):
        tensor.__dlpack__(stream=1)
    with pytest.raises(BufferError, match=r"\(2, 0\)"):
        tensor.__dlpack__(dl_device=(2, 0))
    with pytest.raises(TypeError, match="'yes'"):
        tensor.__dlpack__(copy="yes")
    with pytest.raises(TypeError, match="max_version"):
        tensor.__dlpack__(max_version=1)
    capsule = tensor.__dlpack__(dl_device=(1, 0), copy=False)
    assert capsules.name_of(capsule) == "dltensor"


def test_capsule_kinds_and_flags(client, name):
    client.put(name, np.arange(5, dtype=np.uint8))
    tensor = client.fetch(name)
    expected_copy_flag = capsules.IS_COPIED if not client.local else 0
    assert capsules.name_of(tensor.__dlpack__()) == "dltensor"
    assert capsules.name_of(tensor.__dlpack__(max_version=(0, 8))) == "dltensor"
    versioned = tensor.__dlpack__(max_version=(1, 0))
    managed = capsules.versioned(versioned)
    assert (managed.major, managed.minor) == (1, 0)
    assert managed.flags == expected_copy_flag
    assert capsules.versioned(tensor.__dlpack__(max_version=(1, 7))).minor == 1
    copied = tensor.__dlpack__(max_version=(1, 1), copy=True)
    assert capsules.versioned(copied).flags == capsules.IS_COPIED
    assert capsules.versioned(copied).dl_tensor.data != managed.dl_tensor.data
    shared = capsules.legacy(tensor.__dlpack__())
    assert shared.dl_tensor.data == managed.dl_tensor.data
    assert shared.dl_tensor.strides[0] == 1 and shared.dl_tensor.shape[0] == 5


def test_read_only_local_fetch(local_server, name):
    client = tensord.Client(local_server.address, path="local")
    client.put(name, np.arange(4, dtype=np.float32))
    tensor = client.fetch(name, read_only=True)
    assert tensor.read_only and not tensor.is_copy
    flags = capsules.versioned(tensor.__dlpack__(max_version=(1, 1))).flags
    assert flags == capsules.READ_ONLY
    # A legacy capsule cannot say read-only: refuse rather than hand out a
    # mapping that faults on write, unless the consumer asks for a copy.
    with pytest.raises(BufferError, match=name):
        tensor.__dlpack__()
    copied = tensor.__dlpack__(copy=True)
    assert capsules.name_of(copied) == "dltensor"


def test_unconsumed_capsules_run_the_deleter_once(client, name):
    client.put(name, np.arange(8, dtype=np.int16))
    ledger = DeleterLedger()
    tensor = client.fetch(name)
    for max_version in (None, (1, 1)):
        capsule = tensor.__dlpack__(max_version=max_version)
        del capsule
    tensor.__dlpack__(copy=True)
    ledger.assert_each_deleted_once(3)
    del tensor
    wait_for_no_leases(client, name)


def test_lease_lives_as_long_as_the_consumer(client, name):
    client.put(name, np.arange(1000, dtype=np.float64))
    ledger = DeleterLedger()
    tensor = client.fetch(name)
    array = np.from_dlpack(tensor)
    del tensor
    gc.collect()
    if client.local:
        # The mapping is the server's memfd: the lease stays while numpy holds it.
        assert client.stat(name).open_leases == 1
    assert ledger.deletes() == 0
    assert array[999] == 999.0
    del array
    ledger.assert_each_deleted_once(1)
    wait_for_no_leases(client, name)


def test_tensor_outlives_its_client(local_server, name):
    client = tensord.Client(local_server.address, path="local")
    client.put(name, np.arange(6, dtype=np.int32))
    array = np.from_dlpack(client.fetch(name))
    del client
    gc.collect()
    np.testing.assert_array_equal(array, np.arange(6, dtype=np.int32))
    observer = tensord.Client(local_server.address, path="remote")
    assert observer.stat(name).open_leases == 1
    del array
    wait_for_no_leases(observer, name)


def test_put_and_fetch_from_threads(client, name):
    import threading

    errors = []

    def worker(index):
        try:
            for round_ in range(5):
                source = np.full(1024, index * 10 + round_, dtype=np.int32)
                client.put(f"{name}/{index}", source)
                np.testing.assert_array_equal(np.from_dlpack(client.fetch(f"{name}/{index}")), source)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []


def test_version_matches_the_package_and_the_server_binary():
    import pathlib
    import re
    import subprocess
    from tensord_server import tensord_binary

    pyproject = (pathlib.Path(__file__).parents[2] / "python" / "pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1) == tensord.__version__
    info = tensord.build_info()
    assert info["version"] == tensord.__version__
    assert isinstance(info["cuda"], bool)
    server = subprocess.run([tensord_binary(), "--version"], capture_output=True, text=True, check=True)
    assert server.stdout.startswith(f"tensord {tensord.__version__} (commit ")


def test_fetch_into_fills_arrays_of_any_strides(client, name):
    data = np.arange(24, dtype=np.float32).reshape(4, 6)
    put = client.put(name, data)
    out = np.zeros((4, 6), dtype=np.float32)
    info = client.fetch_into(name, out)
    assert info.version == put.version
    np.testing.assert_array_equal(out, data)
    # A transposed view: strides (1, 4) in elements.
    backing = np.zeros((6, 4), dtype=np.float32)
    view = backing.T
    client.fetch_into(name, view, version=put.version)
    np.testing.assert_array_equal(view, data)


def test_fetch_into_refuses_mismatches_and_read_only_arrays(client, name):
    client.put(name, np.ones((2, 3), dtype=np.int32))
    for wrong in (np.zeros((3, 2), dtype=np.int32), np.zeros((2, 3), dtype=np.float32)):
        with pytest.raises(tensord.Error) as error:
            client.fetch_into(name, wrong)
        assert error.value.code == tensord.StatusCode.INVALID_ARGUMENT
        assert "does not match" in error.value.message
        assert not wrong.any()
    frozen = np.zeros((2, 3), dtype=np.int32)
    frozen.flags.writeable = False
    # numpy 2 exports it flagged read-only (ValueError here); numpy 1.x refuses to export it.
    with pytest.raises((ValueError, BufferError)):
        client.fetch_into(name, frozen)
    with pytest.raises(TypeError, match="an object with __dlpack__ or the buffer protocol, got list"):
        client.fetch_into(name, [0, 0, 0])


def test_closing_a_tensor_releases_its_hold(client, name):
    client.put(name, np.arange(8, dtype=np.int64))
    with client.fetch(name) as tensor:
        assert not tensor.closed
        array = np.from_dlpack(tensor)
    assert tensor.closed
    assert repr(tensor) == "tensord.Tensor(closed)"
    with pytest.raises(ValueError, match="closed"):
        tensor.shape
    with pytest.raises(ValueError, match="closed"):
        np.from_dlpack(tensor)
    tensor.close()  # idempotent
    # The array made inside the block keeps its bytes (and lease) until it goes.
    np.testing.assert_array_equal(array, np.arange(8, dtype=np.int64))
    del array
    gc.collect()
    wait_for_no_leases(client, name)


def test_malloc_tuning_is_a_call_a_program_makes_once():
    # Process-wide and idempotent; no client makes it on its own.
    assert tensord.tune_malloc_for_transfers() is None
    assert tensord.tune_malloc_for_transfers() is None
