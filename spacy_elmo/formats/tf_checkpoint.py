"""TensorFlow's V2 checkpoints read without TensorFlow.

A checkpoint ``PREFIX`` is ``PREFIX.index``, a LevelDB-style table (sorted,
prefix-compressed keys in blocks, an index block, a footer) that maps each
variable name to a BundleEntryProto (dtype, shape, shard, offset, size, CRC-32C),
and the shards ``PREFIX.data-0000K-of-0000N`` holding the raw little-endian
tensor bytes. The key "" holds the BundleHeaderProto (number of shards,
endianness). Every block's and every read tensor's CRC is checked.
"""

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple, Union

import numpy

from ..errors import ElmoCheckpointError
from ..files.text_lines import iter_utf8_lines
from .crc32c import masked_crc32c

_FOOTER_SIZE = 48  # two block handles padded to 40 bytes, then the magic number
_MAGIC = 0xDB4775248B80FB57
_TRAILER_SIZE = 5  # after each block: compression type, masked CRC of block + type
_COMPRESSION = {0: None, 1: "snappy", 2: "zlib"}
_MAX_BLOCK = 1 << 30  # an index block of a GB comes from a damaged footer or handle

# TensorFlow's DataType enum: the numeric ones a checkpoint can be read as.
DTYPES = {
    1: ("DT_FLOAT", "<f4"),
    2: ("DT_DOUBLE", "<f8"),
    3: ("DT_INT32", "<i4"),
    4: ("DT_UINT8", "u1"),
    5: ("DT_INT16", "<i2"),
    6: ("DT_INT8", "i1"),
    9: ("DT_INT64", "<i8"),
    10: ("DT_BOOL", "?"),
    17: ("DT_UINT16", "<u2"),
    19: ("DT_HALF", "<f2"),
    22: ("DT_UINT32", "<u4"),
    23: ("DT_UINT64", "<u8"),
}


class _Damaged(Exception):
    """What is wrong inside the index; the caller names the file."""


@dataclass(frozen=True)
class TensorEntry:
    """One variable of a checkpoint, as its index describes it."""

    name: str
    dtype: int
    shape: Tuple[int, ...]
    shard_id: int
    offset: int
    size: int
    crc32c: int
    sliced: bool  # a partitioned variable: its data lives in slice entries

    @property
    def dtype_name(self) -> str:
        return DTYPES.get(self.dtype, (f"DataType {self.dtype}", ""))[0]


# -- protobuf wire format ----------------------------------------------------
def _varint(buf: bytes, pos: int) -> Tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise _Damaged("a number runs past the end of its record")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise _Damaged("a number longer than 10 bytes")


def _fields(buf: bytes) -> Dict[int, List[Union[int, bytes]]]:
    """A protobuf message's fields: number -> values (ints, or bytes for length-delimited ones)."""
    found: Dict[int, List[Union[int, bytes]]] = {}
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        value: Union[int, bytes]
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value, pos = int.from_bytes(buf[pos : pos + width], "little"), pos + width
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + length], pos + length
        else:
            raise _Damaged(f"protobuf wire type {wire} in field {number}")
        if pos > len(buf) or number == 0:
            raise _Damaged("a protobuf record runs past its end")
        found.setdefault(number, []).append(value)
    return found


def _int(fields: Dict[int, List[Union[int, bytes]]], number: int, signed: bool = True) -> int:
    value = fields.get(number, [0])[-1]
    if not isinstance(value, int):
        raise _Damaged(f"protobuf field {number} is not a number")
    return value - (1 << 64) if signed and value >= 1 << 63 else value


def _entry(name: str, record: bytes) -> TensorEntry:
    fields = _fields(record)
    dims = []
    for dim in fields.get(2, [b""])[-1:]:
        if not isinstance(dim, bytes):
            raise _Damaged(f"variable '{name}': its shape is not a message")
        for size in _fields(dim).get(2, []):
            if not isinstance(size, bytes):
                raise _Damaged(f"variable '{name}': a dimension is not a message")
            dims.append(_int(_fields(size), 1))
    if any(d < 0 for d in dims):
        raise _Damaged(f"variable '{name}' has a negative dimension {dims}")
    crc = fields.get(6, [0])[-1]
    return TensorEntry(
        name=name,
        dtype=_int(fields, 1),
        shape=tuple(dims),
        shard_id=_int(fields, 3),
        offset=_int(fields, 4),
        size=_int(fields, 5),
        crc32c=crc if isinstance(crc, int) else -1,
        sliced=7 in fields,
    )


# -- the LevelDB-style table --------------------------------------------------
def _block_handle(buf: bytes, pos: int) -> Tuple[Tuple[int, int], int]:
    offset, pos = _varint(buf, pos)
    size, pos = _varint(buf, pos)
    return (offset, size), pos


def _block(data: bytes, handle: Tuple[int, int], what: str) -> bytes:
    offset, size = handle
    end = offset + size + _TRAILER_SIZE
    if size > _MAX_BLOCK or end > len(data) - _FOOTER_SIZE:
        raise _Damaged(f"the {what} block (bytes {offset}-{end}) lies outside the file ({len(data)} bytes)")
    contents, kind = data[offset : offset + size], data[offset + size]
    stored = int.from_bytes(data[offset + size + 1 : end], "little")
    if masked_crc32c(contents + bytes([kind])) != stored:
        raise _Damaged(f"the {what} block at byte {offset} fails its CRC check")
    if kind not in _COMPRESSION:
        raise _Damaged(f"the {what} block at byte {offset} has unknown compression type {kind}")
    if _COMPRESSION[kind]:
        raise _Damaged(
            f"the {what} block at byte {offset} is {_COMPRESSION[kind]}-compressed, which this reader does "
            "not support (TensorFlow writes checkpoint indexes uncompressed)"
        )
    return contents


def _block_entries(block: bytes) -> Iterator[Tuple[bytes, bytes]]:
    """A block's (key, value) pairs: each key shares a prefix with the one before."""
    if len(block) < 4:
        raise _Damaged("a block shorter than its restart count")
    n_restarts = int.from_bytes(block[-4:], "little")
    end = len(block) - 4 - 4 * n_restarts
    if end < 0:
        raise _Damaged(f"a block of {len(block)} bytes claims {n_restarts} restart points")
    key, pos = b"", 0
    while pos < end:
        shared, pos = _varint(block, pos)
        unshared, pos = _varint(block, pos)
        value_size, pos = _varint(block, pos)
        if shared > len(key) or pos + unshared + value_size > end:
            raise _Damaged(f"an entry at byte {pos} of a block runs past the block or its previous key")
        key = key[:shared] + block[pos : pos + unshared]
        pos += unshared
        yield key, block[pos : pos + value_size]
        pos += value_size


def _table_entries(data: bytes) -> Iterator[Tuple[bytes, bytes]]:
    if len(data) < _FOOTER_SIZE or int.from_bytes(data[-8:], "little") != _MAGIC:
        raise _Damaged(f"no table footer (the file is {len(data)} bytes; truncated, or not a checkpoint index)")
    footer = data[-_FOOTER_SIZE:]
    meta_handle, pos = _block_handle(footer, 0)
    index_handle, _ = _block_handle(footer, pos)
    _block(data, meta_handle, "metaindex")  # TensorFlow writes it empty: only its CRC is checked
    previous = None
    for _, handle_bytes in _block_entries(_block(data, index_handle, "index")):
        handle, _ = _block_handle(handle_bytes, 0)
        for key, value in _block_entries(_block(data, handle, "data")):
            if previous is not None and key <= previous:
                raise _Damaged(f"key {key!r} is out of order (after {previous!r})")
            previous = key
            yield key, value


def _read_index(path: Path) -> Tuple[int, Dict[str, TensorEntry]]:
    """The number of data shards and the entries of an index file."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ElmoCheckpointError(f"{path}: cannot read the checkpoint index: {err.strerror or err}") from err
    try:
        entries: Dict[str, TensorEntry] = {}
        header = None
        for key, value in _table_entries(data):
            if key == b"":
                header = _fields(value)
                continue
            name = key.decode("utf8", errors="replace")
            entries[name] = _entry(name, value)
        if header is None:
            raise _Damaged("no bundle header (the entry with the empty key)")
        n_shards, big_endian = _int(header, 1), _int(header, 2)
    except _Damaged as err:
        raise ElmoCheckpointError(f"{path}: damaged TensorFlow checkpoint index: {err}; copy it again") from err
    if big_endian:
        raise ElmoCheckpointError(f"{path}: a big-endian checkpoint, which this reader does not support")
    if n_shards < 1:
        raise ElmoCheckpointError(f"{path}: damaged TensorFlow checkpoint index: header says {n_shards} shards")
    for entry in entries.values():
        if not 0 <= entry.shard_id < n_shards:
            raise ElmoCheckpointError(
                f"{path}: damaged TensorFlow checkpoint index: variable '{entry.name}' is in shard "
                f"{entry.shard_id} of {n_shards}"
            )
    return n_shards, entries


class TFCheckpoint:
    """A V2 checkpoint: its variables (``entries``) and ``read(name)`` for their values."""

    def __init__(self, prefix: Union[str, Path]) -> None:
        self.prefix = resolve_prefix(Path(prefix))
        self.index_path = Path(f"{self.prefix}.index")
        self.n_shards, self.entries = _read_index(self.index_path)

    def shard_path(self, shard_id: int) -> Path:
        return Path(f"{self.prefix}.data-{shard_id:05d}-of-{self.n_shards:05d}")

    def read(self, name: str) -> numpy.ndarray:
        """The variable's array, its size and CRC checked against the index."""
        entry = self.entries[name]
        what = f"{self.index_path}: variable '{name}'"
        if entry.sliced:
            raise ElmoCheckpointError(f"{what} is partitioned (saved in slices), which this reader does not support")
        if entry.dtype not in DTYPES:
            raise ElmoCheckpointError(f"{what} has dtype {entry.dtype_name}, not a numeric type")
        dtype = numpy.dtype(DTYPES[entry.dtype][1])
        if entry.size != math.prod(entry.shape) * dtype.itemsize:
            raise ElmoCheckpointError(
                f"{what}: damaged index: {entry.size} bytes for shape {entry.shape} of {entry.dtype_name}"
            )
        path = self.shard_path(entry.shard_id)
        raw = _read_range(path, entry.offset, entry.size, name)
        if masked_crc32c(raw) != entry.crc32c:
            raise ElmoCheckpointError(
                f"{path}: variable '{name}' (bytes {entry.offset}-{entry.offset + entry.size}) fails its CRC check: "
                "the data file is damaged; copy it again"
            )
        return numpy.frombuffer(raw, dtype=dtype).reshape(entry.shape).copy()


def _read_range(path: Path, offset: int, size: int, name: str) -> bytes:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            raw = f.read(size)
    except FileNotFoundError as err:
        raise ElmoCheckpointError(
            f"{path}: data shard not found (variable '{name}' is in it; a checkpoint is its .index and every "
            ".data-K-of-N file)"
        ) from err
    except OSError as err:
        raise ElmoCheckpointError(f"{path}: cannot read the data shard: {err.strerror or err}") from err
    if len(raw) != size:
        raise ElmoCheckpointError(
            f"{path}: truncated data shard: variable '{name}' needs bytes {offset}-{offset + size}, "
            f"the file has {path.stat().st_size}; copy it again"
        )
    return raw


_CHECKPOINT_LINE = re.compile(r'^model_checkpoint_path:\s*"((?:[^"\\]|\\.)*)"\s*$', re.MULTILINE)


def _latest_listed(listing: Path) -> Optional[str]:
    """The latest checkpoint a save directory's ``checkpoint`` file names (None: no such file, or
    it names none); one that cannot be read or is not UTF-8 text is an error naming it."""
    if not listing.is_file():
        return None
    hint = "give the checkpoint prefix instead, e.g. DIR/model.ckpt-N (the name before .index)"
    try:
        for line in iter_utf8_lines(listing, ElmoCheckpointError):
            found = _CHECKPOINT_LINE.search(line)
            if found:
                return found.group(1)
    except ElmoCheckpointError as err:
        raise ElmoCheckpointError(f"{err}: not TensorFlow's checkpoint list; {hint}") from err
    except OSError as err:
        raise ElmoCheckpointError(f"{listing}: cannot read the checkpoint list: {err.strerror or err}; {hint}") from err
    return None


def resolve_prefix(path: Path) -> Path:
    """The checkpoint prefix meant by ``path``: the prefix itself, its .index or a data
    file, or a training directory (its ``checkpoint`` file names the latest, as
    ``tf.train.latest_checkpoint`` reads it)."""
    if path.is_dir():
        latest = _latest_listed(path / "checkpoint")
        if latest is None:
            raise ElmoCheckpointError(
                f"{path} is a directory without a 'checkpoint' file naming the latest checkpoint: "
                "give the checkpoint prefix, e.g. DIR/model.ckpt-N (the name before .index)"
            )
        named = path / latest  # relative to the directory, as TensorFlow reads it
        # an absolute path written on another machine or before the directory moved: its name here
        path = named if Path(f"{named}.index").is_file() else path / Path(latest).name
    path = Path(re.sub(r"\.(index|data-\d{5}-of-\d{5})$", "", str(path)))
    index = Path(f"{path}.index")
    if not index.is_file():
        raise ElmoCheckpointError(
            f"checkpoint index not found: {index} (give the checkpoint prefix, e.g. DIR/model.ckpt-N, the name "
            "before .index; this reads TensorFlow's V2 format)"
        )
    return path
