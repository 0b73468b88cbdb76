"""Atomic writes: a kill at any moment leaves the old file (or directory) or the new one, never a
torn one."""

import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Union

from ..errors import ElmoDiskFullError
from .disk_space import filled_the_disk, is_disk_full


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
    except (OSError, RuntimeError) as err:
        # torch.save on a full disk: "enforce fail at inline_container.cc ... unexpected pos"; h5py's
        # close: RuntimeError. Neither says why: the file system the write just filled does.
        if is_disk_full(err) or filled_the_disk(tmp):
            raise ElmoDiskFullError(path) from err
        if isinstance(err, OSError) and err.filename is None:  # a write through a file object names no file
            err.filename = str(path)
        raise
    finally:
        if tmp.exists():
            tmp.unlink()


@contextmanager
def atomic_dir(path: Path) -> Iterator[Path]:
    """Yields a temporary directory beside ``path`` to fill; on success it becomes
    ``path`` (which must not exist, or be an empty directory), on failure it is
    removed: a reader never sees a half-filled ``path``."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        yield tmp
        if path.is_dir():
            path.rmdir()  # only an empty one: anything in it is refused, not lost
        tmp.rename(path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def write_text_atomic(path: Union[str, Path], text: str) -> None:
    with atomic_path(Path(path)) as tmp:
        tmp.write_text(text, encoding="utf8")


def move_dir(source: Path, target: Path) -> None:
    """Move the directory ``source`` to ``target``, replacing whatever is there."""
    if target.exists():
        shutil.rmtree(target)
    source.rename(target)
