"""adapt-bilm: the biLM continued on a task's training text only; resumable; before/after perplexity."""

from pathlib import Path

import adapt_bilm
import numpy
import pretrain_corpus as pc
import pytest
import srsly
from typer.testing import CliRunner

from spacy_elmo.bilm import ElmoBiLM

from ..conftest import tiny_bilm
from .conftest import REPO, run_cli

# A tiny biLM and short runs: the shipped config with small batches.
FAST = [
    "--config",
    REPO / "configs" / "pretrain_adapt.cfg",
    "--training.batch_size",
    "64",
    "--training.eval_every_steps",
    "2",
    "--training.checkpoint_every_steps",
    "1",
    "--training.warmup_steps",
    "0",
]


def task_text(out: Path, corpora: Path, *exclude) -> Path:
    args = [
        out,
        "--sources",
        "task_train",
        "--input",
        f"task_train={corpora / 'conll/train.spacy'}",
        "--dev-fraction",
        "0.3",
    ]
    result = run_cli(pc.main, [*args, *(a for path in exclude for a in ("--exclude", path))])
    assert result.exit_code == 0, result.output
    return out


def run_adapt(args):
    # The script's own app: it passes unknown options (pretrain overrides) through.
    return CliRunner().invoke(adapt_bilm.app, [str(arg) for arg in args])


def exclude_args(corpora: Path):
    return ["--exclude", corpora / "conll/dev.spacy", "--exclude", corpora / "conll/test.spacy"]


@pytest.fixture(scope="module")
def init_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bilm")
    tiny_bilm(seed=3).to_files(out / "options.json", out / "weights.hdf5")
    return out


def test_refuses_a_text_that_overlaps_dev_or_test_naming_the_count(prepared_corpora, tmp_path, init_dir):
    # Built without --exclude, the tiny CoNLL train text keeps the sentence its dev and test splits share.
    text = task_text(tmp_path / "text", prepared_corpora)
    out = tmp_path / "adapted"
    result = run_adapt([text, out, "--init-dir", init_dir, *exclude_args(prepared_corpora), *FAST])
    assert result.exit_code == 1
    assert "overlaps the evaluation splits (1 sentence(s) of" in result.output
    assert str(prepared_corpora / "conll/dev.spacy") in result.output
    assert not out.exists() and not adapt_bilm.head_dir_of(out).exists()  # refused before any work


def weights(directory: Path):
    bilm = ElmoBiLM.from_files(directory / "options.json", directory / "weights.hdf5")
    return {name: value.detach().numpy().copy() for name, value in bilm.state_dict().items()}


def steps(directory: Path):
    return [r["step"] for r in srsly.read_jsonl(directory / "metrics.jsonl") if "loss" in r]


def test_adapts_head_first_then_all_and_resumes(prepared_corpora, tmp_path, init_dir):
    text = task_text(tmp_path / "text", prepared_corpora, *exclude_args(prepared_corpora)[1::2])
    out = tmp_path / "adapted"
    args = [text, out, "--init-dir", init_dir, *exclude_args(prepared_corpora), "--head-steps", "2", *FAST]
    result = run_adapt([*args, "--steps", "2"])
    assert result.exit_code == 0, result.output
    head = adapt_bilm.head_dir_of(out)
    start, after_head = weights(init_dir), weights(head)
    # The head-only run leaves the biLM exactly as it started; the adaptation changes it.
    assert all(numpy.array_equal(start[name], after_head[name]) for name in start)
    adapted = weights(out)
    assert any(not numpy.array_equal(start[name], adapted[name]) for name in start)
    assert (head / "vocab.txt").read_text() == (out / "vocab.txt").read_text()  # perplexities compare
    first = steps(out)
    assert max(first) == 2
    # Re-run with a larger budget: the adaptation resumes at step 2; the finished head run is left alone.
    result = run_adapt([*args, "--steps", "4"])
    assert result.exit_code == 0, result.output
    assert max(steps(out)) == 4 and max(steps(head)) == 2
    # The "before" run: the fixed biLM's head alone for as many steps as head start + adaptation.
    before_dir = adapt_bilm.before_dir_of(out)
    assert max(steps(before_dir)) == 2 + 4
    assert all(numpy.array_equal(start[name], weights(before_dir)[name]) for name in start)
    # adapt-perplexity: both directories score the task's dev split (.spacy) over the same vocabulary.
    from spacy_elmo.pretrain.perplexity import perplexity

    before, after = (perplexity(d, prepared_corpora / "conll/dev.spacy") for d in (before_dir, out))
    assert before["unknown_rate"] == after["unknown_rate"] and before["sentences"] == after["sentences"] > 0
    assert before["mean"] != after["mean"] and before["mean"] > 1


def test_project_has_the_adapt_and_search_commands():
    project = srsly.read_yaml(REPO / "project.yml")
    commands = {c["name"]: c for c in project["commands"]}
    adapt = " ".join(commands["adapt-bilm"]["script"])
    assert "scripts/adapt_bilm.py" in adapt and "--exclude corpus/conll/test.spacy" in adapt
    assert "${vars.adapt_steps}" in adapt and "adapt_steps" in project["vars"]
    assert len(commands["adapt-perplexity"]["script"]) == 4
    searched = " ".join(commands["search-ner"]["script"] + commands["search-sentiment"]["script"])
    for config in (REPO / "configs" / "search").glob("*.cfg"):
        assert f"configs/search/{config.name}" in searched
