"""The biLM against a literal NumPy reading of bilm-tf's model (tests/naive_elmo.py), for many configurations."""

import numpy
import pytest
import torch

from spacy_elmo.bilm import ElmoBiLM, batch_char_ids
from spacy_elmo.bilm.lstm import ProjectedLstm

from .conftest import tiny_bilm, zip_equal
from .naive_elmo import naive_sentence_layers

SENTENCES = [
    ["The", "cat", "sat", "."],
    ["Naïve", "café", "—", "“quoted”", "🙂"],
    ["x" * 70, "a" * 47 + "é", "short"],  # over-long tokens, a cut inside a character
    ["single"],
    ["<S>", "literal", "</S>", "tokens"],
    ["a", "b", "a", "b", "a", "b", "a", "b", "repeated", "tokens", "x"],
]

CONFIGS = {
    "default": {},
    "tanh_1_highway_no_clip_no_skip": dict(
        activation="tanh", n_highway=1, cell_clip=0.0, proj_clip=0.0, use_skip_connections=False
    ),
    "no_highway_3_layers": dict(n_highway=0, n_layers=3),
    "one_layer_short_tokens": dict(n_layers=1, max_characters_per_token=12),
    "inference_char_count_261": dict(n_characters=261),
}


def _naive(model: ElmoBiLM, tokens, states=None):
    return naive_sentence_layers(model.tf_arrays(), model.options.to_dict(), tokens, states)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_matches_naive_spec_reading(name):
    model = tiny_bilm(seed=1, **CONFIGS[name])
    outputs = model.embed_batch(SENTENCES)
    for tokens, got in zip(SENTENCES, outputs):
        expected, _ = _naive(model, tokens)
        assert got.shape == (model.options.n_layers + 1, len(tokens), 2 * model.options.projection_dim)
        assert got.dtype == numpy.float32
        numpy.testing.assert_allclose(got, expected, atol=2e-5, rtol=1e-4)


def test_clipping_really_fires_and_is_applied():
    model = tiny_bilm(seed=2, scale=4.0, cell_clip=0.5, proj_clip=0.25)
    unclipped = tiny_bilm(seed=2, scale=4.0, cell_clip=0.0, proj_clip=0.0)
    tokens = SENTENCES[0]
    got = model.embed_batch([tokens])[0]
    expected, _ = _naive(model, tokens)
    numpy.testing.assert_allclose(got, expected, atol=2e-5, rtol=1e-4)
    # The first LSTM layer's output is the clipped projection itself (no residual).
    assert numpy.abs(got[1]).max() == pytest.approx(0.25)
    assert numpy.abs(unclipped.embed_batch([tokens])[0][1]).max() > 0.5


def test_inference_and_training_paths_agree(monkeypatch):
    model = tiny_bilm(seed=3)
    ids, lengths = (torch.from_numpy(a) for a in batch_char_ids(SENTENCES))
    with torch.no_grad():
        packed = model(ids, lengths)
        monkeypatch.setattr(ProjectedLstm, "use_packed_weights", False)
        unpacked = model(ids, lengths)
    trained = model.train()(ids, lengths)  # autograd path
    assert trained.requires_grad
    torch.testing.assert_close(packed, unpacked, atol=1e-6, rtol=0)
    torch.testing.assert_close(trained.detach(), unpacked, atol=1e-6, rtol=0)
    trained.sum().backward()
    assert model.bilstm.backward_layers[1].state_weight.grad.abs().sum() > 0
    assert model.char_encoder.char_embed.grad[0].abs().sum() == 0  # padding row stays zero


def test_outputs_are_zero_at_padding():
    model = tiny_bilm()
    ids, lengths = (torch.from_numpy(a) for a in batch_char_ids([["a", "b", "c"], ["d"]]))
    with torch.no_grad():
        layers = model(ids, lengths)
    assert layers.shape == (3, 2, 5, 16)
    assert layers[:, 1, 3:].abs().sum() == 0
    assert layers[:, 1, :3].abs().sum() > 0


def test_stateless_vectors_do_not_depend_on_batch():
    model = tiny_bilm(seed=4)
    together = model.embed_batch(SENTENCES)
    alone = [model.embed_batch([s])[0] for s in SENTENCES]
    reordered = model.embed_batch(SENTENCES[::-1])[::-1]
    for a, b, c in zip_equal(together, alone, reordered):
        numpy.testing.assert_allclose(a, b, atol=1e-5, rtol=0)
        numpy.testing.assert_allclose(a, c, atol=1e-5, rtol=0)
    # and calling again gives the same (no hidden state in stateless mode)
    for a, b in zip_equal(together, model.embed_batch(SENTENCES)):
        numpy.testing.assert_allclose(a, b, atol=1e-6, rtol=0)


def test_stateless_batching_of_many_sentences(monkeypatch):
    """More sentences than one internal batch holds: results still in input order."""
    import spacy_elmo.bilm.id_batches as model_module

    monkeypatch.setattr(model_module, "MAX_BATCH_ROWS", 2)
    model = tiny_bilm(seed=5)
    outputs = model.embed_batch(SENTENCES)
    for tokens, got in zip_equal(SENTENCES, outputs):
        numpy.testing.assert_allclose(got, _naive(model, tokens)[0], atol=2e-5, rtol=1e-4)


def test_empty_inputs():
    model = tiny_bilm()
    assert model.embed_batch([]) == []
    out = model.embed_batch([[], ["a"]])
    assert out[0].shape == (3, 0, 16)
    assert out[1].shape == (3, 1, 16)


@pytest.mark.parametrize(
    "sentences,message",
    [
        (
            ["a sentence"],
            r"sentence 0 is a str \('a sentence'\), not a list of tokens: split it first, e.g. \['a', 'sentence'\]",
        ),
        ("a sentence", "takes a list of sentences .* got one str"),
        ([["ok"], [1, 2]], "sentence 1, token 0 is int 1: tokens must be str"),
        ([["ok", None]], "sentence 0, token 1 is NoneType None: tokens must be str"),
    ],
)
def test_sentences_that_are_not_token_lists_are_refused(sentences, message):
    from spacy_elmo.errors import ElmoInputError

    with pytest.raises(ElmoInputError, match=message):
        tiny_bilm().embed_batch(sentences)


def test_stateful_rows_follow_the_reference_rules():
    """Row r of a batch starts from row r's final state of the previous batch;
    new rows start at zero; a smaller batch leaves the other rows' states alone."""
    model = tiny_bilm(seed=6)
    batches = [SENTENCES[0:3], SENTENCES[3:5], SENTENCES[1:5], [SENTENCES[5]]]
    row_states = {}
    for batch in batches:
        outputs = model.embed_batch(batch, stateful=True)
        for row, (tokens, got) in enumerate(zip(batch, outputs)):
            state = row_states.get(row)
            expected, finals = _naive(model, tokens, state)
            numpy.testing.assert_allclose(got, expected, atol=3e-5, rtol=1e-4)
            row_states[row] = finals
    # The carried state changes results: a fresh stateless run differs.
    stateless = model.embed_batch(batches[-1])[0]
    assert numpy.abs(stateless - outputs[0]).max() > 1e-3


def test_state_export_import_round_trip():
    model = tiny_bilm(seed=7)
    model.embed_batch(SENTENCES[:3], stateful=True)
    saved = model.export_states()
    after_a = model.embed_batch(SENTENCES[3:6], stateful=True)
    model.reset_states()
    assert model.export_states() == {}
    model.import_states(saved)
    after_b = model.embed_batch(SENTENCES[3:6], stateful=True)
    for a, b in zip(after_a, after_b):
        numpy.testing.assert_array_equal(a, b)


def test_char_cnn_cut_to_content_equals_the_full_width():
    """Skipping the all-PAD tail of short tokens leaves the CNN features unchanged."""
    from spacy_elmo.bilm import token_char_ids

    model = tiny_bilm(seed=3, filters=[(1, 4), (3, 6), (7, 8)])
    # A first chunk of only short tokens (cut hard), then one with long ones (not cut).
    tokens = ["", "a", "ab", "über", "<S>", "</S>", "naïve—", "7", "hello"] * 30 + ["x" * 47, "y" * 48, "z" * 60] * 2
    ids = torch.tensor([token_char_ids(t) for t in tokens] + [[0] * 50])  # and a batch-padding row
    with torch.no_grad():
        cut = model.char_encoder._convolve_by_length(ids)
        full = model.char_encoder._convolve(ids)
    assert torch.allclose(cut, full, atol=1e-6)
    assert len(ids) > 256  # several chunks, of different widths


def test_the_weights_generation_follows_every_change_of_the_weights(tmp_path):
    import copy

    from spacy_elmo.bilm.generation import mark_weights_changed

    bilm = tiny_bilm(seed=7).eval()
    sentence = [["a", "tiny", "sentence"]]
    seen = [bilm.weights_generation]

    def changed() -> bool:
        seen.append(bilm.weights_generation)
        return seen[-1] != seen[-2]

    first = bilm.embed_batch(sentence)[0]
    with torch.no_grad():  # in place, as an optimizer does: the tensors' versions may not say so
        for p in bilm.parameters():
            p.mul_(0.5)
    assert not changed()
    bilm.mark_weights_changed()
    assert changed()
    halved = bilm.embed_batch(sentence)[0]
    assert not numpy.allclose(halved, first, atol=1e-4)
    afresh = ElmoBiLM(bilm.options)
    afresh.load_state_dict(bilm.state_dict())
    numpy.testing.assert_allclose(halved, afresh.eval().embed_batch(sentence)[0], atol=1e-6)
    bilm.load_state_dict(tiny_bilm(seed=7).state_dict())
    assert changed()
    numpy.testing.assert_allclose(bilm.embed_batch(sentence)[0], first, atol=1e-6)
    bilm.load_tf_arrays(tiny_bilm(seed=8).tf_arrays())
    assert changed()
    bilm.to("cpu", dtype=torch.float32)
    assert changed()
    bilm.train()
    assert not changed()
    bilm.eval()  # leaving train mode: a torch loop may have stepped in place
    assert changed()
    mark_weights_changed(torch.nn.Sequential(bilm))  # any module holding the biLM
    assert changed()
    assert copy.deepcopy(bilm).weights_generation not in seen
