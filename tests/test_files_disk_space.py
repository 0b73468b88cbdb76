"""spacy_elmo.files.disk_space: full disks, free space, and atomic writes that meet a full disk."""

import errno
import os

import pytest


def test_one_disk_full_detector_knows_the_errno_and_h5pys_messages():
    from spacy_elmo.files.disk_space import is_disk_full

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
    from spacy_elmo.files.disk_space import SPARE_BYTES, require_free_space

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
    from spacy_elmo.files.atomic import atomic_path

    target = tmp_path / "out.json"
    with pytest.raises(ElmoDiskFullError) as err:
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert err.value.filename == str(target) and err.value.detail == ""
    assert str(err.value) == f"no space left on device for {target}"
    assert os.listdir(tmp_path) == []
