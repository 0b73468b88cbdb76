"""The biLM against the original authors' (bilm-tf) outputs."""

import h5py
import numpy
import pytest
import torch

from spacy_elmo.bilm.lstm import ProjectedLstm


def _expected_top(reference_dir, group, index):
    with h5py.File(reference_dir / f"lm_embeddings_{group}.hdf5", "r") as f:
        return f[str(index)][...]  # (2, T, P): forward, backward


def _top_as_reference(layers):
    top = layers[-1]
    half = top.shape[-1] // 2
    return numpy.stack([top[:, :half], top[:, half:]])


@pytest.mark.parametrize("packed", [True, False])
def test_stateful_top_layer_matches_bilm_tf(reference_bilm, reference_sentences, reference_dir, monkeypatch, packed):
    monkeypatch.setattr(ProjectedLstm, "use_packed_weights", packed)
    worst = 0.0
    for i in range(10):
        batch = [reference_sentences[k][i] for k in range(3)]
        outputs = reference_bilm.embed_batch(batch, stateful=True)
        for k in range(3):
            expected = _expected_top(reference_dir, k, i)
            got = _top_as_reference(outputs[k])
            assert got.shape == expected.shape
            worst = max(worst, float(numpy.abs(got - expected).max()))
    assert worst < 1e-5


def test_stateless_matches_only_the_first_batch(reference_bilm, reference_sentences, reference_dir):
    """Stateless = zero state for every sentence: equal to the reference's first
    batch (which also started from zero), different from later ones."""
    first = reference_bilm.embed_batch([reference_sentences[k][0] for k in range(3)])
    for k in range(3):
        numpy.testing.assert_allclose(_top_as_reference(first[k]), _expected_top(reference_dir, k, 0), atol=1e-5)
    later = reference_bilm.embed_batch([reference_sentences[0][1]])[0]
    assert numpy.abs(_top_as_reference(later) - _expected_top(reference_dir, 0, 1)).max() > 1e-3


def test_reset_states_restarts_from_zero(reference_bilm, reference_sentences, reference_dir):
    batch0 = [reference_sentences[k][0] for k in range(3)]
    reference_bilm.embed_batch(batch0, stateful=True)
    reference_bilm.embed_batch(batch0, stateful=True)
    reference_bilm.reset_states()
    again = reference_bilm.embed_batch(batch0, stateful=True)
    numpy.testing.assert_allclose(_top_as_reference(again[0]), _expected_top(reference_dir, 0, 0), atol=1e-5)


def test_layer0_matches_token_embedding_dump(reference_bilm, reference_dir):
    words = (reference_dir / "vocab_test.txt").read_text(encoding="utf8").split("\n")
    with h5py.File(reference_dir / "elmo_token_embeddings.hdf5", "r") as f:
        expected = f["embedding"][...]
    assert len(words) == expected.shape[0] == 458
    assert "<S>" in words and "</S>" in words and "•" in words  # boundary literals, non-ASCII
    # Through embed_batch (one single-token sentence each): layer 0 is [x; x].
    layers = reference_bilm.embed_batch([[w] for w in words])
    P = expected.shape[1]
    got = numpy.stack([layer[0, 0] for layer in layers])
    numpy.testing.assert_allclose(got[:, :P], expected, atol=1e-5)
    numpy.testing.assert_array_equal(got[:, :P], got[:, P:])
    # And the char encoder alone, all tokens in one call.
    from spacy_elmo.bilm import sentence_char_ids

    ids = torch.from_numpy(sentence_char_ids(words)[1:-1])
    with torch.no_grad():
        direct = reference_bilm.token_embeddings(ids).numpy()
    numpy.testing.assert_allclose(direct, expected, atol=1e-5)
