"""A writer of TensorFlow V2 checkpoints, for tests only: fresh random models in TensorFlow's format.

It writes what TensorFlow's BundleWriter writes (test_tf_checkpoint.py checks that its
index is byte-identical to the fixtures TensorFlow wrote): the tensors' bytes one after
the other in key order, round-robin over the shards, and an index table of one data block
(a restart point every 16 keys), an empty metaindex block, an index block and the footer.
"""

from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy

from spacy_elmo.formats.crc32c import masked_crc32c
from spacy_elmo.formats.tf_checkpoint import DTYPES

_DTYPE_IDS = {numpy.dtype(code): number for number, (_, code) in DTYPES.items()}
_MAGIC = 0xDB4775248B80FB57
RESTART_INTERVAL = 16


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number: int, value) -> bytes:
    """One protobuf field: an int (varint), bytes (length-delimited) or ('fixed32', int)."""
    if isinstance(value, tuple):
        return varint(number << 3 | 5) + value[1].to_bytes(4, "little")
    if isinstance(value, bytes):
        return varint(number << 3 | 2) + varint(len(value)) + value
    return varint(number << 3) + varint(value)


def entry_proto(array: numpy.ndarray, shard: int, offset: int, raw: bytes) -> bytes:
    shape = b"".join(field(2, field(1, dim) if dim else b"") for dim in array.shape)
    parts = [field(1, _DTYPE_IDS[array.dtype.newbyteorder("=")]), field(2, shape)]
    parts += [field(number, v) for number, v in ((3, shard), (4, offset), (5, len(raw))) if v]
    return b"".join(parts) + field(6, ("fixed32", masked_crc32c(raw)))


def block(entries: List[Tuple[bytes, bytes]]) -> bytes:
    out, restarts, previous = bytearray(), [0], b""
    for i, (key, value) in enumerate(entries):
        shared = 0
        if i % RESTART_INTERVAL:
            while shared < min(len(key), len(previous)) and key[shared] == previous[shared]:
                shared += 1
        elif i:
            restarts.append(len(out))
        out += varint(shared) + varint(len(key) - shared) + varint(len(value)) + key[shared:] + value
        previous = key
    return bytes(out) + b"".join(r.to_bytes(4, "little") for r in restarts) + len(restarts).to_bytes(4, "little")


def short_successor(key: bytes) -> bytes:
    for i, byte in enumerate(key):
        if byte != 0xFF:
            return key[:i] + bytes([byte + 1])
    return key


def table(entries: List[Tuple[bytes, bytes]], compression: int = 0) -> bytes:
    """``compression``: the type byte of the data block (0: none; TensorFlow writes no other)."""
    out = bytearray()

    def add(contents: bytes, kind: int = 0) -> bytes:
        handle = varint(len(out)) + varint(len(contents))
        trailer = bytes([kind]) + masked_crc32c(contents + bytes([kind])).to_bytes(4, "little")
        out.extend(contents + trailer)
        return handle

    data_handle = add(block(entries), compression)
    meta_handle = add(block([]))
    index_handle = add(block([(short_successor(entries[-1][0]), data_handle)]))
    footer = (meta_handle + index_handle).ljust(40, b"\0") + _MAGIC.to_bytes(8, "little")
    return bytes(out + footer)


def write_checkpoint(
    prefix: Path,
    arrays: Dict[str, numpy.ndarray],
    n_shards: int = 1,
    shard_of: Optional[Dict[str, int]] = None,
    compression: int = 0,
) -> None:
    """``shard_of``: each name's shard (TensorFlow's: one per device); else round-robin."""
    shards = [bytearray() for _ in range(n_shards)]
    entries = []
    for i, name in enumerate(sorted(arrays)):
        array = numpy.asarray(arrays[name])
        raw = array.astype(array.dtype.newbyteorder("<")).tobytes(order="C")
        k = shard_of[name] if shard_of else i % n_shards
        entries.append((name.encode("utf8"), entry_proto(array, k, len(shards[k]), raw)))
        shards[k] += raw
    header = field(1, n_shards) + field(3, field(1, 1))  # num_shards, version {producer: 1}
    Path(f"{prefix}.index").write_bytes(table([(b"", header), *entries], compression))
    for k, data in enumerate(shards):
        Path(f"{prefix}.data-{k:05d}-of-{n_shards:05d}").write_bytes(bytes(data))
