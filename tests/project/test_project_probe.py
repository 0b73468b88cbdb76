"""`probe`: linear probes of each biLM layer for POS (held-out Brown files) and NER (CoNLL)."""

import json

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
    assert len(table) == 4 + 8 and table[4].startswith("| biLM: layer 0 (char CNN) |")
    assert (tmp_path / "out" / "probe.png").stat().st_size > 1000
