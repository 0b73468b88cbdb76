"""``investigate``: train a variant to convergence and keep its DEV score only.

    python scripts/investigate.py CONFIG TRAIN DEV NAME \\
        [--seeds 0] [--gold-preproc] [--metrics-dir metrics/investigate] [SPACY TRAIN OVERRIDES...]

For the questions a missed target raises (another mix, no concatenation,
another learning rate, ...): the same training as ``experiment`` (same
stopping rule, same logs, resumable per seed), but nothing is scored on the
test split, which stays for the final table. Writes
``metrics/investigate/NAME/seed{N}.json`` with ``"test": null``; ``report
--investigations-dir`` lists them next to the main runs' dev scores.
"""

from pathlib import Path

import typer
from experiment import parse_seeds, run_seed

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def main(
    ctx: typer.Context,
    config: Path = typer.Argument(..., exists=True, dir_okay=False, help="spaCy training config"),
    train: Path = typer.Argument(..., exists=True, help="training .spacy"),
    dev: Path = typer.Argument(
        ..., exists=True, help="dev .spacy (model selection, early stopping and the score kept)"
    ),
    name: str = typer.Argument(..., help="run name: training/investigate/NAME/ and metrics/investigate/NAME/"),
    seeds: str = typer.Option("0", "--seeds", help="comma-separated random seeds"),
    gold_preproc: bool = typer.Option(False, "--gold-preproc", help="one example per gold sentence, gold tokens"),
    gpu_id: int = typer.Option(-1, "--gpu-id", help="GPU id, or -1 for CPU"),
    training_dir: Path = typer.Option(Path("training/investigate"), "--training-dir"),
    metrics_dir: Path = typer.Option(Path("metrics/investigate"), "--metrics-dir"),
):
    """Train NAME for each seed; keep the best dev score, never touch the test split."""
    for seed in parse_seeds(seeds):
        run_seed(config, train, dev, None, name, seed, list(ctx.args), gold_preproc, gpu_id, training_dir, metrics_dir)


if __name__ == "__main__":
    app()
