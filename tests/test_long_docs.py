"""Memory on long docs: the layers of a long doc exist once at most (store="all"), never
with store "mix"/"none" and no listener, and nothing per token stays with store="none".

Measured with tracemalloc, which sees every numpy allocation (the layers the component
assembles and stores) but not torch's working memory (one batch, bounded by
MAX_BATCH_POSITIONS): exact and machine-independent, not a timing.
"""

import tracemalloc

import numpy
import pytest
from spacy.tokens import Doc, DocBin

from .conftest import make_nlp, tiny_bilm

N_TOKENS = 3000
LAYER_BYTES_PER_TOKEN = 3 * 16 * 4  # (L+1, 2P) float32 of the tiny biLM


@pytest.fixture
def weight_files(tmp_path):
    options, weights = tmp_path / "options.json", tmp_path / "weights.hdf5"
    tiny_bilm(seed=5).to_files(options, weights)
    return options, weights


def _long_doc(nlp, n_tokens: int = N_TOKENS) -> Doc:
    return Doc(nlp.vocab, words=[f"w{i}" for i in range(n_tokens)])  # no two windows alike (each is computed once)


def _numpy_peak(nlp, doc) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        nlp(doc)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


LONG = 12000


def _pipeline(weight_files, store, dtype="float32"):
    nlp = make_nlp(weight_files, store=store, store_dtype=dtype, cache_size_mb=0)
    nlp.get_pipe("elmo").configure(max_segment_length=64)
    # Weights loaded, lazy imports done, and every word type in the biLM's bounded type
    # cache (a cost per distinct word, not per token of a doc).
    nlp(_long_doc(nlp, LONG))
    return nlp


@pytest.mark.parametrize(
    "store,dtype,at_most",
    [("all", "float32", 1.8), ("all", "float16", 1.2), ("mix", "float32", 1.0), ("none", "float32", 0.6)],
)
def test_a_long_docs_layers_exist_once_at_most_and_not_at_all_when_not_stored(weight_files, store, dtype, at_most):
    """Peak memory per extra token, in float32 layers' worth: the batches' working memory
    (char ids, one batch's outputs) is the same for both docs and cancels out; what remains
    is the stored form (1, 1/2 in float16, 1/3, 0) plus about 0.45 of Python strings and
    tuples (the segments' token texts)."""
    nlp = _pipeline(weight_files, store, dtype)
    short, long = 4000, LONG
    growth = (_numpy_peak(nlp, _long_doc(nlp, long)) - _numpy_peak(nlp, _long_doc(nlp, short))) / (long - short)
    # Before: 2.46 for every store (each window's whole output kept until the doc was assembled).
    # Now about 1.45, 0.95, 0.78 and 0.45 (float16 "all" was 1.45: its float32 layers existed whole first).
    assert growth < at_most * LAYER_BYTES_PER_TOKEN, (store, growth / LAYER_BYTES_PER_TOKEN)


def test_store_none_leaves_no_per_token_arrays_on_the_doc(weight_files):
    nlp = _pipeline(weight_files, "none")
    doc = nlp(_long_doc(nlp))
    per_token = [key for key, value in doc.user_data.items() if numpy.ndim(value) and N_TOKENS in numpy.shape(value)]
    assert per_token == []
    assert doc._.elmo_layers is None and doc[5]._.elmo is None


def test_float16_layers_without_a_listener_match_the_float32_ones_and_survive_a_docbin(weight_files):
    full = make_nlp(weight_files, cache_size_mb=0)
    full.get_pipe("elmo").configure(max_segment_length=64)
    layers = full(_long_doc(full))._.elmo_layers
    nlp = _pipeline(weight_files, "all", "float16")
    docs = list(nlp.pipe([_long_doc(nlp), Doc(nlp.vocab, words=[]), Doc(nlp.vocab, words=["short", "one"])]))
    stored = docs[0].user_data[("spacy_elmo", "layers")]
    assert stored.dtype == numpy.float16 and stored.shape == (3, N_TOKENS, 16)
    numpy.testing.assert_array_equal(stored, layers.astype(numpy.float16))
    assert docs[1]._.elmo_layers.shape == (3, 0, 16) and docs[2]._.elmo_layers.shape == (3, 2, 16)
    (restored,) = DocBin(docs=docs[:1], store_user_data=True).get_docs(nlp.vocab)
    numpy.testing.assert_array_equal(restored._.elmo_layers, stored.astype(numpy.float32))


@pytest.mark.parametrize("store,dtype", [("mix", "float32"), ("mix", "float16")])
def test_the_reduced_path_stores_what_the_full_path_does(weight_files, store, dtype):
    full = make_nlp(weight_files, cache_size_mb=0)
    full.get_pipe("elmo").configure(max_segment_length=64)
    layers = full(_long_doc(full))._.elmo_layers
    nlp = make_nlp(weight_files, store=store, store_dtype=dtype, token_mix=[1.0, 2.0, 1.0], cache_size_mb=0)
    nlp.get_pipe("elmo").configure(max_segment_length=64)
    docs = list(nlp.pipe([_long_doc(nlp), Doc(nlp.vocab, words=[]), Doc(nlp.vocab, words=["short", "one"])]))
    expected = numpy.tensordot(numpy.array([0.25, 0.5, 0.25], dtype="float32"), layers, axes=(0, 0))
    mix = docs[0].user_data[("spacy_elmo", "mix")]
    assert mix.dtype == numpy.dtype(dtype) and mix.shape == (N_TOKENS, 16)
    numpy.testing.assert_allclose(mix, expected, atol=1e-6 if dtype == "float32" else 2e-3)
    assert docs[1].user_data[("spacy_elmo", "mix")].shape == (0, 16)
    assert docs[2][1]._.elmo.shape == (16,)
