"""``learning-curve``: each config trained on nested subsets of the training data (paper sec. 5.4).

    python scripts/learning_curve.py run TASK SUBSETS_DIR DEV TEST [--vectors V] [--bilm-dir B] [--seeds 0,1,2] \
        [--runs R1,R2 [--config R1=CONFIG ...]] ...
    python scripts/learning_curve.py plot METRICS_DIR REPORTS_DIR --subsets ner=DIR --subsets sentiment=DIR

``run`` trains every config of TASK (CURVE below; ``--runs`` picks some) on every ``train_*pct.spacy``
of SUBSETS_DIR (written by ``subsets.py``) with ``experiment``'s runner: the
full dev set for early stopping, test scored once per seed, finished seeds
skipped. Runs are named ``curve_<run>_<p>pct``. The 100% points are the main
runs (``metrics/<run>``), trained by the ``train-*`` commands. The dev search's
chosen pair (CHOSEN: ``*_acc``) trains only when ``--runs`` names it, with its
configs given as ``--config RUN=CONFIG``, and only on its own subsets (CHOSEN_SUBSETS);
where its config is a CURVE run's, that run's scored points are recorded for it
(``experiment``'s ``--same-as``) instead of training them again.

``plot`` writes ``REPORTS_DIR/learning_curve.png`` (score vs training
sentences, log x, one line per config, error bars = sd over seeds) and
``REPORTS_DIR/learning_curve.md`` (the table, and the targets: at 1% and 5%
of CoNLL, CNN + vectors + ELMo >= CNN + vectors + 3 F1; at 1%, the chosen pair's
vectors + ELMo >= its vectors + 8 F1).
"""

import os
import re
import statistics
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import typer
from experiment import parse_seeds, run_seed
from project_errors import ProjectDataError

from spacy_elmo.files.json_files import read_json
from spacy_elmo.formats.bilm_dir import OPTIONS_NAME, WEIGHTS_NAME

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)

# Per task: (main run name, config, what it needs: "vectors" and/or "elmo"), and the test score.
CURVE = {
    "ner": [
        ("ner_cnn", "configs/ner_cnn.cfg", ()),
        ("ner_vectors", "configs/ner_vectors.cfg", ("vectors",)),
        ("ner_vectors_elmo", "configs/ner_vectors_elmo.cfg", ("vectors", "elmo")),
        ("ner_elmo", "configs/ner_elmo.cfg", ("elmo",)),
    ],
    "sentiment": [
        ("sentiment_cnn", "configs/textcat_cnn.cfg", ()),
        ("sentiment_vectors", "configs/textcat_vectors.cfg", ("vectors",)),
        ("sentiment_vectors_elmo", "configs/textcat_vectors_elmo.cfg", ("vectors", "elmo")),
        ("sentiment_elmo", "configs/textcat_elmo.cfg", ("elmo",)),
    ],
}
# Per task: the dev search's chosen pair (issue 30), (main run name, what it needs), and the only
# subsets it trains on (its 100% point is its main run). Its configs are the search's choice, a
# project var: ``run`` takes them as ``--config RUN=CONFIG`` and trains them only when ``--runs``
# names them.
CHOSEN = {
    "ner": [("ner_vectors_acc", ("vectors",)), ("ner_vectors_elmo_acc", ("vectors", "elmo"))],
    "sentiment": [("sentiment_vectors_acc", ("vectors",)), ("sentiment_vectors_elmo_acc", ("vectors", "elmo"))],
}
CHOSEN_SUBSETS = {"ner": ("train_1pct", "train_5pct"), "sentiment": ("train_10pct",)}
SCORE = {"ner": ("ents_f", "CoNLL-2003 test F1"), "sentiment": ("cats_micro_f", "5-class sentiment test accuracy")}
# The issues' targets (all NER): at these subsets, the ELMo run >= its baseline + this many F1 points.
TARGETS = [
    (("train_1pct", "train_5pct"), "ner_vectors_elmo", "ner_vectors", 3.0),
    (("train_1pct",), "ner_vectors_elmo_acc", "ner_vectors_acc", 8.0),
]


def curve_name(run: str, subset: str) -> str:
    return f"curve_{run}_{subset.removeprefix('train_')}"


def needs(kinds, vectors: Optional[str], bilm_dir: Optional[Path]) -> List[str]:
    overrides = []
    if "vectors" in kinds:
        overrides += ["--paths.vectors", vectors or "assets/en_core_web_md"]
    if "elmo" in kinds and bilm_dir is not None:
        overrides += [
            "--paths.elmo_options",
            str(bilm_dir / OPTIONS_NAME),
            "--paths.elmo_weights",
            str(bilm_dir / WEIGHTS_NAME),
        ]
    return overrides


def selected_runs(
    task: str, runs: Optional[str], configs: Optional[Dict[str, str]] = None
) -> List[Tuple[str, str, Tuple[str, ...]]]:
    """TASK's runs named in RUNS, CURVE's first (CURVE's runs without RUNS), as (run, config,
    what it needs); a chosen-pair run (CHOSEN) needs its config in CONFIGS."""
    configs = configs or {}
    chosen = dict(CHOSEN[task])
    misplaced = sorted(set(configs) - set(chosen))
    if misplaced:
        raise typer.BadParameter(f"--config: {', '.join(misplaced)} not among {task}'s chosen pair {list(chosen)}")
    if runs is None:
        return CURVE[task]
    names = [name.strip() for name in runs.split(",") if name.strip()]
    known = [run for run, _, _ in CURVE[task]] + list(chosen)
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise typer.BadParameter(f"--runs: {', '.join(unknown) or '(empty)'} not among {task}'s runs {known}")
    unconfigured = [name for name in chosen if name in names and name not in configs]
    if unconfigured:
        raise typer.BadParameter(
            f"--runs: {', '.join(unconfigured)} need(s) --config RUN=CONFIG (the dev search's choice)"
        )
    picked = [entry for entry in CURVE[task] if entry[0] in names]
    return picked + [(run, configs[run], kinds) for run, kinds in CHOSEN[task] if run in names]


def parse_configs(items: List[str]) -> Dict[str, str]:
    """``RUN=CONFIG`` items as a dict."""
    pairs = [item.partition("=") for item in items]
    bad = [item for item, (run, sign, config) in zip(items, pairs) if not (run and sign and config)]
    if bad:
        raise typer.BadParameter(f"--config: expected RUN=CONFIG, got {bad[0]!r}")
    return {run: config for run, _, config in pairs}


def curve_twin(task: str, run: str, config: str) -> Optional[str]:
    """The CURVE run of TASK with RUN's config, if RUN is a chosen-pair run on an existing row's
    config (NER's ``efficiency_both`` baseline is ``ner_vectors``): its points are recorded for
    RUN where they are the same runs (``experiment``'s ``same_as``), not trained twice."""
    if run not in dict(CHOSEN[task]):
        return None
    twins = [
        name for name, curve_config, _ in CURVE[task] if os.path.normpath(curve_config) == os.path.normpath(config)
    ]
    return twins[0] if twins else None


def trains_on(task: str, run: str, subset: str) -> bool:
    """Whether RUN has a point at SUBSET (e.g. train_1pct): the chosen pair only at its own subsets."""
    return run not in dict(CHOSEN[task]) or subset in CHOSEN_SUBSETS[task]


def check_chosen_subsets(task: str, runs: List[str], subsets: List[Path], subsets_dir: Path) -> None:
    """The chosen pair's subsets are all there, before any training."""
    missing = [name for name in CHOSEN_SUBSETS[task] if name not in {path.stem for path in subsets}]
    if missing and any(run in dict(CHOSEN[task]) for run in runs):
        raise ProjectDataError(
            f"{subsets_dir}: no {', '.join(f'{name}.spacy' for name in missing)} for the chosen pair "
            "(run scripts/subsets.py with those percents)"
        )


def subset_files(subsets_dir: Path) -> List[Path]:
    """SUBSETS_DIR's train_<p>pct.spacy files, smallest p first (a name sort puts 10% before 1%)."""
    found = [
        (re.fullmatch(r"train_(\d+(?:\.\d+)?)pct", path.stem), path) for path in subsets_dir.glob("train_*pct.spacy")
    ]
    return [path for _, path in sorted((float(match.group(1)), path) for match, path in found if match)]


@app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run_curve(
    ctx: typer.Context,
    task: str = typer.Argument(..., help="ner or sentiment"),
    subsets_dir: Path = typer.Argument(..., exists=True, file_okay=False),
    dev: Path = typer.Argument(..., exists=True),
    test: Path = typer.Argument(..., exists=True),
    vectors: Optional[str] = typer.Option(None, "--vectors", help="static vectors (default assets/en_core_web_md)"),
    bilm_dir: Optional[Path] = typer.Option(None, "--bilm-dir", help="the biLM (default: the configs' bundled one)"),
    seeds: str = typer.Option("0,1,2", "--seeds"),
    runs: Optional[str] = typer.Option(
        None, "--runs", help="comma-separated runs to train (default: CURVE's runs of TASK, not the chosen pair)"
    ),
    configs: List[str] = typer.Option(
        [], "--config", help="RUN=CONFIG: a chosen-pair run's config (the dev search's choice), once per run"
    ),
    gold_preproc: bool = typer.Option(False, "--gold-preproc"),
    training_dir: Path = typer.Option(Path("training"), "--training-dir"),
    metrics_dir: Path = typer.Option(Path("metrics"), "--metrics-dir"),
    threads: int = typer.Option(0, "--threads", min=0, help="torch threads per run (0: torch's default)"),
):
    """Train every config of TASK (or --runs) on every subset (extra args go to spacy train)."""
    if task not in CURVE:
        raise typer.BadParameter(f"TASK must be one of {sorted(CURVE)}, got {task!r}")
    chosen = selected_runs(task, runs, parse_configs(configs))
    subsets = subset_files(subsets_dir)
    if not subsets:
        raise ProjectDataError(f"{subsets_dir}: no train_*pct.spacy (run scripts/subsets.py first)")
    check_chosen_subsets(task, [run for run, _, _ in chosen], subsets, subsets_dir)
    for subset in subsets:
        for run, config, kinds in chosen:
            if not trains_on(task, run, subset.stem):
                continue
            twin = curve_twin(task, run, config)
            for seed in parse_seeds(seeds):
                run_seed(
                    Path(config),
                    subset,
                    dev,
                    test,
                    curve_name(run, subset.stem),
                    seed,
                    needs(kinds, vectors, bilm_dir) + list(ctx.args),
                    gold_preproc,
                    -1,
                    training_dir,
                    metrics_dir,
                    same_as=None if twin is None else curve_name(twin, subset.stem),
                    threads=threads,
                )


def seed_test_scores(folder: Path, key: str) -> List[float]:
    """A run's test score KEY, one per seed (``folder``: its metrics)."""
    return [read_json(p, ProjectDataError)["test"][key] for p in sorted(folder.glob("seed*.json"))]


def points(task: str, metrics_dir: Path, subsets_dir: Path) -> Dict[str, List[Tuple[int, List[float]]]]:
    """Per run: (training sentences, test scores over seeds), smallest subset first, 100% last."""
    listing = read_json(subsets_dir / "subsets.json", ProjectDataError)
    sizes = [(name, subset["sentences"]) for name, subset in listing["subsets"].items()]
    sizes.sort(key=lambda item: item[1])
    key = SCORE[task][0]
    found: Dict[str, List[Tuple[int, List[float]]]] = {}
    for run in [run for run, _, _ in CURVE[task]] + [run for run, _ in CHOSEN[task]]:
        for name, n_sentences in sizes + [("full", listing["total_sentences"])]:
            folder = metrics_dir / (run if name == "full" else curve_name(run, name))
            scores = seed_test_scores(folder, key)
            if scores:
                found.setdefault(run, []).append((n_sentences, [100 * s for s in scores]))
    return found


def table(task: str, curves: Dict[str, List[Tuple[int, List[float]]]]) -> List[str]:
    sizes = sorted({n for run in curves.values() for n, _ in run})
    lines = [f"| {task} run | " + " | ".join(f"{n:,} sentences" for n in sizes) + " |", "|---|" + "---|" * len(sizes)]
    for run, run_points in curves.items():
        by_size = dict(run_points)
        cells = [mean_sd_text(by_size[n]) if n in by_size else "" for n in sizes]
        lines.append(f"| `{run}` | " + " | ".join(cells) + " |")
    return lines


def mean_sd_text(scores: List[float]) -> str:
    if len(scores) == 1:
        return f"{scores[0]:.2f} (1 seed)"
    return f"{statistics.fmean(scores):.2f} ± {statistics.stdev(scores):.2f}"


def seeds_heading(curves: Dict[str, Dict[str, List[Tuple[int, List[float]]]]]) -> str:
    """ "one seed" where every point (of every task) has one, else what the cells show."""
    counts = {len(scores) for task in curves.values() for run in task.values() for _, scores in run}
    return "one seed" if counts == {1} else "mean ± sd over seeds"


def target_lines(metrics_dir: Path) -> List[str]:
    lines = []
    for subsets, elmo, baseline, margin in TARGETS:
        for subset in subsets:
            ours, theirs = (
                seed_test_scores(metrics_dir / curve_name(run, subset), "ents_f") for run in (elmo, baseline)
            )
            if ours and theirs:
                gain = 100 * (statistics.fmean(ours) - statistics.fmean(theirs))
                verdict = "met" if gain >= margin else f"MISSED by {margin - gain:.2f} F1"
                lines.append(
                    f"- {subset}: `{elmo}` vs `{baseline}`: {gain:+.2f} F1 (target >= +{margin:.1f}): **{verdict}**"
                )
    return lines


def plot_runs(ax, curves: Dict[str, List[Tuple[int, List[float]]]]) -> None:
    """A line per run on a log x axis ticked at the subsets' sizes (plain numbers); error bars
    (sd over seeds) only where a point has seeds, so one seed's legend shows none."""
    from matplotlib.ticker import NullFormatter, NullLocator

    for run, run_points in curves.items():
        xs = [n for n, _ in run_points]
        means = [statistics.fmean(s) for _, s in run_points]
        if any(len(s) > 1 for _, s in run_points):
            sds = [statistics.stdev(s) if len(s) > 1 else 0.0 for _, s in run_points]
            ax.errorbar(xs, means, yerr=sds, marker="o", capsize=3, label=run)
        else:
            ax.plot(xs, means, marker="o", label=run)
    ax.set_xscale("log")
    sizes = sorted({n for run_points in curves.values() for n, _ in run_points})
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(sizes, [f"{n:,}" for n in sizes])


@app.command("plot")
def plot_curve(
    metrics_dir: Path = typer.Argument(..., exists=True, file_okay=False),
    reports_dir: Path = typer.Argument(...),
    subsets: List[str] = typer.Option(..., "--subsets", help="TASK=SUBSETS_DIR, once per task"),
):
    """The learning-curve plot and table from the runs' test scores."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = dict(item.split("=", 1) for item in subsets)
    unknown = sorted(set(tasks) - set(CURVE))
    if unknown:
        raise typer.BadParameter(f"--subsets: unknown task(s) {unknown}; known: {sorted(CURVE)}")
    reports_dir.mkdir(parents=True, exist_ok=True)
    figure, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4.5), squeeze=False)
    every = {task: points(task, metrics_dir, Path(folder)) for task, folder in tasks.items()}
    lines = [f"# Learning curve (test scores, {seeds_heading(every)})", ""]
    for ax, (task, curves) in zip(axes[0], every.items()):
        plot_runs(ax, curves)
        ax.set_xlabel("training sentences")
        ax.set_ylabel(SCORE[task][1])
        ax.legend()
        lines += table(task, curves) + [""]
    lines += target_lines(metrics_dir)
    figure.tight_layout()
    figure.savefig(reports_dir / "learning_curve.png", dpi=120)
    (reports_dir / "learning_curve.md").write_text("\n".join(lines) + "\n", encoding="utf8")
    typer.echo(f"wrote {reports_dir / 'learning_curve.png'} and learning_curve.md")


if __name__ == "__main__":
    app()
