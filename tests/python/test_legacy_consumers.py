"""Debian's torch 1.13 and numpy 1.24 (DLPack 0.6: legacy "dltensor" capsules
only), run by scripts/python-test.sh in a venv over /usr/bin/python3."""

import gc

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tensord  # noqa: E402
from lifetime import DeleterLedger, wait_for_no_leases  # noqa: E402

TORCH_DTYPES = {
    "float16": torch.float16,
    "float32": torch.float32,
    "float64": torch.float64,
    "bfloat16": torch.bfloat16,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "uint8": torch.uint8,
}


@pytest.mark.parametrize("dtype_name", TORCH_DTYPES)
def test_torch_roundtrip(client, name, dtype_name):
    dtype = TORCH_DTYPES[dtype_name]
    source = (torch.arange(30) - 11).to(dtype).reshape(5, 6)
    info = client.put(name, source)
    assert (info.dtype, info.shape) == (dtype_name, (5, 6))
    ledger = DeleterLedger()
    fetched = torch.from_dlpack(client.fetch(name))
    assert fetched.dtype == dtype and fetched.shape == (5, 6)
    assert torch.equal(fetched, source)
    del fetched
    ledger.assert_each_deleted_once(1)
    wait_for_no_leases(client, name)


def test_torch_zero_d_and_zero_size(client, name):
    client.put(name + "/scalar", torch.tensor(7, dtype=torch.int64))
    scalar = torch.from_dlpack(client.fetch(name + "/scalar"))
    assert scalar.shape == () and scalar.item() == 7
    client.put(name + "/empty", torch.zeros(0, 5, dtype=torch.float16))
    empty = torch.from_dlpack(client.fetch(name + "/empty"))
    assert empty.shape == (0, 5) and empty.dtype == torch.float16


@pytest.mark.parametrize(
    "view",
    [lambda t: t.t(), lambda t: t[:, 1::3], lambda t: t.unsqueeze(1).expand(4, 3, 6)],
    ids=["transpose", "step", "broadcast"],
)
def test_torch_non_contiguous_put(client, name, view):
    source = view(torch.arange(24, dtype=torch.float32).reshape(4, 6))
    assert not source.is_contiguous()
    client.put(name, source)
    assert torch.equal(torch.from_dlpack(client.fetch(name)), source)


def test_torch_bool_is_refused_by_torch_itself(client, name):
    # torch 1.13 has no DLPack bool; nothing may be published by the attempt.
    with pytest.raises(RuntimeError, match="Bool"):
        client.put(name, torch.tensor([True, False]))
    with pytest.raises(tensord.Error) as error:
        client.stat(name)
    assert error.value.code == tensord.StatusCode.NOT_FOUND


def test_numpy_124_takes_legacy_capsules(client, name):
    client.put(name, torch.arange(6, dtype=torch.int32))
    ledger = DeleterLedger()
    array = np.from_dlpack(client.fetch(name))
    np.testing.assert_array_equal(array, np.arange(6, dtype=np.int32))
    del array
    ledger.assert_each_deleted_once(1)


def test_consumer_error_with_capsule_dropped_keeps_error_and_deletes_once(client, name):
    # numpy 1.24 cannot take bfloat16: it raises and drops our capsule while
    # its error is pending; the native destructor must keep that error and
    # still run the deleter (and so end the lease) exactly once.
    client.put(name, torch.ones(4, dtype=torch.bfloat16))
    ledger = DeleterLedger()
    with pytest.raises(RuntimeError, match="Unsupported dtype"):
        np.from_dlpack(client.fetch(name))
    ledger.assert_each_deleted_once(1)
    wait_for_no_leases(client, name)


def test_torch_writes_stay_private_on_the_local_path(local_server, name):
    client = tensord.Client(local_server.address, path="local")
    stored = client.put(name, torch.zeros(4096, dtype=torch.float32))
    tensor = client.fetch(name)
    assert not tensor.is_copy and not tensor.read_only
    mapped = torch.from_dlpack(tensor)
    mapped += 5  # copy-on-write: this process's pages only
    assert mapped[4095].item() == 5.0
    again = torch.from_dlpack(client.fetch(name))
    assert again.sum().item() == 0.0
    assert client.stat(name).crc32c == stored.crc32c
    del tensor, mapped, again
    gc.collect()
    wait_for_no_leases(client, name)


def test_read_only_fetch_is_refused_to_legacy_torch(local_server, name):
    client = tensord.Client(local_server.address, path="local")
    client.put(name, torch.ones(3))
    with pytest.raises(BufferError, match="read-only"):
        torch.from_dlpack(client.fetch(name, read_only=True))
    wait_for_no_leases(client, name)


def test_lease_follows_the_torch_tensor(local_server, name):
    client = tensord.Client(local_server.address, path="local")
    client.put(name, torch.arange(100, dtype=torch.int64))
    ledger = DeleterLedger()
    first = torch.from_dlpack(client.fetch(name))
    second = torch.from_dlpack(client.fetch(name))
    gc.collect()
    # Both map the same held version: one lease for the process.
    assert client.stat(name).open_leases == 1
    del first
    gc.collect()
    assert client.stat(name).open_leases == 1
    assert second[99].item() == 99
    del second
    ledger.assert_each_deleted_once(2)
    wait_for_no_leases(client, name)


def test_torch_fetch_into_preallocated_and_transposed(client, name):
    source = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    client.put(name, source)
    out = torch.empty(3, 4)
    client.fetch_into(name, out)
    assert torch.equal(out, source)
    transposed = torch.zeros(4, 3).t()  # strides (1, 3)
    client.fetch_into(name, transposed)
    assert torch.equal(transposed, source)
    with pytest.raises(tensord.Error) as error:
        client.fetch_into(name, torch.empty(4, 3))
    assert error.value.code == tensord.StatusCode.INVALID_ARGUMENT


def test_torch_state_dict_batch(client, name):
    # A model's state dict as one atomic group, read back whole.
    state = {f"{name}/{key}": (torch.arange(12) - 5).to(dtype).reshape(3, 4)
             for key, dtype in [("bias", torch.float32), ("emb", torch.bfloat16), ("index", torch.int64)]}
    state[f"{name}/view"] = torch.arange(24, dtype=torch.float16).reshape(4, 6).t()
    result = client.batch_put(state, atomic=True)
    assert result.ok, result.errors
    ledger = DeleterLedger()
    fetched = {tensor.name: torch.from_dlpack(tensor) for tensor in client.batch_fetch_group(result.group_version)}
    assert list(fetched) == sorted(state)
    for key, tensor in fetched.items():
        assert tensor.dtype == state[key].dtype and torch.equal(tensor, state[key])
    del fetched, tensor
    ledger.assert_each_deleted_once(4)
