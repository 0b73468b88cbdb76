import json

import conll
import pytest
import spacy
from project_errors import ProjectDataError
from spacy.tokens import DocBin
from spacy.training import Corpus

from spacy_elmo.files.hashing import file_sha256

from .conftest import CONLL_FILES, run_cli


def write(tmp_path, text, name="x.txt"):
    path = tmp_path / name
    path.write_text(text, encoding="utf8")
    return path


def load(path):
    nlp = spacy.blank("en")
    return list(DocBin().from_disk(path).get_docs(nlp.vocab))


def test_docstart_lines_split_articles_and_never_become_tokens():
    articles = list(conll.read_conll(CONLL_FILES[0]))
    assert [len(article) for article in articles] == [2, 3]
    words = [word for article in articles for sentence in article for word in sentence.words]
    assert conll.DOCSTART not in words and len(words) == 28


def test_converted_docs_keep_tokens_sentences_and_entities(prepared_corpora):
    docs = load(prepared_corpora / "conll" / "train.spacy")
    # n_sents=2: article 1 -> one doc; article 2 (3 sentences) -> two docs, never across articles.
    assert [len(list(doc.sents)) for doc in docs] == [2, 2, 1]
    assert docs[1][0].text == "The"
    assert [sent.text for sent in docs[0].sents][1] == "Shares rose 3 percent ."
    assert docs[0].has_unknown_spaces
    assert [(ent.text, ent.label_) for doc in docs for ent in doc.ents] == [
        ("Maria Lopez", "PER"),
        ("Acme Corp", "ORG"),
        ("Lisbon", "LOC"),
        ("Danube", "LOC"),
        ("German", "MISC"),
        ("Austrian", "MISC"),
        ("LINZ", "LOC"),
    ]
    stats = json.loads((prepared_corpora / "conll" / "stats.json").read_text())
    assert stats["splits"]["train"]["labels"] == {"LOC": 3, "MISC": 2, "ORG": 1, "PER": 1}
    assert (stats["splits"]["dev"]["sentences"], stats["splits"]["test"]["tokens"]) == (2, 9)


def test_spacy_corpus_reads_the_gold_tokens_one_example_per_sentence(prepared_corpora):
    examples = list(Corpus(prepared_corpora / "conll" / "train.spacy", gold_preproc=True)(spacy.blank("en")))
    assert len(examples) == 5
    # "2001-05-04" would be re-tokenised by spaCy; the gold token must survive.
    assert [token.text for token in examples[3].predicted] == ["LINZ", "2001-05-04"]


def test_iob1_and_iob2_read_the_same_way_and_entities_stop_at_sentence_ends(tmp_path):
    text = "A x I-PER\nB x I-PER\nC x B-PER\nD x O\nE x I-LOC\n\nF x I-LOC\n"
    [article] = conll.read_conll(write(tmp_path, text))
    doc = conll.make_doc(spacy.blank("en").vocab, article)
    assert [(ent.text, ent.label_) for ent in doc.ents] == [("A B", "PER"), ("C", "PER"), ("E", "LOC"), ("F", "LOC")]


def test_a_malformed_line_names_file_and_line(tmp_path):
    path = write(tmp_path, "EU NNP B-NP B-ORG\nrejects VBZ B-VP X-ORG\n")
    with pytest.raises(ProjectDataError, match=r"x\.txt, line 2: .*'rejects VBZ B-VP X-ORG'"):
        list(conll.read_conll(path))


def test_wrong_counts_fail_for_the_pinned_file_and_warn_for_another(monkeypatch, tmp_path):
    monkeypatch.setitem(conll.EXPECTED, "train", conll.Expected(5, 28, {"LOC": 3, "MISC": 2, "ORG": 1, "PER": 2}))
    args = [*CONLL_FILES, tmp_path / "out"]
    result = run_cli(conll.main, args)
    assert result.exit_code == 0 and "warning:" in result.output and "'PER': 2" in result.output
    monkeypatch.setitem(conll.PINNED_SHA256, "train", file_sha256(CONLL_FILES[0]))
    result = run_cli(conll.main, args)
    assert result.exit_code == 1 and "the pinned file" in result.output


def test_max_sentences_keeps_the_first_sentences_of_each_split(tmp_path):
    result = run_cli(conll.main, [*CONLL_FILES, tmp_path, "--max-sentences", "3"])
    assert result.exit_code == 0, result.output
    assert "warning" not in result.output
    docs = load(tmp_path / "train.spacy")
    assert sum(len(list(doc.sents)) for doc in docs) == 3
    assert [len(load(tmp_path / f"{split}.spacy")) for split in ("dev", "test")] == [1, 1]
