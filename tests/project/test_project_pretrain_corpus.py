import json
from pathlib import Path

import pretrain_corpus as pc
import pytest

from .conftest import PROJECT_DATA, run_cli

SOURCE_ARGS = [
    "--news",
    PROJECT_DATA / "news.csv",
    "--sotu",
    PROJECT_DATA / "sotu",
    "--nlp-corpus",
    PROJECT_DATA / "nlp_corpus",
    "--brown",
    PROJECT_DATA / "brown",
    "--moby-dick",
    PROJECT_DATA / "moby_dick.txt",
    "--conll-train",
    PROJECT_DATA / "conll" / "train.txt",
]


def exclude_args(corpora: Path):
    files = ["conll/dev.spacy", "conll/test.spacy", "sentiment/fine/dev.spacy", "sentiment/fine/test.spacy"]
    return [arg for name in files for arg in ("--exclude", corpora / name)]


def build(out: Path, corpora: Path, *extra):
    result = run_cli(pc.main, [out, *SOURCE_ARGS, *exclude_args(corpora), *extra])
    assert result.exit_code == 0, result.output
    lines = {split: (out / f"{split}.txt").read_text(encoding="utf8").splitlines() for split in ("train", "dev")}
    return lines, json.loads((out / "report.json").read_text())


@pytest.fixture(scope="module")
def built(prepared_corpora, tmp_path_factory):
    # A dev fraction of 0.3 so the tiny corpus has a dev file at all.
    return build(tmp_path_factory.mktemp("pretrain"), prepared_corpora, "--dev-fraction", "0.3")


def test_evaluation_sentences_are_removed_and_reported_per_source(built, prepared_corpora):
    lines, report = built
    text = "\n".join(lines["train"] + lines["dev"]).casefold()
    # Sentiment test (in news, nlp-corpus), a sentiment dev snippet's 2nd sentence (in SOTU),
    # a CoNLL dev/test sentence (in Brown and in the CoNLL train text).
    for sentence in ("jokes land less often", "overstays its welcome", "results on sunday"):
        assert sentence not in text
    by_source = {name: entry["eval_overlap_sentences"] for name, entry in report["sources"].items()}
    assert by_source == {"news": 1, "sotu": 1, "nlp_corpus": 1, "brown": 1, "moby_dick": 0, "conll_train": 1}
    assert report["sources"]["brown"]["eval_overlap_by_file"] == {
        str(prepared_corpora / "conll/dev.spacy"): 1,
        str(prepared_corpora / "conll/test.spacy"): 1,
    }
    assert report["sources"]["news"]["eval_overlap_examples"] == {"The jokes land less often than they should !": 1}


def test_duplicates_are_dropped_and_splits_are_disjoint(built):
    lines, report = built
    kept = lines["train"] + lines["dev"]
    assert len(kept) == len(set(kept))
    assert lines["dev"] and lines["train"]
    assert kept.count("We have built roads and schools .") == 1
    duplicates = {name: entry["duplicate_sentences"] for name, entry in report["sources"].items()}
    assert duplicates == {"news": 0, "sotu": 1, "nlp_corpus": 1, "brown": 0, "moby_dick": 1, "conll_train": 0}
    total = report["total"]
    assert total["train_words"] + total["dev_words"] == sum(len(line.split()) for line in kept)
    assert total["train_sentences"] == len(lines["train"])


def test_sources_are_cleaned_split_and_tokenised(built):
    lines, _ = built
    kept = set(lines["train"] + lines["dev"])
    expected = {
        'The mayor called it " a triumph " for the city .',  # mojibake '"?' repaired
        'The jury said Atlanta \'s election was " fair " .',  # Brown tags stripped, `` '' -> "
        "Some years ago I went to sea for the first time , and never came back .",  # hard wraps joined
        "Then she left .",  # a multi-sentence nlp-corpus item split
        "Maria Lopez joined Acme Corp in Lisbon .",  # CoNLL tokens as they are
    }
    assert expected <= kept
    assert not any("/" in line and "nn" in line for line in kept)


def test_output_is_deterministic_and_the_dev_choice_follows_the_seed(prepared_corpora, tmp_path):
    first, _ = build(tmp_path / "a", prepared_corpora, "--dev-fraction", "0.3")
    again, _ = build(tmp_path / "b", prepared_corpora, "--dev-fraction", "0.3")
    assert first == again
    other_seed, _ = build(tmp_path / "c", prepared_corpora, "--dev-fraction", "0.3", "--seed", "1")
    assert other_seed["dev"] != first["dev"]
    assert sorted(other_seed["train"] + other_seed["dev"]) == sorted(first["train"] + first["dev"])


def test_dev_fraction_is_the_share_of_sentences_held_out():
    held_out = sum(pc.is_dev(f"sentence number {i}", 13, 0.1) for i in range(20000))
    assert 1800 < held_out < 2200


def test_cap_and_source_selection(prepared_corpora, tmp_path):
    _, report = build(tmp_path, prepared_corpora, "--sources", "moby_dick,sotu", "--max-words-per-source", "5")
    assert list(report["sources"]) == ["moby_dick", "sotu"]
    for entry in report["sources"].values():
        kept = entry["train_words"] + entry["dev_words"]
        # The cap stops a source at the first sentence that reaches it.
        assert 5 <= kept < 5 + 20


def test_match_key_ignores_case_spacing_and_punctuation():
    assert pc.match_key("The jokes land less often than they should!") == pc.match_key(
        "the jokes land LESS often than they should ..."
    )
    assert pc.match_key("Results on Sunday :") != pc.match_key("Results on Monday :")


def test_missing_source_and_unknown_source_fail_clearly(tmp_path):
    result = run_cli(pc.main, [tmp_path, "--sources", "sotu", "--sotu", tmp_path / "nope"])
    assert result.exit_code == 1 and "--sotu" in result.output and "nope" in result.output
    result = run_cli(pc.main, [tmp_path, "--sources", "wiki"])
    assert result.exit_code == 2 and "wiki" in result.output


def test_the_brown_probe_files_are_never_pretraining_text(built):
    lines, report = built
    assert pc.BROWN_PROBE_FILES == "c[a-r]01"
    assert not any("Probe sentences" in line for line in lines["train"] + lines["dev"])
    # The other Brown files are read as before.
    assert report["sources"]["brown"]["sentences_read"] >= 1
