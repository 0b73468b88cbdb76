"""``bilm-history``: how a shipped biLM was trained, over every warm start, from its provenance.json.

    python scripts/bilm_history.py PROVENANCE_JSON REPORTS_DIR

A biLM that was continued (``pretrain --paths.init_dir``) carries the
provenance of the one it started from (``ship``'s ``warm_started_from``).
This walks that chain, oldest first, and writes ``REPORTS_DIR/bilm_history.md``
(one row per stretch: how it was set up, steps, tokens, hours, held-out
perplexity at its start and end) and ``REPORTS_DIR/bilm_history.png`` (the
held-out perplexity against the tokens seen in all). Perplexities are
comparable only within one held-out set and vocabulary: the table names the
set by its sha256, and the plot draws each stretch as its own line.
"""

from pathlib import Path
from typing import List, Optional, Tuple

import typer
from confection import Config
from project_errors import ProjectDataError

from spacy_elmo.files.json_files import read_json

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)


def stretches(provenance: dict) -> List[dict]:
    """The chain of provenance records, oldest first."""
    chain = []
    record: Optional[dict] = provenance
    while record:
        chain.append(record)
        record = record.get("warm_started_from")
    return chain[::-1]


def setup(config_text: Optional[str]) -> Tuple[str, Optional[int]]:
    """How a stretch was set up (architecture, start) and its projection, from its saved config.

    ``pretrain`` saves the config it ran, with [model] at the width it trained
    (after any ``warm_start.projection_dim``).
    """
    if not config_text:
        return "(no config recorded)", None
    config = Config().from_str(config_text, interpolate=False)
    model, paths = config["model"], config["paths"]
    start = "warm start" if paths.get("init_dir") or paths.get("init_options") else "from zero"
    softmax = config["training"].get("softmax", "adaptive")
    text = f"LSTM {model['lstm_dim']} x {model['n_layers']}, 2P = {2 * model['projection_dim']}, {softmax} softmax; {start}"
    return text, model["projection_dim"]


def curve_ends(record: dict) -> str:
    curve = [point for point in record.get("held_out_curve") or [] if "dev_perplexity" in point]
    if not curve:
        final = (record.get("perplexity") or {}).get("mean")
        return f"{final:.1f} (at the end)" if final else "not recorded"
    return f"{curve[0]['dev_perplexity']:.1f} -> {curve[-1]['dev_perplexity']:.1f}"


def table(chain: List[dict]) -> List[str]:
    lines = [
        "| stretch | set-up | steps | tokens | tokens in all | hours | held-out set (sha256) | held-out perplexity |",
        "|---|---|---|---|---|---|---|---|",
    ]
    previous_width = None
    for k, record in enumerate(chain, 1):
        text, width = setup(record.get("config"))
        if previous_width and width and previous_width != width:
            text += f", projection widened {previous_width} -> {width}"
        previous_width = width
        sha = (record.get("held_out_sha256") or "not recorded")[:12]
        hours = (record.get("training_seconds") or 0) / 3600
        lines.append(
            f"| {k} | {text} | {record.get('steps') or 0:,} | "
            f"{record.get('tokens_seen') or 0:,} | {record.get('tokens_seen_total') or 0:,} | {hours:.2f} | "
            f"{sha} | {curve_ends(record)} |"
        )
    return lines


def plot(chain: List[dict], png_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for k, record in enumerate(chain, 1):
        curve = [point for point in record.get("held_out_curve") or [] if "dev_perplexity" in point]
        if curve:
            sha = (record.get("held_out_sha256") or "?")[:8]
            ax.plot(
                [p["tokens_seen_total"] / 1e6 for p in curve],
                [p["dev_perplexity"] for p in curve],
                "o-",
                label=f"stretch {k} (held-out set {sha})",
            )
    ax.set_xlabel("tokens seen in all (millions)")
    ax.set_ylabel("held-out perplexity")
    ax.set_yscale("log")
    ax.set_title("The biLM over every warm start")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png_path, dpi=100, format="png")
    plt.close(fig)


@app.command()
def main(
    provenance_json: Path = typer.Argument(..., exists=True, dir_okay=False, help="a shipped biLM's provenance.json"),
    reports_dir: Path = typer.Argument(..., help="where bilm_history.md and .png go"),
):
    """The table and curve of every stretch the biLM was trained in."""
    chain = stretches(read_json(provenance_json, ProjectDataError))
    reports_dir.mkdir(parents=True, exist_ok=True)
    text = "\n".join(["# How the biLM was trained, stretch by stretch", ""] + table(chain)) + "\n"
    (reports_dir / "bilm_history.md").write_text(text, encoding="utf8")
    plot(chain, reports_dir / "bilm_history.png")
    typer.echo(text)


if __name__ == "__main__":
    app()
