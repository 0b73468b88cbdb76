"""A pretraining run whose dev perplexity overflows to inf (SGD at learning rate 30, Adam at 100)
stops with the one-line "pretraining diverged" error, and the curve draws what is finite (issue 76 item 13)."""

import math

import pytest

from spacy_elmo.errors import PretrainDivergedError
from spacy_elmo.files.json_files import read_jsonl
from spacy_elmo.pretrain import load_config, pretrain
from spacy_elmo.pretrain import train as train_module
from spacy_elmo.pretrain.outputs import load_checkpoint

from .test_pretrain import TINY

SETTINGS = {"training.max_steps": 8, "training.checkpoint_every_steps": 4, "training.eval_every_steps": 4}


def test_a_dev_perplexity_that_overflows_stops_the_run_and_keeps_the_last_good_checkpoint(
    tmp_path, text_files, monkeypatch
):
    """It died in matplotlib ("Axis limits cannot be NaN or Inf") at every checkpoint."""
    train, dev = text_files
    real, calls = train_module.dev_nll, []

    def overflowing(lm, data):
        calls.append(1)
        forward, backward, count = real(lm, data)
        return (forward, backward, count) if len(calls) == 1 else (1e6, backward, count)

    monkeypatch.setattr(train_module, "dev_nll", overflowing)
    out = tmp_path / "out"
    config = load_config(TINY, {"paths.train": str(train), "paths.dev": str(dev), **SETTINGS})
    with pytest.raises(PretrainDivergedError) as info:
        pretrain(config, out, progress=False)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(
        "pretraining diverged at step 8: the dev perplexity is not finite (forward inf, mean inf; "
    )
    assert f"the last good checkpoint, {out / 'checkpoint.pt'} (step 4), is kept" in message
    assert load_checkpoint(out / "checkpoint.pt")["step"] == 4
    dev_records = [r["dev_perplexity"] for r in read_jsonl(out / "metrics.jsonl") if "dev_perplexity" in r]
    assert len(dev_records) == 2 and math.isfinite(dev_records[0]) and dev_records[1] == math.inf


def test_the_curve_draws_the_finite_points_and_counts_the_others():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from spacy_elmo.pretrain.outputs import curve_figure

    records = [{"step": s, "loss": 6.0 - s / 100} for s in (10, 20, 30)] + [{"step": 40, "loss": math.nan}]
    records += [{"step": 20, "dev_perplexity": 400.0}, {"step": 40, "dev_perplexity": math.inf}]
    figure = curve_figure(records)  # raised ValueError: Axis limits cannot be NaN or Inf
    loss_axis, perplexity_axis = figure.axes
    assert [list(line.get_xdata()) for line in loss_axis.get_lines()] == [[10, 20, 30]]
    assert [list(line.get_ydata()) for line in perplexity_axis.get_lines()] == [[400.0]]
    assert all(math.isfinite(limit) for limit in (*perplexity_axis.get_ylim(), *loss_axis.get_ylim()))
    assert loss_axis.get_title() == "biLM pretraining (2 points not finite, not drawn)"
    figure.canvas.draw()
    plt.close("all")
