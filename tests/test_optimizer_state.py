"""The optimizer's state survives a resumed stretch: saved by stable parameter
names, restored into a pipeline loaded afresh (other node ids), exactly."""

import numpy
import pytest
import spacy
from spacy.training import Example
from thinc.api import Adam

from spacy_elmo.errors import ElmoError
from spacy_elmo.optimizer_state import optimizer_for, parameter_names, restore_state, save_state, stateful_optimizer

TEXTS = [("a good film", "POS"), ("a bad film", "NEG"), ("good fun", "POS"), ("bad acting", "NEG")]
# An inline tok2vec with a torch biLSTM: node parameters and a torch shim's parameters.
TEXTCAT = {
    "model": {
        "@architectures": "spacy.TextCatReduce.v1",
        "exclusive_classes": True,
        "use_reduce_first": False,
        "use_reduce_last": False,
        "use_reduce_max": True,
        "use_reduce_mean": True,
        "tok2vec": {
            "@architectures": "spacy.Tok2Vec.v2",
            "embed": {
                "@architectures": "spacy.MultiHashEmbed.v2",
                "width": 8,
                "attrs": ["NORM"],
                "rows": [50],
                "include_static_vectors": False,
            },
            "encode": {"@architectures": "spacy.TorchBiLSTMEncoder.v1", "width": 8, "depth": 1, "dropout": 0.0},
        },
    }
}


def examples(nlp):
    cats = {"POS", "NEG"}
    return [
        Example.from_dict(nlp.make_doc(text), {"cats": {c: float(c == label) for c in cats}}) for text, label in TEXTS
    ]


def trained(steps: int):
    nlp = spacy.blank("en")
    nlp.add_pipe("textcat", config=TEXTCAT)
    nlp.initialize(lambda: examples(nlp))
    optimizer = Adam(0.01)
    for _ in range(steps):
        nlp.update(examples(nlp), sgd=optimizer, drop=0.0)
    return nlp, optimizer


def weights(nlp):
    return nlp.get_pipe("textcat").model.to_bytes()


def one_more_update(nlp, optimizer):
    nlp.update(examples(nlp), sgd=optimizer, drop=0.0)
    return weights(nlp)


def test_restored_state_continues_exactly_as_the_uninterrupted_run(tmp_path):
    nlp, optimizer = trained(3)
    save_state(nlp, optimizer, tmp_path / "state", step=3)
    nlp.to_disk(tmp_path / "model")
    resumed, afresh = spacy.load(tmp_path / "model"), spacy.load(tmp_path / "model")
    resumed_optimizer = Adam(0.01)
    assert restore_state(resumed, resumed_optimizer, tmp_path / "state", step=3) is None
    expected = one_more_update(nlp, optimizer)
    assert one_more_update(resumed, resumed_optimizer) == expected
    assert one_more_update(afresh, Adam(0.01)) != expected  # zero moments take another step


def test_every_updated_parameter_is_named_torch_shims_included(tmp_path):
    nlp, optimizer = trained(1)
    names = parameter_names(nlp)
    assert set(optimizer.nr_update) <= set(names)
    assert any("/shim0/" in name for name, _ in names.values())
    for node in nlp.get_pipe("textcat").model.walk():
        for param in node.param_names:
            assert names[(node.id, param)][1] == node.get_param(param).size


def test_a_state_from_another_step_or_pipeline_is_not_restored(tmp_path):
    nlp, optimizer = trained(2)
    save_state(nlp, optimizer, tmp_path / "state", step=2)
    assert "not of step 5" in restore_state(nlp, Adam(0.01), tmp_path / "state", step=5)
    assert "no optimizer state" in restore_state(nlp, Adam(0.01), tmp_path / "missing", step=2)
    renamed = spacy.blank("en")
    renamed.add_pipe("textcat", name="sentiment", config=TEXTCAT)
    renamed.initialize(lambda: examples(renamed))
    fresh = Adam(0.01)
    assert "lacks" in restore_state(renamed, fresh, tmp_path / "state", step=2)
    assert not fresh.mom1  # nothing half-restored


def test_a_wider_pipeline_is_refused_by_size(tmp_path):
    nlp, optimizer = trained(1)
    save_state(nlp, optimizer, tmp_path / "state", step=1)
    wider = spacy.blank("en")
    config = {"model": {**TEXTCAT["model"], "tok2vec": {**TEXTCAT["model"]["tok2vec"]}}}
    config["model"]["tok2vec"]["embed"] = {**TEXTCAT["model"]["tok2vec"]["embed"], "rows": [60]}
    wider.add_pipe("textcat", config=config)
    wider.initialize(lambda: examples(wider))
    fresh = Adam(0.01)
    assert "values there" in restore_state(wider, fresh, tmp_path / "state", step=1)
    assert not fresh.mom1


def test_the_optimizer_is_found_by_its_state_file(tmp_path):
    optimizer = stateful_optimizer(Adam(0.01), str(tmp_path / "state"))
    assert optimizer_for(str(tmp_path / "." / "state")) is optimizer
    with pytest.raises(ElmoError, match="spacy-elmo.StatefulOptimizer.v1"):
        optimizer_for(str(tmp_path / "other"))


def test_saved_moments_are_the_optimizer_s(tmp_path):
    import srsly

    nlp, optimizer = trained(2)
    save_state(nlp, optimizer, tmp_path / "state", step=2)
    saved = srsly.read_msgpack(tmp_path / "state")
    names = parameter_names(nlp)
    key = next(iter(optimizer.mom1))
    entry = saved["params"][names[key][0]]
    assert entry["nr_update"] == 2
    numpy.testing.assert_array_equal(entry["mom2"], optimizer.mom2[key])
