"""An ELMoForManyLangs directory through `embed`, the elmo component and a saved pipeline."""

import shutil

import h5py
import numpy
import pytest
import spacy
import srsly
from typer.testing import CliRunner

pytest.importorskip("elmoformanylangs")  # builds the models (the test extra has it)

from spacy_elmo.bilm import ElmoBiLM  # noqa: E402
from spacy_elmo.bilm.efml_model import EfmlTokenEncoder  # noqa: E402
from spacy_elmo.cli import app  # noqa: E402
from spacy_elmo.errors import ElmoError, ElmoWeightsError  # noqa: E402
from spacy_elmo.layers.bilm_serialization import deserialize_bilm, serialize_bilm  # noqa: E402

from .efml_models import SENTENCES, make_efml_dir  # noqa: E402

LINES = [" ".join(s) for s in SENTENCES if s and all(t and not t.isspace() for t in s)]


@pytest.fixture
def efml_dir(tmp_path):
    return make_efml_dir(tmp_path / "efml", 31, scale=0.4, **{"token_embedder.word_dim": 3})


def test_from_dir_and_bilm_dir_take_an_efml_directory(efml_dir, tmp_path):
    bilm = ElmoBiLM.from_dir(efml_dir)
    assert isinstance(bilm.char_encoder, EfmlTokenEncoder)
    (tmp_path / "neither").mkdir()
    with pytest.raises(ElmoError, match="config.json") as err:
        ElmoBiLM.from_dir(tmp_path / "neither")
    assert "options.json" in str(err.value) and "\n" not in str(err.value)


def test_embed_command_on_an_efml_directory(efml_dir, tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    out = tmp_path / "out.hdf5"
    result = CliRunner().invoke(app, ["embed", str(text), str(out), "--bilm-dir", str(efml_dir), "--max-length", "0"])
    assert result.exit_code == 0, result.output
    expected = ElmoBiLM.from_efml(efml_dir).embed_batch([line.split() for line in LINES])
    with h5py.File(out, "r") as f:
        for i, layers in enumerate(expected):
            numpy.testing.assert_array_equal(f[str(i)][...], layers)


def test_component_and_saved_pipeline_carry_the_vocabularies(efml_dir, tmp_path):
    nlp = spacy.blank("xx")
    nlp.add_pipe("elmo", config={"bilm_dir": str(efml_dir)})
    expected = ElmoBiLM.from_efml(efml_dir).embed_batch([line.split() for line in LINES])
    docs = [nlp(line) for line in LINES]
    for doc, layers in zip(docs, expected):
        assert [t.text for t in doc] == doc.text.split()
        numpy.testing.assert_allclose(doc._.elmo_layers, layers, atol=1e-6)
    nlp.to_disk(tmp_path / "nlp")
    shutil.rmtree(efml_dir)  # the saved pipeline needs nothing of the model directory
    loaded = spacy.load(tmp_path / "nlp")
    for line, layers in zip(LINES, expected):
        numpy.testing.assert_allclose(loaded(line)._.elmo_layers, layers, atol=1e-6)


def test_serialized_efml_bilm_round_trips_and_is_checked(efml_dir):
    bilm = ElmoBiLM.from_efml(efml_dir)
    data = serialize_bilm(bilm)
    again = deserialize_bilm(None, data, bilm.device)
    assert (
        isinstance(again.char_encoder, EfmlTokenEncoder)
        and again.char_encoder.vocab.chars == bilm.char_encoder.vocab.chars
    )
    for a, b in zip(again.embed_batch(SENTENCES), bilm.embed_batch(SENTENCES)):
        numpy.testing.assert_array_equal(a, b)
    msg = srsly.msgpack_loads(data)
    msg["arrays"]["char_encoder.projection.bias"] = msg["arrays"]["char_encoder.projection.bias"] + 1
    with pytest.raises(ElmoWeightsError, match="sha256"):  # the arrays and the vocabularies are covered
        deserialize_bilm(None, srsly.msgpack_dumps(msg), bilm.device)
    msg = srsly.msgpack_loads(data)
    msg["efml"]["words"]["the"] = msg["efml"]["words"]["cat"]  # two words, one id
    del msg["sha256"]  # as pipelines saved before the checksum: the vocabulary is still checked
    with pytest.raises(ElmoWeightsError, match="word.dic vocabulary is not a map of tokens to distinct ids"):
        deserialize_bilm(None, srsly.msgpack_dumps(msg), bilm.device)


def test_a_save_from_before_lstm_bias_keeps_its_vectors(efml_dir):
    """Saves made while the LSTM bias was held less bilm-tf's forget offset (no ``lstm_bias``
    in their settings) get the offset back once, as that code added it at run time."""
    from spacy_elmo.files.hashing import arrays_sha256

    bilm = ElmoBiLM.from_efml(efml_dir)
    msg = srsly.msgpack_loads(serialize_bilm(bilm))
    del msg["efml"]["lstm_bias"]
    for name, array in list(msg["arrays"].items()):
        if name.startswith("bilstm.") and name.endswith(".bias"):
            cells = array.shape[0] // 4
            held = array.copy()
            held[cells : 2 * cells] -= 1.0  # the forget block, as the old code held it
            msg["arrays"][name] = held
    msg["sha256"] = arrays_sha256(msg["arrays"], [msg["options"], msg["efml"]])
    legacy = deserialize_bilm(None, srsly.msgpack_dumps(msg), bilm.device)
    assert any(name.startswith("bilstm.") for name in msg["arrays"])
    for a, b in zip(legacy.embed_batch(SENTENCES), bilm.embed_batch(SENTENCES)):
        numpy.testing.assert_allclose(a, b, atol=1e-6, rtol=0)  # not 1.0 off in the forget gates
