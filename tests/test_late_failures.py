"""Bad sizes, damaged saved pipelines and resume files, a full disk: each fails at
once with one line naming the file and what is wrong, before any allocation or work."""
import json

import pytest

from spacy_elmo.bilm import ElmoBiLM, ElmoOptions, ElmoOptionsError, ElmoWeightsError
from spacy_elmo.bilm.weights import MAX_PARAMETERS, n_parameters

from .conftest import tiny_bilm, tiny_options


@pytest.fixture
def bilm_files(tmp_path):
    options, weights = tmp_path / "options.json", tmp_path / "weights.hdf5"
    tiny_bilm().to_files(options, weights)
    return options, weights


def _set_option(options_file, section: str, name: str, value) -> None:
    data = json.loads(options_file.read_text())
    data[section][name] = value
    options_file.write_text(json.dumps(data))


@pytest.mark.parametrize("name,value", [("projection_dim", 10**9), ("dim", 10**7), ("n_layers", 10**6)])
def test_absurd_sizes_fail_at_once_naming_the_file_and_option(bilm_files, monkeypatch, name, value):
    options, weights = bilm_files
    _set_option(options, "lstm", name, value)
    monkeypatch.setattr(ElmoBiLM, "__init__", lambda *a, **k: pytest.fail("a model was allocated"))
    with pytest.raises(ElmoOptionsError) as err:
        ElmoBiLM.from_files(options, weights)
    message = str(err.value)
    assert "\n" not in message
    assert str(options) in message and f"'lstm.{name}'" in message and "sane bound" in message


def test_sizes_within_bounds_are_checked_against_the_weight_file_before_allocating(bilm_files, monkeypatch):
    options, weights = bilm_files
    _set_option(options, "lstm", "dim", 60000)  # sane, but not what the file holds
    monkeypatch.setattr(ElmoBiLM, "__init__", lambda *a, **k: pytest.fail("a model was allocated"))
    with pytest.raises(ElmoWeightsError) as err:
        ElmoBiLM.from_files(options, weights)
    assert "\n" not in str(err.value)
    assert str(weights) in str(err.value) and "lstm.dim=60000" in str(err.value)


def test_sizes_that_multiply_out_too_large_are_refused_before_allocating():
    options = tiny_options(lstm_dim=65536, projection_dim=16384, n_layers=2)
    assert n_parameters(options) > MAX_PARAMETERS
    with pytest.raises(ElmoOptionsError, match="above the sane bound 1,000,000,000"):
        ElmoBiLM(options)
    expected = 261 * 4 + (1 * 4 * 4 + 4) + (2 * 4 * 6 + 6) + (3 * 4 * 8 + 8)  # char embedding + CNN
    expected += 2 * 2 * (18 * 18 + 18)  # two highway layers (transform, carry)
    expected += 18 * 8 + 8  # projection
    expected += 2 * 2 * (16 * 64 + 64 + 16 * 8)  # 2 directions x 2 layers: W, B, W_P
    assert n_parameters(tiny_options()) == expected
    # The module holds one more character row (the padding id's zeros, not in the file).
    assert sum(p.numel() for p in tiny_bilm().parameters()) == expected + 4


def test_the_published_sizes_are_within_the_bounds():
    from spacy_elmo.bilm import preset

    assert n_parameters(preset("original")) < MAX_PARAMETERS
    ElmoOptions.from_dict(preset("original").to_dict())  # no error
