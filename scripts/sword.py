"""Plain text out of a SWORD Bible or commentary module (zText / zCom / zCom4).

A module holds, per testament (``ot``, ``nt``), three files: a block index
(``?zs``: offset, compressed size, size per zlib block, 3 x uint32), an entry
index (``?zv``: block, offset in the uncompressed block, size per verse; the
size is a uint16 in zText/zCom and a uint32 in zText4/zCom4) and the zlib
blocks (``?zz``). The ``?`` is ``b`` (book blocks) or ``c`` (chapter blocks).
Entries are OSIS markup: notes and titles are dropped, the other tags removed.
Format: libsword's ``zverse.cpp`` / ``zverse4.cpp``.
"""

import html
import re
import struct
import zlib
from pathlib import Path
from typing import Dict, Iterator

from project_errors import ProjectDataError

_NOTE_OR_TITLE = re.compile(r"<(note|title)\b[^>]*>.*?</\1>", re.S)
_TAG = re.compile(r"<[^>]*>")


def _entry_size(index: bytes, blocks: int) -> int:
    """Bytes per entry of the ``?zv`` index: 10 (zText/zCom) or 12 (the "4" drivers)."""
    fits = [size for size in (10, 12) if len(index) % size == 0]
    if len(fits) == 1:
        return fits[0]
    # Both divide: the one whose block numbers all exist.
    for size in (12, 10):
        if size in fits and all(struct.unpack_from("<I", index, i)[0] < blocks for i in range(0, len(index), size)):
            return size
    raise ProjectDataError(f"SWORD entry index of {len(index)} bytes fits no known layout")


def _testament_entries(folder: Path, testament: str) -> Iterator[str]:
    found = {path.suffix[-1]: path for path in folder.glob(f"{testament}.[bc]z[svz]")}
    if set(found) != {"s", "v", "z"}:
        return
    block_index, entry_index, data = (found[kind].read_bytes() for kind in "svz")
    n_blocks = len(block_index) // 12
    step = _entry_size(entry_index, n_blocks)
    cache: Dict[int, bytes] = {}
    for i in range(0, len(entry_index), step):
        block, offset = struct.unpack_from("<II", entry_index, i)
        size = struct.unpack_from("<I" if step == 12 else "<H", entry_index, i + 8)[0]
        if size == 0 or block >= n_blocks:
            continue
        if block not in cache:
            cache.clear()  # entries come in block order: keep one block in memory
            start, length, _ = struct.unpack_from("<III", block_index, block * 12)
            cache[block] = zlib.decompress(data[start : start + length])
        yield cache[block][offset : offset + size].decode("utf8", errors="replace")


def plain_text(markup: str) -> str:
    text = _TAG.sub(" ", _NOTE_OR_TITLE.sub(" ", markup))
    return " ".join(html.unescape(text).split())


def read_module(folder: Path) -> Iterator[str]:
    """Each non-empty entry of the module in ``folder`` as plain text (an entry repeated for
    several verses, as commentaries do, comes once)."""
    if not any(folder.glob("[on]t.[bc]zs")):
        raise ProjectDataError(f"{folder}: no SWORD module files (ot/nt .bzs/.czs)")
    previous = None
    for testament in ("ot", "nt"):
        for markup in _testament_entries(folder, testament):
            text = plain_text(markup)
            if text and text != previous:
                yield text
            previous = text
