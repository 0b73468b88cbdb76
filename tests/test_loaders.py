"""loaders.resolve_bilm: the one road from a component's config to its biLM."""

import pytest

import spacy_elmo.loaders as loaders
from spacy_elmo.errors import ElmoNoWeightsError

from .conftest import tiny_bilm


def test_a_loader_comes_first_then_the_named_files_then_the_bundled_biLM(tmp_path, monkeypatch):
    bundled, named = tiny_bilm(seed=1), tiny_bilm(seed=2, lstm_dim=12)
    bundled.to_files(tmp_path / "bundled" / "options.json", tmp_path / "bundled" / "weights.hdf5")
    named.to_files(tmp_path / "named" / "options.json", tmp_path / "named" / "weights.hdf5")
    monkeypatch.setattr(loaders, "DEFAULT_BILM_DIR", tmp_path / "bundled")
    given = tiny_bilm(seed=3)
    assert loaders.resolve_bilm(bilm_dir=str(tmp_path / "named"), loader=lambda: given) is given
    assert loaders.resolve_bilm(bilm_dir=str(tmp_path / "named")).options == named.options
    files = {
        "options_file": str(tmp_path / "named" / "options.json"),
        "weight_file": str(tmp_path / "named" / "weights.hdf5"),
    }
    assert loaders.resolve_bilm(**files).options == named.options
    assert loaders.resolve_bilm().options == bundled.options


def test_a_missing_bundled_biLM_is_worded_once_for_the_component_and_the_default_loader(tmp_path, monkeypatch):
    monkeypatch.setattr(loaders, "DEFAULT_BILM_DIR", tmp_path / "missing")
    with pytest.raises(ElmoNoWeightsError) as component:
        loaders.resolve_bilm(name="elmo")
    with pytest.raises(ElmoNoWeightsError) as loader:
        loaders.default_weights_v1()()
    assert str(component.value) == str(loader.value)
    assert "The 'elmo' component has no biLM weights" in str(loader.value)
    assert str(tmp_path / "missing") in str(loader.value)
