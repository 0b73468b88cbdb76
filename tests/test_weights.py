"""options.json + weights.hdf5: round trips and clear errors for bad files."""

import json
import shutil
from pathlib import Path

import h5py
import numpy
import pytest

from spacy_elmo.bilm import ElmoBiLM, ElmoOptions, ElmoOptionsError, ElmoWeightsError, preset
from spacy_elmo.bilm.tf_layout import expected_shapes
from spacy_elmo.errors import ElmoFileNotFoundError

from .conftest import tiny_bilm

SENTENCES = [["Round", "trip", "."], ["Ünïcode", "ok"]]


@pytest.fixture
def saved(tmp_path):
    model = tiny_bilm(seed=11)
    options, weights = tmp_path / "options.json", tmp_path / "weights.hdf5"
    model.to_files(options, weights)
    return model, options, weights


def test_written_files_load_back_identically(saved):
    model, options, weights = saved
    loaded = ElmoBiLM.from_files(options, weights)
    assert not loaded.training
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch_equal(a, b), name
    for a, b in zip(model.embed_batch(SENTENCES), loaded.embed_batch(SENTENCES)):
        numpy.testing.assert_array_equal(a, b)


def torch_equal(a, b):
    return bool((a == b).all())


def test_written_layout_is_bilm_tf(saved):
    model, _, weights = saved
    with h5py.File(weights, "r") as f:
        names = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        shapes = {n: f[n].shape for n in names}
        assert all(f[n].dtype == numpy.float32 for n in names)
        assert all(len(f[n].attrs) == 0 for n in names)
    assert shapes == {k: v[0] for k, v in expected_shapes(model.options).items()}
    assert shapes["char_embed"] == (261, 4)
    assert shapes["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0"] == (16, 64)


def test_reference_files_round_trip_exactly(reference_dir, tmp_path):
    model = ElmoBiLM.from_files(reference_dir / "options.json", reference_dir / "lm_weights.hdf5")
    model.to_files(tmp_path / "o.json", tmp_path / "w.hdf5")
    with h5py.File(reference_dir / "lm_weights.hdf5", "r") as a, h5py.File(tmp_path / "w.hdf5", "r") as b:
        for name in expected_shapes(model.options):
            numpy.testing.assert_array_equal(a[name][...], b[name][...])
    original = json.loads((reference_dir / "options.json").read_text())
    assert json.loads((tmp_path / "o.json").read_text()) == original


def test_options_keep_unknown_keys_and_accept_261_chars(tmp_path, saved):
    _, options, weights = saved
    data = json.loads(options.read_text())
    data["char_cnn"]["n_characters"] = 261
    data["n_tokens_vocab"] = 793471
    data["lstm"]["dropout"] = 0.1
    options.write_text(json.dumps(data))
    loaded = ElmoBiLM.from_files(options, weights)
    loaded.to_files(tmp_path / "again.json", tmp_path / "again.hdf5")
    again = json.loads((tmp_path / "again.json").read_text())
    assert again["n_tokens_vocab"] == 793471 and again["lstm"]["dropout"] == 0.1
    assert again["char_cnn"]["n_characters"] == 261


def test_published_sizes():
    assert sum(p.numel() for p in ElmoBiLM(preset("original")).parameters()) == pytest.approx(93.6e6, rel=0.002)
    assert sum(p.numel() for p in ElmoBiLM(preset("small")).parameters()) == pytest.approx(13.6e6, rel=0.005)


# -- errors --------------------------------------------------------------
def test_missing_files(saved, tmp_path):
    _, options, weights = saved
    with pytest.raises(ElmoFileNotFoundError, match="options file not found: .*nope.json"):
        ElmoBiLM.from_files(tmp_path / "nope.json", weights)
    with pytest.raises(FileNotFoundError, match="weight file not found: .*nope.hdf5"):
        ElmoBiLM.from_files(options, tmp_path / "nope.hdf5")
    (tmp_path / "empty").mkdir()
    with pytest.raises(
        ElmoFileNotFoundError,
        match=r"^biLM directory .*empty has no options.json and no weights.hdf5: "
        r"a biLM directory holds options.json and weights.hdf5",
    ):
        ElmoBiLM.from_dir(tmp_path / "empty")
    with pytest.raises(ElmoFileNotFoundError, match="biLM directory not found .*: .*nowhere"):
        ElmoBiLM.from_dir(tmp_path / "nowhere")


def test_unparsable_options(saved):
    _, options, weights = saved
    options.write_text('{"lstm": {"dim": 16,}')
    with pytest.raises(ElmoOptionsError, match=r"options.json: options file is not valid JSON \(line 1") as info:
        ElmoBiLM.from_files(options, weights)
    assert isinstance(info.value.__cause__, json.JSONDecodeError)  # the cause kept for the traceback


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda d: d["lstm"].pop("projection_dim"), "missing option 'lstm.projection_dim'"),
        (lambda d: d.pop("char_cnn"), "missing section 'char_cnn'"),
        (lambda d: d["lstm"].update(dim=-4), "option 'lstm.dim' must be a positive integer, got -4"),
        (lambda d: d["char_cnn"].update(activation="gelu"), "option 'char_cnn.activation' must be one of"),
        (lambda d: d["char_cnn"].update(n_characters=300), "option 'char_cnn.n_characters' must be 261"),
        (lambda d: d["char_cnn"].update(filters=[[1]]), "option 'char_cnn.filters' must be a list of"),
        (lambda d: d["lstm"].update(cell_clip=-1), "option 'lstm.cell_clip' must be a finite number >= 0"),
        (lambda d: d["lstm"].update(cell_clip=float("nan")), r"option 'lstm.cell_clip' must be .*got nan"),
        (lambda d: d["lstm"].update(proj_clip=float("inf")), r"option 'lstm.proj_clip' must be .*got inf"),
    ],
)
def test_invalid_options_name_the_option(saved, edit, message):
    _, options, weights = saved
    data = json.loads(options.read_text())
    edit(data)
    options.write_text(json.dumps(data))
    with pytest.raises(ElmoOptionsError, match=message) as info:
        ElmoBiLM.from_files(options, weights)
    assert str(options) in str(info.value)


def test_not_hdf5(saved, tmp_path):
    _, options, _ = saved
    fake = tmp_path / "model.tar.gz"
    fake.write_bytes(b"\x1f\x8b" + bytes(100))
    with pytest.raises(ElmoWeightsError, match=r"model.tar.gz: not an HDF5 file"):
        ElmoBiLM.from_files(options, fake)


def test_truncated_hdf5(saved, tmp_path):
    _, options, weights = saved
    truncated = tmp_path / "truncated.hdf5"
    data = weights.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ElmoWeightsError, match=r"truncated.hdf5: .*(truncated|cannot be read)") as info:
        ElmoBiLM.from_files(options, truncated)
    assert isinstance(info.value.__cause__, OSError)


def test_missing_dataset(saved):
    _, options, weights = saved
    with h5py.File(weights, "a") as f:
        del f["CNN_high_1/W_carry"]
    with pytest.raises(ElmoWeightsError, match=r"dataset 'CNN_high_1/W_carry' is missing \(needed by .*options.json"):
        ElmoBiLM.from_files(options, weights)


def test_shape_mismatch_names_both_shapes(saved):
    _, options, weights = saved
    data = json.loads(options.read_text())
    data["lstm"]["dim"] = 32
    options.write_text(json.dumps(data))
    with pytest.raises(ElmoWeightsError) as info:
        ElmoBiLM.from_files(options, weights)
    message = str(info.value)
    assert "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0" in message
    assert "(16, 64)" in message and "(16, 128)" in message and "lstm.dim=32" in message


def test_options_describing_a_smaller_model(saved):
    _, options, weights = saved
    data = json.loads(options.read_text())
    data["lstm"]["n_layers"] = 1
    options.write_text(json.dumps(data))
    with pytest.raises(ElmoWeightsError, match=r"Cell1/.*not described by .*'lstm.n_layers'"):
        ElmoBiLM.from_files(options, weights)


def test_non_finite_weights(saved):
    _, options, weights = saved
    with h5py.File(weights, "a") as f:
        f["CNN_proj/b_proj"][0] = numpy.nan
    with pytest.raises(ElmoWeightsError, match="CNN_proj/b_proj' contains NaN"):
        ElmoBiLM.from_files(options, weights)


def test_failed_write_keeps_the_old_file(saved, monkeypatch):
    model, _, weights = saved
    before = weights.read_bytes()

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(h5py.Group, "create_dataset", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        model.to_files(weights.with_suffix(".json"), weights)
    assert weights.read_bytes() == before
    assert sorted(p.name for p in weights.parent.iterdir()) == ["options.json", "weights.hdf5"]


def test_options_from_dict_validates_source_name():
    with pytest.raises(ElmoOptionsError, match="my.json: expected a JSON object"):
        ElmoOptions.from_dict([1, 2], source="my.json")


def test_unknown_preset():
    with pytest.raises(ElmoOptionsError, match="unknown preset 'huge'"):
        preset("huge")


def test_loading_opens_the_weight_file_read_only(reference_dir, tmp_path, monkeypatch):
    """Loading never writes to the weight file: it opens it in mode "r" only, so a
    read-only copy loads and the bytes are untouched (a chmod alone proves nothing as root)."""
    target = tmp_path / "ro.hdf5"
    shutil.copy(reference_dir / "lm_weights.hdf5", target)
    target.chmod(0o444)
    before = target.read_bytes()
    opened = []
    real_file = h5py.File

    def recording_file(name, mode="r", *args, **kwargs):
        opened.append((Path(name), mode))
        return real_file(name, mode, *args, **kwargs)

    monkeypatch.setattr(h5py, "File", recording_file)
    ElmoBiLM.from_files(reference_dir / "options.json", target)
    assert opened and all(mode == "r" for _, mode in opened), opened
    assert target in {path for path, _ in opened}
    assert target.read_bytes() == before


def test_float16_files_are_half_size_and_load(saved, tmp_path):
    model, _, weights = saved
    model.to_files(tmp_path / "h.json", tmp_path / "h.hdf5", dtype="float16")
    with h5py.File(tmp_path / "h.hdf5", "r") as f:
        assert f["CNN_proj/W_proj"].dtype == numpy.float16
    half = ElmoBiLM.from_files(tmp_path / "h.json", tmp_path / "h.hdf5")
    for a, b in zip(model.embed_batch(SENTENCES), half.embed_batch(SENTENCES)):
        numpy.testing.assert_allclose(a, b, atol=0.05)
    with pytest.raises(ElmoWeightsError, match="float32 or float16, not 'int8'"):
        model.to_files(tmp_path / "x.json", tmp_path / "x.hdf5", dtype="int8")


def test_written_file_has_ordinary_permissions(saved, tmp_path):
    """Atomic writing goes through a private temporary file; the result is not private."""
    import os
    import stat

    _, _, weights = saved
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    assert stat.S_IMODE(os.stat(weights).st_mode) == stat.S_IMODE(os.stat(plain).st_mode)
