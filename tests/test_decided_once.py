"""Decisions made once, where they are made (issue 75 item 4), and the public-torch fallback
of the fast kernels (issue 74 item 3): neither changes a result."""

import pytest
import spacy
import torch
from spacy.tokens import Doc

from spacy_elmo.bilm import ElmoBiLM, ElmoError, batch_char_ids, elmo_bilm, kernels, precision, private_torch
from spacy_elmo.layers import bilm_layer
from spacy_elmo.layers.bilm_layer import adopt_loaded_bilm, build_bilm_model, forget_bilm, get_bilm, set_bilm

from .conftest import tiny_bilm

SENTENCES = [["The", "cat", "sat", "."], ["A", "dog", "sat", "on", "the", "cat", "."], ["cat"]]


def _counting(monkeypatch, module, name, calls):
    original = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(name)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)


def _docs():
    vocab = spacy.blank("en").vocab
    return [Doc(vocab, words=words) for words in SENTENCES]


def test_a_training_step_checks_no_precision_and_decides_training_once_per_forward(monkeypatch):
    """Failed before: the kernels checked the precision's name four times per layer and
    direction (fused forward and backward), the layer ran the fine-tuning rule per batch, and
    the type cache, the char encoder and every LSTM layer each asked autograd again."""
    model = build_bilm_model(None)
    set_bilm(model, tiny_bilm(seed=3, scale=0.3))
    checks: list = []
    _counting(monkeypatch, precision, "check_precision", checks)
    _counting(monkeypatch, elmo_bilm, "check_precision", checks)
    _counting(monkeypatch, bilm_layer, "refuse_inference_only_fine_tuning", checks)
    asked: list = []
    _counting(monkeypatch, torch, "is_grad_enabled", asked)
    forwards: list = []
    _counting(monkeypatch, ElmoBiLM, "forward", forwards)
    layers, backprop = model.begin_update(_docs())
    decisions = len(asked)
    backprop([model.ops.alloc(layer.shape) + 1 for layer in layers])
    assert checks == []
    assert decisions == len(forwards) >= 1
    assert get_bilm(model).char_encoder.highway_weights[0].grad is not None


def test_a_load_applies_the_precision_once():
    """Failed before: the load's callback and then set_bilm each applied it (twice)."""
    saved = build_bilm_model(None)
    set_bilm(saved, tiny_bilm(seed=4, scale=0.3))
    bilm_layer.set_precision(saved, "int8")
    data = saved.to_bytes()
    loading = build_bilm_model(None)
    bilm_layer.set_precision(loading, "int8")
    applied: list = []
    original = ElmoBiLM._use_precision

    def counted(self, resolved):
        applied.append(resolved)
        original(self, resolved)

    ElmoBiLM._use_precision = counted  # type: ignore[method-assign]
    try:
        forget_bilm(loading)
        loading.from_bytes(data)
        adopt_loaded_bilm(loading)
    finally:
        ElmoBiLM._use_precision = original  # type: ignore[method-assign]
    assert applied == [precision.Precision.INT8]
    assert get_bilm(loading).precision == "int8"
    docs = _docs()
    for got, want in zip(loading.predict(docs), saved.predict(docs)):
        assert (got == want).all()


def _embedded(model: ElmoBiLM) -> torch.Tensor:
    ids, lengths = (torch.from_numpy(a) for a in batch_char_ids(SENTENCES))
    with torch.no_grad():
        return model(ids, lengths)


def _trained(model: ElmoBiLM):
    ids, lengths = (torch.from_numpy(a) for a in batch_char_ids(SENTENCES))
    out = model(ids, lengths)
    out.square().sum().backward()
    return out.detach(), [param.grad.clone() for param in model.parameters()]


def test_without_torch_s_private_functions_the_public_calls_give_the_same_results(monkeypatch):
    """Failed before: there was no capability check (``private_torch`` did not exist)."""
    fast = tiny_bilm(seed=6, scale=0.3)
    fast_out, (fast_trained, fast_grads) = _embedded(fast), _trained(fast)
    if precision.int8_available():
        fast.set_precision("int8")
        assert _embedded(fast).shape == fast_out.shape  # the int8 fast path runs here
    monkeypatch.setattr(private_torch, "available", lambda: private_torch.NONE)
    public = tiny_bilm(seed=6, scale=0.3)
    assert kernels.packed_linear(torch.randn(4, 3)).kind == "plain"
    torch.testing.assert_close(_embedded(public), fast_out, atol=1e-6, rtol=0)
    public_trained, public_grads = _trained(public)
    torch.testing.assert_close(public_trained, fast_trained, atol=1e-6, rtol=0)
    for got, want in zip(public_grads, fast_grads):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    # torch has no public int8 GEMM: int8 is refused where it is chosen, by name
    with pytest.raises(ElmoError, match="'int8' needs a torch build"):
        public.set_precision("int8")
    assert not precision.native_cpu_bf16()  # bf16 would run emulated, so only when forced


def test_training_without_aten_s_activation_backwards_takes_the_public_calls(monkeypatch):
    """The BPTT's one-pass sigmoid/tanh gradients (torch.ops.aten) were read at import, outside
    the capability check: without them, public calls give the same gradients."""
    from spacy_elmo.bilm import lstm

    fast_out, fast_grads = _trained(tiny_bilm(seed=7, scale=0.3))
    monkeypatch.setattr(private_torch, "available", lambda: private_torch.NONE)
    calls = []
    public_tanh_backward = lstm._public_tanh_backward
    monkeypatch.setattr(lstm, "_public_tanh_backward", lambda *args: calls.append(1) or public_tanh_backward(*args))
    public_out, public_grads = _trained(tiny_bilm(seed=7, scale=0.3))
    assert calls  # the public gradients ran (one per step and direction)
    torch.testing.assert_close(public_out, fast_out, atol=1e-6, rtol=0)
    for got, want in zip(public_grads, fast_grads):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
