"""Training through the listener: round trips, frozen/fine-tuned biLM, replace_listeners."""

import math
import warnings

import numpy
import pytest
import spacy
import torch
from spacy.training import Example
from thinc.api import Adam, fix_random_seed

from spacy_elmo.bilm import ElmoError
from spacy_elmo.doc_data import held_for_listeners
from spacy_elmo.layers.bilm_layer import get_bilm
from spacy_elmo.layers.listener import batch_id, build_listener, learned_mix, receive
from spacy_elmo.layers.scalar_mix import build_scalar_mix

from .conftest import tiny_bilm, zip_equal

NER_DATA = [
    ("Alice lives in Paris .", [(0, 5, "PER"), (15, 20, "LOC")]),
    ("Bob visited Berlin yesterday .", [(0, 3, "PER"), (12, 18, "LOC")]),
    ("The UN met in Geneva .", [(4, 6, "ORG"), (14, 20, "LOC")]),
]
CAT_DATA = [("great movie", "POS"), ("awful film", "NEG"), ("loved it", "POS")]
TEST_TEXTS = ["Alice visited Berlin .", "awful movie", "The UN loved Geneva ."]


@pytest.fixture
def weight_files(tmp_path):
    options, weights = tmp_path / "options.json", tmp_path / "weights.hdf5"
    tiny_bilm(seed=41).to_files(options, weights)
    return str(options), str(weights)


def listener(**settings):
    return {"@architectures": "spacy-elmo.ElmoListener.v1", **settings}


def make_nlp(weight_files, ner_listener=None, textcat_listener=None, **elmo_config):
    fix_random_seed(0)
    nlp = spacy.blank("en")
    options, weights = weight_files
    nlp.add_pipe("elmo", config={"options_file": options, "weight_file": weights, **elmo_config})
    add_ner(nlp, ner_listener or listener())
    if textcat_listener is not None:
        nlp.add_pipe(
            "textcat",
            config={
                "model": {
                    "@architectures": "spacy-elmo.TextCatReduce.v1",
                    "exclusive_classes": True,
                    "use_reduce_first": False,
                    "use_reduce_last": False,
                    "use_reduce_max": True,
                    "use_reduce_mean": True,
                    "tok2vec": textcat_listener,
                }
            },
        )
    return nlp


def add_ner(nlp, tok2vec):
    nlp.add_pipe(
        "ner",
        config={
            "model": {
                "@architectures": "spacy.TransitionBasedParser.v2",
                "state_type": "ner",
                "extra_state_tokens": False,
                "hidden_width": 16,
                "maxout_pieces": 2,
                "use_upper": True,
                "tok2vec": tok2vec,
            }
        },
    )


def examples(nlp):
    out = []
    for text, ents in NER_DATA:
        out.append(Example.from_dict(nlp.make_doc(text), {"entities": ents}))
    if "textcat" in nlp.pipe_names:
        for (text, label), eg in zip(CAT_DATA, out):
            eg.reference.cats = {"POS": float(label == "POS"), "NEG": float(label == "NEG")}
    return out


def train(nlp, steps=2, **update_kwargs):
    egs = examples(nlp)
    optimizer = nlp.initialize(lambda: egs)
    losses = {}
    for _ in range(steps):
        nlp.update(egs, sgd=optimizer, losses=losses, **update_kwargs)
    return optimizer, losses


def predictions(nlp):
    """Entities, cats, and what each component's tok2vec computes: the numbers, so a round trip
    that loses a mix or the biLM fails even where the labels (a barely trained model's) agree."""
    docs = list(nlp.pipe(TEST_TEXTS))
    fresh = [nlp.make_doc(text) for text in TEST_TEXTS]
    if "elmo" in nlp.pipe_names:  # as in nlp.pipe: elmo first, then each listener takes its layers
        fresh = list(nlp.get_pipe("elmo").pipe(fresh))
    encoded = {
        name: [numpy.asarray(x) for x in nlp.get_pipe(name).model.get_ref("tok2vec").predict(fresh)]
        for name in ("ner", "textcat")
        if name in nlp.pipe_names
    }
    return [[(e.start, e.end, e.label_) for e in d.ents] for d in docs], [d.cats for d in docs], encoded


def bilm_params(nlp):
    return {k: v.clone() for k, v in get_bilm(nlp.get_pipe("elmo").model).state_dict().items()}


def assert_same_predictions(a, b):
    assert a[0] == b[0]
    assert len(a[1]) == len(b[1]) == len(TEST_TEXTS)
    for cats_a, cats_b in zip(a[1], b[1]):
        assert cats_a.keys() == cats_b.keys()
        for key in cats_a:
            assert cats_a[key] == pytest.approx(cats_b[key], abs=1e-6)
    assert a[2].keys() == b[2].keys() and a[2]  # some component's encoder was compared
    for name in a[2]:
        for x, y in zip_equal(a[2][name], b[2][name]):
            assert x.shape[0] > 0 and numpy.abs(x).max() > 0  # real vectors, not an empty or zero stand-in
            numpy.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)  # float32 sums in another order


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_train_two_steps_then_round_trip_bytes_and_disk(weight_files, tmp_path, precision):
    """int8 too: a frozen biLM trains its listeners at inference precision, and its int8 copies must
    come back from bytes and disk and give the same numbers."""
    nlp = make_nlp(weight_files, textcat_listener=listener(layer_norm=True), precision=precision)
    train(nlp, steps=2)
    # int8 vectors depend on the batch that first encoded each type (docs/python.md, int8): start
    # from the empty type cache a loaded pipeline has, so the comparison is exact.
    get_bilm(nlp.get_pipe("elmo").model).type_cache.clear()
    before = predictions(nlp)
    assert len({round(cats["POS"], 6) for cats in before[1]}) > 1  # the textcat tells the texts apart
    nlp.to_disk(tmp_path / "pipeline")
    assert_same_predictions(predictions(spacy.load(tmp_path / "pipeline")), before)
    assert spacy.load(tmp_path / "pipeline").get_pipe("elmo").cfg["precision"] == precision
    from_bytes = make_nlp(weight_files, textcat_listener=listener(layer_norm=True), precision=precision)
    from_bytes.get_pipe("textcat").add_label("POS")
    from_bytes.get_pipe("textcat").add_label("NEG")
    from_bytes.from_bytes(nlp.to_bytes())
    assert_same_predictions(predictions(from_bytes), before)
    weights = nlp.get_pipe("elmo").listener_mix_weights()
    loaded_weights = spacy.load(tmp_path / "pipeline").get_pipe("elmo").listener_mix_weights()
    assert weights == loaded_weights and set(weights) == {"ner", "textcat"}


def test_mix_weights_learn_while_the_frozen_bilm_stays_put(weight_files):
    nlp = make_nlp(weight_files)
    egs = examples(nlp)
    optimizer = nlp.initialize(lambda: egs)
    frozen = bilm_params(nlp)
    start = nlp.get_pipe("elmo").listener_mix_weights()["ner"][0]
    assert start["weights"] == pytest.approx([1 / 3] * 3) and start["gamma"] == 1.0
    for _ in range(5):
        losses = nlp.update(egs, sgd=optimizer)
    learned = nlp.get_pipe("elmo").listener_mix_weights()["ner"][0]
    assert learned["weights"] != pytest.approx([1 / 3] * 3, abs=1e-5)
    assert sum(learned["weights"]) == pytest.approx(1.0)
    assert learned["gamma"] != 1.0
    assert losses["elmo"] == 0.0
    for name, value in bilm_params(nlp).items():  # not even weight decay touched it
        assert torch.equal(value, frozen[name]), name


def test_a_frozen_bilm_keeps_its_caches_across_training_steps(weight_files):
    """spaCy steps every trainable pipe, a frozen elmo too: its biLM's weights do not change
    then, so the layer cache must serve every step after the first (recomputing the biLM on
    every step made frozen training many times slower)."""
    nlp = make_nlp(weight_files, cache_size_mb=16)
    egs = examples(nlp)
    optimizer = nlp.initialize(lambda: egs)
    elmo = nlp.get_pipe("elmo")
    generation = get_bilm(elmo.model).weights_generation
    nlp.update(egs, sgd=optimizer)
    cache = elmo.model.attrs["cache"]
    hits = cache.hits
    for _ in range(3):
        nlp.update(egs, sgd=optimizer)
    assert cache.hits == hits + 3 * len(egs)
    assert get_bilm(elmo.model).weights_generation == generation


def test_grad_factor_fine_tunes_the_bilm(weight_files):
    nlp = make_nlp(weight_files, ner_listener=listener(grad_factor=1.0), textcat_listener=listener())
    egs = examples(nlp)
    optimizer = nlp.initialize(lambda: egs)
    before = bilm_params(nlp)
    losses = {}
    for _ in range(3):  # spaCy zero-initialises output layers: no input gradient on step 1
        nlp.update(egs, sgd=optimizer, losses=losses)
    assert losses["elmo"] > 0
    after = bilm_params(nlp)
    assert any(not torch.equal(after[k], before[k]) for k in before)


@pytest.mark.parametrize("cache_size_mb", [0, 16])
def test_a_fine_tuned_pipeline_predicts_with_its_updated_weights(weight_files, tmp_path, cache_size_mb):
    """Predict, update, predict: the second prediction must come from the updated weights (the
    caches derived from them, the layer cache, the type cache and the packed kernels, included),
    as the same weights loaded afresh compute them."""
    nlp = make_nlp(weight_files, ner_listener=listener(grad_factor=1.0), cache_size_mb=cache_size_mb)
    egs = examples(nlp)
    optimizer = nlp.initialize(lambda: egs)
    before = nlp(TEST_TEXTS[0])._.elmo_layers.copy()
    for _ in range(3):  # spaCy zero-initialises output layers: no input gradient on step 1
        nlp.update(egs, sgd=optimizer)
    after = nlp(TEST_TEXTS[0])._.elmo_layers
    assert not numpy.allclose(after, before, atol=1e-4)  # the update moved the biLM
    nlp.to_disk(tmp_path / "pipeline")
    afresh = spacy.load(tmp_path / "pipeline")(TEST_TEXTS[0])._.elmo_layers
    numpy.testing.assert_allclose(after, afresh, atol=1e-5)
    # And the plain torch API on the same module: its own caches follow the updates too.
    words = TEST_TEXTS[0].split()
    numpy.testing.assert_allclose(get_bilm(nlp.get_pipe("elmo").model).embed_batch([words])[0], afresh, atol=1e-5)


def test_a_fine_tuned_bilm_is_what_the_saved_pipeline_carries(weight_files, tmp_path):
    from spacy_elmo.bilm import ElmoBiLM

    nlp = make_nlp(weight_files, ner_listener=listener(grad_factor=1.0))
    train(nlp, steps=3)  # step 1 sends no input gradient (spaCy's zero-initialised output layer)
    words = TEST_TEXTS[0].split()
    tuned = nlp(TEST_TEXTS[0])._.elmo_layers
    untouched = ElmoBiLM.from_files(*weight_files).embed_batch([words])[0]
    assert not numpy.allclose(tuned, untouched, atol=1e-4)  # training moved the biLM
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")  # not the options_file/weight_file it started from
    numpy.testing.assert_allclose(loaded(TEST_TEXTS[0])._.elmo_layers, tuned, atol=1e-6)
    from_bytes = make_nlp(weight_files, ner_listener=listener(grad_factor=1.0)).from_bytes(nlp.to_bytes())
    numpy.testing.assert_allclose(from_bytes(TEST_TEXTS[0])._.elmo_layers, tuned, atol=1e-6)
    assert_same_predictions(predictions(loaded), predictions(nlp))


@pytest.mark.parametrize("grad_factor", [0.0, 1.0])
def test_an_empty_doc_predicts_and_trains_beside_the_others(weight_files, grad_factor):
    # Max pooling too: spacy-elmo.TextCatReduce.v1 pools an empty doc to zeros (spaCy's would fail).
    nlp = make_nlp(weight_files, ner_listener=listener(grad_factor=grad_factor), textcat_listener=listener())
    optimizer, _ = train(nlp, steps=2)
    empty, full = nlp.pipe(["", TEST_TEXTS[0]])
    assert len(empty) == 0 and empty.ents == ()
    assert set(empty.cats) == set(full.cats) == {"POS", "NEG"}
    blank = Example.from_dict(nlp.make_doc(""), {"entities": [], "cats": {"POS": 1.0, "NEG": 0.0}})
    mixed = nlp.update([blank, *examples(nlp)], sgd=optimizer)
    alone = nlp.update([blank], sgd=optimizer)
    for losses in (mixed, alone):
        assert set(losses) == {"elmo", "ner", "textcat"}
        assert all(isinstance(v, float) and math.isfinite(v) for v in losses.values()), losses
    assert (mixed["elmo"] > 0) is (grad_factor > 0)  # the biLM's gradient flows only when it fine-tunes


def test_listener_state_is_cleared_and_never_serialized(weight_files):
    nlp = make_nlp(weight_files)
    train(nlp, steps=1)
    ner_listener = nlp.get_pipe("elmo").listener_map["ner"][0]
    assert ner_listener.attrs["_state"].outputs is None
    egs = examples(nlp)
    nlp.get_pipe("elmo").update(egs)  # the producer sent, nobody consumed yet
    assert ner_listener.attrs["_state"].outputs is not None
    data = ner_listener.to_bytes()
    ner_listener.from_bytes(data)
    assert ner_listener.attrs["_state"].outputs is None
    assert len(data) < 2000  # only the mix parameters, no layer arrays


def test_frozen_and_annotating_reads_the_doc(weight_files):
    nlp = make_nlp(weight_files)
    egs = examples(nlp)
    optimizer = nlp.initialize(lambda: egs)
    start = nlp.get_pipe("elmo").listener_mix_weights()["ner"][0]["weights"]
    for _ in range(3):
        nlp.update(egs, sgd=optimizer, exclude=["elmo"], annotates=["elmo"])
    assert nlp.get_pipe("elmo").listener_mix_weights()["ner"][0]["weights"] != pytest.approx(start, abs=1e-6)
    with pytest.raises(ElmoError, match="annotating_components"):
        nlp.update(examples(nlp), sgd=optimizer, exclude=["elmo"])


def test_listener_gives_zeros_when_elmo_did_not_run(weight_files):
    nlp = make_nlp(weight_files)
    train(nlp, steps=1)
    ner_listener = nlp.get_pipe("elmo").listener_map["ner"][0]
    docs = [nlp.make_doc(t) for t in TEST_TEXTS]
    with pytest.warns(UserWarning, match="found no ELMo layers on 3 of 3 doc"):
        outputs = ner_listener.predict(docs)
    assert [o.shape for o in outputs] == [(len(d), 16) for d in docs]
    assert all((o == 0).all() for o in outputs)
    with nlp.select_pipes(disable=["elmo"]):
        nlp(TEST_TEXTS[0])  # still runs


@pytest.mark.parametrize("store,dtype", [("none", "float32"), ("mix", "float16"), ("all", "float16")])
def test_listeners_work_whatever_is_stored(weight_files, store, dtype):
    full = make_nlp(weight_files, textcat_listener=listener())
    train(full, steps=2)
    expected = predictions(full)
    lean = make_nlp(weight_files, textcat_listener=listener(), store=store, store_dtype=dtype)
    lean.get_pipe("textcat").add_label("POS")
    lean.get_pipe("textcat").add_label("NEG")
    lean.from_bytes(full.to_bytes())
    got = predictions(lean)
    assert_same_predictions(got, expected)
    doc = lean(TEST_TEXTS[0])
    assert set(held_for_listeners(doc)) == {"elmo"}  # held while the doc lives: a listener may read again


@pytest.mark.parametrize("store,dtype", [("none", "float32"), ("mix", "float16"), ("all", "float16")])
def test_a_component_with_two_listeners_gives_both_the_layers_whatever_is_stored(weight_files, store, dtype):
    """ElmoTok2Vec.v2 with elmo_output: one component, two listeners (the encoder's input and
    output). When the component stores less than float32 layers, the doc holds its layers for
    every listener, not for every listening component (the input listener once got zeros)."""
    both = {**tok2vec_at_input(), "@architectures": "spacy-elmo.ElmoTok2Vec.v2", "elmo_output": listener()}
    full = make_nlp(weight_files, ner_listener=both)
    train(full, steps=2)
    expected = predictions(full)
    lean = make_nlp(weight_files, ner_listener=both, store=store, store_dtype=dtype)
    lean.from_bytes(full.to_bytes())
    assert len(lean.get_pipe("elmo").listeners) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no listener may fall back to zeros
        got = predictions(lean)
        doc = lean(TEST_TEXTS[0])
    assert_same_predictions(got, expected)
    assert set(held_for_listeners(doc)) == {"elmo"}  # one copy for both listeners, while the doc lives


def concat_tok2vec():
    return {
        "@architectures": "spacy-elmo.ElmoConcat.v1",
        "elmo": listener(dropout=0.1),
        "tok2vec": {
            "@architectures": "spacy.HashEmbedCNN.v2",
            "pretrained_vectors": None,
            "width": 8,
            "depth": 1,
            "embed_size": 100,
            "window_size": 1,
            "maxout_pieces": 2,
            "subword_features": True,
        },
    }


# With ElmoConcat the listener sits at model.tok2vec.elmo; the block's own path
# (what spacy-transformers users type) must give a pipeline that saves and loads too.
@pytest.mark.parametrize(
    "concat,path", [(False, "model.tok2vec"), (True, "model.tok2vec.elmo"), (True, "model.tok2vec")]
)
def test_replace_listeners(weight_files, tmp_path, concat, path):
    tok2vec = concat_tok2vec() if concat else listener(dropout=0.1)
    nlp = make_nlp(weight_files, ner_listener=tok2vec)
    train(nlp, steps=2)
    before = predictions(nlp)
    mix_before = nlp.get_pipe("elmo").listener_mix_weights()["ner"][0]
    nlp.replace_listeners("elmo", "ner", [path])
    assert nlp.get_pipe("elmo").listening_components == []
    replaced_cfg = nlp.config["components"]["ner"]["model"]["tok2vec"]
    if concat:
        assert replaced_cfg["@architectures"] == "spacy-elmo.ElmoConcat.v1"
        assert replaced_cfg["tok2vec"]["@architectures"] == "spacy.HashEmbedCNN.v2"
        replaced_cfg = replaced_cfg["elmo"]
    assert replaced_cfg["@architectures"] == "spacy-elmo.ElmoStandalone.v1"
    assert replaced_cfg["bilm"]["@architectures"] == "spacy-elmo.ElmoBiLM.v1" and replaced_cfg["dropout"] == 0.1
    assert_same_predictions(predictions(nlp), before)
    standalone = [n for n in nlp.get_pipe("ner").model.walk() if n.name == "elmo_standalone"][0]
    assert learned_mix(standalone) == mix_before
    nlp.remove_pipe("elmo")  # ner owns its biLM now
    assert_same_predictions(predictions(nlp), before)
    nlp.to_disk(tmp_path / "replaced")
    assert_same_predictions(predictions(spacy.load(tmp_path / "replaced")), before)
    # And it keeps training, with its biLM frozen.
    standalone = [n for n in nlp.get_pipe("ner").model.walk() if n.name == "elmo_standalone"][0]
    frozen = {k: v.clone() for k, v in get_bilm(standalone.layers[0]).state_dict().items()}
    mix_before_update = learned_mix(standalone)
    optimizer = nlp.resume_training()
    nlp.update(examples(nlp), sgd=optimizer)
    after = get_bilm(standalone.layers[0]).state_dict()
    assert all(torch.equal(after[k], v) for k, v in frozen.items())
    assert learned_mix(standalone) != mix_before_update


@pytest.mark.parametrize(
    "kind,path,real",
    [
        ("at_input", "model.tok2vec.embed", "'model.tok2vec.elmo'"),  # the case
        ("concat", "model.tok2vec.tok2vec", "'model.tok2vec.elmo'"),
        ("plain", "model.tok2vec.dropout", "'model.tok2vec'"),
    ],
)
def test_replace_listeners_at_a_path_that_is_not_the_listener_is_refused_naming_its_path(
    weight_files, tmp_path, kind, path, real
):
    """Issue 76: a path that exists but holds no listener was accepted; config and model then
    disagreed and the saved pipeline did not load. Now refused at once, the pipeline unchanged."""
    tok2vec = {"at_input": tok2vec_at_input, "concat": concat_tok2vec, "plain": lambda: listener(dropout=0.1)}[kind]()
    nlp = make_nlp(weight_files, ner_listener=tok2vec)
    train(nlp, steps=1)
    before, config = predictions(nlp), nlp.config.to_str()
    with pytest.raises(
        ElmoError, match=rf"^nlp.replace_listeners: '{path}' holds no ELMo listener; the listener's path is {real} "
    ):
        nlp.replace_listeners("elmo", "ner", [path])
    assert nlp.config.to_str() == config and nlp.get_pipe("elmo").listening_components == ["ner"]
    nlp.to_disk(tmp_path / "refused")
    assert_same_predictions(predictions(spacy.load(tmp_path / "refused")), before)


def test_listener_width_conflict_is_explained(weight_files):
    nlp = make_nlp(weight_files, ner_listener=listener(width=32))
    with pytest.raises(
        ElmoError, match="listener of 'ner' was configured for width 32 .* component 'elmo' gives width 16"
    ):
        nlp.initialize(lambda: examples(nlp))


def test_a_listener_fed_another_batch_than_the_producers_refuses_it(weight_files):
    nlp = make_nlp(weight_files)
    nlp.initialize(lambda: examples(nlp))
    ner_listener = nlp.get_pipe("elmo").listeners[0]
    sent, other = [nlp.make_doc(text) for text in TEST_TEXTS[:2]], [nlp.make_doc(TEST_TEXTS[2])]
    layers = [numpy.zeros((3, len(doc), 16), dtype="float32") for doc in sent]
    receive(ner_listener, batch_id(sent), layers, lambda d_layers: None)
    with pytest.raises(ElmoError, match="got a different batch than the one the elmo component sent"):
        ner_listener(other, is_train=True)
    mixed, _ = ner_listener(sent, is_train=True)  # the batch it was sent goes through
    assert [m.shape for m in mixed] == [(len(doc), 16) for doc in sent]


def test_a_listener_that_cannot_know_its_width_says_where_to_get_it():
    nlp = spacy.blank("en")
    add_ner(nlp, listener())  # no elmo component before it
    with pytest.raises(ElmoError, match="does not know the biLM's size: put the 'elmo' component"):
        nlp.initialize(lambda: examples(nlp))


def test_an_uninitialized_mix_has_no_learned_weights_to_report():
    with pytest.raises(ElmoError, match="this ELMo scalar mix is not initialized yet"):
        learned_mix(build_listener(build_scalar_mix(3, 6)))


def test_a_listener_without_its_producer_warns_once_naming_the_component(weight_files, tmp_path):
    import warnings

    nlp = make_nlp(weight_files)
    train(nlp, steps=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # elmo runs: no warning
        nlp(TEST_TEXTS[0])
    with nlp.select_pipes(disable=["elmo"]):
        with pytest.warns(
            UserWarning, match=r"ELMo listener of 'ner' found no ELMo layers on 1 of 1 doc.*enable_pipe\('elmo'\)"
        ):
            nlp(TEST_TEXTS[0])
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # once per component, not per call
            nlp(TEST_TEXTS[1])
    nlp.to_disk(tmp_path / "pipeline")
    excluded = spacy.load(tmp_path / "pipeline", exclude=["elmo"])
    with pytest.warns(UserWarning, match="ELMo listener of 'ner' found no ELMo layers"):
        excluded(TEST_TEXTS[0])


@pytest.mark.parametrize("grad_factor,shown", [(0.0, False), (0.5, True)])
def test_the_training_table_shows_the_elmo_loss_only_when_the_biLM_trains(weight_files, grad_factor, shown):
    from spacy_elmo.training.log import _TableView

    nlp = make_nlp(weight_files, ner_listener=listener(grad_factor=grad_factor))
    train(nlp, steps=1)
    assert nlp.get_pipe("elmo").trains_bilm is shown
    assert [name for name, _ in _TableView(nlp).pipeline] == (["elmo", "ner"] if shown else ["ner"])


def tok2vec_at_input(width=8):
    """spacy-elmo.ElmoTok2Vec.v1: ELMo at the encoder's input."""
    return {
        "@architectures": "spacy-elmo.ElmoTok2Vec.v1",
        "width": width,
        "elmo": listener(dropout=0.1),
        "embed": {
            "@architectures": "spacy.MultiHashEmbed.v2",
            "width": width,
            "attrs": ["NORM", "PREFIX"],
            "rows": [100, 50],
            "include_static_vectors": False,
        },
        "encode": {
            "@architectures": "spacy.MaxoutWindowEncoder.v2",
            "width": width,
            "depth": 1,
            "window_size": 1,
            "maxout_pieces": 2,
        },
    }


def test_elmo_at_the_encoders_input_reaches_the_neighbours_and_at_its_output_does_not():
    from spacy.util import registry
    from thinc.api import Model

    def fake_elmo_forward(model, docs, is_train):
        return [model.ops.asarray2f(doc.user_data["elmo"]) for doc in docs], lambda d: []

    def outputs(architecture, token0):
        fake = Model("fake_elmo", fake_elmo_forward)
        nlp = spacy.blank("en")
        doc = nlp("one two three")
        doc.user_data["elmo"] = numpy.zeros((3, 4), dtype="f")
        doc.user_data["elmo"][0] = token0
        settings = {k: v for k, v in tok2vec_at_input().items() if k not in ("@architectures", "elmo")}
        if architecture == "concat":
            tok2vec = registry.resolve(
                {"m": {"@architectures": "spacy.Tok2Vec.v2", "embed": settings["embed"], "encode": settings["encode"]}}
            )["m"]
            model = registry.get("architectures", "spacy-elmo.ElmoConcat.v1")(fake, tok2vec)
        else:
            resolved = registry.resolve({"e": settings["embed"], "c": settings["encode"]})
            model = registry.get("architectures", "spacy-elmo.ElmoTok2Vec.v1")(fake, resolved["e"], resolved["c"], 8)
        fix_random_seed(0)
        model.initialize(X=[doc])
        return model.predict([doc])[0]

    for architecture, reaches_token1 in (("input", True), ("concat", False)):
        a, b = outputs(architecture, 0.0), outputs(architecture, 5.0)
        assert not numpy.allclose(a[0], b[0])  # token 0 sees its own ELMo either way
        assert (not numpy.allclose(a[1], b[1])) is reaches_token1, architecture


def test_elmo_tok2vec_trains_and_round_trips(weight_files, tmp_path):
    nlp = make_nlp(weight_files, ner_listener=tok2vec_at_input())
    _, losses = train(nlp, steps=2)
    assert losses["ner"] > 0
    before = predictions(nlp)
    assert nlp.get_pipe("elmo").listening_components == ["ner"]
    nlp.to_disk(tmp_path / "pipeline")
    assert_same_predictions(predictions(spacy.load(tmp_path / "pipeline")), before)


@pytest.mark.parametrize("side", ["output", "both"])
def test_elmo_beside_the_encoders_output_under_a_pooled_textcat(weight_files, tmp_path, side):
    """ElmoConcat.v1 and ElmoTok2Vec.v2's "both" end in a concatenation whose width is known only
    once the listener is: the textcat's labels, which thinc hands to a layer of unknown width at
    initialization, must size none of the token layers below it (they once sized the static
    vectors' layer)."""
    settings = tok2vec_at_input()
    settings["embed"]["include_static_vectors"] = True
    if side == "both":
        tok2vec = {**settings, "@architectures": "spacy-elmo.ElmoTok2Vec.v2", "elmo_output": listener()}
    else:
        embed_and_encode = {k: v for k, v in settings.items() if k in ("embed", "encode")}
        tok2vec = {
            "@architectures": "spacy-elmo.ElmoConcat.v1",
            "elmo": listener(),
            "tok2vec": {"@architectures": "spacy.Tok2Vec.v2", **embed_and_encode},
        }
    nlp = make_nlp(weight_files, textcat_listener=tok2vec)
    for word in ("great", "awful", "movie"):
        nlp.vocab.set_vector(word, numpy.full(5, len(word), dtype="f"))
    _, losses = train(nlp, steps=2)
    assert losses["textcat"] > 0
    mixes = nlp.get_pipe("elmo").listener_mix_weights()["textcat"]
    assert len(mixes) == (2 if side == "both" else 1)
    before = predictions(nlp)
    width = nlp.get_pipe("elmo").model.get_dim("nO")
    assert all(x.shape[1] == 8 + width for x in before[2]["textcat"])  # the encoder's 8 + ELMo's 2P
    nlp.to_disk(tmp_path / "pipeline")
    assert_same_predictions(predictions(spacy.load(tmp_path / "pipeline")), before)


def test_evaluation_under_averaged_params_sees_the_averages(weight_files, tmp_path):
    # spacy train evaluates (and saves model-best) inside nlp.use_params(optimizer.averages): what
    # it scores must be what it saves. (thinc 8.3's PyTorchShim swaps no averages in: its keys
    # never match the optimizer's, so the biLM runs its current weights there.)
    nlp = make_nlp(weight_files, ner_listener=listener(grad_factor=1.0), cache_size_mb=16)
    egs = examples(nlp)
    nlp.initialize(lambda: egs)
    optimizer = Adam(0.01, use_averages=True)  # as spaCy's training configs have it
    for _ in range(3):
        nlp.update(egs, sgd=optimizer)
    assert optimizer.averages
    current = nlp(TEST_TEXTS[0])._.elmo_layers.copy()
    with nlp.use_params(optimizer.averages):
        averaged = nlp(TEST_TEXTS[0])._.elmo_layers.copy()
        nlp.to_disk(tmp_path / "averaged")
    numpy.testing.assert_allclose(spacy.load(tmp_path / "averaged")(TEST_TEXTS[0])._.elmo_layers, averaged, atol=1e-5)
    numpy.testing.assert_allclose(nlp(TEST_TEXTS[0])._.elmo_layers, current, atol=1e-6)


def test_an_update_bumps_the_weights_generation_and_prediction_leaves_eval_mode(weight_files):
    nlp = make_nlp(weight_files, ner_listener=listener(grad_factor=1.0))
    optimizer, _ = train(nlp, steps=1)
    bilm = get_bilm(nlp.get_pipe("elmo").model)
    nlp(TEST_TEXTS[0])
    assert not bilm.training  # thinc's own shim leaves its module in train mode
    generation = bilm.weights_generation
    nlp("Bob visited Paris .")
    assert bilm.weights_generation == generation  # a prediction changes nothing
    nlp.update(examples(nlp), sgd=optimizer)
    assert bilm.weights_generation != generation


def two_elmo_nlp(tmp_path, weight_files, **elmo_config):
    """Two elmo components of one width, 'elmo' (ner listens) and 'elmo2' (textcat listens)."""
    options2, weights2 = tmp_path / "options2.json", tmp_path / "weights2.hdf5"
    tiny_bilm(seed=42).to_files(options2, weights2)
    nlp = make_nlp(weight_files, ner_listener=listener(upstream="elmo"), textcat_listener=listener(upstream="elmo2"))
    nlp.get_pipe("elmo").configure(**elmo_config)
    second = {"options_file": str(options2), "weight_file": str(weights2), **elmo_config}
    nlp.add_pipe("elmo", name="elmo2", config=second, after="elmo")
    return nlp


@pytest.mark.parametrize("store,dtype", [("all", "float32"), ("all", "float16"), ("mix", "float32")])
def test_a_listener_reads_its_own_upstreams_layers_when_two_elmo_components_run(weight_files, tmp_path, store, dtype):
    """The second elmo component once replaced the first one's layers on the doc, and the
    first one's listener read them: of the same width, nothing said so."""
    nlp = two_elmo_nlp(tmp_path, weight_files, store=store, store_dtype=dtype)
    train(nlp, steps=1)
    elmo, elmo2 = nlp.get_pipe("elmo"), nlp.get_pipe("elmo2")
    assert elmo.listening_components == ["ner"] and elmo2.listening_components == ["textcat"]
    both = list(elmo2.pipe(elmo.pipe(nlp.make_doc(text) for text in TEST_TEXTS)))
    alone = {
        name: list(nlp.get_pipe(name).pipe(nlp.make_doc(text) for text in TEST_TEXTS)) for name in ("elmo", "elmo2")
    }
    assert {doc.user_data[("spacy_elmo", "source")] for doc in both} == {"elmo2"}  # who wrote the stored layers
    for name, upstream in (("ner", "elmo"), ("textcat", "elmo2")):
        tok2vec = nlp.get_pipe(name).model.get_ref("tok2vec")
        for x, y in zip_equal(tok2vec.predict(both), tok2vec.predict(alone[upstream])):
            assert numpy.abs(x).max() > 0
            numpy.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
    assert set(held_for_listeners(both[0])) == {"elmo", "elmo2"}  # each listener's own, while the doc lives


def test_a_listener_whose_upstream_is_no_elmo_component_says_so_and_names_them(weight_files):
    nlp = make_nlp(weight_files, ner_listener=listener(upstream="elmo_typo"))
    with pytest.raises(ElmoError, match=r"'ner' listens to upstream 'elmo_typo', .* elmo components: 'elmo'\)") as info:
        nlp.initialize(lambda: examples(nlp))
    assert "put the 'elmo' component" not in str(info.value) and "\n" not in str(info.value)


def test_a_listener_of_any_upstream_reads_the_last_elmo_before_it_and_the_earlier_holds_nothing(weight_files, tmp_path):
    """upstream "*" with two elmo components: both link it, as spaCy's tok2vec does; it reads
    the later one's layers (as in training, where the later one's are the last it receives),
    and the earlier one holds none for it on the doc."""
    nlp = two_elmo_nlp(tmp_path, weight_files, store="all", store_dtype="float16")
    nlp.remove_pipe("textcat")
    ner = nlp.get_pipe("ner")
    ner_listener = nlp.get_pipe("elmo").listener_map["ner"][0]
    ner_listener.attrs["upstream_name"] = "*"
    nlp._link_components()
    assert nlp.get_pipe("elmo2").listener_map["ner"] == [ner_listener]
    train(nlp, steps=1)
    doc = nlp(TEST_TEXTS[0])
    assert set(held_for_listeners(doc)) == {"elmo2"}
    alone = list(nlp.get_pipe("elmo2").pipe([nlp.make_doc(TEST_TEXTS[0])]))
    both = list(nlp.get_pipe("elmo2").pipe(nlp.get_pipe("elmo").pipe([nlp.make_doc(TEST_TEXTS[0])])))
    tok2vec = ner.model.get_ref("tok2vec")
    numpy.testing.assert_allclose(tok2vec.predict(both)[0], tok2vec.predict(alone)[0], rtol=1e-5, atol=1e-6)


def test_two_elmo_components_of_different_widths_under_one_any_upstream_listener_are_named(weight_files, tmp_path):
    """upstream "*" links the listener to both elmo components: the second one's width used to be
    blamed on the listener's own width setting, which was null."""
    options24, weights24 = tmp_path / "options24.json", tmp_path / "weights24.hdf5"
    tiny_bilm(seed=42, projection_dim=12).to_files(options24, weights24)
    nlp = make_nlp(weight_files)  # elmo (width 16) and ner, whose listener has upstream "*"
    nlp.add_pipe(
        "elmo", name="elmo24", config={"options_file": str(options24), "weight_file": str(weights24)}, after="elmo"
    )
    with pytest.raises(ElmoError) as info:
        nlp.initialize(lambda: examples(nlp))
    message = str(info.value)
    assert (
        "'ner'" in message and "'elmo' (width 16, 3 layers)" in message and "'elmo24' (width 24, 3 layers)" in message
    )
    assert 'upstream "*"' in message and "set the listener's upstream to one of these names" in message
    assert "to null" not in message and "\n" not in message


def cache_fill_lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "spacy.elmo"]


def test_a_frozen_biLM_says_once_that_it_fills_its_cache_then_progress_then_when_the_cache_serves(weight_files, caplog):
    """spacy train printed nothing for minutes while the first epoch filled the layer cache."""
    nlp = make_nlp(weight_files)
    now = [0.0]
    nlp.get_pipe("elmo")._cache_fill.clock = lambda: now[0]
    optimizer, _ = train(nlp, steps=1)
    (started,) = cache_fill_lines(caplog)
    assert started.startswith("elmo: the frozen biLM runs once over each training sentence and caches its layers")
    others = [Example.from_dict(nlp.make_doc(text), {}) for text in TEST_TEXTS]
    nlp.update(others, sgd=optimizer)  # before a minute has passed: nothing more
    assert len(cache_fill_lines(caplog)) == 1
    now[0] = 61.0
    nlp.update([Example.from_dict(nlp.make_doc("Another new sentence ."), {})], sgd=optimizer)
    progress = cache_fill_lines(caplog)[1]
    assert (
        progress
        == "elmo: filling the layer cache: 7 training docs so far, 7 segments computed, 0 read from the cache (0 of 1024 MB)"
    )
    nlp.update(examples(nlp), sgd=optimizer)  # every sentence cached
    assert cache_fill_lines(caplog)[2].startswith("elmo: the layer cache serves the training batches now: 7 segments")
    now[0] = 1000.0
    nlp.update(others, sgd=optimizer)
    nlp("Alice visited Paris again .")
    list(nlp.pipe(["A sentence never seen .", "And one more ."]))
    assert len(cache_fill_lines(caplog)) == 3  # said once; prediction says nothing


@pytest.mark.parametrize("cache_size_mb,ending", [(0, "has no layer cache"), (0.002, "the layer cache is full")])
def test_a_frozen_biLM_without_room_to_cache_says_so_once(weight_files, caplog, cache_size_mb, ending):
    nlp = make_nlp(weight_files, cache_size_mb=cache_size_mb)
    optimizer, _ = train(nlp, steps=4)
    lines = cache_fill_lines(caplog)
    assert sum(ending in line for line in lines) == 1 and len(lines) == (1 if cache_size_mb == 0 else 2)


def test_prediction_alone_never_reports_the_cache(weight_files, caplog):
    nlp = make_nlp(weight_files)
    nlp.initialize(lambda: examples(nlp))
    list(nlp.pipe(TEST_TEXTS))
    nlp(TEST_TEXTS[0])
    assert cache_fill_lines(caplog) == []


@pytest.mark.parametrize("store", ["none", "mix", "all"])
def test_a_listening_component_run_again_on_a_processed_doc_predicts_the_same(weight_files, store):
    """Issue 76: with store "none" the layers held for the listeners were freed after their one read,
    so `nlp.get_pipe("ner")(doc)` on a processed doc got zeros, other entities, and a warning that
    elmo "did not run". spaCy's tok2vec and store "all" gave the same again; now every store does."""
    nlp = make_nlp(weight_files, store=store)
    train(nlp, steps=3)
    tok2vec = nlp.get_pipe("ner").model.get_ref("tok2vec")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no listener falls back to zeros
        docs = list(nlp.pipe(TEST_TEXTS))
        first = [numpy.asarray(x) for x in tok2vec.predict(docs)]
        entities = [[(e.start, e.end, e.label_) for e in doc.ents] for doc in docs]
        for doc in docs:
            doc.ents = []
            nlp.get_pipe("ner")(doc)
        again = [numpy.asarray(x) for x in tok2vec.predict(docs)]
    assert [[(e.start, e.end, e.label_) for e in doc.ents] for doc in docs] == entities
    for x, y in zip_equal(first, again):
        assert numpy.abs(x).max() > 0
        numpy.testing.assert_array_equal(x, y)


def test_held_layers_go_with_the_doc_and_never_into_its_bytes(weight_files):
    import gc

    from spacy_elmo.doc_data import _HELD

    nlp = make_nlp(weight_files, store="none")
    train(nlp, steps=1)
    doc = nlp(TEST_TEXTS[0])
    assert set(held_for_listeners(doc)) == {"elmo"}
    copy = spacy.tokens.Doc(nlp.vocab).from_bytes(doc.to_bytes())
    assert not held_for_listeners(copy) and not any(k[0] == "spacy_elmo" and k[1] == "layers" for k in copy.user_data)
    gc.collect()  # docs earlier tests left unreachable go now, not in the count below
    before = len(_HELD)
    del doc
    gc.collect()
    assert len(_HELD) == before - 1


def tok2vec_ner_nlp():
    """The control: spaCy's own tok2vec and a listening ner, as make_nlp builds ELMo's."""
    fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("tok2vec")
    add_ner(nlp, {"@architectures": "spacy.Tok2VecListener.v1", "width": 96, "upstream": "*"})
    return nlp


@pytest.mark.parametrize("producer", ["tok2vec", "elmo"])
def test_rehearse_with_docs_the_upstream_annotated_works_as_for_spacys_tok2vec(weight_files, producer):
    """spaCy's documented nlp.rehearse: the parser runs two copies of its model on the same docs
    (its rehearsal copy, then its own); the second once found the held layers already freed."""
    nlp = tok2vec_ner_nlp() if producer == "tok2vec" else make_nlp(weight_files, store="none")
    train(nlp, steps=2)
    optimizer = nlp.resume_training()
    annotated = list(nlp.get_pipe(producer).pipe(nlp.make_doc(text) for text, _ in NER_DATA))
    losses = nlp.rehearse([Example.from_dict(doc, {}) for doc in annotated], sgd=optimizer)
    assert math.isfinite(losses["ner"])


def test_the_zeros_warning_tells_a_doc_elmo_never_saw_from_a_copy_that_lost_its_layers(weight_files):
    nlp = make_nlp(weight_files, store="none")
    train(nlp, steps=1)
    copy = spacy.tokens.Doc(nlp.vocab).from_bytes(nlp(TEST_TEXTS[0]).to_bytes())  # store "none": no layers travel
    with pytest.warns(UserWarning, match=r"'elmo' component ran on these docs, but they were saved or copied") as got:
        nlp.get_pipe("ner")(copy)
    assert "did not run" not in str(got[0].message)
    for listener in nlp.get_pipe("elmo").listeners:
        listener.attrs["_state"].warned_zeros = False
    with pytest.warns(UserWarning, match=r"'elmo' component did not run") as got:
        nlp.get_pipe("ner")(nlp.make_doc(TEST_TEXTS[0]))
    assert "saved or copied" not in str(got[0].message)
