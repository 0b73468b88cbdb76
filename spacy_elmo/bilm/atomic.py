"""Atomic file writing: write under a temporary name, flush, rename over the target."""
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yields a temporary path to write; on success it replaces ``path``, so a
    kill at any moment leaves the old file or the new one, never a torn one.
    The temporary file is created by the writer (a plain open), so the result
    gets the usual permissions."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
