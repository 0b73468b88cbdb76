"""`embed` against hostile inputs and environments (issue 61): another run on the same
output, replaced weights, an output that is the input, a full disk, stray torchrun variables."""

import builtins
import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy
import pytest
from typer.testing import CliRunner

import spacy_elmo
from spacy_elmo.bilm import ElmoBiLM
from spacy_elmo.cli import app, embed_writer
from spacy_elmo.cli import embed as embed_module
from spacy_elmo.cli.embed_writer import progress_path
from spacy_elmo.files.disk_space import SPARE_BYTES

from . import test_cli_embed
from .conftest import crash_embed_on_batch, tiny_bilm
from .test_cli_embed import LINES, TORCHRUN_ENV, read_output, read_output_after, run_embed

files = test_cli_embed.files  # the fixture: a tiny biLM's files and an input text

ROOT = os.path.dirname(os.path.dirname(spacy_elmo.__file__))

# An `embed` run that stops after its first checkpoint until the file GO exists.
PAUSED_RUN = """
import sys, time
from pathlib import Path
from typer.testing import CliRunner

from spacy_elmo.bilm import ElmoBiLM
from spacy_elmo.cli import app
from spacy_elmo.cli import embed as embed_module
from spacy_elmo.cli import embed_writer
from spacy_elmo.cli.embed_writer import progress_path
from spacy_elmo.cli import app, embed_writer
options, weights, text, out, ready, go = sys.argv[1:]
embed_writer.CHECKPOINT_SECONDS = 0.0
original, calls = ElmoBiLM.embed_batch, []
def paused(self, *args, **kwargs):
    calls.append(1)
    if len(calls) == 2:
        Path(ready).touch()
        deadline = time.monotonic() + 60
        while not Path(go).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    return original(self, *args, **kwargs)
ElmoBiLM.embed_batch = paused
app(["embed", text, out, "--options-file", options, "--weight-file", weights, "--batch-size", "2"])
"""


def start_paused_run(tmp, options, weights, text, out, env):
    ready, go = tmp / "ready", tmp / "go"
    args = [sys.executable, "-c", PAUSED_RUN, str(options), str(weights), str(text), str(out), str(ready), str(go)]
    run = subprocess.Popen(args, env={**os.environ, **env, "PYTHONPATH": ROOT}, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert run.poll() is None, run.stderr.read() if run.stderr else ""
        assert time.monotonic() < deadline, "the paused run never checkpointed"
        time.sleep(0.05)
    return run, go


@pytest.mark.parametrize("locking", ["TRUE", "FALSE"])  # FALSE: HDF5's own locks are off (NFS, Lustre)
def test_a_second_run_on_an_output_another_is_writing_says_so(files, monkeypatch, locking):
    tmp, options, weights, text = files
    out = tmp / "busy.hdf5"
    monkeypatch.setenv("HDF5_USE_FILE_LOCKING", locking)
    first, go = start_paused_run(tmp, options, weights, text, out, {"HDF5_USE_FILE_LOCKING": locking})
    try:
        result = run_embed(options, weights, text, out, "--batch-size", "2")
    finally:
        go.touch()
        _, stderr = first.communicate(timeout=120)
    assert result.exit_code == 1, result.output
    assert f"error: OUTPUT_FILE {out} is being written by another run (pid {first.pid} on " in result.output
    assert "damaged" not in result.output and "delete" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert first.returncode == 0, stderr
    data, _ = read_output(out)  # the first run's output is whole and right
    expected = ElmoBiLM.from_files(options, weights).embed_batch([line.split() for line in LINES])
    assert sorted(data, key=int) == [str(i) for i in range(len(LINES))]
    for i, want in enumerate(expected):
        numpy.testing.assert_allclose(data[str(i)], want, atol=1e-5)
    assert not list(tmp.glob("busy.hdf5.*"))  # its lock file is gone too


def kill_embed_at_batch(monkeypatch, files, out, number=3):
    """An `embed` of the fixture's files killed at its ``number``-th batch, after checkpoints."""
    tmp, options, weights, text = files
    monkeypatch.setattr(embed_writer, "CHECKPOINT_SECONDS", 0.0)
    original = crash_embed_on_batch(monkeypatch, number)
    run_embed(options, weights, text, out, "--batch-size", "2")
    monkeypatch.setattr(ElmoBiLM, "embed_batch", original)
    assert not out.exists() and json.loads(progress_path(out).read_text())["done_batches"] == number - 1
    return original


def test_a_resume_after_the_weights_were_replaced_at_the_same_path_is_refused(files, monkeypatch):
    tmp, options, weights, text = files
    out = tmp / "o.hdf5"
    kill_embed_at_batch(monkeypatch, files, out)
    tiny_bilm(seed=99).to_files(options, weights)  # another biLM, same paths
    result = run_embed(options, weights, text, out, "--batch-size", "2")
    assert result.exit_code == 1 and "holds a run with other settings" in result.output, result.output
    assert not out.exists()


def test_a_resume_with_the_same_weights_elsewhere_continues(files, monkeypatch):
    tmp, options, weights, text = files
    out = tmp / "o.hdf5"
    original = kill_embed_at_batch(monkeypatch, files, out)
    moved = tmp / "moved"
    moved.mkdir()
    options, weights = options.rename(moved / "options.json"), weights.rename(moved / "weights.hdf5")
    calls = []
    monkeypatch.setattr(ElmoBiLM, "embed_batch", lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
    result = run_embed(options, weights, text, out, "--batch-size", "2")
    assert result.exit_code == 0, result.output
    assert len(calls) == 2  # 4 batches, 2 done before the kill
    data, _ = read_output(out)
    expected = ElmoBiLM.from_files(options, weights).embed_batch([line.split() for line in LINES])
    for i, want in enumerate(expected):
        numpy.testing.assert_allclose(data[str(i)], want, atol=1e-5)


@pytest.mark.parametrize("how", ["same name", "another spelling", "symlink", "hard link"])
def test_an_output_that_is_the_input_is_refused_and_the_input_kept(files, monkeypatch, how):
    tmp, options, weights, text = files
    before = text.read_bytes()
    out = {"same name": text, "another spelling": tmp / "." / "sub" / ".." / text.name}.get(how, tmp / "alias.txt")
    (tmp / "sub").mkdir()
    if how == "symlink":
        out.symlink_to(text)
    elif how == "hard link":
        os.link(text, out)
    monkeypatch.setattr(embed_module, "load_bilm", lambda **kwargs: pytest.fail("weights were loaded"))
    result = run_embed(options, weights, text, out, "--overwrite")
    assert result.exit_code == 1
    assert f"error: OUTPUT_FILE {out} is the input file {text}" in result.output
    assert len(result.output.strip().splitlines()) == 1 and text.read_bytes() == before


@pytest.mark.parametrize("how", ["--weight-file", "--bilm-dir", "partial", "lock"])
def test_an_output_whose_files_are_the_biLMs_or_the_input_is_refused(files, how):
    """The lock file too: taking it once emptied and removed an input of that name."""
    tmp, options, weights, text = files
    source = ["--options-file", str(options), "--weight-file", str(weights)]
    if how == "--bilm-dir":
        source = ["--bilm-dir", str(tmp)]
    if how in ("partial", "lock"):
        text = text.rename(tmp / f"input.txt.x.{how}")
    out, kept, message = {
        "--weight-file": (weights, weights, f"OUTPUT_FILE {weights} is the --weight-file {weights}"),
        "--bilm-dir": (weights, weights, f"OUTPUT_FILE {weights} is the weights.hdf5 of --bilm-dir {weights}"),
        "partial": (
            tmp / "input.txt.x",
            text,
            f"OUTPUT_FILE {tmp / 'input.txt.x'}'s working file {text.name} is the input file {text}",
        ),
    }.get(
        how,
        (
            tmp / "input.txt.x",
            text,
            f"OUTPUT_FILE {tmp / 'input.txt.x'}'s lock file {text.name} is the input file {text}",
        ),
    )
    before = kept.read_bytes()
    result = CliRunner().invoke(app, ["embed", str(text), str(out), *source, "--overwrite"])
    assert result.exit_code == 1 and f"error: {message}: writing it would replace" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and kept.read_bytes() == before


@pytest.mark.parametrize("kind", ["character device", "FIFO (named pipe)"])
def test_an_input_that_is_no_regular_file_says_what_it_is(files, monkeypatch, kind):
    tmp, options, weights, _ = files
    source = tmp / "fifo"
    if kind.startswith("FIFO"):
        os.mkfifo(source)
    else:
        source = Path("/dev/null")
    monkeypatch.setattr(embed_module, "load_bilm", lambda **kwargs: pytest.fail("weights were loaded"))
    result = run_embed(options, weights, source, tmp / "o.hdf5")
    assert result.exit_code == 1
    assert f"error: the input {source} is a {kind}, not a regular file: give a text file" in result.output
    assert "not found" not in result.output and len(result.output.strip().splitlines()) == 1


def test_a_progress_file_with_a_5000_digit_count_is_named_as_damaged(files):
    tmp, options, weights, text = files
    out = tmp / "o.hdf5"
    run_embed(options, weights, text, tmp / "full.hdf5")
    (tmp / "full.hdf5").rename(embed_writer.partial_path(out))
    progress_path(out).write_text('{"done_batches": ' + "7" * 5000 + "}")
    result = run_embed(options, weights, text, out)
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
    assert f"error: {progress_path(out)} is damaged (an integer of more than 4300 digits)" in result.output


def test_stray_rank_variables_without_torchrun_are_one_line_naming_them(files, monkeypatch):
    tmp, options, weights, text = files
    for name in TORCHRUN_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    result = subprocess.run(  # a subprocess: today's code would wait forever
        [sys.executable, "-m", "spacy_elmo", "embed", str(text), str(tmp / "o.hdf5")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=120,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "error: WORLD_SIZE=2 and RANK=0 are set, but not LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, "
        "TORCHELASTIC_RUN_ID that torchrun sets beside them: this is not a torchrun process; unset WORLD_SIZE "
        "and RANK to run one process, or launch it with torchrun"
    )
    assert not list(tmp.glob("o.hdf5*"))


def test_torchruns_variables_make_a_share():
    from spacy_elmo.pretrain.distributed import torchrun_share

    env = {**TORCHRUN_ENV, "WORLD_SIZE": "2", "RANK": "1"}
    assert torchrun_share(env) == (1, 2)
    assert torchrun_share({}) == (0, 1)
    assert torchrun_share({"WORLD_SIZE": "1", "RANK": "0"}) == (0, 1)


def test_a_disk_filling_up_stops_with_one_line_and_the_rerun_resumes(files, monkeypatch):
    import shutil

    tmp, options, weights, text = files
    reference, _ = read_output_after(run_embed, files, "full.hdf5", "--batch-size", "2")
    monkeypatch.setattr(embed_writer, "CHECKPOINT_SECONDS", 0.0)
    real, writes = shutil.disk_usage, []

    def filling(path):  # room for the first two batches only
        usage = real(path)
        writes.append(path)
        free = SPARE_BYTES + (1 << 20 if len(writes) <= 3 else 100)  # the opening, 2 batches
        return usage._replace(free=free)

    monkeypatch.setattr(shutil, "disk_usage", filling)
    out = tmp / "o.hdf5"
    result = run_embed(options, weights, text, out, "--batch-size", "2")
    assert result.exit_code == 1
    line = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert line == result.output.strip().splitlines()[-1:]  # one line, after the progress bar
    assert line[0].startswith(f"error: no space left on device for {embed_writer.partial_path(out)}: free some")
    assert "it resumes from the last checkpoint (8.0 MiB free; the next write needs 0.0" in line[0]
    assert line[0].endswith(" MiB and 8 MiB is kept spare)")
    assert json.loads(progress_path(out).read_text())["done_batches"] == 2
    monkeypatch.undo()
    assert run_embed(options, weights, text, out, "--batch-size", "2").exit_code == 0
    data, _ = read_output(out)
    assert sorted(data) == sorted(reference) and all((data[k] == reference[k]).all() for k in data)


def test_an_enospc_from_the_writer_is_one_line(files, monkeypatch):
    tmp, options, weights, text = files

    def full(out, batch, vectors, plan):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(embed_writer, "write_batch", full)
    out = tmp / "o.hdf5"
    result = run_embed(options, weights, text, out)
    assert result.exit_code == 1 and "Traceback" not in result.output
    last = result.output.strip().splitlines()[-1]  # one line, after the progress bar
    assert last.startswith(f"error: no space left on device for {embed_writer.partial_path(out)}: free some")


def test_a_full_tmpfs_is_one_line_not_tracebacks_or_a_segfault(files, tiny_tmpfs):
    tmp, options, weights, text = files
    text.write_text("the quick brown fox jumps over the lazy dog again and again\n" * 300, encoding="utf8")
    args = [
        "embed",
        str(text),
        str(tiny_tmpfs / "out.hdf5"),
        "--options-file",
        str(options),
        "--weight-file",
        str(weights),
    ]
    result = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=300,
    )
    assert result.returncode == 1, result.stderr[-2000:]
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith(f"error: no space left on device for {tiny_tmpfs}/out.hdf5.partial")
    )
    assert "Traceback" not in result.stderr


def test_a_partial_with_damaged_metadata_resumes_or_is_one_line_naming_it(files, monkeypatch):
    from .test_hostile_files import metadata_offsets

    tmp, options, weights, text = files
    bilm = ElmoBiLM.from_files(options, weights)
    monkeypatch.setattr(embed_writer, "CHECKPOINT_SECONDS", 0.0)
    original = crash_embed_on_batch(monkeypatch, 3)
    out = tmp / "o.hdf5"
    with pytest.raises(KeyboardInterrupt):
        embed_module.embed_file(text, out, bilm, batch_size=2, progress=False)
    monkeypatch.setattr(ElmoBiLM, "embed_batch", original)
    partial, progress = embed_writer.partial_path(out), progress_path(out)
    raw, saved, offsets = partial.read_bytes(), progress.read_text(), metadata_offsets(partial)
    outcomes = set()
    for offset in offsets[:: len(offsets) // 40]:
        flipped = bytearray(raw)
        flipped[offset] ^= 0xFF
        partial.write_bytes(bytes(flipped))
        progress.write_text(saved)
        out.unlink(missing_ok=True)
        try:
            embed_module.embed_file(text, out, bilm, batch_size=2, progress=False)
            outcomes.add("resumed")
        except embed_module.EmbedInputError as err:
            assert str(err).startswith(f"{partial} is damaged (") and "\n" not in str(err), (offset, str(err))
            assert str(err).endswith(f"delete {partial.name}, {progress.name} (in {tmp}) to start afresh")
            outcomes.add("refused")
    assert "refused" in outcomes


def test_process_0_waiting_for_parts_nobody_writes_times_out_naming_them(files, monkeypatch):
    tmp, options, weights, text = files
    monkeypatch.setattr(embed_writer, "MERGE_POLL_SECONDS", 0.01)
    monkeypatch.setattr(embed_writer, "MERGE_STALL_SECONDS", 0.2, raising=False)
    real_sleep, sleeps = time.sleep, []

    def bounded_sleep(seconds):  # the code before the fix waited forever
        sleeps.append(seconds)
        assert len(sleeps) < 2000, "still waiting"
        real_sleep(seconds)

    monkeypatch.setattr(embed_writer.time, "sleep", bounded_sleep)
    out = tmp / "o.hdf5"
    with pytest.raises(embed_module.EmbedInputError) as err:
        embed_module.embed_file(
            text, out, ElmoBiLM.from_files(options, weights), batch_size=2, share=(0, 2), progress=False
        )
    assert str(err.value) == (
        f"waited 0.2 s for process 1's part of {out} (WORLD_SIZE=2), and it wrote nothing meanwhile: was it "
        "started, by torchrun (which sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT for each)? "
        "Rerun the same command: finished parts are kept"
    )
    assert embed_module.part_path(out, 0, 2).is_file()  # process 0's own part is kept for the rerun


def test_pretraining_decides_the_same_way(monkeypatch):
    import torch

    from spacy_elmo.errors import ElmoError
    from spacy_elmo.pretrain.distributed import setup_distributed

    for name in TORCHRUN_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(
        ElmoError, match=r"^WORLD_SIZE=2 and RANK=1 are set, but not LOCAL_RANK, .*launch it with torchrun$"
    ):
        setup_distributed(torch.device("cpu"))
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert setup_distributed(torch.device("cpu")).world_size == 1


# Every file each format reads a biLM from, as the guard's message names it.
BILM_TF_FILES = {"options.json": "options.json", "weights.hdf5": "weights.hdf5"}
EFML_FILES = {
    "config.json": "config.json",
    "network.json": "network config (config.json's config_path)",
    "char.dic": "char.dic",
    "word.dic": "word.dic",
    "token_embedder.pkl": "token_embedder.pkl",
    "encoder.pkl": "encoder.pkl",
}


def refused_as_output(text, out, source, what, path):
    """`embed --overwrite` onto ``out``, a file of the biLM ``source`` names: one line naming it, no load."""
    before = out.read_bytes()
    result = CliRunner().invoke(app, ["embed", str(text), str(out), *source, "--overwrite"])
    assert result.exit_code == 1, result.output
    assert f"error: OUTPUT_FILE {out} is {what} {path}: writing it would replace" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and out.read_bytes() == before


@pytest.mark.parametrize("name", sorted(BILM_TF_FILES))
@pytest.mark.parametrize("how", ["--options-file/--weight-file", "--bilm-dir", "the bundled biLM"])
def test_no_file_of_a_bilm_tf_biLM_can_be_the_output(files, monkeypatch, how, name):
    tmp, options, weights, text = files
    monkeypatch.setattr(embed_module, "load_bilm", lambda **kwargs: pytest.fail("weights were loaded"))
    if how == "--options-file/--weight-file":
        out = {"options.json": options, "weights.hdf5": weights}[name]
        what = {"options.json": "the --options-file", "weights.hdf5": "the --weight-file"}[name]
        refused_as_output(text, out, ["--options-file", str(options), "--weight-file", str(weights)], what, out)
        return
    directory = tmp if how == "--bilm-dir" else spacy_elmo.loaders.DEFAULT_BILM_DIR
    if not (directory / name).is_file():
        pytest.skip("this install has no bundled biLM")
    source = ["--bilm-dir", str(tmp)] if how == "--bilm-dir" else []
    what = f"the {name} of --bilm-dir" if source else f"the {name} of the bundled biLM"
    refused_as_output(text, directory / name, source, what, directory / name)


@pytest.mark.parametrize("name", sorted(EFML_FILES))
@pytest.mark.parametrize("config_path", ["network.json", "/trained/elsewhere/network.json"])
def test_no_file_of_an_elmoformanylangs_directory_can_be_the_output(files, monkeypatch, tmp_path, name, config_path):
    """It once replaced encoder.pkl (and every file but a bilm-tf directory's two) with the HDF5 output."""
    pytest.importorskip("elmoformanylangs")  # builds the directory (the test extra has it)
    from .efml_models import make_efml_dir

    text = files[3]
    model_dir = make_efml_dir(tmp_path / "efml", 3, **{"token_embedder.word_dim": 3, "token_embedder.char_dim": 4})
    (model_dir / "config.json").write_text(json.dumps({"config_path": config_path}), encoding="utf8")
    monkeypatch.setattr(embed_module, "load_bilm", lambda **kwargs: pytest.fail("weights were loaded"))
    what = f"the {EFML_FILES[name]} of --bilm-dir"
    refused_as_output(text, model_dir / name, ["--bilm-dir", str(model_dir)], what, model_dir / name)


def deny_reading(monkeypatch, denied):
    """Opening ``denied`` raises what it raises for a user without read access (chmod 000 as
    anyone but root: the tests run as root, whom the mode does not stop)."""
    real_open = builtins.open

    def guarded_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and Path(file).resolve() == denied.resolve():
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    def guarded_is_hdf5(name):  # h5py opens the file itself, not through Python's open
        if Path(name).resolve() == denied.resolve():
            raise PermissionError(errno.EACCES, "Permission denied", str(name))
        return real_is_hdf5(name)

    real_is_hdf5 = h5py.is_hdf5
    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(h5py, "is_hdf5", guarded_is_hdf5)


@pytest.mark.parametrize("name,what", [("weights.hdf5", "weight file"), ("options.json", "options file")])
def test_a_biLM_file_this_user_cannot_read_is_one_line_naming_it(files, monkeypatch, name, what):
    """An unreadable weights.hdf5 once gave PermissionError's traceback from h5py.is_hdf5."""
    tmp, options, weights, text = files
    deny_reading(monkeypatch, tmp / name)
    result = run_embed(options, weights, text, tmp / "o.hdf5")
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1, result.output
    assert f"error: {what} {tmp / name} cannot be read: permission denied" in result.output
    assert not list(tmp.glob("o.hdf5*"))


def test_an_input_this_user_cannot_read_is_one_line_naming_it(files, monkeypatch):
    tmp, options, weights, text = files
    deny_reading(monkeypatch, text)
    monkeypatch.setattr(embed_module, "load_bilm", lambda **kwargs: pytest.fail("weights were loaded"))
    result = run_embed(options, weights, text, tmp / "o.hdf5")
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1, result.output
    assert f"error: the input {text} cannot be read: permission denied" in result.output


@pytest.mark.parametrize("name", ["config.json", "network.json", "char.dic", "encoder.pkl"])
def test_an_elmoformanylangs_file_this_user_cannot_read_is_one_line_naming_it(files, monkeypatch, tmp_path, name):
    pytest.importorskip("elmoformanylangs")  # builds the directory (the test extra has it)
    from .efml_models import make_efml_dir

    text = files[3]
    model_dir = make_efml_dir(tmp_path / "efml", 3, **{"token_embedder.char_dim": 4})
    deny_reading(monkeypatch, model_dir / name)
    result = CliRunner().invoke(app, ["embed", str(text), str(tmp_path / "o.hdf5"), "--bilm-dir", str(model_dir)])
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1, result.output
    assert f"{model_dir / name} cannot be read: permission denied" in result.output
