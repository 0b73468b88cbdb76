"""Pretraining that cannot go on, said in one line: divergence, a second run on the
same output, a full disk, files it may not read or write, Ctrl-C; and what each
figure scored, huge losses, over-long paragraphs, the threads it picks."""

import errno
import fcntl
import math
import os
import shutil
from pathlib import Path

import h5py
import numpy
import pytest
import torch

from spacy_elmo.errors import ElmoError
from spacy_elmo.files.atomic import atomic_path
from spacy_elmo.files.json_files import read_jsonl
from spacy_elmo.pretrain import Corpus, load_config, pretrain
from spacy_elmo.pretrain import train as train_module
from spacy_elmo.pretrain.outputs import load_checkpoint

from .conftest import tiny_bilm
from .test_pretrain import TINY

SETTINGS = {"training.max_steps": 8, "training.checkpoint_every_steps": 4, "training.log_every_steps": 1}


def _pretrain(output_dir, train, **overrides):
    settings = {"paths.train": str(train), **SETTINGS, **overrides}
    return pretrain(load_config(TINY, settings), output_dir, progress=False)


def _cli(*args):
    from typer.testing import CliRunner

    from spacy_elmo.cli import app

    return CliRunner().invoke(app, ["pretrain", str(TINY), *map(str, args), "--no-progress"])


def _cli_settings(train, **overrides):
    settings = {"paths.train": train, **SETTINGS, **overrides}
    return [str(x) for name, value in settings.items() for x in (f"--{name}", value)]


def _faulty_steps(monkeypatch, fault):
    """train_step with ``fault(call, model, figures)`` applied after each real step (calls count from 1)."""
    real, calls = train_module.train_step, []

    def step(model, *args, **kwargs):
        calls.append(1)
        return fault(len(calls), model, lambda: real(model, *args, **kwargs))

    monkeypatch.setattr(train_module, "train_step", step)


# -- 4: divergence ---------------------------------------------------------
@pytest.mark.parametrize("what", ["loss", "weights"])
def test_a_diverging_run_stops_at_once_and_keeps_the_last_good_checkpoint(tmp_path, text_files, monkeypatch, what):
    """A NaN loss at step 5, or (at the checkpoint of step 8) weights an update made infinite
    though the loss was finite: stopped there, nothing non-finite written."""
    train, _ = text_files
    out = tmp_path / "out"
    bad_step = 5 if what == "loss" else 8

    def diverges(call, model, step):
        forward, backward, n = step()
        if call == bad_step:
            with torch.no_grad():
                next(model.parameters()).fill_(math.inf)
            forward = math.nan if what == "loss" else forward
        return forward, backward, n

    _faulty_steps(monkeypatch, diverges)
    with pytest.raises(ElmoError) as err:
        _pretrain(out, train)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"pretraining diverged at step {bad_step}: ")
    assert f"the last good checkpoint, {out / 'checkpoint.pt'} (step 4), is kept" in message
    assert "training.learn_rate" in message
    state = load_checkpoint(out / "checkpoint.pt")
    assert state["step"] == 4
    assert all(torch.isfinite(t).all() for t in state["model"].values())
    with h5py.File(out / "weights.hdf5", "r") as f:
        arrays = []
        f.visititems(lambda name, obj: arrays.append(obj[()]) if isinstance(obj, h5py.Dataset) else None)
    assert arrays and all(numpy.isfinite(a).all() for a in arrays)
    logged = [r["loss"] for r in read_jsonl(out / "metrics.jsonl") if "loss" in r]
    assert len(logged) == (4 if what == "loss" else 8) and all(math.isfinite(x) for x in logged)


# -- 11: a huge but finite loss ---------------------------------------------
def test_a_huge_loss_has_an_infinite_perplexity_not_an_overflow(tmp_path, text_files, monkeypatch):
    from spacy_elmo.pretrain.evaluation import dev_record, perplexities

    assert perplexities(1e6, 3.0, 1) == {
        "forward": math.inf,
        "backward": math.exp(3.0),
        "mean": math.inf,
        "predictions_per_direction": 1,
    }
    assert dev_record("full", 7, (2e3, 2e3, 2))["dev_perplexity"] == math.inf
    train, _ = text_files
    _faulty_steps(monkeypatch, lambda call, model, step: (1e6, 1e6, step()[2]))  # diverging SGD: huge, finite
    assert _pretrain(tmp_path / "out", train, **{"training.max_steps": 2})["steps"] == 2
    records = [r for r in read_jsonl(tmp_path / "out" / "metrics.jsonl") if "loss" in r]
    assert [r["perplexity"] for r in records] == [math.inf, math.inf]


# -- 5: one run per output directory ----------------------------------------
def test_a_second_pretrain_on_the_same_output_directory_is_refused(tmp_path, text_files):
    train, _ = text_files
    out = tmp_path / "out"
    out.mkdir()
    lock = out / ".pretrain.lock"
    with open(lock, "a") as first_run:  # what the first run holds while it trains
        fcntl.flock(first_run.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = _cli(out, *_cli_settings(train))
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        f"error: pretrain output {out} is being written by another run (its pid not recorded yet, "
        f"lock file {lock}): wait for it to finish, or give another output"
    )
    assert [p.name for p in out.iterdir()] == [".pretrain.lock"]  # nothing of the first run touched
    assert _pretrain(out, train, **{"training.max_steps": 2})["steps"] == 2  # released: runs


# -- 16: outputs it may not write, inputs it may not read --------------------
def test_an_output_that_is_a_file_is_named(tmp_path, text_files):
    train, _ = text_files
    out = tmp_path / "out"
    out.write_text("my notes\n")
    with pytest.raises(ElmoError) as err:
        _pretrain(out, train)
    assert str(err.value) == (
        f"pretrain output {out} is a file, not a directory: give a directory (a new one, or an earlier "
        "pretrain output to resume)"
    )
    assert out.read_text() == "my notes\n"


@pytest.mark.parametrize("code,reason", [(errno.EROFS, "a read-only file system"), (errno.EACCES, "permission denied")])
def test_an_output_directory_that_cannot_be_written_is_named(tmp_path, text_files, monkeypatch, code, reason):
    """Root writes through chmod: the file system's refusal is simulated where the directory is made."""
    train, _ = text_files
    out = tmp_path / "ro" / "out"
    real_mkdir = Path.mkdir

    def refused(self, *args, **kwargs):
        if self == out:
            raise OSError(code, os.strerror(code), str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", refused)
    with pytest.raises(ElmoError) as err:
        _pretrain(out, train)
    assert str(err.value) == (
        f"cannot write {out} ({reason}): pretrain needs an output directory it may write; give another "
        "OUTPUT_DIR, or make this one writable for the user running pretrain"
    )


def test_an_unreadable_corpus_is_named(tmp_path, text_files, monkeypatch):
    train, _ = text_files
    real_open = Path.open

    def forbidden(self, *args, **kwargs):
        if self == train:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", forbidden)
    with pytest.raises(ElmoError) as err:
        _pretrain(tmp_path / "out", train)
    assert str(err.value) == (
        f"cannot read {train} (permission denied): make it readable for the user running pretrain "
        "(chmod, chown), or give a readable copy"
    )


def test_unreadable_starting_weights_are_named(tmp_path, text_files, monkeypatch):
    """h5py names the file only inside its message (as it does, run as a user without access)."""
    train, _ = text_files
    options, weights = tmp_path / "bilm" / "options.json", tmp_path / "bilm" / "weights.hdf5"
    tiny_bilm().to_files(options, weights)
    real_is_hdf5 = h5py.is_hdf5

    def forbidden(name):
        if str(name) == str(weights):
            raise PermissionError(
                errno.EACCES,
                f"Unable to determine if file is accessible as hdf5 (unable to open file: name = '{name}', "
                "errno = 13, error message = 'Permission denied', flags = 0, o_flags = 0)",
            )
        return real_is_hdf5(name)

    monkeypatch.setattr(h5py, "is_hdf5", forbidden)
    with pytest.raises(ElmoError) as err:
        _pretrain(tmp_path / "out", train, **{"paths.init_options": str(options), "paths.init_weights": str(weights)})
    assert str(err.value) == (
        f"cannot read {weights} (permission denied): make it readable for the user running pretrain "
        "(chmod, chown), or give a readable copy"
    )


# -- 10: a full disk --------------------------------------------------------
def _disk_with(monkeypatch, free_bytes):
    """shutil.disk_usage (as spacy_elmo/files/disk_space.py calls it) reporting ``free_bytes(path)`` free."""
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda path: real(path)._replace(free=free_bytes(Path(path))))


def test_too_little_space_for_a_checkpoint_is_said_before_writing_it(tmp_path, text_files, monkeypatch):
    train, _ = text_files
    out = tmp_path / "out"
    _disk_with(monkeypatch, lambda path: 300 * 1024)
    with pytest.raises(ElmoError) as err:
        _pretrain(out, train)
    message = str(err.value)
    assert message.startswith(
        f"no space left on device writing {out / 'checkpoint.pt'} (0.3 MiB free; the next write needs 0.3 MiB "
        "and 8 MiB is kept spare); "
    )
    assert message.endswith("no checkpoint was written yet: free some space and rerun the same command")
    assert not (out / "checkpoint.pt").exists() and not list(out.glob(".*.tmp*"))


@pytest.mark.parametrize("writer", ["torch", "hdf5"])
def test_a_writer_that_fills_the_disk_is_a_full_disk_not_its_own_error(tmp_path, text_files, monkeypatch, writer):
    """What torch.save and h5py raise when the disk fills under them (seen on a 256 KiB tmpfs):
    errors that do not say so; the disk then has (nearly) nothing free."""
    from spacy_elmo.pretrain import outputs

    train, _ = text_files
    out = tmp_path / "out"
    calls = {"n": 0}
    _disk_with(monkeypatch, lambda path: 0 if list(out.glob(".*.tmp*")) else 10**9)
    real_save, real_write_weights = torch.save, outputs.write_weights

    def torch_save(obj, f, *args, **kwargs):  # the checkpoint's writer, given the temporary file
        calls["n"] += 1
        if calls["n"] < 2:
            return real_save(obj, f, *args, **kwargs)
        f.write(b"the disk fills")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598")

    def write_weights(arrays, path, **kwargs):  # as formats.bilm_tf.write_weights: h5py into a temporary file
        calls["n"] += 1
        if calls["n"] < 2:
            return real_write_weights(arrays, path, **kwargs)
        with atomic_path(Path(path)) as tmp:
            tmp.write_bytes(b"the disk fills")
            raise RuntimeError("Can't decrement id ref count (unable to close file)")

    if writer == "torch":
        monkeypatch.setattr(torch, "save", torch_save)
    else:
        monkeypatch.setattr(outputs, "write_weights", write_weights)
    written = out / ("checkpoint.pt" if writer == "torch" else "weights.hdf5")
    with pytest.raises(ElmoError) as err:
        _pretrain(out, train)
    assert str(err.value) == (
        f"no space left on device writing {written}; the last checkpoint, {out / 'checkpoint.pt'} (step "
        f"{4 if writer == 'torch' else 8}), is intact: free some space and rerun the same command to resume from it"
    )
    assert not list(out.glob(".*.tmp*"))


# -- 21: Ctrl-C -------------------------------------------------------------
def test_ctrl_c_says_where_the_last_checkpoint_is_and_that_rerunning_resumes(tmp_path, text_files, monkeypatch):
    train, _ = text_files
    out = tmp_path / "out"

    def interrupted_in_step_7(call, model, step):
        if call == 7:
            raise KeyboardInterrupt
        return step()

    _faulty_steps(monkeypatch, interrupted_in_step_7)
    result = _cli(out, *_cli_settings(train))
    assert result.exit_code == 130
    assert result.stderr.splitlines()[-1] == (
        f"interrupted at step 6: the last checkpoint, {out / 'checkpoint.pt'} (step 4), is intact; "
        "re-running the same command resumes from it (the 2 step(s) since it are lost)"
    )
    monkeypatch.undo()
    again = _cli(out, *_cli_settings(train))
    assert again.exit_code == 0 and f"{out}: resuming from step 4 (of 8)" in again.stderr


# -- 23: what each perplexity scored ----------------------------------------
def test_each_perplexity_line_says_which_sentences_it_scored(tmp_path, text_files):
    train, dev = text_files  # dev: 3 sentences
    out = tmp_path / "out"
    result = _cli(out, *_cli_settings(train, **{"paths.dev": dev, "corpus.max_dev_sentences": 2}))
    assert result.exit_code == 0
    last = result.stderr.splitlines()[-1]
    assert last.startswith("trained to step 8, dev perplexity ")
    assert last.endswith(
        f") on the first 2 sentences of {dev} (corpus.max_dev_sentences; `perplexity` scores them all); biLM in {out}"
    )
    from typer.testing import CliRunner

    from spacy_elmo.cli import app

    scored = CliRunner().invoke(app, ["perplexity", str(out), str(dev)])
    assert scored.exit_code == 0
    assert f"(exp of the mean loss; all 3 sentences of {dev}, " in scored.stdout
    whole = _cli(tmp_path / "all", *_cli_settings(train, **{"paths.dev": dev, "training.max_steps": 1}))
    assert whole.stderr.splitlines()[-1].endswith(f") on all 3 sentences of {dev}; biLM in {tmp_path / 'all'}")


# -- 17: a paragraph over spaCy's max_length --------------------------------
def test_a_paragraph_longer_than_spacys_max_length_is_cut_at_sentence_ends(tmp_path, monkeypatch):
    """As a 47 MB single line is against spaCy's 1,000,000 characters (E088), here with a 100-character limit."""
    from spacy_elmo.pretrain import corpus as corpus_module

    real = corpus_module._sentence_splitter

    def short_limit(lang):
        nlp = real(lang)
        nlp.max_length = 100
        return nlp

    monkeypatch.setattr(corpus_module, "_sentence_splitter", short_limit)
    line = " ".join(f"word{i} is here ." for i in range(40)) + " " + "x" * 30 + " y" * 60  # no end at last
    text = tmp_path / "one_line.txt"
    text.write_text(line + "\n")
    corpus = Corpus()
    sentences = corpus.read(text, text_format="paragraphs", max_sentence_length=1000)
    assert [corpus.types[i] for s in sentences for i in s] == line.split()  # nothing lost or changed
    assert [len(s) for s in sentences[:40]] == [4] * 40  # every sentence whole
    assert list(corpus_module.split_paragraph("ab cd. ef", 4)) == ["ab ", "cd. ", "ef"]
    assert list(corpus_module.split_paragraph("abcdefghij", 4)) == ["abcd", "efgh", "ij"]


# -- 20: threads ------------------------------------------------------------
@pytest.mark.parametrize(
    "load,setting,omp,expected",
    [(1.3, 0, None, 1), (0.2, 0, None, 2), (9.0, 0, None, 1), (1.3, 3, None, 3), (0.0, 0, "1", None)],
)
def test_threads_are_chosen_from_the_free_cores(monkeypatch, load, setting, omp, expected):
    from spacy_elmo.pretrain.distributed import choose_threads

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(os, "getloadavg", lambda: (load, 0.0, 0.0))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    if omp:
        monkeypatch.setenv("OMP_NUM_THREADS", omp)
    assert choose_threads(setting)[0] == expected


def test_pretrain_on_a_busy_machine_takes_the_free_core_only(tmp_path, text_files, monkeypatch, capsys):
    """torch's default on 2 cores beside another job: 2 threads, 12x slower than 1."""
    train, _ = text_files
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(os, "getloadavg", lambda: (1.2, 1.0, 1.0))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    chosen = []
    monkeypatch.setattr(torch, "set_num_threads", chosen.append)
    _pretrain(tmp_path / "out", train, **{"training.max_steps": 1})
    assert chosen == [1]
    assert "torch thread(s) per process (system.threads = 0: 1 of 2 core(s), with a load average of 1.2)" in (
        capsys.readouterr().err
    )
