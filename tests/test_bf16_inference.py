"""precision "bf16": close to fp32, refused before any weights load where bf16 is not native
(unless forced), and kept or overridden by a saved pipeline like int8.

This machine's CPU may have no native bf16: the tests that run bf16 force it
(``SPACY_ELMO_FORCE_BF16=1``; torch then emulates it, with the same rounding)."""

import numpy
import pytest
import spacy
import torch
from typer.testing import CliRunner

from spacy_elmo.bilm import ElmoBiLM, ElmoError, batch_char_ids, kernels
from spacy_elmo.bilm import precision as policy
from spacy_elmo.bilm.kernels import packed_linear as PackedLinear
from spacy_elmo.bilm.precision import FORCE_BF16_ENV
from spacy_elmo.cli import app
from spacy_elmo.cli import embed as embed_module

from .benchmark_modules import benchmark_module
from .conftest import make_nlp, tiny_bilm, zip_equal

layer_deviation = benchmark_module("layer_deviation").layer_deviation

SENTENCES = [["The", "cat", "sat", "."], ["A", "dog", "sat", "on", "the", "cat", "."], ["cat"]]
TEXT = "The cat sat on the mat ."


@pytest.fixture
def forced(monkeypatch):
    monkeypatch.setenv(FORCE_BF16_ENV, "1")


@pytest.fixture
def not_native(monkeypatch):
    """A CPU without native bf16, and no force."""
    monkeypatch.setattr(policy, "native_cpu_bf16", lambda: False)
    monkeypatch.delenv(FORCE_BF16_ENV, raising=False)


@pytest.fixture
def weight_files(tmp_path):
    tiny_bilm(seed=11, scale=0.3).to_files(tmp_path / "options.json", tmp_path / "weights.hdf5")
    return tmp_path / "options.json", tmp_path / "weights.hdf5"


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("with_bias,with_add", [(False, False), (True, False), (False, True), (True, True)])
def test_bf16_linear_is_close_to_fp32_and_returns_fp32(forced, packed, with_bias, with_add):
    torch.manual_seed(0)
    weight, x = torch.randn(24, 40), torch.randn(5, 24)
    bias = torch.randn(40) if with_bias else None
    add = torch.randn(5, 40) if with_add else None
    expected = x @ weight + (bias if with_bias else 0) + (add if with_add else 0)
    kernel = PackedLinear(weight, bias, "bf16", packed=packed)
    got = kernel(x, add=add)
    assert kernel.kind in ("bf16", "bf16-onednn") and got.dtype == torch.float32
    # inputs and weights rounded to 8 significant bits: ~0.4% of each product
    assert 0 < float((got - expected).abs().max()) < 0.02 * float(expected.abs().max())


@pytest.mark.parametrize("packed", [True, False])
def test_bf16_product_is_the_bf16_gemm_result_without_bias_and_fp32_kernels_refuse_it(forced, packed):
    torch.manual_seed(0)
    weight, x, bias = torch.randn(24, 40), torch.randn(5, 24), torch.randn(40)
    kernel = PackedLinear(weight, bias, "bf16", packed=packed)
    product = kernel.bf16_product(x)
    assert product.dtype == torch.bfloat16
    assert torch.equal(kernel(x), torch.add(bias, product))  # the call widens the same product
    with pytest.raises(ElmoError, match="bf16_product needs a bf16 kernel"):
        PackedLinear(weight, bias, "fp32").bf16_product(x)


def test_bf16_linear_falls_back_to_plain_where_onednn_cannot_pack(monkeypatch):
    """Claimed native on a CPU whose oneDNN has no bf16 kernels: plain bf16 mm, same values."""
    monkeypatch.setattr(policy, "native_cpu_bf16", lambda: True)

    def cannot_pack(*args):
        raise RuntimeError("no bf16 kernels here")

    monkeypatch.setattr(kernels, "_onednn_available", lambda: True)
    monkeypatch.setattr(torch.ops.mkldnn, "_reorder_linear_weight", cannot_pack, raising=False)
    weight, x = torch.randn(8, 6), torch.randn(3, 8)
    kernel = PackedLinear(weight, None, "bf16")
    assert kernel.kind == "bf16"
    torch.testing.assert_close(kernel(x), (x.bfloat16() @ weight.bfloat16()).float())


def test_bf16_tiny_bilm_is_close_to_fp32_and_switching_back_is_exact(forced, tmp_path):
    exact = tiny_bilm(seed=9, scale=0.3)
    exact.to_files(tmp_path / "options.json", tmp_path / "weights.hdf5")
    half = ElmoBiLM.from_dir(tmp_path, precision="bf16")
    assert half.precision == "bf16"
    want, got = exact.embed_batch(SENTENCES), half.embed_batch(SENTENCES)
    assert all(g.dtype == numpy.float32 for g in got)
    deviation = layer_deviation(want, got)
    # measured (emulated, AVX2): max abs 0.00051 / 0.00061 / 0.00080 (layers 0 / 1 / 2; values
    # up to 0.18), mean cosine >= 0.999993
    assert all(1e-5 < max_abs < 0.002 and cosine >= 0.999 for max_abs, cosine in deviation), deviation
    half.set_precision("fp32")
    for w, g in zip_equal(want, half.embed_batch(SENTENCES)):
        numpy.testing.assert_allclose(g, w, atol=1e-6)


def test_bf16_on_the_reference_biLM_is_close_to_fp32(forced, reference_dir, reference_sentences):
    sentences = [s for group in reference_sentences for s in group[:4]]
    exact = ElmoBiLM.from_files(reference_dir / "options.json", reference_dir / "lm_weights.hdf5")
    half = ElmoBiLM.from_files(reference_dir / "options.json", reference_dir / "lm_weights.hdf5", precision="bf16")
    deviation = layer_deviation(exact.embed_batch(sentences), half.embed_batch(sentences))
    # measured (emulated, AVX2; 12 sentences, 334 tokens): max abs 0.0148 / 0.0123 / 0.0154
    # (layers 0 / 1 / 2; values up to 7.1 / 3.0 / 4.6), mean cosine >= 0.999995
    assert all(1e-4 < max_abs < 0.04 and cosine >= 0.999 for max_abs, cosine in deviation), deviation


def test_bf16_inference_ignores_gradients_mode_for_training(forced):
    """Autograd always runs fp32: bf16 copies are for inference only."""
    model = tiny_bilm(seed=10, scale=0.3)
    ids, lengths = (torch.from_numpy(a) for a in batch_char_ids(SENTENCES))
    fp32 = model(ids, lengths).detach()
    model.set_precision("bf16")
    with_grad = model(ids, lengths)
    assert with_grad.requires_grad
    torch.testing.assert_close(with_grad.detach(), fp32, atol=1e-6, rtol=0)


def test_bf16_is_refused_before_any_weights_load_where_not_native(not_native, tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(ElmoError, match=f"precision 'bf16' needs native bf16.*{FORCE_BF16_ENV}=1"):
        ElmoBiLM.from_files(missing / "options.json", missing / "weights.hdf5", precision="bf16")
    with pytest.raises(ElmoError, match="neither AVX512-BF16 nor AMX"):
        ElmoBiLM.from_dir(tmp_path, precision="bf16")  # the directory holds no biLM: not read
    model = tiny_bilm()
    with pytest.raises(ElmoError, match="precision 'bf16' needs native bf16"):
        model.set_precision("bf16")
    assert model.precision == "fp32"


def test_bf16_is_accepted_when_forced_or_native(monkeypatch, weight_files):
    monkeypatch.setattr(policy, "native_cpu_bf16", lambda: False)
    monkeypatch.setenv(FORCE_BF16_ENV, "1")
    assert ElmoBiLM.from_files(*weight_files, precision="bf16").precision == "bf16"
    monkeypatch.setenv(FORCE_BF16_ENV, "0")  # "0" is not a force
    with pytest.raises(ElmoError, match="needs native bf16"):
        ElmoBiLM.from_files(*weight_files, precision="bf16")
    monkeypatch.setattr(policy, "native_cpu_bf16", lambda: True)
    model = ElmoBiLM.from_files(*weight_files, precision="bf16")
    assert model.precision == "bf16" and model.embed_batch(SENTENCES[:1])[0].shape == (3, 4, 16)


def test_the_component_refuses_bf16_before_any_weights_load(not_native, weight_files, monkeypatch):
    from spacy_elmo.pipeline import elmo as elmo_module

    monkeypatch.setattr(elmo_module, "resolve_bilm", lambda **kwargs: pytest.fail("weights were loaded"))
    with pytest.raises(ElmoError, match=f"elmo precision 'bf16' needs native bf16.*{FORCE_BF16_ENV}=1"):
        make_nlp(weight_files, precision="bf16")


def test_embed_refuses_bf16_before_any_weights_load(not_native, tmp_path, monkeypatch):
    text = tmp_path / "input.txt"
    text.write_text("a b\n", encoding="utf8")
    monkeypatch.setattr(embed_module, "load_bilm", lambda **kwargs: pytest.fail("weights were loaded"))
    result = CliRunner().invoke(app, ["embed", str(text), str(tmp_path / "o.hdf5"), "--precision", "bf16"])
    assert result.exit_code == 1 and "--precision 'bf16' needs native bf16" in result.output
    assert FORCE_BF16_ENV in result.output and len(result.output.strip().splitlines()) == 1


def test_embed_runs_bf16_when_forced(forced, tmp_path, weight_files):
    import h5py

    text = tmp_path / "input.txt"
    text.write_text("The cat sat .\nA dog .\n", encoding="utf8")
    outputs = {}
    for precision in ("fp32", "bf16"):
        out = tmp_path / f"{precision}.hdf5"
        args = [
            "embed",
            str(text),
            str(out),
            "--options-file",
            str(weight_files[0]),
            "--weight-file",
            str(weight_files[1]),
            "--precision",
            precision,
        ]
        assert CliRunner().invoke(app, args).exit_code == 0
        with h5py.File(out, "r") as f:
            outputs[precision] = f["0"][...]
    assert outputs["bf16"].dtype == numpy.float32
    assert 1e-5 < numpy.abs(outputs["bf16"] - outputs["fp32"]).max() < 0.005


def test_the_component_runs_bf16_and_keeps_it_after_saving(forced, tmp_path, weight_files):
    exact = make_nlp(weight_files)(TEXT)._.elmo_layers
    nlp = make_nlp(weight_files, precision="bf16")
    half = nlp(TEXT)._.elmo_layers
    assert half.dtype == numpy.float32 and 1e-5 < numpy.abs(exact - half).max() < 0.005
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.get_pipe("elmo").cfg["precision"] == "bf16"
    numpy.testing.assert_allclose(loaded(TEXT)._.elmo_layers, half, atol=1e-6)


def test_a_saved_bf16_pipeline_loads_as_fp32_where_bf16_is_not_native(forced, tmp_path, weight_files, monkeypatch):
    make_nlp(weight_files, precision="bf16").to_disk(tmp_path / "pipeline")
    monkeypatch.setattr(policy, "native_cpu_bf16", lambda: False)
    monkeypatch.delenv(FORCE_BF16_ENV)
    with pytest.raises(ElmoError, match="elmo precision 'bf16' needs native bf16"):
        spacy.load(tmp_path / "pipeline")
    nlp = spacy.load(tmp_path / "pipeline", config={"components": {"elmo": {"precision": "fp32"}}})
    numpy.testing.assert_allclose(nlp(TEXT)._.elmo_layers, make_nlp(weight_files)(TEXT)._.elmo_layers, atol=1e-6)
