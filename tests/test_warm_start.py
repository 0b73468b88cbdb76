"""Warm starts, continuous outputs (vmf), precision = "auto", and a killed run's loss of work."""

import os
import signal
import subprocess
import sys
import time
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

import numpy
import pytest
import torch

from spacy_elmo.bilm import ElmoBiLM
from spacy_elmo.bilm.lm_head import VmfHead, log_bessel_iv
from spacy_elmo.files.json_files import read_jsonl
from spacy_elmo.pretrain import PretrainConfigError, PretrainDataError, Vocabulary, load_config
from spacy_elmo.pretrain.outputs import load_checkpoint
from spacy_elmo.pretrain.perplexity import perplexity
from spacy_elmo.pretrain.train import native_cpu_bf16, resolve_precision
from spacy_elmo.pretrain.warm_start import WarmStart, extended_vocab, warm_start_summary, widened_bilm

from .conftest import tiny_bilm
from .test_pretrain import SENTENCES, TINY, losses, run

MORE = ["the old man sold fresh fish at the market .", "a new bridge opened over the wide river ."]


def dev_records(output_dir):
    return [r for r in read_jsonl(Path(output_dir) / "metrics.jsonl") if "dev_perplexity" in r or "dev_loss" in r]


@pytest.mark.parametrize("softmax", ["full", "adaptive"])
def test_warm_start_with_the_same_vocabulary_begins_at_the_exports_perplexity(tmp_path, text_files, softmax):
    train, dev = text_files
    first = run(tmp_path / "first", train, dev, **{"training.softmax": softmax})
    run(
        tmp_path / "warm",
        train,
        dev,
        **{"training.softmax": softmax, "training.max_steps": 5, "paths.init_dir": str(tmp_path / "first")},
    )
    start = dev_records(tmp_path / "warm")[0]
    assert start["step"] == 0
    assert start["dev_perplexity"] == pytest.approx(first["dev_perplexity"]["mean"], rel=1e-5)
    # Far below a fresh head's start (about the 37 words of the vocabulary).
    assert start["dev_perplexity"] < 6.0
    assert (tmp_path / "warm" / "vocab.txt").read_text() == (tmp_path / "first" / "vocab.txt").read_text()


@pytest.mark.parametrize("softmax", ["full", "adaptive"])
def test_a_larger_vocabulary_keeps_the_shared_words_rows(tmp_path, text_files, softmax):
    train, dev = text_files
    run(tmp_path / "first", train, dev, **{"training.softmax": softmax, "training.max_steps": 10})
    grown = tmp_path / "grown.txt"
    grown.write_text("\n".join(SENTENCES * 12 + MORE * 30) + "\n", encoding="utf8")
    old_vocab = Vocabulary.from_file(tmp_path / "first" / "vocab.txt")
    old = load_checkpoint(tmp_path / "first" / "checkpoint.pt")["model"]
    # One step at a learning rate of ~0 shows the starting state without a separate code path.
    run(
        tmp_path / "warm",
        grown,
        dev,
        **{
            "training.softmax": softmax,
            "training.max_steps": 1,
            "training.learn_rate": 1e-30,
            "paths.init_dir": str(tmp_path / "first"),
        },
    )
    new_vocab = Vocabulary.from_file(tmp_path / "warm" / "vocab.txt")
    assert new_vocab.words[: len(old_vocab)] == old_vocab.words
    assert set(new_vocab.words) - set(old_vocab.words) >= {"market", "river"}
    new = load_checkpoint(tmp_path / "warm" / "checkpoint.pt")["model"]
    for name, tensor in old.items():
        if name.startswith("bilm."):
            assert torch.allclose(new[name], tensor, atol=1e-12), name
    n = len(old_vocab)
    if softmax == "full":
        assert torch.allclose(new["head.weight"][:n], old["head.weight"], atol=1e-12)
        assert not torch.allclose(new["head.weight"][n:], torch.zeros_like(new["head.weight"][n:]))
    else:
        # Cutoff 20: words 0-19 in the head, every later one (old and new) in the one tail cluster.
        assert torch.allclose(new["head.softmax.head.weight"], old["head.softmax.head.weight"], atol=1e-12)
        old_tail, new_tail = old["head.softmax.tail.0.1.weight"], new["head.softmax.tail.0.1.weight"]
        assert new_tail.shape[0] == len(new_vocab) - 20 > old_tail.shape[0]
        assert torch.allclose(new_tail[: old_tail.shape[0]], old_tail, atol=1e-12)


@pytest.mark.parametrize("softmax", ["full", "adaptive"])
def test_a_widened_warm_start_begins_where_the_export_ends(tmp_path, text_files, softmax):
    """warm_start.projection_dim widens the biLM and its head without changing what they compute."""
    train, dev = text_files
    first = run(tmp_path / "first", train, dev, **{"training.softmax": softmax})
    wide = {
        "training.softmax": softmax,
        "training.max_steps": 3,
        "paths.init_dir": str(tmp_path / "first"),
        "warm_start.projection_dim": 24,
    }
    run(tmp_path / "wide", train, dev, **wide)
    start = dev_records(tmp_path / "wide")[0]
    assert start["step"] == 0
    assert start["dev_perplexity"] == pytest.approx(first["dev_perplexity"]["mean"], rel=1e-5)
    assert ElmoBiLM.from_dir(tmp_path / "wide").options.projection_dim == 24
    # The widened run resumes under the same settings.
    summary = run(tmp_path / "wide", train, dev, **{**wide, "training.max_steps": 5})
    assert summary["steps"] == 5
    # The same config continues the widened export (the project's `pretrain` step, run again after
    # install-default): a start already as wide is left as it is.
    run(tmp_path / "again", train, dev, **{**wide, "paths.init_dir": str(tmp_path / "wide")})
    assert dev_records(tmp_path / "again")[0]["dev_perplexity"] == pytest.approx(
        summary["dev_perplexity"]["mean"], rel=1e-5
    )
    assert ElmoBiLM.from_dir(tmp_path / "again").options.projection_dim == 24


def test_widened_bilm_keeps_every_layer_of_the_old_one():
    old = tiny_bilm()
    wide = widened_bilm(old, replace(old.options, projection_dim=old.options.projection_dim + 8)).eval()
    sentences = [["The", "cat", "sat", "."], ["A", "dog", "."]]
    narrow_layers, wide_layers = old.embed_batch(sentences), wide.embed_batch(sentences)
    P = old.options.projection_dim
    W = wide.options.projection_dim
    for a, b in zip(narrow_layers, wide_layers):
        assert b.shape == (a.shape[0], a.shape[1], 2 * W)
        numpy.testing.assert_allclose(b[..., :P], a[..., :P], atol=1e-6)  # forward (and token) dimensions
        numpy.testing.assert_allclose(b[..., W : W + P], a[..., P:], atol=1e-6)  # backward
        # The new dimensions are not dead: they carry random projections of the old units.
        assert numpy.abs(b[..., P:W]).max() > 1e-3
    assert widened_bilm(old, old.options) is old


def test_widening_refuses_a_narrower_size_or_no_starting_biLM(tmp_path, text_files):
    train, dev = text_files
    run(tmp_path / "first", train, dev, **{"training.max_steps": 2})
    with pytest.raises(PretrainConfigError, match=r"warm_start.projection_dim = 8 is narrower .* projection_dim 16"):
        run(
            tmp_path / "narrow",
            train,
            dev,
            **{"paths.init_dir": str(tmp_path / "first"), "warm_start.projection_dim": 8},
        )
    with pytest.raises(PretrainConfigError, match=r"warm_start.projection_dim widens a starting biLM"):
        load_config(TINY, {"paths.train": str(train), "warm_start.projection_dim": 32})
    with pytest.raises(PretrainConfigError, match=r"warm_start.projection_dim must be null or a positive integer"):
        load_config(
            TINY,
            {"paths.train": str(train), "paths.init_dir": str(tmp_path / "first"), "warm_start.projection_dim": "wide"},
        )


def test_extended_vocabulary_appends_frequent_new_words_only():
    old = Vocabulary(["<S>", "</S>", "<UNK>", "the", "cat"])
    counts = numpy.array([5, 9, 1, 4, 2])
    grown = extended_vocab(old, ["cat", "dog", "rare", "the", "fish"], counts, min_count=2, max_size=7)
    assert grown.words == ["<S>", "</S>", "<UNK>", "the", "cat", "dog", "fish"]


def test_warm_start_from_a_bilm_alone_trains_a_fresh_head(tmp_path, text_files, capsys):
    train, dev = text_files
    run(tmp_path / "first", train, dev, **{"training.max_steps": 10})
    bilm_only = tmp_path / "bilm_only"
    bilm_only.mkdir()
    for name in ("options.json", "weights.hdf5"):
        (bilm_only / name).write_bytes((tmp_path / "first" / name).read_bytes())
    run(
        tmp_path / "warm",
        train,
        dev,
        **{"training.max_steps": 1, "training.learn_rate": 1e-30, "paths.init_dir": str(bilm_only)},
    )
    reference = ElmoBiLM.from_dir(tmp_path / "first")
    state = load_checkpoint(tmp_path / "warm" / "checkpoint.pt")["model"]
    for name, tensor in reference.state_dict().items():
        assert torch.allclose(state[f"bilm.{name}"], tensor, atol=1e-12), name
    # A fresh head: the start is near chance over the 37 words.
    assert dev_records(tmp_path / "warm")[0]["dev_perplexity"] > 10
    assert (
        f"warm start from {bilm_only}: its biLM weights; it has no LM head (vocab.txt and softmax.hdf5), "
        "so this run trains the LM head (full) from scratch"
    ) in capsys.readouterr().err.splitlines()


def test_the_warm_start_summary_says_what_the_head_starts_from(tmp_path):
    assert warm_start_summary(WarmStart(tmp_path, softmax_settings={"kind": "full"}), "adaptive", 0, 40) == (
        f"warm start from {tmp_path}: its biLM weights; its LM head is full and this run's is adaptive, "
        "so this run trains the LM head from scratch"
    )
    assert warm_start_summary(WarmStart(tmp_path, softmax_settings={"kind": "full"}), "full", 32, 40) == (
        f"warm start from {tmp_path}: its biLM weights, and its LM head's rows for 32 of this run's 40 words "
        "(the other words' rows start fresh)"
    )
    assert warm_start_summary(WarmStart(tmp_path, softmax_settings={"kind": "full"}), "full", 40, 40).endswith(
        "for 40 of this run's 40 words"
    )


def test_warm_start_from_a_broken_directory_names_the_file(tmp_path, text_files):
    train, dev = text_files
    run(tmp_path / "first", train, dev, **{"training.max_steps": 5})
    first = tmp_path / "first"
    (first / "vocab.txt").rename(tmp_path / "vocab.txt")
    with pytest.raises(PretrainDataError, match=r"softmax\.hdf5 is there but .*vocab\.txt is missing"):
        run(tmp_path / "a", train, dev, **{"paths.init_dir": str(first)})
    short = Vocabulary.from_file(tmp_path / "vocab.txt").words[:-2]
    (first / "vocab.txt").write_text("".join(w + "\n" for w in short), encoding="utf8")
    with pytest.raises(PretrainDataError, match=r"scores 37 words but .*vocab\.txt lists 35"):
        run(tmp_path / "b", train, dev, **{"paths.init_dir": str(first)})
    (first / "weights.hdf5").unlink()
    with pytest.raises(PretrainDataError, match=r"paths\.init_dir .* has no weights\.hdf5"):
        run(tmp_path / "c", train, dev, **{"paths.init_dir": str(first)})
    with pytest.raises(PretrainConfigError, match="give one"):
        load_config(
            TINY,
            {
                "paths.train": str(train),
                "paths.init_dir": str(first),
                "paths.init_options": "o.json",
                "paths.init_weights": "w.hdf5",
            },
        )


# -- continuous outputs ----------------------------------------------------
def test_log_bessel_matches_mpmath():
    mpmath = pytest.importorskip("mpmath")
    for order, tolerance in ((3.0, 3e-3), (49.0, 1e-4), (149.0, 1e-5)):
        for kappa in (0.5, 20.0, 149.0, 900.0):
            exact = float(mpmath.log(mpmath.besseli(order, kappa)))
            approx = float(log_bessel_iv(order, torch.tensor(kappa, dtype=torch.float64)))
            assert approx == pytest.approx(exact, abs=tolerance), (order, kappa)


def test_vmf_loss_is_lowest_for_the_target_direction():
    targets = torch.eye(6)
    head = VmfHead(3, 6, targets, l1=0.0)
    with torch.no_grad():
        head.project.weight.zero_()
        head.project.bias.copy_(5 * targets[2])
    losses = head(torch.zeros(6, 3), torch.arange(6))
    assert int(losses.argmin()) == 2
    # A word without a vector (zero row) adds nothing.
    head_with_gap = VmfHead(3, 2, torch.tensor([[0.0] * 6, [1.0] + [0.0] * 5]), l1=0.02)
    assert head_with_gap(torch.ones(2, 3), torch.tensor([0, 1]))[0] == 0


def spacy_vectors_dir(path: Path, words, width: int = 8) -> Path:
    from spacy.vocab import Vocab

    vocab = Vocab()
    rng = numpy.random.default_rng(0)
    for word in words:
        vocab.set_vector(word, rng.normal(size=width).astype("float32"))
    vocab.to_disk(path)
    return path


def test_vmf_pretraining_learns_and_reports_a_loss_not_a_perplexity(tmp_path, text_files):
    train, dev = text_files
    words = sorted({w for s in SENTENCES for w in s.split()} - {"Zürich"})
    vectors = spacy_vectors_dir(tmp_path / "vectors", words)
    summary = run(
        tmp_path / "vmf",
        train,
        dev,
        **{"training.softmax": "vmf", "paths.output_vectors": str(vectors), "training.max_steps": 40},
    )
    records = dev_records(tmp_path / "vmf")
    assert records and all("dev_loss" in r and "dev_perplexity" not in r for r in records)
    curve = [r["loss"] for r in read_jsonl(tmp_path / "vmf" / "metrics.jsonl") if "loss" in r]
    assert curve[-1] < curve[0] - 1.0, curve
    result = perplexity(tmp_path / "vmf", dev)
    assert "mean" not in result
    assert result["mean_loss"] == pytest.approx(summary["dev_perplexity"]["mean_loss"], rel=1e-5)
    # Every dev word has a vector but "Zürich" and the boundary: 3 sentences, 21 words, one of them Zürich-free.
    assert result["predictions_per_direction"] == sum(len(s.split()) for s in SENTENCES[:3])
    cli = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "perplexity", str(tmp_path / "vmf"), str(dev)],
        capture_output=True,
        text=True,
    )
    assert cli.returncode == 0, cli.stderr
    assert "no perplexity" in cli.stdout and "mean loss" in cli.stdout
    with pytest.raises(PretrainConfigError, match="output_vectors"):
        load_config(TINY, {"paths.train": str(train), "training.softmax": "vmf"})


def test_vmf_warm_start_from_a_softmax_biLM_keeps_the_biLM(tmp_path, text_files):
    train, dev = text_files
    run(tmp_path / "first", train, dev, **{"training.softmax": "adaptive", "training.max_steps": 10})
    vectors = spacy_vectors_dir(tmp_path / "vectors", ["the", "cat", "dog"])
    run(
        tmp_path / "vmf",
        train,
        dev,
        **{
            "training.softmax": "vmf",
            "paths.output_vectors": str(vectors),
            "paths.init_dir": str(tmp_path / "first"),
            "training.max_steps": 1,
            "training.learn_rate": 1e-30,
        },
    )
    state = load_checkpoint(tmp_path / "vmf" / "checkpoint.pt")["model"]
    for name, tensor in ElmoBiLM.from_dir(tmp_path / "first").state_dict().items():
        assert torch.allclose(state[f"bilm.{name}"], tensor, atol=1e-12), name


# -- precision ---------------------------------------------------------------
def test_auto_precision_is_bf16_only_where_native(tmp_path, text_files, capsys):
    assert resolve_precision("fp32", torch.device("cpu")) == "fp32"
    expected = "bf16" if native_cpu_bf16() else "fp32"
    assert resolve_precision("auto", torch.device("cpu")) == expected
    train, dev = text_files
    run(tmp_path / "auto", train, dev, **{"training.precision": "auto", "training.max_steps": 2})
    assert f"training.precision = auto: {expected} on cpu" in capsys.readouterr().err


DEV_PERPLEXITY_BOUND = {"full": 6.0, "sampled": 12.0, "adaptive": 6.0}


@pytest.mark.parametrize("softmax", ["full", "sampled", "adaptive"])
def test_bf16_pretraining_learns_like_fp32(tmp_path, text_files, softmax):
    """The bf16 path (autocast, the LSTM's fused node with bf16 GEMMs) learns the repeated text
    with every LM head."""
    train, dev = text_files
    emulated = pytest.warns(UserWarning, match="without native bf16") if not native_cpu_bf16() else nullcontext()
    with emulated:
        summary = run(tmp_path / "bf16", train, dev, **{"training.precision": "bf16", "training.softmax": softmax})
    curve = losses(tmp_path / "bf16")
    assert curve[-1] < 0.5 * curve[0], curve
    # 29 words: a model that learned nothing scores about 29 on dev. After 60 steps the sampled
    # head's dev perplexity spreads with the seed in either precision (fp32, seeds 0-3: 4.0, 3.1,
    # 4.6, 13.1; bf16 on an AMX Xeon: 8.2, 3.9, 7.5, 6.7), so its bound is looser.
    assert summary["dev_perplexity"]["mean"] < DEV_PERPLEXITY_BOUND[softmax]


def test_a_run_resumes_in_another_precision_and_logs_each(tmp_path, text_files):
    """fp32 to bf16 and back: a long run's stretches follow the CPU they run on."""
    train, dev = text_files
    out = tmp_path / "out"
    emulated = pytest.warns(UserWarning, match="without native bf16") if not native_cpu_bf16() else nullcontext()
    for max_steps, precision in ((2, "fp32"), (4, "bf16"), (6, "fp32")):
        with emulated if precision == "bf16" else nullcontext():
            summary = run(out, train, dev, **{"training.max_steps": max_steps, "training.precision": precision})
        assert summary["steps"] == max_steps
    logged = [(r["step"], r["precision"]) for r in read_jsonl(out / "metrics.jsonl") if "loss" in r]
    # Logged every 5 steps and at the end of each stretch.
    assert logged == [(2, "fp32"), (4, "bf16"), (5, "fp32"), (6, "fp32")]
    assert 'precision = "fp32"' in (out / "config.cfg").read_text()


# -- a killed run ------------------------------------------------------------
# A real kill of a pretraining process, then its resume (~40 s of processes): make test-slow; the in-process
# interrupted-and-resumed test (tests/test_pretrain.py) runs by default.
@pytest.mark.slow
def test_killed_run_resumes_losing_at_most_one_checkpoint_interval(tmp_path, text_files):
    train, dev = text_files
    out = tmp_path / "out"
    interval = 4

    def command(max_steps):
        return [
            sys.executable,
            "-m",
            "spacy_elmo",
            "pretrain",
            str(TINY),
            str(out),
            "--no-progress",
            "--paths.train",
            str(train),
            "--training.max_steps",
            str(max_steps),
            "--training.log_every_steps",
            "1",
            "--training.checkpoint_every_steps",
            str(interval),
            "--training.eval_every_steps",
            "100000",
        ]

    process = subprocess.Popen(command(100000), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # Kill it one step past its third checkpoint (or later: the point is where it was).
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and process.poll() is None:
            logged = [r["step"] for r in read_jsonl(out / "metrics.jsonl") if "loss" in r]
            if logged and logged[-1] >= 3 * interval + 1 and (out / "checkpoint.pt").is_file():
                break
            time.sleep(0.1)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait()
    last_logged = max(r["step"] for r in read_jsonl(out / "metrics.jsonl") if "loss" in r)
    saved = load_checkpoint(out / "checkpoint.pt")["step"]
    # 0 when the kill lands between a checkpoint and the next step's log line.
    assert 0 <= last_logged - saved <= interval, (last_logged, saved)
    resumed = subprocess.run(command(saved + 2), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming from step {saved}" in resumed.stderr
    assert load_checkpoint(out / "checkpoint.pt")["step"] == saved + 2
    again = subprocess.run(command(saved + 2), capture_output=True, text=True)
    assert again.returncode == 0 and f"already trained to step {saved + 2}" in again.stderr


# -- unknown words -------------------------------------------------------------
def test_perplexity_of_text_outside_the_vocabulary_says_so(tmp_path, text_files):
    train, dev = text_files
    run(tmp_path / "out", train, dev, **{"training.max_steps": 5})
    foreign = tmp_path / "foreign.txt"
    foreign.write_text("zyx wvu tsr qpo .\nnml kji hgf .\n", encoding="utf8")
    assert perplexity(tmp_path / "out", dev)["unknown_rate"] == 0.0
    result = perplexity(tmp_path / "out", foreign)
    assert result["unknown_rate"] == pytest.approx(7 / 9)  # all but the two "."
    cli = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "perplexity", str(tmp_path / "out"), str(foreign)],
        capture_output=True,
        text=True,
    )
    assert cli.returncode == 0, cli.stderr
    assert "unknown words       77.78%" in cli.stdout
    assert "warning: 77.8% of the words of" in cli.stderr and "<UNK>" in cli.stderr
    quiet = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "perplexity", str(tmp_path / "out"), str(dev)],
        capture_output=True,
        text=True,
    )
    assert "warning" not in quiet.stderr


def test_pretraining_warns_about_a_dev_text_outside_the_vocabulary(tmp_path, text_files, capsys):
    train, _ = text_files
    foreign = tmp_path / "foreign.txt"
    foreign.write_text("zyx wvu tsr qpo .\n", encoding="utf8")
    run(tmp_path / "out", train, foreign, **{"training.max_steps": 2})
    assert "warning: 80.0% of the words of the dev text" in capsys.readouterr().err


def test_a_resumed_run_removes_temporaries_an_interrupted_write_left(tmp_path, text_files, capsys):
    train, dev = text_files
    out = tmp_path / "out"
    run(out, train, dev, **{"training.max_steps": 2})
    stale = out / ".checkpoint.pt.tmp424242"
    stale.write_bytes(b"half a checkpoint")
    keep = out / "notes.tmp1"  # not one of ours (no leading dot): left alone
    keep.write_text("mine")
    run(out, train, dev, **{"training.max_steps": 3})
    assert not stale.exists() and keep.exists()
    assert "removed .checkpoint.pt.tmp424242, left by an interrupted write" in capsys.readouterr().err
