"""Zero-copy create/seal from Python: Client.create, tensord.TensorWriter
(DLPack and buffer-protocol views filled in place), seal/abort, the context
manager, and Client.seal_group. Runs in both venvs (torch only in legacy)."""

import gc

import numpy as np
import pytest

import tensord
from tensord_server import TensordServer


@pytest.fixture
def local(local_server):
    return tensord.Client(local_server.address, path="local")


def assert_not_found(client, name):
    with pytest.raises(tensord.Error) as raised:
        client.stat(name)
    assert raised.value.code == tensord.StatusCode.NOT_FOUND


def test_numpy_2_from_dlpack_is_writable(local, name):
    if np.__version__.startswith("1."):
        pytest.skip("numpy 1.x marks every from_dlpack array read-only; np.asarray(writer) is the way there")
    writer = local.create(name, "int32", (3,))
    filled = np.from_dlpack(writer)
    assert filled.flags.writeable
    filled[:] = [5, 6, 7]
    del filled
    writer.seal()
    np.testing.assert_array_equal(np.from_dlpack(local.fetch(name)), [5, 6, 7])


def test_numpy_fills_in_place_and_seal_publishes(local, name):
    writer = local.create(name, "float32", (2, 3))
    assert (writer.name, writer.dtype, writer.shape, writer.nbytes) == (name, "float32", (2, 3), 24)
    assert writer.__dlpack_device__() == (1, 0) and writer.state == "open"
    np.asarray(writer)[...] = np.arange(6, dtype=np.float32).reshape(2, 3)
    # Nothing is visible to readers before the seal.
    assert_not_found(local, name)
    assert name not in [info.name for info in local.list("py/")]
    info = writer.seal()
    assert (info.name, info.dtype, info.shape) == (name, "float32", (2, 3))
    assert writer.state == "sealed" and writer.info.version == info.version
    np.testing.assert_array_equal(np.from_dlpack(local.fetch(name)), np.arange(6).reshape(2, 3))


def test_buffer_protocol_views_are_typed_and_writable(local, name):
    writer = local.create(name, np.int16, [4, 2])
    view = memoryview(writer)
    assert (view.format, view.shape, view.strides, view.readonly) == ("h", (4, 2), (4, 2), False)
    view.release()
    filled = np.frombuffer(writer, dtype=np.int16)
    filled[:] = np.arange(8, dtype=np.int16) - 3
    del filled
    with memoryview(writer) as raw:
        raw.cast("B")[0:2] = b"\x07\x00"  # element 0 := 7 (little-endian)
    writer.seal(send_crc32c=True)
    expected = (np.arange(8, dtype=np.int16) - 3).reshape(4, 2)
    expected[0, 0] = 7
    np.testing.assert_array_equal(np.from_dlpack(local.fetch(name)), expected)


def test_dtype_without_struct_code_is_a_byte_buffer(local, name):
    writer = local.create(name, "bfloat16", (3,))
    with memoryview(writer) as view:
        assert (view.format, view.shape, view.nbytes) == ("B", (6,), 6)
        view[:] = bytes([0x80, 0x3F, 0x00, 0x40, 0x40, 0x40])  # bfloat16 1.0, 2.0, 3.0
    info = writer.seal()
    assert info.dtype == "bfloat16"
    out = bytearray(6)
    local.fetch_into(name, out)
    assert bytes(out) == bytes([0x80, 0x3F, 0x00, 0x40, 0x40, 0x40])


def test_context_manager_seals_on_exit_and_aborts_on_exception(local, name):
    with local.create(name + "/ok", "uint8", (3,)) as writer:
        np.asarray(writer)[:] = [1, 2, 3]
    assert writer.state == "sealed"
    assert writer.info.name == name + "/ok"
    np.testing.assert_array_equal(np.from_dlpack(local.fetch(name + "/ok")), [1, 2, 3])

    with pytest.raises(RuntimeError, match="producer failed"):
        with local.create(name + "/failed", "uint8", (3,)) as failed:
            np.asarray(failed)[:] = [4, 5, 6]
            raise RuntimeError("producer failed")
    assert failed.state == "aborted" and failed.info is None
    assert_not_found(local, name + "/failed")


def test_use_after_seal_or_abort_raises(local, name):
    writer = local.create(name, "float64", (2,))
    writer.seal()
    with pytest.raises(ValueError, match="already sealed"):
        writer.seal()
    with pytest.raises(ValueError, match="already sealed"):
        writer.__dlpack__()
    with pytest.raises(BufferError, match="already sealed"):
        memoryview(writer)
    aborted = local.create(name + "/aborted", "float64", (2,))
    aborted.abort()
    aborted.abort()  # idempotent
    with pytest.raises(ValueError, match="already aborted"):
        aborted.seal()
    assert_not_found(local, name + "/aborted")
    assert "aborted" in repr(aborted)


def test_seal_refuses_while_views_are_alive(local, name):
    writer = local.create(name, "float32", (4,))
    array = np.asarray(writer)
    view = memoryview(writer)
    capsule_array = np.from_dlpack(writer)
    with pytest.raises(BufferError, match="3 view"):
        writer.seal()
    assert writer.state == "open"
    array[:] = 1.5
    del array, capsule_array
    view.release()
    assert writer.seal().shape == (4,)
    np.testing.assert_array_equal(np.from_dlpack(local.fetch(name)), np.full(4, 1.5, np.float32))


def test_abort_with_a_live_view_keeps_the_view_valid(local, name):
    writer = local.create(name, "int32", (1024,))
    array = np.asarray(writer)
    writer.abort()
    array[:] = 7  # still mapped: the create goes when the array does
    assert int(array.sum()) == 7 * 1024
    del array
    gc.collect()
    assert_not_found(local, name)


def test_dropped_writer_aborts_and_frees_its_bytes(name):
    # A quota of 1 MiB: an unsealed create still charged would refuse the next.
    server = TensordServer(unix=True, handoff=True, extra_flags=["--max-host-bytes=1MiB"])
    try:
        client = tensord.Client(server.address, path="local")
        for _ in range(3):
            writer = client.create(name, "uint8", (700 * 1024,))
            np.asarray(writer)[:] = 1
            del writer
            gc.collect()
            assert_not_found(client, name)
        with client.create(name, "uint8", (700 * 1024,)) as last:
            np.asarray(last)[:] = 2
        assert client.stat(name).total_bytes == 700 * 1024
    finally:
        server.stop()


def test_create_options(local, name):
    with local.create(name, "float16", (2,), retention="cache") as writer:
        np.asarray(writer)[:] = 0.5
    assert writer.info.retention == "cache"
    assert local.stat(name).retention == "cache"
    with pytest.raises(ValueError, match="retention must be"):
        local.create(name, "float16", (2,), retention="forever")
    with pytest.raises(ValueError, match="device must be"):
        local.create(name, "float16", (2,), device="tpu:0")
    for dtype in ("f32", np.dtype("float32"), np.float32):
        assert local.create(name + "/d", dtype, (1,)).dtype == "float32"
    with pytest.raises(ValueError, match="dtype must be"):
        local.create(name, float, (2,))
    with pytest.raises(ValueError, match="dtype must be"):
        local.create(name, "float33", (2,))
    with pytest.raises(tensord.Error) as negative:
        local.create(name, "float32", (2, -1))
    assert negative.value.code == tensord.StatusCode.INVALID_ARGUMENT


def test_create_needs_the_local_handoff(tcp_server, name):
    remote = tensord.Client(tcp_server.address, path="remote")
    with pytest.raises(tensord.Error) as raised:
        remote.create(name, "float32", (2,))
    assert raised.value.code == tensord.StatusCode.UNAVAILABLE
    assert "local handoff" in raised.value.message and "path='local'" in raised.value.message


def test_seal_group_publishes_all_under_one_version(local, name):
    first = local.create(name + "/a", "float32", (2,))
    second = local.create(name + "/b", "int64", (3,))
    np.asarray(first)[:] = [1.0, 2.0]
    np.asarray(second)[:] = [7, 8, 9]
    assert_not_found(local, name + "/a")
    infos = local.seal_group([first, second], send_crc32c=True)
    assert isinstance(infos, tensord.SealGroupResult)
    assert [info.name for info in infos] == [name + "/a", name + "/b"]
    assert len(infos) == 2 and infos[-1].name == infos.items[1].name
    assert infos[0].version == infos[1].version == infos.group_version
    assert infos.cluster_group is None  # a single node orders no cluster group
    with pytest.raises(IndexError):
        infos[2]
    assert first.state == second.state == "sealed" and second.info.version == infos[0].version
    group = local.batch_fetch_group(infos.group_version)
    np.testing.assert_array_equal(np.from_dlpack(group[0]), [1.0, 2.0])
    np.testing.assert_array_equal(np.from_dlpack(group[1]), [7, 8, 9])


def test_seal_group_checks_every_writer_before_taking_any(local, name):
    open_writer = local.create(name + "/open", "uint8", (2,))
    sealed = local.create(name + "/sealed", "uint8", (2,))
    sealed.seal()
    with pytest.raises(ValueError, match="already sealed"):
        local.seal_group([open_writer, sealed])
    with pytest.raises(ValueError, match="twice"):
        local.seal_group([open_writer, open_writer])
    with pytest.raises(TypeError, match="TensorWriter"):
        local.seal_group([open_writer, "not a writer"])
    view = memoryview(open_writer)
    with pytest.raises(BufferError, match="view"):
        local.seal_group([open_writer])
    view.release()
    assert open_writer.state == "open"
    assert_not_found(local, name + "/open")
    assert local.seal_group([open_writer])[0].name == name + "/open"


def test_torch_fills_in_place(local, name):
    torch = pytest.importorskip("torch")
    writer = local.create(name, torch.float32, (3, 2))
    torch.from_dlpack(writer).copy_(torch.arange(6, dtype=torch.float32).reshape(3, 2))
    writer.seal()
    fetched = torch.from_dlpack(local.fetch(name))
    assert torch.equal(fetched, torch.arange(6, dtype=torch.float32).reshape(3, 2))
    with local.create(name + "/half", torch.float16, (4,)) as half:
        torch.from_dlpack(half).fill_(0.25)
    assert half.info.dtype == "float16"
