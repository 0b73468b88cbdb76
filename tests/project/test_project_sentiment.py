import json

import pytest
import sentiment
import spacy
from project_errors import ProjectDataError
from spacy.tokens import DocBin

from spacy_elmo.files.hashing import file_sha256

from .conftest import SNIPPETS, run_cli


@pytest.mark.parametrize(
    "rating,label",
    [
        (-4.0, "very_negative"),
        (-2.0, "very_negative"),
        (-1.999, "negative"),
        (-0.6, "negative"),
        (-0.5, "neutral"),
        (0.0, "neutral"),
        (0.5, "neutral"),
        (0.501, "positive"),
        (1.999, "positive"),
        (2.0, "very_positive"),
        (4.0, "very_positive"),
    ],
)
def test_boundaries_go_to_the_outer_classes_at_2_and_to_neutral_at_half(rating, label):
    assert sentiment.fine_label(rating) == label


def test_the_documented_split_sizes():
    splits = sentiment.split_indices(10605, 13)
    assert [len(splits[name]) for name in sentiment.SPLITS] == [8484, 1060, 1061]
    assert sorted(i for indices in splits.values() for i in indices) == list(range(10605))
    tiny = sentiment.split_indices(20, 13)
    assert (tiny["dev"], tiny["test"]) == ([7, 5], [9, 8])


def docs(path):
    return list(DocBin().from_disk(path).get_docs(spacy.blank("en").vocab))


def test_fine_and_binary_corpora(prepared_corpora):
    out = prepared_corpora / "sentiment"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["classes"] == {"very_negative": 4, "negative": 3, "neutral": 5, "positive": 3, "very_positive": 5}
    assert manifest["variants"]["fine"]["test"] == {
        "very_negative": 0,
        "negative": 1,
        "neutral": 0,
        "positive": 0,
        "very_positive": 1,
    }
    # The neutral dev snippet (rating -0.5) is dropped from the binary variant.
    assert manifest["variants"]["binary"]["dev"] == {"negative": 0, "positive": 1}
    assert json.loads((out / "splits.json").read_text())["test"] == ["10", "9"]
    [test_doc, other] = docs(out / "fine" / "test.spacy")
    assert test_doc.text == "One of the most moving documentaries of the year."
    assert test_doc.cats == {
        "very_negative": 0.0,
        "negative": 0.0,
        "neutral": 0.0,
        "positive": 0.0,
        "very_positive": 1.0,
    }
    assert other.text == "The jokes land less often than they should."
    assert [token.text for token in other][-2:] == ["should", "."]
    [binary_dev] = docs(out / "binary" / "dev.spacy")
    assert binary_dev.cats == {"negative": 0.0, "positive": 1.0}
    assert sum(len(docs(out / "fine" / f"{split}.spacy")) for split in sentiment.SPLITS) == 20


def test_a_malformed_line_names_its_number(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("1\t0.5\tfine\n2\tbad\tnot a number\n", encoding="utf8")
    with pytest.raises(ProjectDataError, match=r"s\.txt, line 2: .*'2\\tbad\\tnot a number'"):
        sentiment.read_snippets(path)


def test_the_pinned_file_must_give_the_published_counts(monkeypatch, tmp_path):
    monkeypatch.setattr(sentiment, "PINNED_SHA256", file_sha256(SNIPPETS))
    result = run_cli(sentiment.main, [SNIPPETS, tmp_path])
    assert result.exit_code == 1
    assert "expected (2052, 3009, 562, 2795, 2187)" in result.output
    # Another seed is a different, documented split: no check.
    assert run_cli(sentiment.main, [SNIPPETS, tmp_path, "--seed", "1"]).exit_code == 0
