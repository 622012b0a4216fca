"""The Python binding's batch calls on this machine, in tensors/s, beside
baselines measured in the same rounds.

One tensord (TCP and a handoff socket) and, in each round: raw TCP of one
batch's bytes from this process (socket sendall / recv_into, the floor any
transfer of those bytes pays), batch_put of N numpy arrays, batch_fetch of
their names and batch_fetch_prefix, over gRPC (path="remote") and over the
handoff socket (path="local"). Every fetched item is checked (its first
byte is its index). The C++ rows of the same calls are tensord-bench
--sections batch; this prints the Python ones next to raw TCP.

Run through scripts/bench-python-batch.sh, which makes the venv (numpy, the
tensord module) and passes the tensord binary.
"""
import argparse
import os
import socket
import statistics
import sys
import threading
import time

import numpy as np
import tensord

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
from tensord_server import TensordServer  # noqa: E402


def raw_tcp_seconds(payload: bytes, sink: bytearray) -> float:
    """One send of `payload` over loopback TCP into `sink`, timed."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve():
        connection, _ = listener.accept()
        view = memoryview(sink)
        received = 0
        while received < len(sink):
            received += connection.recv_into(view[received:])
        connection.sendall(b"k")
        connection.close()

    server = threading.Thread(target=serve)
    server.start()
    sender = socket.create_connection(("127.0.0.1", port))
    start = time.perf_counter()
    sender.sendall(payload)
    sender.recv(1)
    seconds = time.perf_counter() - start
    sender.close()
    server.join()
    listener.close()
    return seconds


def check(tensors, count: int, what: str) -> None:
    if len(tensors) != count:
        raise SystemExit(f"{what}: {len(tensors)} of {count} items")
    for index, tensor in enumerate(tensors):
        if isinstance(tensor, Exception):
            raise SystemExit(f"{what}: item {index}: {tensor}")
        if np.from_dlpack(tensor)[0] != index % 251:
            raise SystemExit(f"{what}: item {index} holds another item's bytes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensord", help="the tensord binary (default: TENSORD_BINARY, else build/server/tensord)")
    parser.add_argument("--count", type=int, default=1024, help="tensors per batch (default 1024)")
    parser.add_argument("--bytes", type=int, default=4096, help="bytes per tensor (default 4096)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds; medians are printed (default 7)")
    args = parser.parse_args()
    if args.tensord:
        os.environ["TENSORD_BINARY"] = args.tensord
    if args.count < 1 or args.bytes < 1 or args.rounds < 1:
        raise SystemExit("--count, --bytes and --rounds must be positive")
    tensord.tune_malloc_for_transfers()
    server = TensordServer(handoff=True)
    try:
        remote = tensord.Client(server.address, path="remote")
        local = tensord.Client(server.address, path="local")
        arrays = {}
        for index in range(args.count):
            array = np.full(args.bytes, index % 251, dtype=np.uint8)
            arrays[f"pybench/{index:06d}"] = array
        names = list(arrays)
        payload = np.concatenate(list(arrays.values())).tobytes()
        sink = bytearray(len(payload))
        samples = {}

        def timed(label, run, check_result=None):
            start = time.perf_counter()
            result = run()
            samples.setdefault(label, []).append(time.perf_counter() - start)
            if check_result is not None:
                check_result(result, label)

        def check_put(result, label):
            if not result.ok:
                raise SystemExit(f"{label}: {result.errors[:3]}")

        for _ in range(args.rounds + 1):  # the first round warms up and is dropped
            samples.setdefault("raw TCP, same bytes", []).append(raw_tcp_seconds(payload, sink))
            for label, client in (("remote", remote), ("local", local)):
                timed(f"batch_put ({label})", lambda c=client: c.batch_put(arrays), check_put)
            for label, client in (("remote", remote), ("local", local)):
                timed(f"batch_fetch ({label})", lambda c=client: c.batch_fetch(names),
                      lambda r, what: check(r, args.count, what))
                timed(f"batch_fetch_prefix ({label})", lambda c=client: c.batch_fetch_prefix("pybench/"),
                      lambda r, what: check(r, args.count, what))
        medians = {label: statistics.median(values[1:]) for label, values in samples.items()}
        raw_rate = len(payload) / medians["raw TCP, same bytes"]
        print(f"Python batch calls, {args.count} x {args.bytes} bytes, median of {args.rounds} rounds "
              f"(tensord {server.address}):")
        print(f"  {'raw TCP, same bytes':32s} {raw_rate / 1e9:8.3f} GB/s    baseline")
        for label, seconds in medians.items():
            if label.startswith("raw"):
                continue
            rate = args.count / seconds
            print(f"  {label:32s} {rate:8.0f} tensors/s  {len(payload) / seconds / raw_rate:6.3f}x raw TCP")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
