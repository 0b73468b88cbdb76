"""On a CUDA device (``pytest --gpu``; skipped without it): the biLM and the component
give the CPU's outputs. benchmarks/gpu_check.py runs these as one of its rows."""

import numpy
import pytest
import spacy

from spacy_elmo.bilm import ElmoBiLM
from spacy_elmo.errors import ElmoError
from spacy_elmo.layers.bilm_layer import get_bilm

from .conftest import make_nlp, tiny_bilm, zip_equal

pytestmark = pytest.mark.gpu
SENTENCES = [["The", "quick", "brown", "fox", "."], ["Naïve", "café"], ["A", "much", "longer", "sentence", "here", "."]]


@pytest.fixture
def weight_files(tmp_path):
    options, weights = tmp_path / "options.json", tmp_path / "weights.hdf5"
    tiny_bilm(seed=5).to_files(options, weights)
    return options, weights


@pytest.fixture
def spacy_gpu():
    """spaCy's GPU ops for the test (thinc's CupyOps need cupy), the CPU's again after it."""
    pytest.importorskip("cupy", reason="spaCy runs on a GPU through cupy")
    spacy.require_gpu(0)
    yield
    spacy.require_cpu()


def test_embed_batch_on_cuda_equals_cpu(weight_files):
    cpu = ElmoBiLM.from_files(*weight_files)
    gpu = ElmoBiLM.from_files(*weight_files, device="cuda")
    for a, b in zip_equal(cpu.embed_batch(SENTENCES), gpu.embed_batch(SENTENCES)):
        numpy.testing.assert_allclose(b, a, atol=1e-5)
    for a, b in zip_equal(cpu.embed_batch(SENTENCES, stateful=True), gpu.embed_batch(SENTENCES, stateful=True)):
        numpy.testing.assert_allclose(b, a, atol=1e-5)


def test_int8_is_refused_on_cuda(weight_files):
    with pytest.raises(ElmoError, match="int8"):
        ElmoBiLM.from_files(*weight_files, device="cuda", precision="int8").embed_batch(SENTENCES)


def test_the_component_runs_on_cuda_when_spacy_requires_the_gpu_before_building(weight_files, spacy_gpu):
    nlp = make_nlp(weight_files)
    nlp.initialize()
    bilm = get_bilm(nlp.get_pipe("elmo").model)
    assert bilm is not None and {p.device.type for p in bilm.parameters()} == {"cuda"}
    expected = ElmoBiLM.from_files(*weight_files).embed_batch(SENTENCES)
    for doc, want in zip_equal(list(nlp.pipe([" ".join(s) for s in SENTENCES])), expected):
        layers = doc._.elmo_layers
        numpy.testing.assert_allclose(layers.get() if hasattr(layers, "get") else layers, want, atol=1e-5)
