"""Device tensors over the local handoff, against a server with the
simulated device backend (device memory that is host memory in a memfd,
with CUDA's lifecycle rules): they come back as CUDA DLPack tensors
(__dlpack_device__ (2, N)) that this process imports, or as host copies
with device_to_host=True and over gRPC. Device creates are filled through
their capsule's pointer (the simulated device is host-addressable). The
real-GPU test at the end skips without a CUDA device."""

import ctypes

import numpy as np
import pytest

import capsules
import tensord
from tensord_server import TensordServer

KDL_CPU, KDL_CUDA = 1, 2
SOURCE = np.arange(6, dtype=np.float32).reshape(2, 3) * 1.5


@pytest.fixture(scope="module")
def device_server():
    server = TensordServer(unix=True, handoff=True, extra_flags=["--device-backend=simulated"])
    yield server
    server.stop()


@pytest.fixture
def local(device_server):
    return tensord.Client(device_server.address, path="local")


@pytest.fixture
def auto(device_server):
    return tensord.Client(device_server.address)


def write_through_capsule(producer, data: bytes) -> None:
    capsule = producer.__dlpack__()
    tensor = capsules.legacy(capsule).dl_tensor
    assert (tensor.device_type, tensor.device_id) == (KDL_CUDA, 0)
    ctypes.memmove(tensor.data + tensor.byte_offset, data, len(data))


def read_through_capsule(producer, nbytes: int) -> bytes:
    capsule = producer.__dlpack__()
    tensor = capsules.legacy(capsule).dl_tensor
    assert (tensor.device_type, tensor.device_id) == (KDL_CUDA, 0)
    return ctypes.string_at(tensor.data + tensor.byte_offset, nbytes)


def put_on_device(client, name, array=SOURCE):
    writer = client.create(name, str(array.dtype), array.shape, device="cuda:0")
    assert writer.device == (KDL_CUDA, 0) and writer.__dlpack_device__() == (KDL_CUDA, 0)
    write_through_capsule(writer, array.tobytes())
    return writer.seal()


def test_device_create_and_fetch_come_as_cuda_tensors(local, name):
    writer = local.create(name, "float32", (2, 3), device=(KDL_CUDA, 0))
    with pytest.raises(BufferError, match="cuda:0 memory"):
        memoryview(writer)
    write_through_capsule(writer, SOURCE.tobytes())
    info = writer.seal()
    assert info.device == (KDL_CUDA, 0)

    tensor = local.fetch(name)
    assert tensor.__dlpack_device__() == (KDL_CUDA, 0) and not tensor.is_copy
    assert read_through_capsule(tensor, 24) == SOURCE.tobytes()
    # The stored version itself: versioned capsules say read-only, and a
    # legacy one (torch's kind) is still handed out for device memory.
    versioned = tensor.__dlpack__(max_version=(1, 1), stream=1)
    assert capsules.versioned(versioned).flags & capsules.READ_ONLY
    assert capsules.versioned(versioned).dl_tensor.device_type == KDL_CUDA
    assert capsules.name_of(tensor.__dlpack__(stream=0)) == "dltensor"


def test_device_tensor_export_arguments(local, name):
    put_on_device(local, name)
    tensor = local.fetch(name)
    with pytest.raises(BufferError, match="device_to_host=True"):
        tensor.__dlpack__(copy=True)
    with pytest.raises(BufferError, match=r"dl_device \(1, 0\)"):
        tensor.__dlpack__(dl_device=(KDL_CPU, 0))
    assert capsules.name_of(tensor.__dlpack__(dl_device=(KDL_CUDA, 0))) == "dltensor"
    with pytest.raises(TypeError, match="stream must be None or an int"):
        tensor.__dlpack__(stream="default")
    # A host consumer refuses a CUDA tensor (numpy has no device memory).
    with pytest.raises((BufferError, RuntimeError, TypeError, ValueError)):
        np.from_dlpack(tensor)


def test_host_copies_on_request_and_over_grpc(device_server, auto, name):
    put_on_device(auto, name)
    assert auto.local
    imported = auto.fetch(name)
    assert imported.__dlpack_device__() == (KDL_CUDA, 0)
    copied = auto.fetch(name, device_to_host=True)
    assert copied.__dlpack_device__() == (KDL_CPU, 0) and copied.is_copy
    np.testing.assert_array_equal(np.from_dlpack(copied), SOURCE)
    remote = tensord.Client(device_server.address, path="remote")
    over_grpc = remote.fetch(name)
    assert over_grpc.__dlpack_device__() == (KDL_CPU, 0)
    np.testing.assert_array_equal(np.from_dlpack(over_grpc), SOURCE)
    out = np.zeros((2, 3), np.float32)
    auto.fetch_into(name, out)
    np.testing.assert_array_equal(out, SOURCE)


def test_local_path_cannot_give_host_copies(local, name):
    put_on_device(local, name)
    with pytest.raises(tensord.Error) as raised:
        local.fetch(name, device_to_host=True)
    assert raised.value.code == tensord.StatusCode.FAILED_PRECONDITION


def test_batch_fetches_import_device_tensors(auto, local, name):
    put_on_device(local, name + "/a")
    put_on_device(local, name + "/b", np.arange(4, dtype=np.int64))
    items = local.batch_fetch([name + "/a", name + "/b"])
    assert [item.__dlpack_device__() for item in items] == [(KDL_CUDA, 0)] * 2
    assert read_through_capsule(items[1], 32) == np.arange(4, dtype=np.int64).tobytes()
    prefix = local.batch_fetch_prefix(name + "/")
    assert [item.__dlpack_device__() for item in prefix] == [(KDL_CUDA, 0)] * 2
    host = auto.batch_fetch([name + "/a"], device_to_host=True)
    np.testing.assert_array_equal(np.from_dlpack(host[0]), SOURCE)
    host_prefix = auto.batch_fetch_prefix(name + "/", device_to_host=True)
    np.testing.assert_array_equal(np.from_dlpack(host_prefix[1]), np.arange(4))


def test_device_writers_seal_as_a_group(local, name):
    first = local.create(name + "/a", "float32", (2, 3), device="cuda:0")
    second = local.create(name + "/b", "float32", (2, 3), device="cuda")
    write_through_capsule(first, SOURCE.tobytes())
    write_through_capsule(second, (SOURCE + 1).tobytes())
    infos = local.seal_group([first, second])
    assert infos[0].version == infos[1].version
    group = local.batch_fetch_group(infos[0].version)
    assert read_through_capsule(group[1], 24) == (SOURCE + 1).tobytes()


def test_real_gpu_roundtrip_with_torch(name):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device in this process")
    if not tensord.build_info()["cuda"]:
        pytest.skip("this tensord module was built without its CUDA backend")
    server = TensordServer(unix=True, handoff=True, extra_flags=["--device-backend=cuda"])
    try:
        client = tensord.Client(server.address, path="local")
        source = torch.arange(12, dtype=torch.float32, device="cuda:0").reshape(3, 4)
        with client.create(name, torch.float32, (3, 4), device="cuda:0") as writer:
            torch.from_dlpack(writer).copy_(source)
            torch.cuda.synchronize()
        fetched = torch.from_dlpack(client.fetch(name))
        assert fetched.device == torch.device("cuda:0")
        assert torch.equal(fetched, source)
    finally:
        server.stop()
