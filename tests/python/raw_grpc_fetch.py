#!/usr/bin/env python3
"""Puts and fetches a tensor with nothing but grpcio and stubs generated from
proto/ at run time: proof that the wire contract is usable without tensord's
client library.

    python raw_grpc_fetch.py 127.0.0.1:50051
"""

import array
import importlib
import os
import sys
import tempfile

import grpc
from grpc_tools import protoc

PROTO_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")
CHUNK_BYTES = 1000  # small, so the tensor spans several chunks
MAX_MESSAGE_BYTES = 8 << 20
DEADLINE_S = 30


def generate_stubs(out_dir: str):
    """tensord/v1/*_pb2(_grpc).py from proto/, imported from out_dir."""
    protos = [os.path.join(PROTO_ROOT, "tensord", "v1", f) for f in ("tensor.proto", "tensor_service.proto")]
    arguments = ["protoc", f"-I{PROTO_ROOT}", f"--python_out={out_dir}", f"--grpc_python_out={out_dir}", *protos]
    if protoc.main(arguments) != 0:
        raise RuntimeError(f"protoc failed: {' '.join(arguments)}")
    # Regular packages, so they win over an installed tensord module (this
    # script must run in a process that has not imported that one).
    for package in ("tensord", os.path.join("tensord", "v1")):
        open(os.path.join(out_dir, package, "__init__.py"), "w").close()
    sys.path.insert(0, out_dir)
    return (
        importlib.import_module("tensord.v1.tensor_pb2"),
        importlib.import_module("tensord.v1.tensor_service_pb2"),
        importlib.import_module("tensord.v1.tensor_service_pb2_grpc"),
    )


def put_requests(service_pb2, tensor_pb2, name: str, shape, payload: bytes):
    """A PutHeader, then chunks covering [0, len(payload)) in order."""
    layout = tensor_pb2.TensorLayout(dtype=tensor_pb2.DataType(code=0, bits=32, lanes=1), shape=shape)
    yield service_pb2.PutRequest(
        header=service_pb2.PutHeader(name=name, layout=layout, total_bytes=len(payload)))
    for offset in range(0, len(payload), CHUNK_BYTES):
        yield service_pb2.PutRequest(
            chunk=service_pb2.Chunk(offset=offset, data=payload[offset:offset + CHUNK_BYTES]))


def fetch(service_pb2, stub, name: str):
    """(TensorInfo, bytes): the header, then inline data or chunks at absolute offsets."""
    responses = stub.Fetch(service_pb2.FetchRequest(name=name, max_chunk_bytes=CHUNK_BYTES), timeout=DEADLINE_S)
    header = next(responses)
    if not header.HasField("header"):
        raise AssertionError(f"first Fetch message is not a header: {header}")
    info, byte_range = header.header.info, header.header.range
    if header.header.HasField("inline_data"):
        return info, header.header.inline_data
    received = bytearray(byte_range.length)
    for response in responses:
        chunk = response.chunk
        start = chunk.offset - byte_range.offset
        if start < 0 or start + len(chunk.data) > len(received):
            raise AssertionError(f"chunk at {chunk.offset} (+{len(chunk.data)}) is outside {byte_range}")
        received[start:start + len(chunk.data)] = chunk.data
    return info, bytes(received)


def run(address: str, name: str = "raw/grpc/int32") -> None:
    with tempfile.TemporaryDirectory(prefix="tensord-stubs-") as out_dir:
        tensor_pb2, service_pb2, service_grpc = generate_stubs(out_dir)
        options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)]
        with grpc.insecure_channel(address, options=options) as channel:
            stub = service_grpc.TensorServiceStub(channel)
            shape = [3, 1000]
            values = array.array("i", range(-1500, 1500))
            payload = values.tobytes()
            put = stub.Put(put_requests(service_pb2, tensor_pb2, name, shape, payload), timeout=DEADLINE_S)
            assert put.info.name == name and put.info.total_bytes == len(payload), put
            info, received = fetch(service_pb2, stub, name)
            assert received == payload, "fetched bytes differ from the put bytes"
            assert info.version == put.info.version
            assert list(info.layout.shape) == shape
            assert list(info.layout.strides) == [1000, 1]
            assert (info.layout.dtype.code, info.layout.dtype.bits) == (0, 32)
            assert info.crc32c == put.info.crc32c
            try:
                stub.Stat(service_pb2.StatRequest(name=name + "/missing"), timeout=DEADLINE_S)
                raise AssertionError("Stat of a missing name succeeded")
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.NOT_FOUND, error
                assert name + "/missing" in error.details()
    print(f"raw grpc: put and fetched {name} ({len(payload)} bytes, version {info.version}) byte-exact")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} HOST:PORT")
    run(sys.argv[1])
