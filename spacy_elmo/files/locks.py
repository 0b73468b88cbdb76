"""Locks beside an output: a second writer is refused at once with an error naming the run that
holds it, and a killed writer's lock does not block the next run (the operating system drops it).

Where ``fcntl`` exists (POSIX) the lock is our own ``flock``: it notes its holder in the lock file
for the refusal to name and removes the file on release, neither of which filelock does (it keeps
the file so that waiters share one inode). Where it does not (Windows), filelock's lock, imported
only there, holds instead."""

import errno
import os
import socket
import warnings
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Iterator, Optional, Union

from ..errors import ElmoLockedError


def _import_fcntl() -> Optional[ModuleType]:
    try:
        import fcntl
    except ImportError:  # Windows
        return None
    return fcntl


_FCNTL = _import_fcntl()


def lock_path(path: Path) -> Path:
    """The lock file beside ``path`` that ``exclusive_lock`` takes."""
    return path.with_name(path.name + ".lock")


@contextmanager
def exclusive_lock(path: Union[str, Path], what: str, lock: Optional[Path] = None) -> Iterator[None]:
    """Hold ``PATH.lock`` (or ``lock``, e.g. a file inside an output directory) while the
    block runs, or fail at once with an error naming ``what`` and the run that holds it.
    A lock of our own, so it works where HDF5's own locking is off
    (``HDF5_USE_FILE_LOCKING=FALSE`` on NFS/Lustre); the operating system drops it when its
    process dies, so a killed run leaves no stale lock."""
    path = Path(path)
    lock = lock if lock is not None else lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    if _FCNTL is None:
        with _filelock_held(lock, path, what):
            yield
        return
    fd = _locked_fd(_FCNTL, lock, path, what)
    try:
        if fd is not None:
            _note_holder(fd)
        yield
    finally:
        if fd is not None:
            lock.unlink(missing_ok=True)  # while still held: a waiting run then sees the file is gone
            os.close(fd)


def _locked_fd(fcntl: ModuleType, lock: Path, path: Path, what: str) -> Optional[int]:
    """An open, ``flock``-ed descriptor of ``lock`` (None where the file system has no locks)."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno in (errno.EWOULDBLOCK, errno.EACCES):
                raise ElmoLockedError(_held_by_another(what, path, lock)) from err
            _warn_unlocked(lock, path, err)
            return None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the holder removed it as we opened it: lock the file that is there now


def _note_holder(fd: int) -> None:
    """Who holds the lock, for the error another run shows (best effort: a full disk
    leaves the file empty, and the lock still holds)."""
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode("utf8"))
    except OSError:
        pass


def _holder(lock: Path) -> str:
    try:
        return lock.read_text(encoding="utf8").strip() or "its pid not recorded yet"
    except (OSError, UnicodeDecodeError):
        return "another process"


@contextmanager
def _filelock_held(lock: Path, path: Path, what: str) -> Iterator[None]:
    """filelock's lock on ``lock`` while the block runs (where there is no ``flock``)."""
    from filelock import FileLock, Timeout

    held = FileLock(str(lock), timeout=0)
    try:
        held.acquire()
    except Timeout as err:
        raise ElmoLockedError(_held_by_another(what, path, lock)) from err
    except OSError as err:
        _warn_unlocked(lock, path, err, stacklevel=6)
        yield
        return
    try:
        yield
    finally:
        held.release()


def _held_by_another(what: str, path: Path, lock: Path) -> str:
    return (
        f"{what} {path} is being written by another run ({_holder(lock)}, lock file {lock}): "
        "wait for it to finish, or give another output"
    )


def _warn_unlocked(lock: Path, path: Path, err: OSError, stacklevel: int = 5) -> None:
    """Where the file system has no locks: a warning, and the run goes on unlocked."""
    message = f"cannot lock {lock} ({err.strerror or err}): make sure no other run writes {path}"
    warnings.warn(message, stacklevel=stacklevel)  # the caller of exclusive_lock
