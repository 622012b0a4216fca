#!/usr/bin/env python3
"""Writes the seed inputs of the snapshot_format fuzz target into
snapshot_format/ beside this script, in the layout service/snapshot/
snapshot_format.h describes (little-endian, CRC-32C checksums). Rerun after
changing the format."""
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "snapshot_format")
ALIGN = 64
HEADER = 40


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def align(value):
    return (value + ALIGN - 1) // ALIGN * ALIGN


def record(name, version, dtype, shape, strides, byte_offset, data_offset, payload, retention=0):
    code, bits, lanes = dtype
    out = struct.pack("<H", len(name)) + name.encode()
    out += struct.pack("<QqBBBHiiI", version, 1_700_000_000_000_000_000 + version, retention,
                       code, bits, lanes, 1, 0, len(shape))
    out += b"".join(struct.pack("<q", extent) for extent in shape)
    out += struct.pack("<B", 1 if strides else 0)
    out += b"".join(struct.pack("<q", stride) for stride in strides)
    out += struct.pack("<QQQI", byte_offset, data_offset, len(payload), crc32c(payload))
    return out


def snapshot(tensors, next_version=None):
    """tensors: (name, version, dtype, shape, strides, byte_offset, payload[, retention]).
    next_version: the registry's next version; by default one above the highest."""
    if next_version is None:
        next_version = max([t[1] for t in tensors], default=0) + 1
    def manifest(offsets):
        return b"".join(record(t[0], t[1], t[2], t[3], t[4], t[5], offsets[i], t[6], *t[7:])
                        for i, t in enumerate(tensors))
    size = len(manifest([0] * len(tensors)))
    offsets, offset = [], align(HEADER + size)
    for t in tensors:
        offsets.append(offset)
        offset = align(offset + len(t[6]))
    body = manifest(offsets)
    header = b"TNSDSNAP" + struct.pack("<IIQQI", 2, len(tensors), len(body), next_version,
                                       crc32c(body))
    header += struct.pack("<I", crc32c(header))
    out = bytearray(header + body)
    for t, at in zip(tensors, offsets):
        out += b"\0" * (at - len(out))
        out += t[6]
    return bytes(out)


U8, F32 = (1, 8, 1), (2, 32, 1)
SEEDS = {
    "empty": snapshot([]),
    "one_u8": snapshot([("w/a", 3, U8, [5], [], 0, b"hello")], next_version=40),
    "mixed": snapshot([
        ("w/a", 3, U8, [100], [], 0, bytes(range(100))),
        ("w/empty", 5, U8, [0], [], 0, b""),
        ("w/strided", 9, F32, [2, 3], [1, 2], 0, bytes(24), 1),
        ("s", 11, F32, [], [], 4, bytes(8)),
    ]),
}
SEEDS["truncated"] = SEEDS["mixed"][:-7]
SEEDS["bad_crc"] = SEEDS["one_u8"][:-1] + b"!"

os.makedirs(HERE, exist_ok=True)
for name, payload in SEEDS.items():
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(payload)
