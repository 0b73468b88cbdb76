"""sha256 of files (of any size, block by block) and of named arrays."""

import hashlib
import json
from pathlib import Path
from typing import Any, Dict

_BLOCK = 1 << 20


def update_sha256(digest: "hashlib._Hash", path: Path) -> None:
    """Feed a file's bytes to ``digest`` block by block (files of any size)."""
    with path.open("rb") as f:
        for block in iter(lambda: f.read(_BLOCK), b""):
            digest.update(block)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    update_sha256(digest, path)
    return digest.hexdigest()


def arrays_sha256(arrays: Dict[str, Any], header: Any = None) -> str:
    """sha256 of named arrays (each name, dtype, shape and C-order bytes, in name order)
    and a JSON-able ``header``: the checksum a saved biLM carries."""
    digest = hashlib.sha256(json.dumps(header, sort_keys=True).encode("utf8"))
    for name in sorted(arrays):
        array = arrays[name]
        digest.update(json.dumps([name, array.dtype.str, list(array.shape)]).encode("utf8"))
        digest.update(array.tobytes())
    return digest.hexdigest()
