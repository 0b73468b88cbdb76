"""``report``: the results table, plots and a summary from the project's metrics.

    python scripts/report.py METRICS_DIR REPORTS_DIR [--bilm-dir training/bilm] [--title ...]

Reads ``METRICS_DIR/<run>/seed*.json`` (written by ``experiment``), the
pretraining output and, where the ``speed`` command measured them,
``METRICS_DIR/speed_{ner,sentiment}.json`` (``benchmarks/bench_trained.py``: a
words/s column beside each config's score), and writes ``REPORTS_DIR/results.md``,
``REPORTS_DIR/scores.png``, ``REPORTS_DIR/pretrain_curve.png``,
``REPORTS_DIR/layer_weights.png`` and ``METRICS_DIR/summary.json``.

The work is split by job: ``report_runs.py`` (what ran, the records summarized, the targets),
``report_tables.py`` (results.md's text) and ``report_plots.py`` (the pictures); this file runs them.

Scores are means over seeds with the sample standard deviation. Accuracy is
spaCy's ``cats_micro_f``: with exclusive classes every snippet gets exactly one
predicted and one gold label, so micro-F1 equals accuracy.
"""

import json
from pathlib import Path
from typing import List, Optional

import typer
from project_errors import ProjectDataError
from report_plots import figure_lines, plots
from report_runs import load_runs, summarize
from report_tables import example_lines, load_speeds, markdown, other_sections, pretrain_section

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)


@app.command()
def main(
    metrics_dir: Path = typer.Argument(..., help="folder of <run>/seed*.json from `experiment`"),
    reports_dir: Path = typer.Argument(..., help="where results.md and the plots go"),
    bilm_dir: Optional[Path] = typer.Option(None, "--bilm-dir", help="the pretraining output folder"),
    title: str = typer.Option("ELMo for spaCy: results", "--title"),
    investigations_dir: Optional[Path] = typer.Option(
        None, "--investigations-dir", help="dev-only runs of `investigate` to list too (e.g. metrics/investigate)"
    ),
    adapted_dir: Optional[Path] = typer.Option(
        None,
        "--adapted-dir",
        help="the folder of adapt-bilm's bilm_adapted_<task>/ (e.g. training), for their perplexities",
    ),
    reduced: bool = typer.Option(
        False, "--reduced", help="a reduced run (the demo): say what its figures mean, judge no target"
    ),
    examples: List[str] = typer.Option(
        [], "--example", help="a sentence to show the NER pipelines' entities on (with --training-dir)"
    ),
    example_test: Optional[Path] = typer.Option(
        None, "--example-test", help="a test .spacy: also its first sentence on which the pipelines differ"
    ),
    training_dir: Path = typer.Option(Path("training"), "--training-dir", help="the runs' models, for --example"),
):
    """Write results.md, the plots and metrics/summary.json."""
    # The learning curve's runs (curve_*) have their own report (learning_curve.py).
    runs = {name: seeds for name, seeds in load_runs(metrics_dir).items() if not name.startswith("curve_")}
    if not runs:
        raise ProjectDataError(f"{metrics_dir}: no <run>/seed*.json metrics to report")
    summary = summarize(runs)
    investigations = load_runs(investigations_dir, dev_only=True) if investigations_dir else {}
    pretrain_lines, pretrain_records = pretrain_section(bilm_dir)
    reports_dir.mkdir(parents=True, exist_ok=True)
    speeds = load_speeds(metrics_dir)
    example = example_lines(training_dir, examples, example_test)
    results = markdown(
        summary, runs, pretrain_lines, title, investigations, bilm_dir, speeds, adapted_dir, reduced, example
    )
    written = plots(summary, runs, pretrain_records, reports_dir, speeds)
    results += figure_lines(written, reports_dir) + other_sections(reports_dir)
    (reports_dir / "results.md").write_text(results, encoding="utf8")
    (metrics_dir / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf8")
    typer.echo(
        f"wrote {reports_dir / 'results.md'}, {', '.join(str(p) for p in written)}, {metrics_dir / 'summary.json'}"
    )


if __name__ == "__main__":
    app()
