"""The scalar mix layer alone (thinc only): values, gradients, regularisers."""

import numpy
import pytest
from thinc.api import fix_random_seed, set_dropout_rate

from spacy_elmo.bilm import ElmoError
from spacy_elmo.layers.scalar_mix import build_scalar_mix, mix_weights


def layers(seed=0, n=5, n_layers=3, width=6):
    return numpy.random.default_rng(seed).normal(size=(n_layers, n, width)).astype("float32")


def test_starts_as_the_plain_average():
    mix = build_scalar_mix()
    X = [layers(0), layers(1, n=2)]
    mix.initialize(X=X)
    assert mix.get_dim("nL") == 3 and mix.get_dim("nO") == 6
    Y = mix.predict(X)
    for x, y in zip(X, Y):
        numpy.testing.assert_allclose(y, x.mean(axis=0), atol=1e-6)


def test_weights_and_gamma_are_used():
    mix = build_scalar_mix(3, 6)
    mix.initialize()
    mix.set_param("s", numpy.asarray([0.0, numpy.log(2.0), numpy.log(5.0)], dtype="float32"))
    mix.set_param("gamma", numpy.asarray([2.0], dtype="float32"))
    X = layers()
    expected = 2.0 * (X[0] + 2 * X[1] + 5 * X[2]) / 8
    numpy.testing.assert_allclose(mix.predict([X])[0], expected, atol=1e-5)
    numpy.testing.assert_allclose(mix_weights(mix), [1 / 8, 2 / 8, 5 / 8], atol=1e-6)


@pytest.mark.parametrize("layer_norm", [False, True])
def test_gradients_match_finite_differences(layer_norm):
    mix = build_scalar_mix(3, 6, layer_norm=layer_norm)
    mix.initialize()
    mix.set_param("s", numpy.asarray([0.3, -0.2, 0.5], dtype="float32"))
    mix.set_param("gamma", numpy.asarray([1.3], dtype="float32"))
    X = [layers(2).astype("float64").astype("float32")]
    dY = [numpy.random.default_rng(3).normal(size=(5, 6)).astype("float32")]

    def loss(params=None, inputs=None):
        saved = {k: mix.get_param(k).copy() for k in ("s", "gamma")}
        for k, v in (params or {}).items():
            mix.set_param(k, v)
        Y = mix.predict(inputs or X)
        for k, v in saved.items():
            mix.set_param(k, v)
        return float((Y[0] * dY[0]).sum())

    _, backprop = mix(X, is_train=True)
    dX = backprop(dY)
    eps = 1e-2
    for name in ("s", "gamma"):
        value = mix.get_param(name).astype("float64")
        numeric = []
        for i in range(value.size):
            up, down = value.copy(), value.copy()
            up[i] += eps
            down[i] -= eps
            numeric.append((loss({name: up.astype("float32")}) - loss({name: down.astype("float32")})) / (2 * eps))
        numpy.testing.assert_allclose(mix.get_grad(name), numeric, rtol=2e-2, atol=2e-3)
    for index in [(0, 1, 2), (2, 4, 0), (1, 0, 5)]:
        up, down = X[0].copy(), X[0].copy()
        up[index] += eps
        down[index] -= eps
        numeric = (loss(inputs=[up]) - loss(inputs=[down])) / (2 * eps)
        assert dX[0][index] == pytest.approx(numeric, rel=2e-2, abs=2e-3)


@pytest.mark.parametrize("layer_norm", [False, True])
def test_no_docs_and_docs_of_no_tokens(layer_norm):
    mix = build_scalar_mix(3, 6, layer_norm=layer_norm)
    mix.initialize()
    assert mix.predict([]) == []
    assert [y.shape for y in mix.predict([layers(n=0)])] == [(0, 6)]
    Y, backprop = mix([layers(n=0)], is_train=True)
    assert [y.shape for y in Y] == [(0, 6)]
    dX = backprop([numpy.zeros((0, 6), dtype="float32")])
    assert [d.shape for d in dX] == [(3, 0, 6)]
    assert mix.get_grad("s").shape == (3,) and mix.get_grad("gamma").shape == (1,)
    assert not mix.get_grad("s").any() and not mix.get_grad("gamma").any()  # and no NaN


def test_layer_norm_normalises_each_token():
    mix = build_scalar_mix(3, 6, layer_norm=True)
    mix.initialize()
    X = layers() * 10 + 3
    Y = mix.predict([X])[0]
    centered = X - X.mean(axis=-1, keepdims=True)
    normed = centered / numpy.sqrt((centered**2).mean(axis=-1, keepdims=True) + 1e-6)
    numpy.testing.assert_allclose(Y, normed.mean(axis=0), atol=1e-5)


def test_l2_pulls_weights_toward_the_average():
    mix = build_scalar_mix(3, 6, l2=0.5)
    mix.initialize()
    s = numpy.asarray([1.0, 0.0, -1.0], dtype="float32")
    mix.set_param("s", s)
    _, backprop = mix([layers()], is_train=True)
    backprop([numpy.zeros((5, 6), dtype="float32")])  # no task gradient: only the penalty
    numpy.testing.assert_allclose(mix.get_grad("s"), 2 * 0.5 * s, atol=1e-6)


def test_dropout_only_in_training():
    fix_random_seed(0)
    mix = build_scalar_mix(3, 6, dropout=0.5)
    mix.initialize()
    X = [layers()]
    assert (mix.predict(X)[0] != 0).all()
    assert (mix(X, is_train=True)[0][0] == 0).any()


def test_training_dropout_does_not_replace_the_configured_rate():
    """spaCy's update() calls set_dropout_rate(model, [training] dropout) on
    every node: the mix keeps its own rate (a listener's `dropout`)."""
    fix_random_seed(0)
    mix = build_scalar_mix(3, 6, dropout=0.5)
    mix.initialize()
    set_dropout_rate(mix, 0.0)
    X = [layers(n=400)]
    dropped = float((mix(X, is_train=True)[0][0] == 0).mean())
    assert 0.4 < dropped < 0.6


def test_layer_dropout_drops_whole_layers_only_in_training():
    fix_random_seed(0)
    mix = build_scalar_mix(3, 6, layer_dropout=0.6)
    mix.initialize()
    X = [layers()]
    average = X[0].mean(axis=0)
    numpy.testing.assert_allclose(mix.predict(X)[0], average, atol=1e-6)
    # Each training output is the average of a non-empty subset of the layers.
    subsets = [X[0][list(keep)].mean(axis=0) for keep in ((0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2))]
    seen_partial = False
    for _ in range(20):
        Y = mix(X, is_train=True)[0][0]
        matches = [numpy.allclose(Y, subset, atol=1e-5) for subset in subsets]
        assert any(matches)
        seen_partial |= not matches[-1]
    assert seen_partial


def test_no_input_gradient_when_the_bilm_is_frozen():
    mix = build_scalar_mix(3, 6)
    mix.initialize()
    mix.attrs["input_gradient"] = False
    _, backprop = mix([layers()], is_train=True)
    assert backprop([numpy.ones((5, 6), dtype="float32")]) == []
    assert numpy.abs(mix.get_grad("gamma")).sum() > 0


def test_bad_settings_and_shapes():
    with pytest.raises(ElmoError, match="dropout must be in"):
        build_scalar_mix(dropout=1.0)
    with pytest.raises(ElmoError, match="l2 must be >= 0"):
        build_scalar_mix(l2=-1)
    mix = build_scalar_mix(3, 6)
    mix.initialize()
    with pytest.raises(ElmoError, match="expects 3 layers, got an input with 2"):
        mix.predict([layers(n_layers=2)])
    with pytest.raises(ElmoError, match="expects vectors of width 6, got an input of width 4"):
        mix.predict([layers(width=4)])
    unsized = build_scalar_mix()
    with pytest.raises(ElmoError, match="does not know how many layers the biLM has"):
        unsized.initialize()


@pytest.mark.parametrize("layer_norm", [False, True])
def test_a_batch_is_mixed_in_one_pass_and_equals_each_doc_mixed_alone(monkeypatch, layer_norm):
    """One set of kernels per batch, not per doc (on a GPU each is a launch); per doc the
    same values and gradients as mixing that doc alone."""
    mix = build_scalar_mix(3, 6, layer_norm=layer_norm)
    mix.initialize()
    mix.set_param("s", numpy.asarray([0.3, -0.2, 0.5], dtype="float32"))
    docs = [layers(0, n=4), layers(1, n=0), layers(2, n=7).astype("float16")]
    alone = [mix.begin_update([X]) for X in docs]
    calls = []
    real = numpy.tensordot
    monkeypatch.setattr(numpy, "tensordot", lambda *a, **k: calls.append(1) or real(*a, **k))
    Ys, backprop = mix.begin_update(docs)
    assert len(calls) == 1
    dYs = [numpy.full_like(Y, 0.5) for Y in Ys]
    dXs = backprop(dYs)
    assert len(calls) == 2  # d(weights): one more for the whole batch
    for (Y_alone, backprop_alone), Y, dY, dX in zip(alone, Ys, dYs, dXs):
        numpy.testing.assert_allclose(Y, Y_alone[0], rtol=1e-6, atol=1e-7)
        numpy.testing.assert_allclose(dX, backprop_alone([dY])[0], rtol=1e-6, atol=1e-7)
