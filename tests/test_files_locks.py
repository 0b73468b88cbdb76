"""spacy_elmo.files.locks: the lock beside an output."""

import errno
import fcntl
import os
import subprocess
import sys

import pytest

import spacy_elmo
from spacy_elmo.errors import ElmoLockedError
from spacy_elmo.files.locks import exclusive_lock, lock_path

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
        "from spacy_elmo.files.locks import exclusive_lock\n"
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


def test_a_lock_on_a_full_disk_still_holds(tmp_path, monkeypatch):
    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    out = tmp_path / "out.hdf5"
    with exclusive_lock(out, "OUTPUT_FILE"):
        with pytest.raises(ElmoLockedError, match=r"is being written by another run \(its pid not recorded yet"):
            with exclusive_lock(out, "OUTPUT_FILE"):
                pytest.fail("locked twice")
