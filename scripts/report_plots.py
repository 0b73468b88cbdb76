"""The report's pictures: scores.png (a bar per run), pretrain_curve.png and layer_weights.png."""

from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from report_runs import NER_RUNS, SENTIMENT_RUNS, is_elmo_run, layer_weight_rows, mean_sd, words_per_second


def score_bars(ax, summary, task_runs, key: str, label: str, rates: Optional[Dict[str, float]] = None) -> None:
    """A task's test scores, a bar per run, ELMo's red, each bar labelled with its score (and its
    words/s, from ``rates``, where known: the score's price); the axis spans the scores (not 0-100),
    so gaps of a fraction of a point show; error bars (the seeds' sample standard deviation) only
    where a run has seeds."""
    rates = rates or {}
    names = [n for n, _ in task_runs if n in summary]
    ends: List[float] = []  # the bars' tops and their error bars' ends
    for with_elmo, color, legend in ((False, "#999", "without ELMo"), (True, "#c44", "with ELMo")):
        shown = [(i, n) for i, n in enumerate(names) if is_elmo_run(n) == with_elmo]
        if not shown:
            continue
        means = [100 * mean_sd(summary[n][key])[0] for _, n in shown]
        spread = any(summary[n]["n_seeds"] > 1 for _, n in shown)
        sds = [100 * mean_sd(summary[n][key])[1] for _, n in shown] if spread else None
        bars = ax.bar([i for i, _ in shown], means, yerr=sds, capsize=4, color=color, label=legend)
        labels = [f"{m:.2f}" + (f"\n{rates[n]:,.0f} words/s" if n in rates else "") for m, (_, n) in zip(means, shown)]
        ax.bar_label(bars, labels=labels, fontsize=8, padding=2)
        spreads = sds or [0.0] * len(means)
        ends += [m - sd for m, sd in zip(means, spreads)] + [m + sd for m, sd in zip(means, spreads)]
    ax.set_xticks(range(len(names)))
    # Slanted: the _acc runs' names overlap their neighbours' when level.
    ax.set_xticklabels([n.split("_", 1)[1] for n in names], rotation=30, ha="right")
    if ends:
        low, high = score_axis(ends)
        if rates:  # a second label line needs as much room again
            high = min(100.0, high + (high - max(ends)))
        ax.set_ylim(low, high)
        label = f"{label} (axis from {low:g})" if low > 0 else label
    ax.set_ylabel(label)
    if names:  # above the axes: inside, it hid the tallest bars
        ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.01), ncol=2, frameon=False)


def score_axis(scores: Sequence[float]) -> Tuple[float, float]:
    """Y limits that show the scores' differences: from a round number a little below the lowest
    (never below 0) to room above the highest for the bars' labels."""
    low, high = min(scores), max(scores)
    pad = max((high - low) * 0.25, 1.0)
    return max(0.0, 5 * ((low - 2 * pad) // 5)), min(100.0, high + pad)


def figure_lines(written: List[Path], reports_dir: Path) -> str:
    """The pictures the report made, shown in results.md (they sit beside it)."""
    shown = [f"![{path.name}]({path.relative_to(reports_dir).as_posix()})" for path in written]
    return "\n## Figures\n\n" + "\n\n".join(shown) + "\n" if shown else ""


def plots(summary, runs, pretrain_records, reports_dir: Path, speeds=None) -> List[Path]:
    """scores.png (with each run's words/s: the ``speed`` records', else ``spacy evaluate``'s),
    pretrain_curve.png and layer_weights.png, where there is something to draw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    panels = [
        (task_runs, key, label, task)
        for task_runs, key, label, task in (
            (NER_RUNS, "f1", "CoNLL-2003 test F1", "ner"),
            (SENTIMENT_RUNS, "accuracy", "5-class sentiment test accuracy", "sentiment"),
        )
        if any(name in summary for name, _ in task_runs)
    ] or [(NER_RUNS, "f1", "CoNLL-2003 test F1", "ner")]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for ax, (task_runs, key, label, task) in zip(axes[0], panels):
        rates = words_per_second(summary, (speeds or {}).get(task))
        score_bars(ax, summary, task_runs, key, label, rates)  # a task without runs gets no empty panel
    fig.tight_layout()
    written.append(reports_dir / "scores.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    if pretrain_records:
        from spacy_elmo.pretrain.outputs import plot_curve

        written.append(reports_dir / "pretrain_curve.png")
        plot_curve(pretrain_records, written[-1])

    rows = layer_weight_rows(runs)
    if rows:
        fig, ax = plt.subplots(figsize=(9, 4))
        width = 0.8 / len(rows)
        for i, (run, component, weights, _) in enumerate(rows):
            ax.bar([j + i * width for j in range(len(weights))], weights, width=width, label=f"{run} ({component})")
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(rows[0][2]))])
        ax.set_xticklabels([f"layer {j}" for j in range(len(rows[0][2]))])
        ax.set_ylabel("softmax(s)")
        ax.axhline(1 / len(rows[0][2]), color="#888", linestyle=":", label="plain average")
        # Beside the axes: over them it hid the tallest bars once six runs had weights.
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
        fig.tight_layout()
        written.append(reports_dir / "layer_weights.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    return written
