"""Starts a real tensord process for the Python tests and stops it by PID."""

import os
import shutil
import signal
import subprocess
import tempfile
import time

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
POLL_INTERVAL_S = 0.02


def tensord_binary() -> str:
    """TENSORD_BINARY, else build/server/tensord of this repository."""
    default = os.path.join(os.path.dirname(__file__), "..", "..", "build", "server", "tensord")
    path = os.path.abspath(os.environ.get("TENSORD_BINARY", default))
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"no tensord binary at {path}; build it or set TENSORD_BINARY")
    return path


class TensordServer:
    """A tensord on 127.0.0.1 (port picked by the kernel) or on a Unix socket,
    optionally with a handoff socket for the zero-copy local path."""

    def __init__(self, *, unix: bool = False, handoff: bool = False, extra_flags=()):
        self.temp_dir = tempfile.mkdtemp(prefix="tensord-py-")
        self.stderr_path = os.path.join(self.temp_dir, "stderr.log")
        ready_path = os.path.join(self.temp_dir, "ready")
        listen = f"unix:{self.temp_dir}/grpc.sock" if unix else "127.0.0.1:0"
        self.handoff_socket = os.path.join(self.temp_dir, "handoff.sock") if handoff else None
        arguments = [tensord_binary(), f"--listen={listen}", f"--ready-file={ready_path}", "--log-level=warning"]
        # Local handoff only where a test asks for it (tensord's default is on).
        arguments.append(f"--handoff-socket={self.handoff_socket or 'off'}")
        arguments.extend(extra_flags)
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(arguments, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not os.path.exists(ready_path):
            if self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"tensord exited with {self.process.returncode} before it was ready: {self.stderr_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"tensord wrote no ready file in {READY_TIMEOUT_S} s: {self.stderr_tail()}")
            time.sleep(POLL_INTERVAL_S)
        with open(ready_path) as ready:
            self.addresses = [line.strip() for line in ready if line.strip()]
        self.address = self.addresses[0]

    def stderr_tail(self) -> str:
        try:
            with open(self.stderr_path, errors="replace") as stderr:
                return stderr.read()[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited in time; both by PID."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=STOP_TIMEOUT_S)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def wait_until(predicate, what: str, timeout_s: float = 15.0):
    """Polls `predicate` (bounded in time) until it returns a truthy value."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(POLL_INTERVAL_S)
