"""File safety, one policy for the library: atomic writes, locks, free space and full disks, UTF-8 lines,
JSON limits, checksums, JSONL. (Named so that it shadows no standard module.)"""

import errno
import fcntl
import hashlib
import json
import os
import shutil
import socket
import stat
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Type, Union

from .errors import ElmoDiskFullError, ElmoError, ElmoFileNotFoundError, ElmoLockedError, ElmoPermissionError
from .json_depth import MAX_JSON_DEPTH, check_json_depth

_BLOCK = 1 << 20


def special_file_kind(path: Path) -> Optional[str]:
    """What ``path`` is when it exists but is neither a regular file nor a directory
    (``/dev/null``, a named pipe...): a file reader would hang or read nothing."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    kinds = (
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISFIFO, "FIFO (named pipe)"),
        (stat.S_ISSOCK, "socket"),
    )
    return next((kind for test, kind in kinds if test(mode)), None)


def require_file(path: Union[str, Path], what: str, hint: str = "") -> Path:
    """``path`` as a Path if it is a file; else an error that says whether it is
    missing, a directory (``hint``: what to give instead of a directory) or a device
    or pipe."""
    path = Path(path)
    if path.is_dir():
        raise ElmoFileNotFoundError(f"{what} {path} is a directory, not a file{hint}")
    kind = special_file_kind(path)
    if kind:
        raise ElmoError(f"{what} {path} is a {kind}, not a regular file: give the file itself")
    if not path.is_file():
        raise ElmoFileNotFoundError(f"{what} not found: {path}")
    require_readable(path, what)
    return path


def require_readable(path: Path, what: str) -> None:
    """An error naming ``path`` where this user may not open it for reading: tried, not
    read off the mode bits (root reads a chmod 000 file; ACLs and NFS decide otherwise).
    h5py and torch would say so in a traceback, or as a damaged file."""
    try:
        with open(path, "rb"):
            pass
    except PermissionError as err:
        raise ElmoPermissionError(
            f"{what} {path} cannot be read: permission denied (give this user read access, or a copy it can read)"
        ) from err


def require_writable_path(path: Union[str, Path], what: str) -> Path:
    """``path`` as a Path if a file can be written there (its directory is created if
    needed); else an error naming ``what`` and why. Checked by writing a probe file,
    which also catches read-only file systems."""
    path = Path(path)
    if path.is_dir():
        raise ElmoError(f"{what} {path} is a directory: give a file name")
    _probe_writable(path.absolute(), what, path, ElmoError)
    return path


def require_new_dir(path: Union[str, Path], what: str, error: Type[ElmoError] = ElmoError) -> Path:
    """Where ``atomic_dir`` may write the directory ``path``: the path itself, or the empty
    directory a symlink names. Else one ``error`` naming ``what``, ``path`` and the problem: it
    holds files or is a file, a dangling symlink, the current directory, under a file, or in a
    place that cannot be written (read-only, forbidden). Made by a probe, as
    ``require_writable_path`` checks a file's place."""
    given = Path(path)
    target = given.resolve()  # a symlink to a directory: fill the directory it names
    if given.is_symlink() and not target.exists():
        raise error(f"{what} {given} is a symlink to {os.readlink(given)}, which does not exist: give a new directory")
    if target.exists() and not (target.is_dir() and not any(target.iterdir())):
        raise error(f"{what} {given} exists and is not an empty directory: give a new one")
    if target == Path.cwd() or target in Path.cwd().parents:
        raise error(f"{what} {given} is the current directory (or holds it): give a new directory's name")
    _probe_writable(target, what, given, error)
    return target


def existing_ancestor(path: Path) -> Path:
    """The nearest of the absolute ``path``'s parents that exists (the root at worst): where a
    write to ``path`` would make its directories, and whose file system it fills."""
    return next(parent for parent in path.parents if parent.exists())


def _probe_writable(path: Path, what: str, given: Path, error: Type[ElmoError]) -> None:
    """Whether something can be written beside the absolute ``path`` (its parents are made if
    needed): by writing a probe file, which also catches read-only file systems."""
    above = existing_ancestor(path)
    if not above.is_dir():
        raise error(f"{what} {given} cannot be written: {above} is a file, not a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        probe = path.with_name(f".{path.name}.probe{os.getpid()}")
        probe.touch()
        probe.unlink()
    except OSError as err:
        raise error(f"{what} {given} cannot be written: {err.strerror or err}") from err


def same_file(a: Union[str, Path], b: Union[str, Path]) -> bool:
    """Whether two paths name one file: the same path once resolved (symlinks, ``..``),
    or the same inode (hard links)."""
    if Path(a).resolve() == Path(b).resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # either is missing: only the resolved paths could have told
        return False


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


def lock_path(path: Path) -> Path:
    """The lock file beside ``path`` that ``exclusive_lock`` takes."""
    return path.with_name(path.name + ".lock")


@contextmanager
def exclusive_lock(path: Union[str, Path], what: str, lock: Optional[Path] = None) -> Iterator[None]:
    """Hold ``PATH.lock`` (or ``lock``, e.g. a file inside an output directory) while the
    block runs, or fail at once with an error naming ``what`` and the run that holds it.
    A lock of our own (``flock``), so it works where HDF5's own locking is off
    (``HDF5_USE_FILE_LOCKING=FALSE`` on NFS/Lustre); the kernel drops it when its process
    dies, so a killed run leaves no stale lock."""
    path = Path(path)
    lock = lock if lock is not None else lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = _locked_fd(lock, path, what)
    try:
        if fd is not None:
            _note_holder(fd)
        yield
    finally:
        if fd is not None:
            lock.unlink(missing_ok=True)  # while still held: a waiting run then sees the file is gone
            os.close(fd)


def _locked_fd(lock: Path, path: Path, what: str) -> Optional[int]:
    """An open, locked descriptor of ``lock`` (None where the file system has no locks)."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno in (errno.EWOULDBLOCK, errno.EACCES):
                raise ElmoLockedError(
                    f"{what} {path} is being written by another run ({_holder(lock)}, lock file {lock}): "
                    "wait for it to finish, or give another output"
                ) from err
            message = f"cannot lock {lock} ({err.strerror or err}): make sure no other run writes {path}"
            warnings.warn(message, stacklevel=4)  # the caller of exclusive_lock
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


# What h5py raises reading a damaged file: OSError, and for damaged metadata also
# RuntimeError ("Object visitation failed"), KeyError ("Unable to synchronously open
# object"), ValueError, TypeError. Caught only around reads of a file (and after our
# own errors, which are ValueErrors).
HDF5_READ_ERRORS = (OSError, RuntimeError, KeyError, ValueError, TypeError)


def one_line_reason(err: BaseException) -> str:
    """The first line of an exception's message (its type where it has none)."""
    text = str(err).strip().strip("'\"").strip()
    return text.splitlines()[0] if text else type(err).__name__


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


def write_json_atomic(path: Path, data: Any, indent: Optional[int] = None) -> None:
    write_text_atomic(path, json.dumps(data, indent=indent))


def iter_utf8_lines(path: Path, error: Type[Exception]) -> Iterator[str]:
    """Lines of a UTF-8 file without their line ends; raises ``error`` naming
    the first undecodable line and byte."""
    with path.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                yield raw.decode("utf8").rstrip("\r\n")
            except UnicodeDecodeError as err:
                raise error(
                    f"{path}, line {number}: not valid UTF-8 (byte {raw[err.start]:#04x} at byte offset {err.start})"
                ) from err


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


def parse_json(text: str) -> Any:
    """``json.loads`` whose every failure is a ``ValueError`` with a one-line reason: bad
    syntax (``json.JSONDecodeError``), an integer too long for Python to convert, or
    nesting deeper than MAX_JSON_DEPTH."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError as err:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels") from err
    except ValueError as err:  # int(): "Exceeds the limit (4300 digits) for integer string conversion"
        limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()  # Python 3.9.14+
        raise ValueError(f"an integer of more than {limit} digits") from err
    check_json_depth(data)
    return data


def read_json(path: Path, error: Type[Exception]) -> Any:
    """A JSON file's content; a file that is not UTF-8 JSON raises ``error`` naming it."""
    require_readable(path, "the file")
    try:
        return parse_json(path.read_text(encoding="utf8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise error(f"{path}: not a valid JSON file ({err}): a damaged or cut file? write it again") from err


def read_jsonl(path: Path) -> List[Dict[str, Any]]:
    """The records of a JSONL file (none if it is missing), up to the first line a
    kill cut short: that line and everything after it are dropped, not an error."""
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf8").splitlines():
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return records


def write_jsonl_atomic(path: Path, records: Iterable[Dict[str, Any]]) -> None:
    """Rewrite a JSONL file whole (a kill leaves the old file or the new one)."""
    write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in records))


def write_text_atomic(path: Union[str, Path], text: str) -> None:
    with atomic_path(Path(path)) as tmp:
        tmp.write_text(text, encoding="utf8")


def move_dir(source: Path, target: Path) -> None:
    """Move the directory ``source`` to ``target``, replacing whatever is there."""
    if target.exists():
        shutil.rmtree(target)
    source.rename(target)


def append_jsonl(path: Path, records: Iterable[Dict[str, Any]]) -> None:
    with path.open("a", encoding="utf8") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")
        f.flush()
