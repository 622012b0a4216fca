"""The wire contract with plain grpcio (no tensord client library). The
script runs in its own process: its generated tensord.v1 stubs would clash
with this process's imported tensord module."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("grpc_tools")

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "raw_grpc_fetch.py")


@pytest.mark.parametrize("server_fixture", ["tcp_server", "local_server"])
def test_raw_grpc_put_and_fetch(request, server_fixture):
    server = request.getfixturevalue(server_fixture)
    result = subprocess.run([sys.executable, SCRIPT, server.address], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "byte-exact" in result.stdout
