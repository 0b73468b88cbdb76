"""The optimizer's state survives a resumed stretch: saved by stable parameter
names, restored into a pipeline loaded afresh (other node ids), exactly."""

import io
from typing import List

import numpy
import pytest
import spacy
import srsly
from spacy.tokens import DocBin
from spacy.training import Example
from spacy.training.initialize import init_nlp
from spacy.training.loop import train as train_pipeline
from spacy.util import registry
from thinc.api import Adam, Optimizer

from spacy_elmo.errors import ElmoError
from spacy_elmo.training.optimizer_state import (
    OPTIMIZERS,
    parameter_names,
    restore_state,
    save_state,
    stateful_optimizer,
)

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


def test_the_log_takes_the_optimizer_made_last_for_its_state_file(tmp_path):
    stateful_optimizer(Adam(0.01), str(tmp_path / "state"))  # init_nlp's resolution of [training]
    later = stateful_optimizer(Adam(0.01), str(tmp_path / "state"))  # train's, the one it updates
    assert OPTIMIZERS.take(str(tmp_path / "." / "state")) is later
    with pytest.raises(ElmoError, match="spacy-elmo.StatefulOptimizer.v1"):
        OPTIMIZERS.take(str(tmp_path / "state"))  # taken: the hand-off keeps no finished run's optimizer
    with pytest.raises(ElmoError, match="spacy-elmo.StatefulOptimizer.v1"):
        OPTIMIZERS.take(str(tmp_path / "other"))


MADE: List[Optimizer] = []


@registry.optimizers("spacy-elmo-test.RecordedAdam.v1")
def recorded_adam() -> Optimizer:
    MADE.append(Adam(0.01))
    return MADE[-1]


def spacy_train_config(tmp_path):
    """A tiny textcat config as a resumed project stretch writes it: the optimizer wrapped in
    StatefulOptimizer.v1, TrainingLog.v2 saving its state; 4 steps, an evaluation every 2."""
    nlp = spacy.blank("en")
    nlp.add_pipe("textcat", config=TEXTCAT)
    for split in ("train", "dev"):
        docs = [example.reference for example in examples(nlp)]
        DocBin(docs=docs).to_disk(tmp_path / f"{split}.spacy")
    config = nlp.config.copy()
    config["paths"].update(train=str(tmp_path / "train.spacy"), dev=str(tmp_path / "dev.spacy"))
    state_file = str(tmp_path / "state")
    config["training"].update(max_steps=4, eval_frequency=2, patience=0, dropout=0.0)
    config["training"]["optimizer"] = {
        "@optimizers": "spacy-elmo.StatefulOptimizer.v1",
        "optimizer": {"@optimizers": "spacy-elmo-test.RecordedAdam.v1"},
        "state_file": state_file,
    }
    config["training"]["logger"] = {"@loggers": "spacy-elmo.TrainingLog.v2", "optimizer_state": state_file}
    return config


def test_the_log_saves_the_state_of_the_optimizer_spacy_trains_with(tmp_path):
    """``spacy train`` resolves [training] twice (init_nlp, then train): the state saved at the
    last evaluation (step 4, the last update) is the moments of the optimizer spaCy's loop
    updated, not of init_nlp's, which no update reaches."""
    MADE.clear()
    nlp = init_nlp(spacy_train_config(tmp_path))
    (tmp_path / "out").mkdir()  # as spacy train's command makes it
    train_pipeline(nlp, tmp_path / "out", stdout=io.StringIO(), stderr=io.StringIO())
    updated = [optimizer for optimizer in MADE if optimizer.nr_update]
    assert len(MADE) == 2 and len(updated) == 1
    trained, names = updated[0], parameter_names(nlp)
    saved = srsly.read_msgpack(tmp_path / "state")
    assert saved["step"] == 4
    assert set(saved["params"]) == {names[key][0] for key in trained.nr_update}
    for key, count in trained.nr_update.items():
        entry = saved["params"][names[key][0]]
        assert entry["nr_update"] == count == 5  # steps 0-4
        numpy.testing.assert_array_equal(entry["mom1"], trained.mom1[key])


def test_saved_moments_are_the_optimizer_s(tmp_path):
    nlp, optimizer = trained(2)
    save_state(nlp, optimizer, tmp_path / "state", step=2)
    saved = srsly.read_msgpack(tmp_path / "state")
    names = parameter_names(nlp)
    key = next(iter(optimizer.mom1))
    entry = saved["params"][names[key][0]]
    assert entry["nr_update"] == 2
    numpy.testing.assert_array_equal(entry["mom2"], optimizer.mom2[key])
