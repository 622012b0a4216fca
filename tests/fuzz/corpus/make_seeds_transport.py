#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz targets of the wire and transport
layers (stream_message, request_validation, handoff_session) beside this script. The tensord.v1
messages are serialized by hand (no protobuf package needed); the field
numbers follow proto/tensord/v1/*.proto. Rerun after changing a seed."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


# --- protobuf wire format -------------------------------------------------

def varint(value):
    value &= (1 << 64) - 1  # negative int64 values take ten bytes
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(field, wire_type):
    return varint(field << 3 | wire_type)


def uint(field, value):
    """A varint field (uint32/uint64/int32/int64); proto3 omits zero."""
    return b"" if value == 0 else tag(field, 0) + varint(value)


def optional_uint(field, value):
    """An `optional` scalar: written even when zero."""
    return tag(field, 0) + varint(value)


def data(field, payload):
    """A length-delimited field: bytes, string or an embedded message."""
    if isinstance(payload, str):
        payload = payload.encode()
    return tag(field, 2) + varint(len(payload)) + payload


def packed(field, values):
    return b"" if not values else data(field, b"".join(varint(v) for v in values))


def fixed32(field, value):
    return tag(field, 5) + struct.pack("<I", value)


# --- tensord.v1 messages --------------------------------------------------

def dtype(code, bits, lanes=1):
    return uint(1, code) + uint(2, bits) + uint(3, lanes)


def layout(code, bits, shape, strides=(), byte_offset=0, lanes=1, device=None):
    out = data(1, dtype(code, bits, lanes)) + packed(2, shape) + packed(3, strides)
    out += uint(4, byte_offset)
    if device is not None:
        out += data(5, uint(1, device[0]) + uint(2, device[1]))
    return out


def put_header(name, lay, total_bytes, crc=None):
    out = data(1, name) + data(2, lay) + uint(3, total_bytes)
    if crc is not None:
        out += optional_uint(4, crc)
    return out


def chunk(offset, payload):
    return uint(1, offset) + data(2, payload)


def byte_range(offset, length):
    return uint(1, offset) + uint(2, length)


def fetch_request(name, version=0, rng=None, max_chunk_bytes=0):
    out = data(1, name) + uint(2, version)
    if rng is not None:
        out += data(3, byte_range(*rng))
    return out + uint(4, max_chunk_bytes)


def tensor_info(name, version, lay, total_bytes, crc=0):
    return data(1, name) + uint(2, version) + data(3, lay) + uint(4, total_bytes) + uint(5, crc)


def handoff(request_id, kind_field, body):
    return uint(1, request_id) + data(kind_field, body)


def acquire(request_id, name, version=0, held=(), arena_slots=False):
    return handoff(request_id, 2, data(1, name) + uint(2, version) + packed(3, held)
                   + uint(5, int(arena_slots)))


def release(request_id, lease_id):
    return handoff(request_id, 3, uint(1, lease_id))


def create(request_id, name, lay, total_bytes):
    return handoff(request_id, 4, data(1, name) + data(2, lay) + uint(3, total_bytes))


def seal(request_id, create_id, crc=None):
    body = uint(1, create_id)
    if crc is not None:
        body += optional_uint(2, crc)
    return handoff(request_id, 5, body)


def abort(request_id, create_id):
    return handoff(request_id, 6, uint(1, create_id))


def authenticate(request_id, token):
    return handoff(request_id, 7, data(1, token))


def crc32c(payload):
    crc = 0xFFFFFFFF
    for byte in payload:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


# dtype codes (DLDataTypeCode)
INT, UINT, FLOAT, BFLOAT, COMPLEX, BOOL, FLOAT4_E2M1FN = 0, 1, 2, 4, 5, 6, 17
F32_2X3 = layout(FLOAT, 32, [2, 3])


# --- input framings of the fuzz targets -----------------------------------

def stream_input(message, piece_lengths=()):
    """stream_message_fuzz: [cut count][cut lengths][message]."""
    return bytes([len(piece_lengths)]) + bytes(piece_lengths) + message


def validation_input(fetch, limit, message, shift=0):
    """request_validation_fuzz: [mode][limit, 8 bytes LE][message]."""
    return bytes([shift << 1 | (1 if fetch else 0)]) + struct.pack("<Q", limit) + message


def put_many_item(name, lay, total_bytes, offset, crc=None):
    body = data(1, name) + data(2, lay) + uint(3, total_bytes) + uint(6, offset)
    if crc is not None:
        body += optional_uint(5, crc)
    return body


def put_many(request_id, items, atomic=False):
    return handoff(request_id, 12, b"".join(data(1, item) for item in items) + uint(2, int(atomic)))


def handoff_input(flags, packets):
    """handoff_session_fuzz: [flags] then [2-byte LE length][packet]..."""
    return bytes([flags]) + b"".join(struct.pack("<H", len(p)) + p for p in packets)


def write(folder, name, payload):
    os.makedirs(os.path.join(HERE, folder), exist_ok=True)
    with open(os.path.join(HERE, folder, name), "wb") as f:
        f.write(payload)


# stream_message: PutRequest / FetchResponse (field 1 header, field 2 chunk).
body = bytes(i % 251 for i in range(200))
write("stream_message", "chunk_whole", stream_input(data(2, chunk(4096, body))))
write("stream_message", "chunk_split", stream_input(data(2, chunk(0, body[:100])), [5, 1, 0, 40]))
write("stream_message", "chunk_huge_offset",
      stream_input(data(2, chunk(1 << 40, b"xyz" * 20)), [3, 3]))
write("stream_message", "chunk_unknown_fields", stream_input(
    uint(15, 99) + data(2, uint(1, 8) + fixed32(7, 1) + data(2, b"abcd" * 8) + data(9, b"zz"))
    + tag(3, 1) + struct.pack("<Q", 5), [2, 7, 12]))
write("stream_message", "put_header", stream_input(
    data(1, put_header("layers/0.w", F32_2X3, 24, crc=0x1234)), [4, 10]))
write("stream_message", "fetch_header", stream_input(
    data(1, tensor_info("emb", 3, layout(BFLOAT, 16, [4, 8]), 64) + data(2, byte_range(0, 64)))))
write("stream_message", "fetch_header_inline", stream_input(
    data(1, tensor_info("emb", 3, layout(BFLOAT, 16, [4, 8]), 64) + data(2, byte_range(0, 64))
         + data(3, body[:64]) + uint(4, 0)), [3, 20, 9]))
# A tag padded to six bytes, which protobuf refuses (found by the fuzzer).
write("stream_message", "padded_tag", stream_input(
    data(1, bytes([0x88, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01]))))
write("stream_message", "empty", stream_input(b""))
# BatchFetch answers (BatchFetchResponse.items = 3 of BatchFetchItem = 1):
# an item with inline bytes, a failed one, one whose chunks follow; cut so
# an item straddles two pieces.
batch_item_info = tensor_info("kv/0", 3, layout(UINT, 8, [64]), 64)
batch_items = (data(1, uint(1, 0) + data(3, batch_item_info) + data(4, body[:64]))
               + data(1, uint(1, 1) + data(2, uint(1, 5) + data(2, "tensor 'kv/1' not found")))
               + data(1, uint(1, 2) + data(3, batch_item_info)))
write("stream_message", "batch_fetch_items", stream_input(data(3, batch_items), [30, 7, 50]))
# BatchPut messages of items (BatchPutRequest.items = 4) and of options (3).
put_items = (data(1, data(1, put_header("kv/a", F32_2X3, 24, crc=7)) + data(2, body[:24]))
             + data(1, data(1, put_header("kv/b", layout(UINT, 8, [0]), 0))))
write("stream_message", "batch_put_items", stream_input(data(4, put_items), [9, 30]))
write("stream_message", "batch_put_options", stream_input(data(3, uint(1, 1))))
write("stream_message", "batch_fetch_items_merged", stream_input(
    data(3, batch_items) + data(3, data(1, uint(1, 9) + data(4, b"") + data(4, b"ab")))))

# wire_tensor_info: [kind % 12: TensorInfo, StatResponse, FetchHeader, StatRequest,
# FetchRequest, FetchResponse, BatchFetchItem, BatchPutItem, AcquiredItem,
# HandoffResponse, BatchFetchRequest, HandoffRequest (put_many)] [message].
def info_input(kind, message):
    return bytes([kind]) + message


full_info = (tensor_info("models/enc.w", 9, layout(FLOAT, 32, [2, 3], strides=[3, 1],
                                                    device=(2, 1)), 24, crc=0xABCDEF12)
             + uint(6, 1700000000123456789) + uint(7, 2) + uint(8, 2))
write("wire_tensor_info", "info_full", info_input(0, full_info))
write("wire_tensor_info", "info_cluster_node", info_input(
    0, tensor_info("a/b", 4, b"", 16, crc=7) + data(9, "node-2")))
write("wire_tensor_info", "stat_response", info_input(1, data(1, full_info)))
# Fields repeated (the last scalar wins, submessages merge, repeated append),
# shape unpacked, and unknown varint, fixed and group fields.
write("wire_tensor_info", "stat_merged_and_unknown", info_input(1, data(1, full_info) + data(
    1, uint(2, 10) + data(3, tag(2, 0) + varint(5) + data(1, uint(3, 4)))
    + uint(20, 1) + fixed32(21, 9) + tag(22, 3) + uint(1, 1) + tag(22, 4))))
write("wire_tensor_info", "header_split", info_input(
    2, data(1, full_info) + data(2, byte_range(8, 16)) + uint(4, 1)))
write("wire_tensor_info", "header_inline", info_input(
    2, data(1, full_info) + data(2, byte_range(0, 24)) + data(3, bytes(24))))
write("wire_tensor_info", "bad_utf8_name", info_input(0, data(1, b"\xc3\x28")))
write("wire_tensor_info", "stat_request", info_input(3, data(1, "models/enc.w") + uint(2, 5)))
write("wire_tensor_info", "fetch_request", info_input(
    4, fetch_request("models/enc.w", version=2, rng=(8, 16), max_chunk_bytes=4096) + uint(5, 1 << 20)))
# FetchInline answers: the bytes in the header; a header merged with a
# later one; a chunk that replaces the header (protobuf's oneof rule).
inline_header = data(1, full_info) + data(2, byte_range(0, 24)) + data(3, bytes(24))
write("wire_tensor_info", "fetch_response_inline", info_input(5, data(1, inline_header)))
write("wire_tensor_info", "fetch_response_merged", info_input(
    5, data(1, inline_header) + data(1, data(2, byte_range(0, 3)) + data(3, b"xyz"))))
write("wire_tensor_info", "fetch_response_chunk_last", info_input(
    5, data(1, inline_header) + data(2, chunk(8, b"abcd"))))
write("wire_tensor_info", "batch_fetch_item", info_input(
    6, uint(1, 7) + data(3, full_info) + data(4, bytes(24))))
# Status and info merged from two occurrences, the last inline data kept.
write("wire_tensor_info", "batch_fetch_item_merged", info_input(
    6, data(2, uint(1, 5)) + data(2, data(2, "gone")) + data(3, full_info)
    + data(3, uint(2, 11)) + data(4, b"x") + data(4, b"yz") + uint(1, 300)))
write("wire_tensor_info", "batch_put_item", info_input(
    7, data(1, put_header("kv/0", F32_2X3, 24, crc=0)) + data(2, bytes(24))))
# The header in two occurrences (merged), the data twice (the last kept).
write("wire_tensor_info", "batch_put_item_merged", info_input(
    7, data(1, put_header("kv/1", F32_2X3, 24)) + data(2, b"old") + data(1, uint(5, 1))
    + data(2, bytes(24)) + uint(9, 4)))
# Batch acquire answers on the handoff socket (handoff.proto): an arena
# item, a device item with its handle, a refusal for the gRPC path; then
# an answer of two packets' worth merged, and one of another kind.
arena_item = (uint(1, 4) + data(4, data(1, full_info) + uint(2, 9) + uint(3, 16 << 20)
                                + uint(5, 8192) + uint(6, 3)) + uint(5, 1))
device_handle = (data(1, "simulated") + uint(2, 2) + uint(3, 1) + uint(6, 24) + uint(7, 4096)
                 + uint(8, 1) + tag(9, 1) + struct.pack("<Q", 0xFEDCBA9876543210))
device_item = uint(1, 5) + data(4, data(1, full_info) + uint(2, 10) + data(4, device_handle))
refused_item = uint(1, 6) + data(2, uint(1, 9) + data(2, "on the device")) + uint(3, 1)
write("wire_tensor_info", "acquired_item_arena", info_input(8, arena_item))
write("wire_tensor_info", "acquired_item_device", info_input(8, device_item))
write("wire_tensor_info", "batch_answer", info_input(
    9, uint(1, 12) + data(8, data(1, arena_item) + data(1, device_item) + data(1, refused_item)
                          + uint(2, 1))))
write("wire_tensor_info", "batch_answer_merged", info_input(
    9, uint(1, 12) + data(8, data(1, arena_item) + uint(2, 1)) + data(8, data(1, refused_item)
                                                                      + uint(2, 0))))
write("wire_tensor_info", "batch_answer_refused", info_input(
    9, uint(1, 3) + uint(2, 8) + data(3, "the limit (--max-leases-per-client) is 65536")))
write("wire_tensor_info", "batch_answer_other_kind", info_input(
    9, uint(1, 3) + data(8, data(1, arena_item)) + data(4, uint(2, 1))))
write("wire_tensor_info", "negative_ids", info_input(0, tensor_info(
    "n", 1, layout(INT, 8, [4], strides=[-1], byte_offset=3, device=(1, -1)), 4)))
# BatchFetch requests: by names (one at a version, one empty), by an empty
# prefix (set, so every name), and fields repeated with unknown ones between.
write("wire_tensor_info", "batch_fetch_request_names", info_input(
    10, data(1, data(1, "kv/0/block/1")) + data(1, data(1, "kv/0/block/2") + uint(2, 7))
    + data(1, b"")))
write("wire_tensor_info", "batch_fetch_request_prefix", info_input(10, data(2, b"")))
write("wire_tensor_info", "batch_fetch_request_merged", info_input(
    10, data(1, data(1, "a") + uint(2, 5) + data(1, "bc")) + data(2, "p1") + data(2, "p2")
    + uint(3, 1) + uint(3, 2) + uint(4, 9) + fixed32(21, 9) + tag(22, 3) + uint(1, 1)
    + tag(22, 4)))
# put_many requests (HandoffRequest.put_many = 12): items with and without
# a checksum and release ids; put_many twice (items appended) with an item's
# layout twice (merged), unpacked release ids and unknown fields; and one
# that names another kind first (left to protobuf).
write("wire_tensor_info", "put_many_request", info_input(11, put_many(
    7, [put_many_item("p/a", layout(UINT, 8, [4096]), 4096, 0),
        put_many_item("p/b", F32_2X3, 24, 4096, crc=0)], atomic=True) + data(11, varint(3) + varint(9))))
write("wire_tensor_info", "put_many_request_merged", info_input(11, uint(1, 5) + data(
    12, data(1, put_many_item("m/0", F32_2X3, 24, 64, crc=7) + data(2, data(2, varint(5)))))
    + uint(11, 4) + uint(11, 6) + fixed32(21, 9) + tag(22, 3) + uint(1, 1) + tag(22, 4)
    + data(12, data(1, put_many_item("m/1", layout(UINT, 8, [1]), 1, 128)) + uint(2, 1))))
write("wire_tensor_info", "put_many_request_other_kind_first", info_input(
    11, data(3, uint(1, 1)) + put_many(8, [put_many_item("o/0", F32_2X3, 24, 0)])))

# request_validation: PutHeader (mode bit 0 clear) or FetchRequest (set).
write("request_validation", "put_f32_2x3", validation_input(
    False, 1 << 20, put_header("layers/0.w", F32_2X3, 24, crc=0xDEADBEEF)))
write("request_validation", "put_strided_offset", validation_input(
    False, 1 << 20, put_header("a/b", layout(INT, 16, [3, 4], strides=[1, 3], byte_offset=8), 32)))
write("request_validation", "put_negative_stride", validation_input(
    False, 1 << 20, put_header("rev", layout(FLOAT, 32, [4], strides=[-1], byte_offset=12), 16)))
write("request_validation", "put_vector_lanes_cpu", validation_input(
    False, 4096, put_header("v:1", layout(FLOAT, 16, [5], lanes=4, device=(1, 0)), 40)))
write("request_validation", "put_fp4_packed", validation_input(
    False, 64, put_header("q4", layout(FLOAT4_E2M1FN, 4, [3]), 2)))
write("request_validation", "put_bool_empty", validation_input(
    False, 0, put_header("mask", layout(BOOL, 8, [0, 7]), 0)))
write("request_validation", "put_over_limit", validation_input(
    False, 1 << 20, put_header("big", layout(COMPLEX, 128, [1024]), 16384), shift=10))
write("request_validation", "put_cuda_device", validation_input(
    False, 1 << 20, put_header("gpu", layout(UINT, 8, [16], device=(2, 0)), 16)))
# A part of a put in several streams (PutHeader.part = 7).
put_part = data(7, data(1, "0123456789abcdef0123456789abcdef") + uint(2, 3) + uint(3, 8) + uint(4, 8))
write("request_validation", "put_part", validation_input(
    False, 1 << 20, put_header("p/parts", layout(UINT, 8, [24]), 24) + put_part))
write("request_validation", "fetch_whole", validation_input(True, 100, fetch_request("w")))
write("request_validation", "fetch_range", validation_input(
    True, 100, fetch_request("w", version=3, rng=(10, 20), max_chunk_bytes=8)))
write("request_validation", "fetch_to_end", validation_input(True, 100, fetch_request("w", rng=(60, 0))))
write("request_validation", "fetch_beyond", validation_input(True, 100, fetch_request("w", rng=(90, 20))))

# handoff_session: flags bit 0 authorized, bit 1 reap, bits 2.. seconds/packet.
zeros24 = bytes(24)
write("handoff_session", "create_seal_acquire_release", handoff_input(1, [
    create(1, "w", F32_2X3, 24), seal(2, 1), acquire(3, "w"), acquire(4, "w", held=[1]),
    release(5, 2), release(6, 2)]))
write("handoff_session", "authenticate_then_create", handoff_input(0, [
    acquire(1, "w"), authenticate(2, "fuzz-token"), create(3, "t/x", layout(UINT, 8, [24]), 24),
    seal(4, 1, crc=crc32c(zeros24)), acquire(5, "t/x", version=1)]))
# One second per packet and a 5 s create timeout: "c" is reaped before its seal.
write("handoff_session", "abort_and_reap", handoff_input(1 | 2 | 1 << 2, [
    create(1, "a", F32_2X3, 24), create(2, "b", layout(INT, 64, [4]), 32), abort(3, 1),
    acquire(4, "a"), seal(5, 2), create(6, "c", layout(UINT, 8, [8]), 8)]
    + [acquire(7 + i, "b", held=[i % 2]) for i in range(5)] + [seal(12, 3), abort(13, 3)]))
write("handoff_session", "republish_and_old_version", handoff_input(1, [
    create(1, "w", layout(FLOAT, 32, [4], strides=[-1], byte_offset=12), 16), seal(2, 1),
    acquire(3, "w"), create(4, "w", layout(BOOL, 8, [0]), 0), seal(5, 3, crc=0),
    acquire(6, "w", version=1), acquire(7, "w")]))
# A small sealed version moves into an arena slot: a client that accepts
# slots gets the arena's fd (mapping_bytes the arena, mapping_offset the
# slot); one that does not, a memfd of the version alone.
write("handoff_session", "acquire_arena_slots", handoff_input(1, [
    create(1, "w", layout(FLOAT, 32, [4], strides=[-1], byte_offset=12), 16), seal(2, 1),
    acquire(3, "w", arena_slots=True), acquire(4, "w"), create(5, "v", F32_2X3, 24), seal(6, 2),
    acquire(7, "v", arena_slots=True), release(8, 1), release(9, 3)]))
write("handoff_session", "bad_requests", handoff_input(1, [
    b"\xff\xff", uint(1, 42), create(2, "big", layout(UINT, 8, [1 << 20]), 1 << 20),
    create(3, "../x", F32_2X3, 24), seal(4, 77, crc=5), release(5, 9), abort(6, 9),
    authenticate(7, "nope")]))
# put_many: the fuzzer hands each one a memfd of the input so far (sealed
# against shrinking for an even request id). Items in and beyond it, one
# atomic batch, one on an unsealed memfd, and acquires of what was put.
write("handoff_session", "put_many", handoff_input(1, [
    put_many(2, [put_many_item("p/a", layout(UINT, 8, [16]), 16, 0),
                 put_many_item("p/b", F32_2X3, 24, 8, crc=7),
                 put_many_item("p/c", layout(UINT, 8, [4]), 4, 1 << 20)]),
    put_many(4, [put_many_item("p/a", layout(UINT, 8, [8]), 8, 2),
                 put_many_item("p/d", layout(UINT, 8, [0]), 0, 0)], atomic=True),
    put_many(5, [put_many_item("p/e", layout(UINT, 8, [8]), 8, 0)]),
    acquire(6, "p/a", arena_slots=True), acquire(8, "p/d")]))
