"""Fixtures: real tensord servers (TCP, and Unix socket + handoff socket) and
clients for both transfer paths."""

import itertools
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from tensord_server import TensordServer  # noqa: E402

import tensord  # noqa: E402


@pytest.fixture(scope="session")
def tcp_server():
    server = TensordServer()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def local_server():
    server = TensordServer(unix=True, handoff=True)
    yield server
    server.stop()


@pytest.fixture(params=["remote", "local"])
def client(request, tcp_server, local_server):
    """A client over TCP (gRPC streaming) or over the handoff socket (zero-copy)."""
    if request.param == "remote":
        connected = tensord.Client(tcp_server.address, path="remote")
    else:
        connected = tensord.Client(local_server.address, path="local")
    return connected


_names = itertools.count()


@pytest.fixture
def name(request):
    """A fresh tensor name per test."""
    return f"py/{request.node.name.replace('[', '.').replace(']', '')}.{next(_names)}"
