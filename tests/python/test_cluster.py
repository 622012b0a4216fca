"""The cluster from Python: a real etcd and two tensord nodes on loopback
(skipped where /usr/bin/etcd is absent): put with replicas, read through
from the other node, the cluster listing and a cluster watch; and what a
single node answers to the cluster options."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import numpy as np
import pytest

from tensord_server import TensordServer

import tensord

ETCD = "/usr/bin/etcd"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def etcd():
    if not os.access(ETCD, os.X_OK):
        pytest.skip("etcd-server is not installed (deploy/install-deps.sh installs it)")
    data = tempfile.mkdtemp(prefix="tensord-py-etcd-")
    client_port, peer_port = free_port(), free_port()
    endpoint = f"http://127.0.0.1:{client_port}"
    process = subprocess.Popen(
        [ETCD, "--data-dir", data, "--listen-client-urls", endpoint, "--advertise-client-urls", endpoint,
         "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
         "--initial-cluster", f"default=http://127.0.0.1:{peer_port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", client_port), timeout=0.2):
                break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail("etcd did not start")
            time.sleep(0.05)
    yield endpoint
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=15)
    shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="module")
def nodes(etcd):
    # Node a also serves the local handoff, for the create/seal test.
    started = [TensordServer(handoff=(letter == "a"),
                             extra_flags=[f"--etcd-endpoints={etcd}", f"--node-name=py-{letter}",
                                          "--etcd-lease-ttl=2s", "--etcd-prefix=/tensord-py"])
               for letter in "ab"]
    yield started
    for node in started:
        node.stop()


def test_a_replicated_put_is_read_on_the_other_node_and_listed(nodes):
    a = tensord.Client(nodes[0].address, path="remote")
    b = tensord.Client(nodes[1].address, path="remote")
    weights = np.arange(4096, dtype=np.float32)
    info = a.put("py/w", weights, replicas=2)
    assert info.node == ""
    np.testing.assert_array_equal(np.from_dlpack(b.fetch("py/w")), weights)
    listed = b.list("py/", cluster=True)
    assert [(i.name, i.total_bytes) for i in listed] == [("py/w", weights.nbytes)]
    assert listed[0].node in ("py-a", "py-b")
    with pytest.raises(tensord.Error) as refused:
        a.put("py/x", weights, replicas=3)
    assert refused.value.code == tensord.StatusCode.FAILED_PRECONDITION


def test_a_local_create_with_two_replicas_is_held_by_both_nodes_once_sealed(nodes):
    local = tensord.Client(nodes[0].address, path="local")
    b = tensord.Client(nodes[1].address, path="remote")
    with local.create("pyc/w", "float32", (256,), replicas=2) as writer:
        np.asarray(writer)[:] = np.arange(256, dtype=np.float32)
    # The seal returned once both nodes registered a copy: node b lists its
    # own copy (its local listing, before any read could pull one) and
    # answers from it.
    assert [i.name for i in b.list("pyc/")] == ["pyc/w"]
    np.testing.assert_array_equal(np.from_dlpack(b.fetch("pyc/w")), np.arange(256, dtype=np.float32))
    with pytest.raises(tensord.Error) as refused:
        local.create("pyc/x", "uint8", (4,), replicas=3)
    assert refused.value.code == tensord.StatusCode.FAILED_PRECONDITION


def test_a_cluster_watch_reports_publishes_on_every_node(nodes):
    a = tensord.Client(nodes[0].address, path="remote")
    b = tensord.Client(nodes[1].address, path="remote")
    with b.watch("pyw/", cluster=True) as watch:
        a.put("pyw/m", np.ones(8, dtype=np.int32))
        event = watch.next(timeout=5.0)
        assert event.kind == "published"
        assert [(item.name, item.node) for item in event.items] == [("pyw/m", "py-a")]


def test_an_atomic_batch_is_read_whole_through_the_other_node_by_its_cluster_group(nodes):
    a = tensord.Client(nodes[0].address, path="remote")
    b = tensord.Client(nodes[1].address, path="remote")
    first = {f"pyg/{i}": np.full(64, i, dtype=np.int16) for i in range(5)}
    result = a.batch_put(first, atomic=True)
    assert result.ok and result.cluster_group is not None
    group = b.batch_fetch_cluster_group(result.cluster_group)
    assert [tensor.name for tensor in group] == sorted(first)
    for tensor in group:
        np.testing.assert_array_equal(np.from_dlpack(tensor), first[tensor.name])
    # A later put of one item: the group is no longer whole anywhere.
    a.put("pyg/3", np.zeros(64, dtype=np.int16))
    with pytest.raises(tensord.Error) as gone:
        b.batch_fetch_cluster_group(result.cluster_group)
    assert gone.value.code == tensord.StatusCode.NOT_FOUND
    with pytest.raises(ValueError):
        b.batch_fetch_cluster_group(0)


def test_a_single_node_refuses_the_cluster_options(tcp_server):
    client = tensord.Client(tcp_server.address, path="remote")
    with pytest.raises(tensord.Error) as listed:
        client.list("", cluster=True)
    assert listed.value.code == tensord.StatusCode.FAILED_PRECONDITION
    with pytest.raises(tensord.Error) as put:
        client.put("single/x", np.zeros(4, dtype=np.uint8), replicas=2)
    assert put.value.code == tensord.StatusCode.FAILED_PRECONDITION
    grouped = client.batch_put({"single/g": np.zeros(4, dtype=np.uint8)}, atomic=True)
    assert grouped.ok and grouped.cluster_group is None
    with pytest.raises(tensord.Error) as group:
        client.batch_fetch_cluster_group(grouped.group_version)
    assert group.value.code == tensord.StatusCode.FAILED_PRECONDITION
