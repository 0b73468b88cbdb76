"""`probe`: linear probes of each biLM layer for POS (held-out Brown files) and NER (CoNLL)."""

import json
from pathlib import Path

import numpy
import probe

from ..conftest import tiny_bilm
from .conftest import PROJECT_DATA, run_cli


def test_brown_probe_sentences_are_the_held_out_files_with_base_tags():
    sentences = probe.brown_pos(PROJECT_DATA / "brown")
    assert len(sentences) == 6  # ca01 only (cb01 is not in the fixture; ca02, cb02 are pretraining text)
    assert sentences[2] == (["The", "city", "grew", "fast", "."], ["at", "nn", "vbd", "rb", "."])  # nn-tl -> nn


def test_ner_macro_f1_leaves_out_the_o_tag():
    labels = ["B-PER", "O"]
    gold = numpy.array([0, 0, 1, 1])
    assert probe.score(numpy.array([0, 1, 1, 1]), gold, labels, "ner") == 2 / 3  # PER: tp 1, fn 1
    assert probe.score(numpy.array([0, 1, 1, 1]), gold, labels, "pos") == 0.75


def test_probe_writes_every_layer_the_floor_and_the_chart(tmp_path, prepared_corpora):
    bilm_dir = tmp_path / "bilm"
    tiny_bilm(seed=3).to_files(bilm_dir / "options.json", bilm_dir / "weights.hdf5")
    result = run_cli(
        probe.main,
        [
            tmp_path / "out",
            "--bilm-dir",
            bilm_dir,
            "--brown",
            PROJECT_DATA / "brown",
            "--conll-train",
            prepared_corpora / "conll" / "train.spacy",
            "--conll-dev",
            prepared_corpora / "conll" / "dev.spacy",
            "--vectors",
            tmp_path / "no-vectors",
            "--max-sentences",
            "20",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "probe.json").read_text())
    for scores in report["scores"].values():
        assert list(scores) == [f"{who}: {layer}" for who in ("biLM", "random biLM") for layer in probe.LAYER_NAMES]
        assert all(0.0 <= value <= 1.0 for value in scores.values())
    assert report["tokens"]["POS accuracy (Brown)"] >= 1
    table = (tmp_path / "out" / "probe.md").read_text().splitlines()
    assert table[:2] == [probe.PROBE_HEADING, ""] and table[0].startswith("# ")  # a section of results.md
    assert table[2].startswith(f"The biLM probed: `{bilm_dir.as_posix()}`")
    assert table[6].startswith("| biLM: layer 0 (char CNN) |") and table[13].startswith("| random biLM: average |")
    assert len(table) == 6 + 8 + 3 + 2  # the rows, then how to read them: a line per task
    assert (tmp_path / "out" / "probe.png").stat().st_size > 1000


def test_the_probe_says_which_biLM_it_probed_and_its_legend_covers_no_bar(tmp_path):
    """The demo probed its small biLM while its tasks read the bundled one, and did not say so;
    the chart's legend covered a bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from spacy_elmo.loaders import DEFAULT_BILM_DIR

    bilm = tiny_bilm(seed=3)
    bilm_dir = tmp_path / "bilm"
    line = probe.probed_line(bilm_dir, bilm)
    assert line.startswith(f"The biLM probed: `{bilm_dir.as_posix()}`, not the package's bundled biLM")
    assert f"2P = {bilm.options.output_dim}" in line
    assert "the package's bundled biLM" in probe.probed_line(Path(DEFAULT_BILM_DIR), bilm)
    results = {"POS": {"a": 0.9, "b": 0.95}, "NER": {"a": 0.5, "b": 0.6}}
    probe.write_outputs(tmp_path / "out", results, {"POS": 1, "NER": 1}, bilm_dir, line)
    assert (tmp_path / "out" / "probe.md").read_text().splitlines()[2] == line
    figure = plt.gcf()
    figure.canvas.draw()
    axis = figure.axes[0]
    legend_box = axis.get_legend().get_window_extent()
    assert legend_box.y0 >= axis.get_window_extent().y1 - 1  # above the axes, over no bar
    plt.close("all")


def test_the_probe_says_what_a_biLM_below_its_random_floor_means():
    """The demo's 400-step biLM scored below the random-weight biLM on POS (72.7 vs 75.1) with no word."""
    layers = {f"{who}: {layer}": 0.5 for who in ("biLM", "random biLM") for layer in probe.LAYER_NAMES}
    pos = {**layers, "biLM: layer 1 (LSTM)": 0.727, "random biLM: layer 0 (char CNN)": 0.751}
    ner = {**layers, "biLM: layer 2 (LSTM)": 0.6, "random biLM: average": 0.55}
    lines = probe.meaning_lines({"POS accuracy (Brown)": pos, "NER token macro F1 (CoNLL dev)": ner})
    assert lines[1] == probe.READING and "the floor" in probe.READING
    assert lines[3].startswith(
        "- POS accuracy (Brown): the biLM's best, layer 1 (LSTM) 72.7, is -2.4 points from the floor's best "
        "(layer 0 (char CNN) 75.1): this biLM has learned no more than spelling gives"
    )
    assert lines[4] == (
        "- NER token macro F1 (CoNLL dev): the biLM's best, layer 2 (LSTM) 60.0, is +5.0 points from the "
        "floor's best (average 55.0)"
    )
