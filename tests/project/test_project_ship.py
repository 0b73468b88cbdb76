"""ship: a pretrained biLM becomes the package's default weights (float16, size-capped)."""
from pathlib import Path

import h5py
import numpy
import pytest

from spacy_elmo.bilm import ElmoBiLM
from spacy_elmo.pretrain import load_config, pretrain
from spacy_elmo.project import ProjectDataError
from spacy_elmo.project.ship import ship

TINY = Path(__file__).parent.parent.parent / "configs" / "pretrain_tiny.cfg"


def test_ship_writes_float16_weights_with_provenance(tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat .\na dog ran home .\n" * 20, encoding="utf8")
    bilm_dir = tmp_path / "bilm"
    pretrain(load_config(TINY, {"paths.train": str(text), "training.max_steps": 3}), bilm_dir, progress=False)
    dest = ship(bilm_dir, tmp_path / "default_bilm")
    assert sorted(p.name for p in dest.iterdir()) == ["options.json", "provenance.json", "weights.hdf5"]
    with h5py.File(dest / "weights.hdf5", "r") as f:
        assert f["CNN_proj/W_proj"].dtype == numpy.float16
    provenance = (dest / "provenance.json").read_text()
    assert '"steps": 3' in provenance and "[training]" in provenance
    original = ElmoBiLM.from_dir(bilm_dir).embed_batch([["the", "cat"]])[0]
    shipped = ElmoBiLM.from_dir(dest).embed_batch([["the", "cat"]])[0]
    assert numpy.allclose(original, shipped, atol=2e-2) and not numpy.array_equal(original, shipped)
    with pytest.raises(ProjectDataError, match="over the 0.0001 MB limit"):
        ship(bilm_dir, tmp_path / "too_big", max_mb=0.0001)
    assert not (tmp_path / "too_big").exists()
