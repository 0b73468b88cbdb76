"""``learning-curve``: each config trained on nested subsets of the training data (paper sec. 5.4).

    python scripts/learning_curve.py run TASK SUBSETS_DIR DEV TEST [--vectors V] [--bilm-dir B] [--seeds 0,1,2] ...
    python scripts/learning_curve.py plot METRICS_DIR REPORTS_DIR --subsets ner=DIR --subsets sentiment=DIR

``run`` trains every config of TASK (CURVE below; ``--runs`` picks some) on every ``train_*pct.spacy``
of SUBSETS_DIR (written by ``subsets.py``) with ``experiment``'s runner: the
full dev set for early stopping, test scored once per seed, finished seeds
skipped. Runs are named ``curve_<run>_<p>pct``. The 100% points are the main
runs (``metrics/<run>``), trained by the ``train-*`` commands.

``plot`` writes ``REPORTS_DIR/learning_curve.png`` (score vs training
sentences, log x, one line per config, error bars = sd over seeds) and
``REPORTS_DIR/learning_curve.md`` (the table, and the target: at 1% and 5%
of CoNLL, CNN + vectors + ELMo >= CNN + vectors + 3 F1).
"""

import json
import re
import statistics
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import typer
from experiment import parse_seeds, run_seed
from project_errors import ProjectDataError

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
SCORE = {"ner": ("ents_f", "CoNLL-2003 test F1"), "sentiment": ("cats_micro_f", "5-class sentiment test accuracy")}
# The target: at these subsets, CNN + vectors + ELMo >= CNN + vectors + this many points.
TARGET = ("ner", ("train_1pct", "train_5pct"), "ner_vectors_elmo", "ner_vectors", 3.0)


def curve_name(run: str, subset: str) -> str:
    return f"curve_{run}_{subset.removeprefix('train_')}"


def needs(kinds, vectors: Optional[str], bilm_dir: Optional[Path]) -> List[str]:
    overrides = []
    if "vectors" in kinds:
        overrides += ["--paths.vectors", vectors or "assets/en_core_web_md"]
    if "elmo" in kinds and bilm_dir is not None:
        overrides += [
            "--paths.elmo_options",
            str(bilm_dir / "options.json"),
            "--paths.elmo_weights",
            str(bilm_dir / "weights.hdf5"),
        ]
    return overrides


def selected_runs(task: str, runs: Optional[str]) -> List[Tuple[str, str, Tuple[str, ...]]]:
    """TASK's curve entries named in RUNS (all of them without it), in CURVE's order."""
    if runs is None:
        return CURVE[task]
    names = [name.strip() for name in runs.split(",") if name.strip()]
    known = [run for run, _, _ in CURVE[task]]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise typer.BadParameter(f"--runs: {', '.join(unknown) or '(empty)'} not among {task}'s runs {known}")
    return [entry for entry in CURVE[task] if entry[0] in names]


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
    runs: Optional[str] = typer.Option(None, "--runs", help="comma-separated runs to train (default: all of TASK's)"),
    gold_preproc: bool = typer.Option(False, "--gold-preproc"),
    training_dir: Path = typer.Option(Path("training"), "--training-dir"),
    metrics_dir: Path = typer.Option(Path("metrics"), "--metrics-dir"),
):
    """Train every config of TASK (or --runs) on every subset (extra args go to spacy train)."""
    if task not in CURVE:
        raise typer.BadParameter(f"TASK must be one of {sorted(CURVE)}, got {task!r}")
    chosen = selected_runs(task, runs)
    subsets = subset_files(subsets_dir)
    if not subsets:
        raise ProjectDataError(f"{subsets_dir}: no train_*pct.spacy (run scripts/subsets.py first)")
    for subset in subsets:
        for run, config, kinds in chosen:
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
                )


def points(task: str, metrics_dir: Path, subsets_dir: Path) -> Dict[str, List[Tuple[int, List[float]]]]:
    """Per run: (training sentences, test scores over seeds), smallest subset first, 100% last."""
    listing = json.loads((subsets_dir / "subsets.json").read_text(encoding="utf8"))
    sizes = [(name, subset["sentences"]) for name, subset in listing["subsets"].items()]
    sizes.sort(key=lambda item: item[1])
    key = SCORE[task][0]
    found: Dict[str, List[Tuple[int, List[float]]]] = {}
    for run, _, _ in CURVE[task]:
        for name, n_sentences in sizes + [("full", listing["total_sentences"])]:
            folder = metrics_dir / (run if name == "full" else curve_name(run, name))
            scores = [json.loads(p.read_text(encoding="utf8"))["test"][key] for p in sorted(folder.glob("seed*.json"))]
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


def target_lines(metrics_dir: Path) -> List[str]:
    task, subsets, elmo, baseline, margin = TARGET
    lines = []
    for subset in subsets:
        ours = [
            json.loads(p.read_text())["test"]["ents_f"]
            for p in (metrics_dir / curve_name(elmo, subset)).glob("seed*.json")
        ]
        theirs = [
            json.loads(p.read_text())["test"]["ents_f"]
            for p in (metrics_dir / curve_name(baseline, subset)).glob("seed*.json")
        ]
        if ours and theirs:
            gain = 100 * (statistics.fmean(ours) - statistics.fmean(theirs))
            verdict = "met" if gain >= margin else "MISSED"
            lines.append(
                f"- {subset}: `{elmo}` vs `{baseline}`: {gain:+.2f} F1 (target >= +{margin:.1f}): **{verdict}**"
            )
    return lines


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
    lines = ["# Learning curve (test scores, mean ± sd over seeds)", ""]
    for ax, (task, folder) in zip(axes[0], tasks.items()):
        curves = points(task, metrics_dir, Path(folder))
        for run, run_points in curves.items():
            xs = [n for n, _ in run_points]
            means = [statistics.fmean(s) for _, s in run_points]
            sds = [statistics.stdev(s) if len(s) > 1 else 0.0 for _, s in run_points]
            ax.errorbar(xs, means, yerr=sds, marker="o", capsize=3, label=run)
        ax.set_xscale("log")
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
