"""ElmoBiLM is a token encoder + the biLSTM: bilm-tf's char CNN or ELMoForManyLangs' encoder,
composed, never a subclass."""

import numpy
import pytest
import torch

from spacy_elmo.bilm import ElmoBiLM
from spacy_elmo.bilm.char_encoder import CharEncoder
from spacy_elmo.errors import ElmoError

from .conftest import tiny_bilm, tiny_options

SENTENCES = [["the", "cat", "sat"], ["a", "dog"]]


def test_a_biLM_built_on_a_given_char_encoder_is_the_default_one():
    default = tiny_bilm(seed=4)
    options = tiny_options()
    encoder = CharEncoder(options)
    composed = ElmoBiLM(options, token_encoder=encoder)
    assert composed.char_encoder is encoder and composed.generation is encoder.generation
    composed.load_state_dict(default.state_dict())
    for a, b in zip(composed.eval().embed_batch(SENTENCES), default.embed_batch(SENTENCES)):
        numpy.testing.assert_array_equal(a, b)


def test_an_efml_biLM_is_an_elmo_biLM_made_of_efml_s_token_encoder(tmp_path):
    pytest.importorskip("elmoformanylangs")  # builds the model
    from spacy_elmo.bilm.efml_model import EfmlTokenEncoder

    from .efml_models import make_efml_dir

    bilm = ElmoBiLM.from_efml(make_efml_dir(tmp_path / "efml", 5, **{"token_embedder.word_dim": 3}))
    assert type(bilm) is ElmoBiLM and isinstance(bilm.char_encoder, EfmlTokenEncoder)
    ids, lengths = bilm.batch_ids(SENTENCES)
    expected_ids, expected_lengths = bilm.char_encoder.vocab.batch_ids(SENTENCES)
    assert numpy.array_equal(ids, expected_ids) and numpy.array_equal(lengths, expected_lengths)
    assert bilm.generation is bilm.char_encoder.generation
    with pytest.raises(ElmoError, match="cannot be written as bilm-tf options.json"):
        bilm.to_files(tmp_path / "options.json", tmp_path / "weights.hdf5")
    with torch.no_grad():
        assert bilm(torch.from_numpy(ids), torch.from_numpy(lengths)).shape[:2] == (bilm.n_output_layers, 2)
