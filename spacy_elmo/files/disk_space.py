"""Free space and full disks: one detector of "no space left", one check before a write, one error
naming the output meant."""

import errno
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Union

from ..errors import ElmoDiskFullError
from .paths import existing_ancestor


def is_disk_full(err: BaseException) -> bool:
    """Whether ``err`` is the file system's "no space left" (or quota exceeded): an OSError
    ENOSPC or EDQUOT, or h5py's RuntimeError or OSError that quotes it only in its message."""
    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(err, (OSError, RuntimeError)) and any(said in str(err) for said in _NO_SPACE_SAID)


_NO_SPACE_SAID = ("errno = 28", "No space left on device")
# Free bytes every write leaves: room for HDF5's metadata, flushed at checkpoints and at close
# (a write that fills the disk leaves h5py in a state that can end in a segfault: stop before it).
SPARE_BYTES = 8 << 20
# Free bytes below which a write that failed counts as having filled the disk.
FILLED_DISK_BYTES = 1 << 20


def filled_the_disk(tmp: Path) -> bool:
    """Whether a write to ``tmp`` that failed left its file system (nearly) full."""
    try:
        return tmp.exists() and shutil.disk_usage(tmp.parent).free < FILLED_DISK_BYTES
    except OSError:
        return False


def hdf5_bytes(arrays: Iterable[Any]) -> int:
    """About what writing ``arrays`` (anything with ``nbytes``) as HDF5 datasets takes: their
    bytes and 4 KiB of headers each."""
    return sum(array.nbytes + 4096 for array in arrays)


@contextmanager
def full_disk_as(path: Union[str, Path]) -> Iterator[None]:
    """A full disk met in the block (the file system's ENOSPC, h5py's message quoting it, a
    write refused before it) as one ``ElmoDiskFullError`` naming ``path`` (the output meant, not
    a temporary), with how much was free and needed where that is known."""
    try:
        yield
    except (OSError, RuntimeError) as err:
        if not is_disk_full(err):
            raise
        raise ElmoDiskFullError(path, getattr(err, "detail", "")) from err


def require_free_space(path: Union[str, Path], needed: int) -> None:
    """An ``ElmoDiskFullError`` naming ``path`` where its file system has less than ``needed``
    bytes free beyond SPARE_BYTES: checked before a write, since torch's and h5py's writers fail on
    a full disk with errors that do not say so, and h5py may crash. ``path``'s directory need not
    exist yet."""
    free = shutil.disk_usage(existing_ancestor(Path(path).absolute())).free
    if free < needed + SPARE_BYTES:
        mib = 1 << 20
        raise ElmoDiskFullError(
            path,
            f"{free / mib:.1f} MiB free; the next write needs {needed / mib:.1f} MiB "
            f"and {SPARE_BYTES // mib} MiB is kept spare",
        )
