"""``plan``: what the `all` workflow will run and how long each part takes here.

    python -m spacy_elmo.project.plan PRETRAIN_CONFIG REPORT_FILE [--seeds 0,1,2] [--tokens-per-sec 1532]

Printed before the long run starts (and written to REPORT_FILE). The
pretraining time follows from the config's steps and batch size and the
training speed measured by ``benchmarks/bench_pretrain.py --config ...`` on a
2-core CPU. The task-training times are the means per seed measured by the full run on
that machine (2026-11-23, ``metrics/<run>/seed*.json``: ``training.wall_seconds``).
"""
from pathlib import Path

import typer

from ..pretrain import load_config

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)

# Minutes per seed on a 2-core CPU, to convergence (patience 1600 steps), and their basis.
TASK_MINUTES = {
    "ner_cnn": (9, "measured: 9.2 min/seed"),
    "ner_vectors": (11, "measured: 11.4 min/seed"),
    "ner_elmo": (15, "measured: 15.1 min/seed"),
    "sentiment_bow": (1, "measured: 0.9 min/seed"),
    "sentiment_cnn": (4, "measured: 4.3 min/seed"),
    "sentiment_vectors": (5, "measured: 5.4 min/seed"),
    "sentiment_elmo": (8, "measured: 8.2 min/seed"),
}
DATA_MINUTES = 5


@app.command()
def main(
    pretrain_config: Path = typer.Argument(..., exists=True, dir_okay=False),
    report_file: Path = typer.Argument(...),
    seeds: str = typer.Option("0,1,2", "--seeds"),
    tokens_per_sec: float = typer.Option(1532.0, "--tokens-per-sec", help="pretraining speed of this config here"),
):
    """Print the expected duration of each part of the full run."""
    training = load_config(pretrain_config, {"paths.train": "unused"})["training"]
    n_seeds = len([s for s in seeds.split(",") if s.strip()])
    pretrain_minutes = training["max_steps"] * training["batch_size"] / tokens_per_sec / 60
    rows = [("fetch and prepare the data", DATA_MINUTES, "measured: about 4"),
            (f"pretrain ({training['max_steps']} steps x {training['batch_size']} tokens at "
             f"{tokens_per_sec:.0f} tokens/s)", pretrain_minutes, "from the measured speed")]
    rows += [(f"{name}, {n_seeds} seed(s)", minutes * n_seeds, basis) for name, (minutes, basis) in TASK_MINUTES.items()]
    total = sum(minutes for _, minutes, _ in rows)
    lines = ["# Expected duration of `spacy project run all` on a 2-core CPU", "",
             "| step | minutes | basis |", "|---|---|---|"]
    lines += [f"| {name} | {minutes:.0f} | {basis} |" for name, minutes, basis in rows]
    lines += [f"| **total** | **{total:.0f}** (about {total / 60:.1f} hours) | |", "",
              "Every step resumes where it stopped: re-run `spacy project run all` after an interruption."]
    text = "\n".join(lines) + "\n"
    report_file.parent.mkdir(parents=True, exist_ok=True)
    report_file.write_text(text, encoding="utf8")
    typer.echo(text)


if __name__ == "__main__":
    app()
