import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

from spacy_elmo.bilm import ElmoBiLM, ElmoOptions

DATA = Path(__file__).parent / "data"
REFERENCE = DATA / "bilm_tf_reference"


def pytest_addoption(parser):
    parser.addoption("--gpu", action="store_true", default=False, help="also run the tests marked gpu (needs CUDA)")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device; runs only with --gpu (benchmarks/gpu_check.py)")


def pytest_collection_modifyitems(config, items):
    """GPU tests run with ``--gpu`` where torch sees a CUDA device, and are skipped otherwise."""
    if config.getoption("--gpu") and torch.cuda.is_available():
        return
    reason = "needs --gpu" if not config.getoption("--gpu") else "no CUDA device"
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


def tiny_options(**overrides) -> ElmoOptions:
    """A random-weight biLM small enough for exact checks in milliseconds."""
    settings = dict(
        char_dim=4,
        filters=[(1, 4), (2, 6), (3, 8)],
        n_highway=2,
        projection_dim=8,
        lstm_dim=16,
        n_layers=2,
        cell_clip=3.0,
        proj_clip=3.0,
        use_skip_connections=True,
        activation="relu",
    )
    settings.update(overrides)
    return ElmoOptions(**settings)


def tiny_bilm(seed: int = 0, scale: float = 1.0, **overrides) -> ElmoBiLM:
    """Random weights, including non-zero biases, so every term is exercised."""
    torch.manual_seed(seed)
    model = ElmoBiLM(tiny_options(**overrides))
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(torch.randn_like(param) * scale * 0.5)
        model.char_encoder.char_embed[0].zero_()
    return model.eval()


@pytest.fixture
def reference_dir() -> Path:
    return REFERENCE


@pytest.fixture
def reference_bilm() -> ElmoBiLM:
    return ElmoBiLM.from_files(REFERENCE / "options.json", REFERENCE / "lm_weights.hdf5")


@pytest.fixture
def reference_sentences():
    return [[s.split() for s in group] for group in json.loads((REFERENCE / "sentences.json").read_text())]


# The pretraining tests' text: six sentences, repeated so a tiny biLM learns them.
PRETRAIN_SENTENCES = [
    "the cat sat on the mat .",
    "a dog ran to the big red house .",
    "she reads a long book every night .",
    "Zürich is a city in Switzerland .",
    "they walked home after the game .",
    "the small green tree grew tall .",
]


@pytest.fixture
def text_files(tmp_path):
    """A training text (the sentences 12 times) and a dev text (the first 3)."""
    train = tmp_path / "train.txt"
    train.write_text("\n".join(PRETRAIN_SENTENCES * 12) + "\n", encoding="utf8")
    dev = tmp_path / "dev.txt"
    dev.write_text("\n".join(PRETRAIN_SENTENCES[:3]) + "\n", encoding="utf8")
    return train, dev


def make_nlp(weight_files, **config):
    """A blank English pipeline with an ``elmo`` component on ``(options, weights)`` files."""
    import spacy

    nlp = spacy.blank("en")
    options, weights = weight_files
    nlp.add_pipe("elmo", config={"options_file": str(options), "weight_file": str(weights), **config})
    return nlp


def crash_embed_on_batch(monkeypatch, number: int):
    """Make ``ElmoBiLM.embed_batch`` raise KeyboardInterrupt (a kill) at its ``number``-th call;
    returns the original, to restore with ``monkeypatch.setattr(ElmoBiLM, "embed_batch", it)``."""
    original = ElmoBiLM.embed_batch
    calls = {"n": 0}

    def crashing(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == number:
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ElmoBiLM, "embed_batch", crashing)
    return original


def zip_equal(*sequences):
    """zip that fails when the lengths differ (zip(strict=True) needs Python 3.10; setup.py allows 3.9)."""
    lengths = [len(s) for s in sequences]
    assert len(set(lengths)) == 1, f"lengths differ: {lengths}"
    return zip(*sequences)


def _tmpfs(tmp_path, options):
    """A tmpfs mounted with ``options`` (root only), unmounted afterwards."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount)]).returncode:
        pytest.skip("needs root and tmpfs (the monkeypatched tests cover the rest)")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 64 KiB tmpfs: a disk that fills."""
    yield from _tmpfs(tmp_path, "size=64k")


@pytest.fixture
def read_only_tmpfs(tmp_path):
    """A read-only tmpfs: an output place not even root may write."""
    yield from _tmpfs(tmp_path, "ro,size=64k")
