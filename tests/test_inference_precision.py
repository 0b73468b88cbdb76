"""Inference speed-ups that must not change results: packed kernels, the type cache, int8."""

import numpy
import pytest
import spacy
import torch
from spacy.tokens import Doc

from spacy_elmo.bilm import ElmoBiLM, ElmoError, batch_char_ids
from spacy_elmo.bilm.elmo_bilm import unique_types
from spacy_elmo.bilm.kernels import packed_linear as PackedLinear
from spacy_elmo.bilm.precision import FORCE_BF16_ENV
from spacy_elmo.bilm.type_cache import TypeCache
from spacy_elmo.layers.bilm_layer import get_bilm

from .conftest import make_nlp, tiny_bilm, zip_equal

SENTENCES = [["The", "cat", "sat", "."], ["A", "dog", "sat", "on", "the", "cat", "."], ["cat"]]


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("with_bias,with_add", [(False, False), (True, False), (False, True), (True, True)])
def test_packed_linear_is_x_times_weight_plus_bias_plus_add(packed, with_bias, with_add):
    torch.manual_seed(0)
    weight, x = torch.randn(24, 40), torch.randn(5, 24)
    bias = torch.randn(40) if with_bias else None
    add = torch.randn(5, 40) if with_add else None
    expected = x @ weight + (bias if with_bias else 0) + (add if with_add else 0)
    kernel = PackedLinear(weight, bias, packed=packed)
    assert kernel.kind in (("onednn", "mkl", "plain") if packed else ("plain",))
    torch.testing.assert_close(kernel(x, add=add), expected, atol=1e-5, rtol=1e-5)
    quantized = PackedLinear(weight, bias, "int8")(x, add=add)
    assert 0 < float((quantized - expected).abs().max()) < 0.05 * float(expected.abs().max())


def test_int8_products_do_not_saturate_on_this_cpu():
    """Activations near the top of their range times weights at +127: pairs of u8*s8
    products sum past 16 bits, where AVX2's kernels saturate unless activations use 7 bits."""
    weight = torch.ones(256, 64)
    x = torch.full((8, 256), 0.999)
    x[:, 0] = -0.001  # the range's low end near 0: quantized activations land near 255
    expected = x @ weight
    quantized = PackedLinear(weight, None, "int8")(x)
    assert float((quantized - expected).abs().max()) < 0.01 * float(expected.abs().max())


def test_unknown_precision_is_refused():
    with pytest.raises(ElmoError, match="precision must be one of"):
        PackedLinear(torch.randn(3, 3), precision="int4")
    with pytest.raises(ElmoError, match="precision must be one of"):
        tiny_bilm().set_precision("fp8")


def _types(sentences):
    ids, _ = batch_char_ids(sentences)
    return unique_types(torch.from_numpy(ids))[0]


def test_type_cache_computes_each_type_once_and_keeps_its_bound():
    model = tiny_bilm(seed=5)
    cache = TypeCache(max_types=6)
    seen = []

    def encoder(chars):
        seen.append(len(chars))
        return model.char_encoder(chars)

    with torch.no_grad():
        first = _types(SENTENCES[:1])  # <S>, </S> and 4 words
        numpy.testing.assert_array_equal(cache.encode(first, encoder, "w"), model.char_encoder(first))
        again = cache.encode(first, encoder, "w")
        assert seen == [6] and cache.stats()["hits"] == 6 and torch.equal(again, model.char_encoder(first))
        cache.encode(_types(SENTENCES[1:2]), encoder, "w")  # 9 types, 4 of them new; 6 are kept
        assert seen[-1] == 4 and len(cache) == 6
        cache.encode(first, encoder, "other weights")  # a new owner empties the cache
        assert seen[-1] == 6 and len(cache) == 6 and cache.stats()["misses"] == 16


def test_a_negative_type_cache_size_is_refused():
    with pytest.raises(ElmoError, match="type cache size must be >= 0 types, got -1"):
        tiny_bilm(seed=5).set_type_cache_size(-1)


def test_type_cache_outputs_match_uncached_ones_and_follow_weight_changes():
    model = tiny_bilm(seed=7)
    uncached = tiny_bilm(seed=7)
    uncached.set_type_cache_size(0)
    model.embed_batch(SENTENCES)
    for got, expected in zip_equal(model.embed_batch(SENTENCES[::-1]), uncached.embed_batch(SENTENCES[::-1])):
        numpy.testing.assert_allclose(got, expected, atol=1e-6)
    assert model.type_cache.stats()["hit_rate"] > 0.4
    with torch.no_grad():
        model.char_encoder.proj_bias.add_(1.0)  # in place, then said: the cache must follow
        uncached.char_encoder.proj_bias.add_(1.0)
    model.mark_weights_changed()
    uncached.mark_weights_changed()
    numpy.testing.assert_allclose(model.embed_batch(SENTENCES)[0], uncached.embed_batch(SENTENCES)[0], atol=1e-6)


def test_training_never_uses_the_type_cache():
    model = tiny_bilm(seed=8).train()
    ids, lengths = (torch.from_numpy(a) for a in batch_char_ids(SENTENCES))
    model(ids, lengths).sum().backward()
    assert len(model.type_cache) == 0 and model.char_encoder.proj_weight.grad is not None


def test_int8_is_close_to_fp32_and_switching_back_is_exact(tmp_path):
    exact = tiny_bilm(seed=9, scale=0.3)
    exact.to_files(tmp_path / "options.json", tmp_path / "weights.hdf5")
    quantized = ElmoBiLM.from_dir(tmp_path, precision="int8")
    assert quantized.precision == "int8"
    want, got = exact.embed_batch(SENTENCES), quantized.embed_batch(SENTENCES)
    worst = max(float(numpy.abs(w - g).max()) for w, g in zip_equal(want, got))
    assert 1e-5 < worst < 0.05
    quantized.set_precision("fp32")
    for w, g in zip_equal(want, quantized.embed_batch(SENTENCES)):
        numpy.testing.assert_allclose(g, w, atol=1e-6)


@pytest.mark.parametrize("precision,history_atol", [("fp32", 1e-6), ("bf16", 1e-6), ("int8", 0.005)])
def test_what_ran_before_moves_a_sentences_vectors_only_within_int8s_batch_scales(
    weight_files, precision, history_atol, monkeypatch
):
    """int8 quantizes activations with one scale per call, so a type's cached vector depends on the
    batch that first encoded it (docs/python.md, int8); fp32 and bf16 have no such history. A
    cleared cache repeats."""
    monkeypatch.setenv(FORCE_BF16_ENV, "1")  # bf16 where this CPU has no native bf16
    text = "The cat sat on the mat ."
    fresh = make_nlp(weight_files, precision=precision)(text)._.elmo_layers
    nlp = make_nlp(weight_files, precision=precision)
    nlp("Cats sat on mats , and the dog barked at a cat !!! 1999 .")
    history = float(numpy.abs(nlp(text)._.elmo_layers - fresh).max())
    assert history < history_atol
    if precision == "int8":
        assert history > 1e-5  # the dependence docs/python.md describes is real, and this test would see it go
    get_bilm(nlp.get_pipe("elmo").model).type_cache.clear()
    nlp.get_pipe("elmo").model.attrs["cache"].clear()  # the output cache keeps the sentence as first computed
    numpy.testing.assert_allclose(nlp(text)._.elmo_layers, fresh, atol=1e-6)


def test_int8_inference_ignores_gradients_mode_for_training():
    """Autograd always runs fp32: int8 copies are for inference only."""
    model = tiny_bilm(seed=10, scale=0.3)
    fp32 = model(*(torch.from_numpy(a) for a in batch_char_ids(SENTENCES))).detach()
    model.set_precision("int8")
    with_grad = model(*(torch.from_numpy(a) for a in batch_char_ids(SENTENCES)))
    assert with_grad.requires_grad
    torch.testing.assert_close(with_grad.detach(), fp32, atol=1e-6, rtol=0)


@pytest.fixture
def weight_files(tmp_path):
    tiny_bilm(seed=11, scale=0.3).to_files(tmp_path / "options.json", tmp_path / "weights.hdf5")
    return tmp_path / "options.json", tmp_path / "weights.hdf5"


def test_the_component_runs_int8_and_keeps_it_after_saving(tmp_path, weight_files):
    text = "The cat sat on the mat ."
    exact = make_nlp(weight_files)(text)._.elmo_layers
    nlp = make_nlp(weight_files, precision="int8")
    quantized = nlp(text)._.elmo_layers
    assert 1e-5 < numpy.abs(exact - quantized).max() < 0.05
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.get_pipe("elmo").cfg["precision"] == "int8"
    numpy.testing.assert_allclose(loaded(text)._.elmo_layers, quantized, atol=1e-6)


@pytest.mark.parametrize(
    "saved,loaded_as", [("fp32", "int8"), ("int8", "fp32"), ("fp32", "bf16"), ("bf16", "fp32"), ("int8", "bf16")]
)
def test_a_saved_pipeline_runs_at_the_precision_it_is_loaded_with(
    tmp_path, weight_files, saved, loaded_as, monkeypatch
):
    """The switch docs/component.md gives: spacy.load(path, config=...) must win over the saved setting."""
    monkeypatch.setenv(FORCE_BF16_ENV, "1")  # bf16 where this CPU has no native bf16
    text = "The cat sat on the mat ."
    expected = make_nlp(weight_files, precision=loaded_as)(text)._.elmo_layers
    make_nlp(weight_files, precision=saved).to_disk(tmp_path / "pipeline")
    nlp = spacy.load(tmp_path / "pipeline", config={"components": {"elmo": {"precision": loaded_as}}})
    assert nlp.get_pipe("elmo").cfg["precision"] == loaded_as
    numpy.testing.assert_allclose(nlp(text)._.elmo_layers, expected, atol=1e-6)
    assert spacy.load(tmp_path / "pipeline").get_pipe("elmo").cfg["precision"] == saved


def test_a_saved_pipeline_keeps_the_cache_size_it_is_loaded_with(tmp_path, weight_files):
    make_nlp(weight_files, cache_size_mb=64).to_disk(tmp_path / "pipeline")
    nlp = spacy.load(tmp_path / "pipeline", config={"components": {"elmo": {"cache_size_mb": 0}}})
    assert nlp.get_pipe("elmo").cfg["cache_size_mb"] == 0
    assert nlp.get_pipe("elmo").model.attrs["cache"].max_bytes == 0


def test_int8_fine_tuning_is_refused_at_initialize_in_one_line(weight_files):
    nlp = make_nlp(weight_files, precision="int8")
    listener = {"@architectures": "spacy-elmo.ElmoListener.v1", "grad_factor": 1.0}
    nlp.add_pipe(
        "textcat",
        config={
            "model": {
                "@architectures": "spacy.TextCatReduce.v1",
                "exclusive_classes": True,
                "use_reduce_first": False,
                "use_reduce_last": False,
                "use_reduce_max": False,
                "use_reduce_mean": True,
                "tok2vec": listener,
            }
        },
    )
    for label in ("POS", "NEG"):
        nlp.get_pipe("textcat").add_label(label)
    with pytest.raises(ElmoError) as info:
        nlp.initialize()
    assert str(info.value) == (
        "elmo precision 'int8' is for inference only, but the listener of 'textcat' fine-tunes the biLM "
        "(grad_factor > 0): train with the elmo component's precision 'fp32' (switch to int8 after training), "
        "or set grad_factor 0"
    )
    assert not nlp.get_pipe("elmo").has_weights  # refused before any work
    frozen = make_nlp(weight_files, precision="int8")
    frozen.add_pipe(
        "textcat",
        config={"model": {**nlp.config["components"]["textcat"]["model"], "tok2vec": {**listener, "grad_factor": 0.0}}},
    )
    for label in ("POS", "NEG"):
        frozen.get_pipe("textcat").add_label(label)
    frozen.initialize()  # a frozen biLM may run int8 while the task trains


def test_a_standalone_biLM_refuses_int8_fine_tuning_at_initialize(weight_files):
    from spacy_elmo.layers.bilm_layer import build_bilm_model, set_bilm, set_precision
    from spacy_elmo.layers.listener import build_standalone
    from spacy_elmo.layers.scalar_mix import build_scalar_mix

    bilm = build_bilm_model(None)
    set_bilm(bilm, ElmoBiLM.from_files(*weight_files))
    set_precision(bilm, "int8")
    with pytest.raises(ElmoError, match="fine-tunes its biLM .* precision 'int8', which is for inference only"):
        build_standalone(bilm, build_scalar_mix(), grad_factor=1.0).initialize()
    build_standalone(bilm, build_scalar_mix(), grad_factor=0.0).initialize()


def test_the_component_refuses_an_unknown_precision_and_int8_fine_tuning(weight_files):
    with pytest.raises(ElmoError, match="elmo precision must be one of"):
        make_nlp(weight_files, precision="int4")
    from spacy_elmo.layers.bilm_layer import build_bilm_model, set_bilm, set_precision

    model = build_bilm_model(None)
    set_bilm(model, ElmoBiLM.from_files(*weight_files))
    set_precision(model, "int8")
    doc = Doc(spacy.blank("en").vocab, words=["a", "b"])
    assert model.predict([doc])[0].shape == (3, 2, 16)
    with pytest.raises(ElmoError, match="inference only"):
        model.begin_update([doc])


def test_precision_is_applied_when_it_is_set_and_when_a_biLM_arrives_never_by_a_batch(weight_files):
    """The biLM runs at the model's precision from the moment either is known (set_precision,
    set_bilm, a load), so no prediction batch has a precision to decide."""
    from spacy_elmo.layers.bilm_layer import build_bilm_model, get_bilm, set_bilm, set_precision

    model = build_bilm_model(None)
    set_precision(model, "int8")  # before the weights: applied when they arrive
    set_bilm(model, ElmoBiLM.from_files(*weight_files))
    assert get_bilm(model).precision == "int8"
    set_precision(model, "fp32")  # after them: applied now
    assert get_bilm(model).precision == "fp32"
    set_precision(model, "int8")
    # A load (a standalone model's: no pipe around it) keeps the loading model's precision,
    # a run-time choice, whatever the saved model ran at.
    loaded = build_bilm_model(None).from_bytes(model.to_bytes())
    assert get_bilm(loaded).precision == "fp32" and loaded.attrs["settings"].precision == "fp32"
    int8 = build_bilm_model(None)
    set_precision(int8, "int8")
    set_precision(model, "fp32")
    int8.from_bytes(model.to_bytes())
    assert get_bilm(int8).precision == "int8" and get_bilm(int8) is not get_bilm(model)
    set_precision(model, "int8")
    doc = Doc(spacy.blank("en").vocab, words=["a", "b"])
    numpy.testing.assert_array_equal(int8.predict([doc])[0], model.predict([doc])[0])


def test_a_loaded_component_runs_at_its_config_precision_not_the_saved_one(weight_files, tmp_path):
    nlp = make_nlp(weight_files, precision="int8")
    nlp("a b")
    nlp.to_disk(tmp_path / "int8")
    fp32 = spacy.load(tmp_path / "int8", config={"components": {"elmo": {"precision": "fp32"}}})
    assert get_bilm(fp32.get_pipe("elmo").model).precision == "fp32"
    assert get_bilm(spacy.load(tmp_path / "int8").get_pipe("elmo").model).precision == "int8"
