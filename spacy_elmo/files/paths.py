"""What a path is, and whether it can be read or written: checked before the work, so that a
missing file, a directory, a device or a forbidden place is one clear error, not a traceback."""

import os
import stat
from pathlib import Path
from typing import Optional, Type, Union

from ..errors import ElmoError, ElmoFileNotFoundError, ElmoPermissionError


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
