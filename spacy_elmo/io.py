"""File helpers shared by the library: atomic writes, UTF-8 lines, sha256, JSONL."""

import errno
import fcntl
import hashlib
import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Type, Union

from .errors import ElmoError, ElmoFileNotFoundError

_BLOCK = 1 << 20


def require_file(path: Union[str, Path], what: str, hint: str = "") -> Path:
    """``path`` as a Path if it is a file; else an error that says whether it is
    missing or a directory (``hint``: what to give instead of a directory)."""
    path = Path(path)
    if path.is_dir():
        raise ElmoFileNotFoundError(f"{what} {path} is a directory, not a file{hint}")
    if not path.is_file():
        raise ElmoFileNotFoundError(f"{what} not found: {path}")
    return path


def require_writable_path(path: Union[str, Path], what: str) -> Path:
    """``path`` as a Path if a file can be written there (its directory is created if
    needed); else an error naming ``what`` and why. Checked by writing a probe file,
    which also catches read-only file systems."""
    path = Path(path)
    if path.is_dir():
        raise ElmoError(f"{what} {path} is a directory: give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        probe = path.with_name(f".{path.name}.probe{os.getpid()}")
        probe.touch()
        probe.unlink()
    except OSError as err:
        raise ElmoError(f"{what} {path} cannot be written: {err.strerror or err}") from None
    return path


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
    except OSError as err:
        if err.filename is None:  # a write through a file object names no file: name the one meant
            err.filename = str(path)
        if not is_disk_full(err) and filled_the_disk(tmp):
            raise disk_full_error(path) from err
        raise
    except RuntimeError as err:
        # torch.save on a full disk: "enforce fail at inline_container.cc ... unexpected pos"; h5py's
        # close: RuntimeError. Neither says why: the file system the write just filled does.
        if filled_the_disk(tmp):
            raise disk_full_error(path) from err
        raise
    finally:
        if tmp.exists():
            tmp.unlink()


def is_disk_full(err: BaseException) -> bool:
    """Whether ``err`` is the file system's "no space left" (or quota exceeded)."""
    return isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)


# Free bytes below which a failed write counts as having filled the disk.
FULL_DISK_BYTES = 1 << 20


def filled_the_disk(tmp: Path) -> bool:
    """Whether a write to ``tmp`` that failed left its file system (nearly) full."""
    try:
        return tmp.exists() and shutil.disk_usage(tmp.parent).free < FULL_DISK_BYTES
    except OSError:
        return False


FREE_SPACE_PREFIX = "No space left on device"


def disk_full_error(path: Union[str, Path], strerror: str = FREE_SPACE_PREFIX) -> OSError:
    return OSError(errno.ENOSPC, strerror, str(path))


def require_free_space(path: Union[str, Path], needed: int) -> None:
    """An ENOSPC error naming ``path`` where its file system has less than ``needed`` bytes
    free: checked before a write, since torch's and h5py's writers fail on a full disk with
    errors that do not say so, and h5py may crash."""
    needed += FULL_DISK_BYTES  # what a write that fills the disk would leave
    free = shutil.disk_usage(Path(path).parent).free
    if free < needed:
        raise disk_full_error(
            path, f"{FREE_SPACE_PREFIX}: {free / 2**20:.1f} MiB free, about {needed / 2**20:.1f} MiB needed"
        )


@contextmanager
def exclusive_lock(path: Union[str, Path], what: str) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (created if needed) while the block runs;
    if another process holds it, an ``ElmoError`` at once (``what``: the work it guards, e.g.
    "a pretrain run on OUT"). An flock of our own: it holds where HDF5's file locking is
    off (NFS, Lustre) and is released by the kernel when the process dies, however it dies."""
    path = Path(path)
    with open(path, "a") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as err:
            raise ElmoError(
                f"another process is already running {what} (it holds {path}): wait for it to finish, "
                "or stop it, or use another output"
            ) from err
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


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
                ) from None


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


def read_json(path: Path, error: Type[Exception]) -> Any:
    """A JSON file's content; a file that is not UTF-8 JSON raises ``error`` naming it."""
    try:
        return json.loads(path.read_text(encoding="utf8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise error(f"{path}: not a valid JSON file ({err}): a damaged or cut file? write it again") from None


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
