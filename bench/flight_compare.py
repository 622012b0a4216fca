"""tensord against Apache Arrow Flight, on this machine and in the same run.

One uint8 tensor of each size is put and fetched by a long-lived client in
this process; each server runs in its own process. Flight moves it the way
its users do: DoPut in 1 MiB record batches, DoGet of those batches, each
copied into place in one reused buffer. tensord's client is the Python
binding over gRPC (path="remote"): put() from the array, fetch_into() the
same reused buffer. Rounds alternate the two so both see the same machine.

Run through scripts/bench-flight.sh, which makes the venv (pyarrow, the
tensord module) and passes the tensord binary.
"""
import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight

BATCH_BYTES = 1 << 20
MIB = 1 << 20


class OneColumnFlightServer(flight.FlightServerBase):
    """Keeps each put table (its 1 MiB batches) and streams it back as put."""

    def __init__(self, location):
        super().__init__(location)
        self._tables = {}

    def do_put(self, context, descriptor, reader, writer):
        self._tables[descriptor.path[0]] = reader.read_all()

    def do_get(self, context, ticket):
        return flight.RecordBatchStream(self._tables[ticket.ticket])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"flight_compare: {what} did not start")
            time.sleep(0.05)


def flight_put(client, name: bytes, source: np.ndarray) -> None:
    data = pa.py_buffer(source)
    schema = pa.schema([("bytes", pa.uint8())])
    writer, _ = client.do_put(flight.FlightDescriptor.for_path(name), schema)
    for offset in range(0, source.nbytes, BATCH_BYTES):
        length = min(BATCH_BYTES, source.nbytes - offset)
        column = pa.Array.from_buffers(pa.uint8(), length, [None, data.slice(offset, length)])
        writer.write_batch(pa.record_batch([column], schema=schema))
    writer.close()


def flight_fetch_into(client, name: bytes, destination: np.ndarray) -> None:
    offset = 0
    for chunk in client.do_get(flight.Ticket(name)):
        column = chunk.data.column(0)
        length = len(column)
        values = np.frombuffer(column.buffers()[1], dtype=np.uint8, count=length, offset=column.offset)
        np.copyto(destination[offset:offset + length], values)
        offset += length
    if offset != destination.nbytes:
        raise SystemExit(f"flight_compare: Flight DoGet returned {offset} of {destination.nbytes} bytes")


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tensord", required=False, help="the tensord binary")
    parser.add_argument("--sizes-mib", default="256,1024")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tensord-arg", action="append", default=[],
                        help="a further tensord flag, e.g. --tensord-arg=--spare-put-bytes=0")
    parser.add_argument("--serve-flight", type=int, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.serve_flight:
        OneColumnFlightServer(f"grpc://127.0.0.1:{arguments.serve_flight}").serve()
        return 0
    import tensord  # the module under test; not needed by the Flight server process

    flight_port, tensord_port = free_port(), free_port()
    flight_server = subprocess.Popen([sys.executable, __file__, "--serve-flight", str(flight_port)])
    data_dir = tempfile.mkdtemp(prefix="tensord-flight-")
    tensord_server = subprocess.Popen(
        [arguments.tensord, f"--listen=127.0.0.1:{tensord_port}", "--handoff-socket=off",
         "--max-host-bytes=6GiB", *arguments.tensord_arg], stderr=open(os.path.join(data_dir, "tensord.log"), "w"))
    try:
        wait_for_port(flight_port, flight_server, "the Flight server")
        wait_for_port(tensord_port, tensord_server, "tensord")
        flight_client = flight.FlightClient(f"grpc://127.0.0.1:{flight_port}")
        tensord_client = tensord.Client(f"127.0.0.1:{tensord_port}", path="remote")
        print(f"flight_compare: pyarrow {pa.__version__}, {os.cpu_count()} CPUs, "
              f"{arguments.rounds} alternating rounds, medians in GB/s (1e9 bytes/s)")
        print(f"  {'size':>9}  {'op':<5} {'tensord':>8} {'Flight':>8} {'ratio':>6}  target")
        for size_mib in (int(s) for s in arguments.sizes_mib.split(",")):
            size = size_mib * MIB
            source = np.frombuffer(np.random.default_rng(size_mib).bytes(size), dtype=np.uint8)
            destination = np.ones(size, dtype=np.uint8)  # pre-faulted, reused
            name = f"flight/{size_mib}"
            samples = {key: [] for key in ("tensord put", "flight put", "tensord fetch", "flight fetch")}
            for round_index in range(arguments.rounds + 1):  # round 0 warms both up
                times = {
                    "tensord put": timed(lambda: tensord_client.put(name, source)),
                    "flight put": timed(lambda: flight_put(flight_client, name.encode(), source)),
                    "tensord fetch": timed(lambda: tensord_client.fetch_into(name, destination)),
                }
                if not np.array_equal(destination[::4096], source[::4096]):
                    raise SystemExit("flight_compare: tensord fetched other bytes")
                destination[::4096] = 0
                times["flight fetch"] = timed(lambda: flight_fetch_into(flight_client, name.encode(), destination))
                if not np.array_equal(destination[::4096], source[::4096]):
                    raise SystemExit("flight_compare: Flight fetched other bytes")
                if round_index > 0:
                    for key, seconds in times.items():
                        samples[key].append(seconds)
            for op in ("put", "fetch"):
                ours = size / statistics.median(samples[f"tensord {op}"]) / 1e9
                theirs = size / statistics.median(samples[f"flight {op}"]) / 1e9
                ratio = ours / theirs
                verdict = "met" if ratio >= 1.2 else "MISSED"
                print(f"  {size_mib:>5} MiB  {op:<5} {ours:8.2f} {theirs:8.2f} {ratio:6.2f}x  >= 1.2x {verdict}")
            tensord_client.delete(name)
    finally:
        for process in (tensord_server, flight_server):
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
