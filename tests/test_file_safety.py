"""spacy_elmo.file_safety: the lock beside an output, files that must exist."""

import errno
import fcntl
import os
import subprocess
import sys

import pytest

import spacy_elmo
from spacy_elmo.errors import ElmoLockedError
from spacy_elmo.file_safety import exclusive_lock, lock_path

ROOT = os.path.dirname(os.path.dirname(spacy_elmo.__file__))


def test_a_held_lock_refuses_a_second_holder_naming_the_first(tmp_path):
    out = tmp_path / "out.hdf5"
    with exclusive_lock(out, "OUTPUT_FILE"):
        assert lock_path(out).read_text().startswith(f"pid {os.getpid()} on ")
        with pytest.raises(ElmoLockedError) as err:
            with exclusive_lock(out, "OUTPUT_FILE"):
                pytest.fail("locked twice")
    message = str(err.value)
    assert message.startswith(f"OUTPUT_FILE {out} is being written by another run (pid {os.getpid()} on ")
    assert "\n" not in message and str(lock_path(out)) in message
    assert not lock_path(out).exists()  # released and removed
    with exclusive_lock(out, "OUTPUT_FILE"):
        assert lock_path(out).exists()


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    out = tmp_path / "out.hdf5"
    script = (
        "import os, sys\n"
        "from spacy_elmo.file_safety import exclusive_lock\n"
        "with exclusive_lock(sys.argv[1], 'OUTPUT_FILE'):\n"
        "    os._exit(9)\n"  # dies holding it: no release code runs
    )
    died = subprocess.run([sys.executable, "-c", script, str(out)], env={**os.environ, "PYTHONPATH": ROOT})
    assert died.returncode == 9 and lock_path(out).exists()
    with exclusive_lock(out, "OUTPUT_FILE"):
        assert lock_path(out).read_text().startswith(f"pid {os.getpid()} ")


def test_a_file_system_without_locks_warns_and_runs(tmp_path, monkeypatch):
    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    ran = []
    with pytest.warns(UserWarning, match="cannot lock .*out.hdf5.lock .No locks available.: make sure no other run"):
        with exclusive_lock(tmp_path / "out.hdf5", "OUTPUT_FILE"):
            ran.append(True)
    assert ran == [True]


def test_a_device_given_as_a_file_says_what_it_is():
    from spacy_elmo.errors import ElmoError
    from spacy_elmo.file_safety import require_file

    with pytest.raises(ElmoError, match=r"^weight file /dev/null is a character device, not a regular file: give"):
        require_file("/dev/null", "weight file")


def test_a_lock_on_a_full_disk_still_holds(tmp_path, monkeypatch):
    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    out = tmp_path / "out.hdf5"
    with exclusive_lock(out, "OUTPUT_FILE"):
        with pytest.raises(ElmoLockedError, match=r"is being written by another run \(its pid not recorded yet"):
            with exclusive_lock(out, "OUTPUT_FILE"):
                pytest.fail("locked twice")


def test_one_disk_full_detector_knows_the_errno_and_h5pys_messages():
    from spacy_elmo.file_safety import is_disk_full

    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert is_disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    # h5py quotes the errno inside its message, with no errno of its own
    assert is_disk_full(RuntimeError("Can't write data (file write failed: ..., errno = 28, error message = ...)"))
    assert is_disk_full(OSError("Unable to synchronously create file (No space left on device)"))
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not is_disk_full(RuntimeError("unexpected pos 704 vs 598"))


def test_free_space_is_checked_where_the_directory_is_yet_to_be_made(tmp_path, monkeypatch):
    import shutil

    from spacy_elmo.errors import ElmoDiskFullError, ElmoError
    from spacy_elmo.file_safety import SPARE_BYTES, require_free_space

    real, asked = shutil.disk_usage, []

    def usage(path):
        asked.append(path)
        return real(path)._replace(free=SPARE_BYTES + 1000)

    monkeypatch.setattr(shutil, "disk_usage", usage)
    target = tmp_path / "new" / "deeper" / "weights.hdf5"
    require_free_space(target, 1000)
    assert asked == [tmp_path]
    with pytest.raises(ElmoDiskFullError) as err:
        require_free_space(target, 1001)
    assert isinstance(err.value, OSError) and isinstance(err.value, ElmoError) and err.value.errno == errno.ENOSPC
    assert str(err.value) == (
        f"no space left on device for {target} (8.0 MiB free; the next write needs 0.0 MiB and 8 MiB is kept spare)"
    )


def test_an_atomic_write_that_meets_a_full_disk_is_the_one_disk_full_error_and_leaves_nothing(tmp_path):
    from spacy_elmo.errors import ElmoDiskFullError
    from spacy_elmo.file_safety import atomic_path

    target = tmp_path / "out.json"
    with pytest.raises(ElmoDiskFullError) as err:
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert err.value.filename == str(target) and err.value.detail == ""
    assert str(err.value) == f"no space left on device for {target}"
    assert os.listdir(tmp_path) == []
