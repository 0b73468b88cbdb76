"""Where precision and device are decided, without a GPU: CUDA's capabilities monkeypatched."""

import pytest
import spacy
import torch

from spacy_elmo.bilm import ElmoError, precision
from spacy_elmo.layers import bilm_layer


def fake_cuda(monkeypatch, capabilities):
    """GPUs with these compute capabilities; torch.cuda.is_bf16_supported says yes to all (as it
    does for emulated bf16 on a V100 or T4) and looks at the current device only."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(capabilities))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: capabilities[index or 0])
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)


def test_native_bf16_is_the_given_gpus_own_and_excludes_emulation(monkeypatch):
    fake_cuda(monkeypatch, {0: (9, 0), 1: (7, 0), 2: (7, 5), 3: (8, 6)})  # H100, V100, T4, A-series
    assert precision.native_bf16("cuda") and precision.native_bf16("cuda:0") and precision.native_bf16("cuda:3")
    assert not precision.native_bf16("cuda:1")
    assert not precision.native_bf16(torch.device("cuda", 2))
    monkeypatch.delenv(precision.FORCE_BF16_ENV, raising=False)
    with pytest.raises(ElmoError, match="'bf16' needs native bf16"):
        precision.check_precision("bf16", device="cuda:1")
    precision.check_precision("bf16", device="cuda:0")


def test_pretraining_auto_precision_takes_emulated_bf16_for_fp32(monkeypatch):
    from spacy_elmo.pretrain.train import resolve_precision

    fake_cuda(monkeypatch, {0: (7, 0)})
    assert resolve_precision("auto", torch.device("cuda:0")) == "fp32"


def test_int8_on_a_gpu_is_refused_when_the_component_is_built(monkeypatch):
    monkeypatch.setattr(bilm_layer, "get_torch_default_device", lambda: torch.device("cuda", 0))
    nlp = spacy.blank("en")
    with pytest.raises(ElmoError, match="'int8' runs on the CPU only"):
        nlp.add_pipe("elmo", config={"precision": "int8"})  # not at the first predict
    assert "elmo" not in nlp.pipe_names
