"""``plan``: what the `all` workflow will run and how long each part takes here.

    python scripts/plan.py PRETRAIN_CONFIG REPORT_FILE --tokens-per-sec N \\
        --task-minutes RUN=MINUTES,... --data-minutes N --machine TEXT [--seeds 0,1,2] \
        [--max-steps N] [--other-minutes STEP=MINUTES,...] \
        [--adapt-config CFG --adapt-steps N --adapt-head-steps N --adapt-tasks N] [--optional-minutes STEP=MINUTES,...]

Printed before the long run starts (and written to REPORT_FILE). The
pretraining time follows from the config's steps (or the ``--max-steps`` the
workflow overrides them with) and batch size and the
measured training speed; the task-training times are measured minutes per
seed. Steps outside `all` (the dev search, ``adapt-bilm``) are listed apart,
below the total: ``adapt-bilm`` from its config's batch size, its steps (the
head-only start, the adaptation and the head-only "before" run, per task) and the same pretraining speed.
The measurements themselves are ``project.yml`` vars (``plan_*``: where
they were measured and how), the one place to change on another machine.
"""

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import typer

from spacy_elmo.pretrain import load_config

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)


def minute_items(text: str) -> List[Tuple[str, str]]:
    """``NAME=MINUTES,...`` as (name, minutes text) pairs, in the given order."""
    items = filter(None, (part.strip() for part in text.split(",")))
    return [(name.strip(), value.strip()) for name, _, value in (item.partition("=") for item in items)]


def parse_minutes(text: str, option: str = "--task-minutes") -> Dict[str, float]:
    """``RUN=MINUTES,...`` as a dict, in the given order (``~MINUTES``: an estimate, see ``basis``)."""
    minutes = {}
    for name, value in minute_items(text):
        try:
            minutes[name] = float(value.removeprefix("~"))
        except ValueError:
            item = f"{name}={value}" if value else name
            raise typer.BadParameter(f"expected NAME=MINUTES, got {item!r}", param_hint=option) from None
    return minutes


def basis(text: str, name: str, minutes: float, unit: str) -> str:
    """ "measured: ..." or, for a value written ``~MINUTES``, "estimated (not measured yet): ...";
    0 is a step that trains nothing (a run recorded from another's seeds: experiment's --same-as)."""
    if minutes == 0:
        return "no training: the seeds of another run with its config (`--same-as`)"
    estimated = any(found == name and value.startswith("~") for found, value in minute_items(text))
    return f"{'estimated (not measured yet)' if estimated else 'measured'}: {minutes:g} {unit}"


@app.command()
def main(
    pretrain_config: Path = typer.Argument(..., exists=True, dir_okay=False),
    report_file: Path = typer.Argument(...),
    seeds: str = typer.Option("0,1,2", "--seeds"),
    max_steps: Optional[int] = typer.Option(
        None, "--max-steps", min=1, help="the pretraining steps the workflow runs (default: the config's)"
    ),
    tokens_per_sec: float = typer.Option(..., "--tokens-per-sec", help="pretraining speed of this config here"),
    task_minutes: str = typer.Option(
        ...,
        "--task-minutes",
        help="RUN=MINUTES,...: measured minutes per seed of each task run (~MINUTES: an estimate)",
    ),
    data_minutes: float = typer.Option(..., "--data-minutes", help="minutes to fetch and prepare the data"),
    machine: str = typer.Option(..., "--machine", help="where the minutes were measured, for the title"),
    other_minutes: str = typer.Option(
        "",
        "--other-minutes",
        help="STEP=MINUTES,...: measured minutes of steps run once, not per seed (~MINUTES: an estimate)",
    ),
    adapt_config: Optional[Path] = typer.Option(
        None,
        "--adapt-config",
        exists=True,
        dir_okay=False,
        help="adapt-bilm's pretrain config (listed apart: not in `all`)",
    ),
    adapt_steps: int = typer.Option(0, "--adapt-steps", min=0, help="adapt-bilm's steps (biLM and head), per task"),
    adapt_head_steps: int = typer.Option(0, "--adapt-head-steps", min=0, help="adapt-bilm's head-only steps, per task"),
    adapt_tasks: int = typer.Option(2, "--adapt-tasks", min=1, help="tasks adapt-bilm adapts a biLM for"),
    optional_minutes: str = typer.Option(
        "", "--optional-minutes", help="STEP=MINUTES,...: steps outside `all` (~MINUTES: an estimate)"
    ),
):
    """Print the expected duration of each part of the full run."""
    # Only [training] is read: the paths a run needs are not checked here.
    overrides: Dict[str, Any] = {"paths.train": "unused", "paths.init_dir": "unused"}
    if max_steps is not None:
        overrides["training.max_steps"] = max_steps
    training = load_config(pretrain_config, overrides)["training"]
    rows = rows_in_all(training, tokens_per_sec, data_minutes, seeds, task_minutes, other_minutes)
    total = sum(minutes for _, minutes, _ in rows)
    lines = [f"# Expected duration of `spacy project run all` on {machine}", "", *table_lines(rows)]
    lines += [
        f"| **total** | **{total:.0f}** (about {total / 60:.1f} hours) | |",
        "",
        "Every step resumes where it stopped: re-run `spacy project run all` after an interruption.",
    ]
    optional = optional_rows(
        optional_minutes, adapt_config, overrides, tokens_per_sec, adapt_tasks, adapt_head_steps, adapt_steps
    )
    if optional:
        lines += ["", "Not in `all` (run on purpose: `spacy project run STEP`):", "", *table_lines(optional)]
    text = "\n".join(lines) + "\n"
    report_file.parent.mkdir(parents=True, exist_ok=True)
    report_file.write_text(text, encoding="utf8")
    typer.echo(text)


Row = Tuple[str, float, str]


def table_lines(rows: List[Row]) -> List[str]:
    """The markdown table of (step, minutes, basis) rows."""
    return ["| step | minutes | basis |", "|---|---|---|"] + [f"| {n} | {m:.0f} | {b} |" for n, m, b in rows]


def pretrain_row(training: Dict[str, Any], tokens_per_sec: float) -> Row:
    steps, batch_size = training["max_steps"], training["batch_size"]
    return (
        f"pretrain ({steps} steps x {batch_size} tokens at {tokens_per_sec:.0f} tokens/s)",
        steps * batch_size / tokens_per_sec / 60,
        "from the measured speed",
    )


def adapt_row(batch_size: int, tokens_per_sec: float, tasks: int, head_steps: int, steps: int) -> Row:
    # Head-only: the start (head_steps) and the "before" run (head_steps + steps).
    head_only = 2 * head_steps + steps
    return (
        f"adapt-bilm ({tasks} tasks x ({head_only} head-only + {steps}) steps x "
        f"{batch_size} tokens at {tokens_per_sec:.0f} tokens/s)",
        tasks * (head_only + steps) * batch_size / tokens_per_sec / 60,
        "from the measured pretraining speed (head-only steps cost less: an upper bound)",
    )


def step_rows(text: str, option: str) -> List[Row]:
    """A row for each STEP=MINUTES of ``text`` (the value of ``option``): steps run once."""
    return [(name, minutes, basis(text, name, minutes, "min")) for name, minutes in parse_minutes(text, option).items()]


def rows_in_all(
    training: Dict[str, Any],
    tokens_per_sec: float,
    data_minutes: float,
    seeds: str,
    task_minutes: str,
    other_minutes: str,
) -> List[Row]:
    """The rows of the steps `all` runs: the data, pretraining, each task run per seed, the other steps."""
    n_seeds = len([s for s in seeds.split(",") if s.strip()])
    rows = [
        ("fetch and prepare the data", data_minutes, "measured, rounded up"),
        pretrain_row(training, tokens_per_sec),
    ]
    # Planned in whole minutes per seed; the basis shows the measurement.
    rows += [
        (f"{name}, {n_seeds} seed(s)", round(minutes) * n_seeds, basis(task_minutes, name, minutes, "min/seed"))
        for name, minutes in parse_minutes(task_minutes).items()
    ]
    return rows + step_rows(other_minutes, "--other-minutes")


def optional_rows(
    optional_minutes: str,
    adapt_config: Optional[Path],
    overrides: Dict[str, Any],
    tokens_per_sec: float,
    adapt_tasks: int,
    adapt_head_steps: int,
    adapt_steps: int,
) -> List[Row]:
    """The rows of the steps outside `all`: the --optional-minutes ones, then adapt-bilm if it has a config."""
    optional = step_rows(optional_minutes, "--optional-minutes")
    if adapt_config is not None:
        batch_size = load_config(adapt_config, overrides)["training"]["batch_size"]
        optional.append(adapt_row(batch_size, tokens_per_sec, adapt_tasks, adapt_head_steps, adapt_steps))
    return optional


if __name__ == "__main__":
    app()
