"""The stored ELMo arrays follow the tokens through spaCy's retokenize and as_doc, as spaCy's
doc.tensor does, or are dropped with one warning: never another token's vector (issue 76 item 11)."""

import warnings

import numpy
import pytest
import spacy
from spacy.tokens import Doc

from spacy_elmo.doc_data import DocStore, annotated_by_elmo, held_for_listeners, layers_for_listener
from spacy_elmo.pipeline.extensions import install_extensions

from .conftest import make_nlp
from .test_pipeline import weight_files  # noqa: F401 (a fixture)

TEXT = "Alice visited Berlin and Bob in May ."  # 8 tokens; Berlin is token 2
BERLIN = 2


def annotated(store="all", dtype="float32", listeners=False):
    """A doc of TEXT with random (3, 8, 4) layers stored as ``store`` (and held for listeners);
    returns it and the layers."""
    install_extensions()
    doc = spacy.blank("en")(TEXT)
    layers = numpy.random.default_rng(0).normal(size=(3, len(doc), 4)).astype("float32")
    doc_store = DocStore("elmo", store, dtype, [0.2, 0.3, 0.5])
    if listeners:
        doc_store.annotate_for_listeners(doc, layers)
    else:
        doc_store.annotate(doc, doc_store.stored_form(layers))
    return doc, layers


def mix(layers, start, end):
    return numpy.tensordot(numpy.asarray([0.2, 0.3, 0.5], dtype="float32"), layers[:, start:end], axes=(0, 0))


def quietly(read):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # following the tokens warns of nothing
        return read()


@pytest.mark.parametrize("store", ["all", "mix"])
def test_after_a_merge_berlin_reads_berlins_vector_and_the_merged_token_the_mean_of_its_parts(store):
    """ "Berlin" (token 1 after merging "Alice visited") read the old "visited" vector."""
    doc, layers = annotated(store)
    berlin = doc[BERLIN]._.elmo.copy()
    with doc.retokenize() as retokenizer:
        retokenizer.merge(doc[0:2])
    assert doc[1].text == "Berlin" and len(doc) == 7
    numpy.testing.assert_array_equal(quietly(lambda: doc[1]._.elmo), berlin)
    numpy.testing.assert_allclose(doc[0]._.elmo, mix(layers, 0, 2).mean(axis=0), rtol=1e-6)
    numpy.testing.assert_array_equal(doc[6]._.elmo, mix(layers, 7, 8)[0])
    if store == "all":
        assert doc._.elmo_layers.shape == (3, 7, 4)  # kept 8 tokens for 7
        numpy.testing.assert_array_equal(doc._.elmo_layers[:, 1:], layers[:, 2:])
    merged_and_berlin = (mix(layers, 0, 2).mean(axis=0) + mix(layers, 2, 3)[0]) / 2
    numpy.testing.assert_allclose(doc[0:2]._.elmo, merged_and_berlin, rtol=1e-6)


@pytest.mark.parametrize("store", ["all", "mix"])
def test_after_a_split_berlin_reads_berlins_vector_and_the_pieces_the_split_tokens(store):
    """token._.elmo raised IndexError after a split."""
    doc, layers = annotated(store)
    berlin = doc[BERLIN]._.elmo.copy()
    with doc.retokenize() as retokenizer:
        retokenizer.split(doc[0], ["Al", "ice"], heads=[(doc[0], 1), doc[1]])
    assert doc[3].text == "Berlin" and len(doc) == 9
    numpy.testing.assert_array_equal(quietly(lambda: doc[3]._.elmo), berlin)
    numpy.testing.assert_array_equal(doc[0]._.elmo, mix(layers, 0, 1)[0])  # the token they were cut from
    numpy.testing.assert_array_equal(doc[1]._.elmo, mix(layers, 0, 1)[0])
    numpy.testing.assert_array_equal(doc[8]._.elmo, mix(layers, 7, 8)[0])  # the last one, no IndexError
    assert doc[0:9]._.elmo.shape == (4,)


@pytest.mark.parametrize("store", ["all", "mix"])
def test_a_span_as_doc_reads_its_own_tokens_vectors(store):
    """The span "Berlin and Bob" (tokens 2-4) as a doc read "Alice visited Berlin"'s vectors."""
    doc, layers = annotated(store)
    berlin = doc[BERLIN]._.elmo.copy()
    sub = doc[2:5].as_doc(copy_user_data=True)
    assert sub[0].text == "Berlin"
    numpy.testing.assert_array_equal(quietly(lambda: sub[0]._.elmo), berlin)
    numpy.testing.assert_array_equal(numpy.stack([t._.elmo for t in sub]), mix(layers, 2, 5))
    if store == "all":
        numpy.testing.assert_array_equal(sub._.elmo_layers, layers[:, 2:5])
    again = sub[1:3].as_doc(copy_user_data=True)  # a span of a span: "and Bob"
    numpy.testing.assert_array_equal(again[1]._.elmo, mix(layers, 4, 5)[0])
    numpy.testing.assert_array_equal(doc[BERLIN]._.elmo, berlin)  # the original doc is untouched


def test_the_merge_entities_pipe_after_elmo_keeps_each_token_its_own_vector(weight_files):  # noqa: F811
    nlp = make_nlp(weight_files, store="mix")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "PERSON", "pattern": "Alice Smith"}])
    nlp.add_pipe("merge_entities")
    alone = make_nlp(weight_files, store="mix")("Alice Smith visited Berlin .")
    doc = nlp("Alice Smith visited Berlin .")
    assert [t.text for t in doc] == ["Alice Smith", "visited", "Berlin", "."]
    numpy.testing.assert_allclose(doc[2]._.elmo, alone[3]._.elmo, rtol=1e-5, atol=1e-6)  # two runs: last bits
    numpy.testing.assert_allclose(doc[0]._.elmo, alone[0:2]._.elmo, rtol=1e-5, atol=1e-6)
    numpy.testing.assert_allclose(doc[2].similarity(doc[2]), 1.0, rtol=1e-6)  # spaCy's vector API too


def test_a_listener_after_a_retokenizer_reads_the_layers_of_the_tokens_the_doc_has():
    doc, layers = annotated("none", listeners=True)
    with doc.retokenize() as retokenizer:
        retokenizer.merge(doc[3:5])  # "and Bob"
    read = layers_for_listener(doc, "elmo")
    assert read.shape == (3, 7, 4)
    numpy.testing.assert_array_equal(read[:, :3], layers[:, :3])
    numpy.testing.assert_allclose(read[:, 3], layers[:, 3:5].mean(axis=1), rtol=1e-6)
    numpy.testing.assert_array_equal(read[:, 4:], layers[:, 5:])
    numpy.testing.assert_array_equal(layers_for_listener(doc, "elmo"), read)  # read again: the same
    assert held_for_listeners(doc)["elmo"].shape == (3, 7, 4)
    assert not [key for key, value in doc.user_data.items() if isinstance(value, numpy.ndarray)]  # store "none"


def test_arrays_that_belong_to_another_text_are_dropped_with_one_warning():
    doc, _ = annotated("mix")
    other = Doc(doc.vocab, words=["Bob", "left", "Berlin", "in", "a", "rather", "long", "hurry", "today"])
    other.user_data.update(doc.user_data)  # copied by hand: the arrays are not this text's
    with pytest.warns(UserWarning, match="belong to other tokens .*: run the elmo component on the doc as it is"):
        assert other[2]._.elmo is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert other[0]._.elmo is None and other._.elmo_layers is None  # dropped: said once, no store hint
    assert not annotated_by_elmo(other)  # a listener says elmo did not run on it, not that its store keeps too little


@pytest.mark.parametrize("store", ["all", "mix"])
def test_reading_each_tokens_vector_maps_the_doc_once_not_once_a_token(store, monkeypatch):
    """A loop over token._.elmo stays linear: a token whose characters are its recorded row's
    reads that row without mapping the whole doc (which took one doc.to_array per token)."""
    from spacy_elmo import doc_tokens

    doc, layers = annotated(store)
    calls = []
    offsets = doc_tokens.token_offsets
    monkeypatch.setattr(doc_tokens, "token_offsets", lambda d: calls.append(1) or offsets(d))
    for token in doc:
        numpy.testing.assert_allclose(token._.elmo, mix(layers, token.i, token.i + 1)[0], rtol=1e-6)
    assert calls == []
    with doc.retokenize() as retokenizer:
        retokenizer.merge(doc[0:2])
    vectors = [token._.elmo for token in doc]  # the first read after the merge maps the doc once
    assert len(calls) == 2  # that one mapping: the doc's offsets read, then recorded anew
    numpy.testing.assert_array_equal(vectors[1], mix(layers, 2, 3)[0])


def test_token_reads_stay_linear_beside_many_token_extension_values(monkeypatch):
    """user_data holds a key per token extension value set: finding the anchor among every key
    on each token read made a loop over token._.elmo quadratic again."""
    from spacy.tokens import Token

    from spacy_elmo import doc_tokens

    if not Token.has_extension("spacy_elmo_test_flag"):
        Token.set_extension("spacy_elmo_test_flag", default=False)
    doc, layers = annotated("mix")
    for token in doc:
        token._.spacy_elmo_test_flag = True  # one user_data key each
    scans = []
    anchors = doc_tokens._anchors
    monkeypatch.setattr(doc_tokens, "_anchors", lambda d: scans.append(1) or anchors(d))
    for token in doc:
        numpy.testing.assert_allclose(token._.elmo, mix(layers, token.i, token.i + 1)[0], rtol=1e-6)
    assert scans == []
