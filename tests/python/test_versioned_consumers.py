"""numpy 2.x and jax (CPU) from PyPI: DLPack 1.x consumers that ask for
"dltensor_versioned" capsules. Run by scripts/python-test.sh in its own venv."""

import gc

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import capsules  # noqa: E402
import tensord  # noqa: E402
from lifetime import DeleterLedger, wait_for_no_leases  # noqa: E402

jax.config.update("jax_enable_x64", True)

DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"]


class CapsuleProbe:
    """Wraps a tensord.Tensor and records what a consumer asked __dlpack__
    for and which capsule it got."""

    def __init__(self, tensor):
        self.tensor = tensor
        self.calls = []

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        capsule = self.tensor.__dlpack__(**kwargs)
        self.calls.append((kwargs.get("max_version"), capsules.name_of(capsule)))
        return capsule

    def assert_capsule_follows_max_version(self):
        assert len(self.calls) == 1
        max_version, capsule_name = self.calls[0]
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        assert capsule_name == ("dltensor_versioned" if versioned else "dltensor")


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy2_roundtrip_versioned(client, name, dtype):
    source = ((np.arange(12) % 5) - 2).astype(dtype).reshape(3, 4)
    info = client.put(name, source)
    assert info.dtype == dtype
    ledger = DeleterLedger()
    probe = CapsuleProbe(client.fetch(name))
    fetched = np.from_dlpack(probe)
    assert probe.calls[0][1] == "dltensor_versioned"  # numpy 2 asks for DLPack 1.x
    assert fetched.dtype == source.dtype
    np.testing.assert_array_equal(fetched, source)
    del fetched, probe
    ledger.assert_each_deleted_once(1)
    wait_for_no_leases(client, name)


def test_numpy2_read_only_and_copy_on_write(local_server, name):
    client = tensord.Client(local_server.address, path="local")
    client.put(name, np.zeros(8, dtype=np.int64))
    shared = np.from_dlpack(client.fetch(name, read_only=True))
    assert not shared.flags.writeable  # the READ_ONLY flag reached numpy
    private = np.from_dlpack(client.fetch(name))
    assert private.flags.writeable
    private[:] = 9  # copy-on-write: the stored tensor is untouched
    np.testing.assert_array_equal(shared, np.zeros(8, dtype=np.int64))
    np.testing.assert_array_equal(np.from_dlpack(client.fetch(name)), np.zeros(8, dtype=np.int64))
    copied = np.from_dlpack(client.fetch(name, read_only=True), copy=True)
    assert copied.flags.writeable
    del shared, private, copied
    gc.collect()
    wait_for_no_leases(client, name)


def test_numpy2_copy_false_and_device(client, name):
    client.put(name, np.arange(4, dtype=np.float32))
    array = np.from_dlpack(client.fetch(name), copy=False, device="cpu")
    np.testing.assert_array_equal(array, np.arange(4, dtype=np.float32))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int32", "int64", "uint8", "bool", "bfloat16"])
def test_jax_roundtrip(client, name, dtype):
    source = jnp.asarray((np.arange(10) % 3).reshape(2, 5)).astype(dtype)
    info = client.put(name, source)
    assert (info.dtype, info.shape) == (dtype, (2, 5))
    ledger = DeleterLedger()
    probe = CapsuleProbe(client.fetch(name))
    fetched = jax.dlpack.from_dlpack(probe)
    # jax 0.10 still asks without max_version, so it gets a legacy capsule.
    probe.assert_capsule_follows_max_version()
    assert fetched.dtype == source.dtype
    assert bool((fetched == source).all())
    del fetched, probe
    ledger.assert_each_deleted_once(1)
    wait_for_no_leases(client, name)


def test_jax_zero_d_and_zero_size(client, name):
    client.put(name + "/scalar", jnp.asarray(2.5, dtype=jnp.float32))
    assert float(jax.dlpack.from_dlpack(client.fetch(name + "/scalar"))) == 2.5
    client.put(name + "/empty", np.zeros((2, 0), dtype=np.int16))
    assert jax.dlpack.from_dlpack(client.fetch(name + "/empty")).shape == (2, 0)


def test_consumer_error_with_capsule_dropped_keeps_error_and_deletes_once(client, name):
    # numpy has no bfloat16: it raises and drops our versioned capsule while
    # its error is pending.
    client.put(name, jnp.ones(3, dtype=jnp.bfloat16))
    ledger = DeleterLedger()
    with pytest.raises((BufferError, TypeError, RuntimeError)):
        np.from_dlpack(client.fetch(name))
    ledger.assert_each_deleted_once(1)
    wait_for_no_leases(client, name)


def test_put_from_tensord_tensor(client, name):
    client.put(name + "/a", np.arange(6, dtype=np.uint8))
    client.put(name + "/b", client.fetch(name + "/a"))
    np.testing.assert_array_equal(np.from_dlpack(client.fetch(name + "/b")), np.arange(6, dtype=np.uint8))


def test_jax_batch_round_trip(client, name):
    sources = {f"{name}/{dtype}": jnp.asarray((np.arange(10) % 3).reshape(2, 5)).astype(dtype)
               for dtype in ["bfloat16", "bool", "float32", "int64"]}
    result = client.batch_put(sources)
    assert result.ok, result.errors
    ledger = DeleterLedger()
    fetched = client.batch_fetch(list(sources) + [f"{name}/missing"])
    assert isinstance(fetched[-1], tensord.Error)
    arrays = [jax.dlpack.from_dlpack(tensor) for tensor in fetched[:-1]]
    for array, source in zip(arrays, sources.values()):
        assert array.dtype == source.dtype and bool((array == source).all())
    del fetched, arrays, array
    ledger.assert_each_deleted_once(4)
