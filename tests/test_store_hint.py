"""A pipeline whose `elmo` component keeps no vectors on the Doc (`store "none"`, the shipped configs')
says once which setting keeps them, where `doc._.elmo_layers` or `token._.elmo` returns None."""

import warnings

import pytest

from spacy_elmo.pipeline import extensions

from .conftest import make_nlp, tiny_bilm


@pytest.fixture
def weight_files(tmp_path):
    tiny_bilm(seed=5).to_files(tmp_path / "options.json", tmp_path / "weights.hdf5")
    return tmp_path / "options.json", tmp_path / "weights.hdf5"


def hints(read) -> list:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read()
    return [str(w.message) for w in caught if "keeps" in str(w.message)]


def test_store_none_names_the_setting_that_keeps_the_vectors_once(weight_files, monkeypatch):
    """It returned None with no hint that store "none" was why."""
    monkeypatch.setattr(extensions, "_HINTED", set())
    doc = make_nlp(weight_files, store="none")("Alice visited Berlin .")
    first = hints(lambda: doc._.elmo_layers)
    assert doc._.elmo_layers is None and doc[0]._.elmo is None and doc[0:2]._.elmo is None
    assert len(first) == 1 and first[0].startswith("the 'elmo' component keeps no vectors (store 'none') on the Doc")
    assert "set its store to 'all'" in first[0] and "[components.elmo] store" in first[0]
    assert hints(lambda: (doc._.elmo_layers, doc[1]._.elmo)) == []  # once per component and process


def test_store_mix_names_all_for_the_layers_and_stored_vectors_give_no_hint(weight_files, monkeypatch):
    monkeypatch.setattr(extensions, "_HINTED", set())
    mix = make_nlp(weight_files, store="mix")("Alice visited Berlin .")
    assert hints(lambda: mix[0]._.elmo) == []  # the mix is kept
    (line,) = hints(lambda: mix._.elmo_layers)
    assert line.startswith("the 'elmo' component keeps only the token mix (store 'mix')")
    monkeypatch.setattr(extensions, "_HINTED", set())
    kept = make_nlp(weight_files, store="all")("Alice visited Berlin .")
    assert hints(lambda: (kept._.elmo_layers, kept[0]._.elmo)) == []
    import spacy

    assert hints(lambda: spacy.blank("en")("no elmo here")._.elmo_layers) == []  # the component never ran
