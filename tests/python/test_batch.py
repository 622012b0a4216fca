"""batch_put and the batch fetches against real servers, with numpy as
producer and consumer. Runs in both venvs."""

import threading

import numpy as np
import pytest

import tensord
from lifetime import DeleterLedger
from tensord_server import TensordServer

# The limited server's --max-tensor-bytes: items over it fail on their own.
MAX_TENSOR_BYTES = 64 * 1024
TOO_BIG = np.zeros(MAX_TENSOR_BYTES + 1, dtype=np.uint8)


@pytest.fixture(scope="module")
def limited_client():
    server = TensordServer(extra_flags=[f"--max-tensor-bytes={MAX_TENSOR_BYTES}"])
    yield tensord.Client(server.address, path="remote")
    server.stop()


def assert_same_bytes(fetched, source):
    array = np.from_dlpack(fetched)
    assert (array.dtype, array.shape) == (source.dtype, source.shape)
    assert array.tobytes() == source.tobytes()


def assert_error(item, code, *mentions):
    assert isinstance(item, tensord.Error), item
    assert item.code == code, item
    for text in mentions:
        assert text in item.message


def test_each_item_publishes_or_fails_on_its_own(limited_client, name):
    sources = {
        f"{name}/small": np.arange(1000, dtype=np.float32),
        f"{name}/too-big": TOO_BIG,
        f"{name}/large": (np.arange(60 * 1024) % 251).astype(np.uint8),
        f"{name}/empty": np.zeros((3, 0), dtype=np.int16),
    }
    result = limited_client.batch_put(sources)
    assert not result.ok and result.group_version is None
    assert [type(item) for item in result.items] == [
        tensord.TensorInfo, tensord.Error, tensord.TensorInfo, tensord.TensorInfo]
    assert_error(result.items[1], tensord.StatusCode.RESOURCE_EXHAUSTED, f"{name}/too-big")
    assert result.errors == [(f"{name}/too-big", result.items[1])]
    published = [item for item in result.items if isinstance(item, tensord.TensorInfo)]
    assert [info.name for info in published] == [f"{name}/small", f"{name}/large", f"{name}/empty"]
    # Each item of a plain batch is its own version, as a put would be.
    assert len({info.version for info in published}) == 3
    with pytest.raises(tensord.Error) as missing:
        limited_client.stat(f"{name}/too-big")
    assert missing.value.code == tensord.StatusCode.NOT_FOUND
    for info in published:
        assert_same_bytes(limited_client.fetch(info.name), sources[info.name])
    assert "published=3, failed=1, group_version=None" in repr(result)


def test_a_refused_atomic_batch_publishes_nothing(limited_client, name):
    result = limited_client.batch_put(
        [(f"{name}/w0", np.ones(10, dtype=np.int32)), (f"{name}/w1", TOO_BIG), (f"{name}/w2", np.ones(3))],
        atomic=True)
    assert not result.ok and result.group_version is None
    assert all(isinstance(item, tensord.Error) for item in result.items)
    assert_error(result.items[1], tensord.StatusCode.RESOURCE_EXHAUSTED, f"{name}/w1")
    for refused in (result.items[0], result.items[2]):
        # The others say they were held back, and because of which item.
        assert_error(refused, tensord.StatusCode.ABORTED, f"{name}/w1")
    assert [error_name for error_name, _ in result.errors] == [f"{name}/w0", f"{name}/w1", f"{name}/w2"]
    assert limited_client.list(name + "/") == []


def test_an_atomic_batch_publishes_and_is_fetched_whole(client, name):
    first = {
        f"{name}/b": np.arange(12, dtype=np.float64).reshape(3, 4),
        f"{name}/a": np.array([1, -2, 3], dtype=np.int8),
        f"{name}/c": np.array(7, dtype=np.int64),
    }
    result = client.batch_put(first, atomic=True)
    assert result.ok and result.errors == []
    assert result.group_version is not None
    assert [info.version for info in result.items] == [result.group_version] * 3
    group = client.batch_fetch_group(result.group_version)
    assert [tensor.name for tensor in group] == sorted(first)
    assert {tensor.version for tensor in group} == {result.group_version}
    for tensor in group:
        assert_same_bytes(tensor, first[tensor.name])

    # Over the local path these tensors hold leases that keep the group whole.
    del group, tensor
    second = client.batch_put({key: np.asarray(value + 1) for key, value in first.items()}, atomic=True)
    assert second.group_version > result.group_version
    # The older group lost its items to the newer one: no longer whole.
    with pytest.raises(tensord.Error) as gone:
        client.batch_fetch_group(result.group_version)
    assert gone.value.code == tensord.StatusCode.NOT_FOUND
    for tensor in client.batch_fetch_group(second.group_version):
        assert_same_bytes(tensor, first[tensor.name] + 1)


def test_batch_fetch_fails_only_the_missing_items(client, name):
    a = np.arange(5, dtype=np.int32)
    b = np.arange(7, dtype=np.uint8)
    put = client.batch_put([(f"{name}/a", a), (f"{name}/b", b)])
    a_version = put.items[0].version
    client.put(f"{name}/a", a * 2)
    fetched = client.batch_fetch([
        f"{name}/a",
        f"{name}/missing",
        (f"{name}/a", a_version),
        ("../escape", None),
        [f"{name}/b", None],
        (f"{name}/b", 999999999),
    ], verify_crc32c=True)
    assert len(fetched) == 6
    assert_same_bytes(fetched[0], a * 2)
    assert_error(fetched[1], tensord.StatusCode.NOT_FOUND, f"{name}/missing")
    if isinstance(fetched[2], tensord.Error):
        # The older version may already be gone once nothing holds it.
        assert_error(fetched[2], tensord.StatusCode.NOT_FOUND, f"{name}/a")
    else:
        assert fetched[2].version == a_version
        assert_same_bytes(fetched[2], a)
    assert_error(fetched[3], tensord.StatusCode.INVALID_ARGUMENT, "../escape")
    assert_same_bytes(fetched[4], b)
    assert_error(fetched[5], tensord.StatusCode.NOT_FOUND, f"{name}/b")
    assert client.batch_fetch([]) == []


def test_batch_fetch_prefix_is_in_name_order(client, name):
    sources = {f"{name}/{key}": np.full(4, index, dtype=np.int16) for index, key in enumerate("cadb")}
    client.batch_put(sources)
    client.put(f"{name}-sibling", np.ones(1, dtype=np.int8))  # shares the text, not the prefix
    tensors = client.batch_fetch_prefix(name + "/")
    assert [tensor.name for tensor in tensors] == sorted(sources)
    for tensor in tensors:
        assert_same_bytes(tensor, sources[tensor.name])
    assert client.batch_fetch_prefix(name + "/nothing/") == []


@pytest.mark.parametrize(
    "source",
    [
        (np.arange(24) - 7).astype("float16").reshape(2, 3, 4),
        np.linspace(-1, 1, 33, dtype=np.float32),
        np.arange(10, dtype=np.float64) / 3,
        np.arange(-128, 128, dtype=np.int8),
        np.arange(-9, 9, dtype=np.int64).reshape(3, 6)[:, ::2],  # non-contiguous
        np.arange(48, dtype=np.uint32).reshape(6, 8).T,
        (np.arange(300 * 1024) % 255).astype(np.uint8),  # spans several chunks
        np.array(-2.5, dtype=np.float64),
        np.zeros((0, 4), dtype=np.int32),
    ],
    ids=["float16", "float32", "float64", "int8", "step", "transpose", "chunked", "0-d", "0-size"],
)
def test_batch_round_trips_are_byte_exact(client, name, source):
    result = client.batch_put([(f"{name}/x", source), (f"{name}/y", source[::-1] if source.ndim else source)],
                              send_crc32c=True)
    assert result.ok, result.errors
    assert result.items[0].shape == source.shape and result.items[0].dtype == str(source.dtype)
    first, second = client.batch_fetch([f"{name}/x", f"{name}/y"], verify_crc32c=True)
    assert_same_bytes(first, source)
    assert_same_bytes(second, source[::-1] if source.ndim else source)


def test_retention_and_iterables_of_pairs(client, name):
    pairs = ((f"{name}/{index}", np.full(2, index, dtype=np.uint16)) for index in range(3))
    result = client.batch_put(pairs, retention="cache")
    assert [info.retention for info in result.items] == ["cache"] * 3
    assert client.stat(f"{name}/0").retention == "cache"
    assert client.put(f"{name}/0", np.ones(1)).retention == "default"
    empty = client.batch_put({})
    assert empty.ok and empty.items == []


def test_bad_arguments_fail_the_whole_call(client, name):
    with pytest.raises(TypeError, match="got str"):
        client.batch_put("abc")
    with pytest.raises(TypeError, match="item 1: expected a \\(name, tensor\\) pair, got int"):
        client.batch_put([(f"{name}/a", np.ones(1)), 5])
    with pytest.raises(TypeError, match="item 0: the name must be a str, got int"):
        client.batch_put([(3, np.ones(1))])
    with pytest.raises(TypeError, match=f"item '{name}/b'.*got list"):
        client.batch_put({f"{name}/a": np.ones(1), f"{name}/b": [1, 2]})
    with pytest.raises(ValueError, match="'forever'"):
        client.batch_put({f"{name}/a": np.ones(1)}, retention="forever")
    # A name the client refuses stops the batch before anything is sent.
    with pytest.raises(tensord.Error) as bad_name:
        client.batch_put({f"{name}/a": np.ones(1), "../escape": np.ones(1)})
    assert bad_name.value.code == tensord.StatusCode.INVALID_ARGUMENT
    assert "../escape" in bad_name.value.message
    assert client.list(name + "/") == []
    with pytest.raises(TypeError, match="got str"):
        client.batch_fetch(f"{name}/a")
    with pytest.raises(TypeError, match="item 1: expected a name or a \\(name, version\\) pair, got int"):
        client.batch_fetch([f"{name}/a", 7])
    with pytest.raises(TypeError, match="item 0: the version must be None or an int, got str"):
        client.batch_fetch([(f"{name}/a", "latest")])
    with pytest.raises(ValueError, match="-1"):
        client.batch_fetch([(f"{name}/a", -1)])
    with pytest.raises(ValueError, match="group_version must be a positive int, got 0"):
        client.batch_fetch_group(0)
    with pytest.raises(tensord.Error) as bad_prefix:
        client.batch_fetch_prefix("has space/")
    assert bad_prefix.value.code == tensord.StatusCode.INVALID_ARGUMENT
    assert tensord.MAX_BATCH_ITEMS == 65536


def test_batch_fetched_tensors_follow_the_fetch_lifetime(client, name):
    client.batch_put({f"{name}/{index}": np.arange(8, dtype=np.int64) * index for index in range(3)})
    ledger = DeleterLedger()
    tensors = client.batch_fetch_prefix(name + "/")
    arrays = [np.from_dlpack(tensor) for tensor in tensors]
    del tensors
    assert ledger.deletes() == 0
    for index, array in enumerate(arrays):
        np.testing.assert_array_equal(array, np.arange(8, dtype=np.int64) * index)
    del arrays, array
    ledger.assert_each_deleted_once(3)
    with client.batch_fetch([f"{name}/1"])[0] as tensor:
        # gRPC copies remotely; the server's own pages over the handoff socket.
        assert tensor.is_copy == (not client.local)
    assert tensor.closed


def test_batch_calls_from_threads(client, name):
    errors = []

    def worker(index):
        try:
            for round_ in range(5):
                sources = {f"{name}/{index}/{item}": np.full(256, round_ * 10 + item, dtype=np.int32)
                           for item in range(4)}
                assert client.batch_put(sources, atomic=True).ok
                for tensor in client.batch_fetch_prefix(f"{name}/{index}/"):
                    assert_same_bytes(tensor, sources[tensor.name])
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
