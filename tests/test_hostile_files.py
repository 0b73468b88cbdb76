"""options.json and weights.hdf5 built to break the readers (issue 61): each is a one-line
error naming the file, never a traceback or another file's bytes."""

import json

import h5py
import numpy
import pytest

from spacy_elmo.bilm import ElmoOptions
from spacy_elmo.errors import ElmoOptionsError, ElmoWeightsError
from spacy_elmo.formats.bilm_tf import read_weights

from .conftest import tiny_bilm, tiny_options


def options_text(**replace) -> str:
    """A valid options.json whose values ``replace`` swaps for raw JSON text."""
    data = tiny_options().to_dict()
    marks = {}
    for number, (section, name) in enumerate(key.split(".") for key in replace):
        data[section][name] = f"@{number}@"
        marks[f'"@{number}@"'] = list(replace.values())[number]
    text = json.dumps(data)
    for mark, raw in marks.items():
        text = text.replace(mark, raw)
    return text


@pytest.mark.parametrize(
    "raw,reason",
    [
        ("9" * 5000, "an integer of more than 4300 digits"),
        ("[" * 100_000 + "]" * 100_000, "nested deeper than 100 levels"),
        ("[" * 900 + "]" * 900, "nested deeper than 100 levels"),  # parses, but deep copies would fail
    ],
)
def test_an_options_file_built_to_break_the_parser_is_one_line_naming_it(tmp_path, raw, reason):
    path = tmp_path / "options.json"
    path.write_text(options_text(**{"lstm.dim": raw}), encoding="utf8")
    with pytest.raises(ElmoOptionsError) as err:
        ElmoOptions.from_file(path)
    message = str(err.value)
    assert message.startswith(f"{path}: options file is not valid JSON (") and reason in message
    assert "\n" not in message and len(message) < 300


def test_options_nested_too_deeply_are_refused_from_a_dict_too():
    deep: list = []
    for _ in range(900):
        deep = [deep]
    data = {**tiny_options().to_dict(), "extra_setting": deep}
    with pytest.raises(ElmoOptionsError, match=r"^the saved biLM: options nested deeper than 100 levels"):
        ElmoOptions.from_dict(data, source="the saved biLM")


NAME = "CNN_proj/b_proj"  # the dataset the tests replace


def weight_file_with(tmp_path, kind):
    """The tiny biLM's weight file whose dataset NAME is ``kind``: a link, or data kept
    in another file (all 7.0), where a plain weight file holds its own bytes."""
    bilm = tiny_bilm(seed=3)
    arrays = bilm.tf_arrays()
    shape, sevens = arrays[NAME].shape, numpy.full(arrays[NAME].shape, 7.0, numpy.float32)
    other, raw = tmp_path / "other.hdf5", tmp_path / "raw.bin"
    with h5py.File(other, "w") as f:
        f["b"] = sevens
    sevens.tofile(raw)
    path = tmp_path / f"{kind}.hdf5"
    with h5py.File(path, "w") as f:
        for name, array in arrays.items():
            if name != NAME or kind.startswith("extra"):
                f[name] = array
        if kind == "soft link":
            f["spare"] = sevens
            f[NAME] = h5py.SoftLink("/spare")
        elif kind in ("external link", "dangling external link"):
            f[NAME] = h5py.ExternalLink(str(other if kind == "external link" else tmp_path / "gone.hdf5"), "/b")
        elif kind == "external storage":
            f.create_dataset(NAME, shape=shape, dtype="f4", external=[(str(raw), 0, sevens.nbytes)])
        elif kind == "virtual dataset":
            layout = h5py.VirtualLayout(shape=shape, dtype="f4")
            layout[:] = h5py.VirtualSource(str(other), "b", shape=shape)
            f.create_virtual_dataset(NAME, layout)
        elif kind == "dangling soft link":
            f[NAME] = h5py.SoftLink("/nowhere")
        elif kind == "extra soft link":
            f["CNN/alias"] = h5py.SoftLink("/nowhere")
    return bilm.options, path


@pytest.mark.parametrize(
    "kind,message",
    [
        ("soft link", f"'{NAME}' is a soft link (to '/spare')"),
        ("external link", f"'{NAME}' is an external link (to '/b' in "),
        ("dangling external link", f"'{NAME}' is an external link (to '/b' in "),
        ("external storage", f"dataset '{NAME}' keeps its data in another file ("),
        ("virtual dataset", f"dataset '{NAME}' is a virtual dataset (its data comes from other datasets)"),
        ("dangling soft link", f"'{NAME}' is a soft link (to '/nowhere')"),
        ("extra soft link", "'CNN/alias' is a soft link (to '/nowhere')"),
    ],
)
def test_a_weight_file_that_links_or_keeps_data_elsewhere_is_refused_by_name(tmp_path, kind, message):
    options, path = weight_file_with(tmp_path, kind)
    with pytest.raises(ElmoWeightsError) as err:
        read_weights(options, path)
    assert str(err.value).startswith(f"{path}: {message}") and "\n" not in str(err.value)
    assert "a weight file holds all its datasets itself" in str(err.value)


def metadata_offsets(path):
    """The byte offsets of an HDF5 file outside its datasets' raw data: superblock,
    object headers, B-trees, heaps."""
    data = []
    with h5py.File(path, "r") as f:
        f.visititems(
            lambda _, item: (
                data.append(range(item.id.get_offset(), item.id.get_offset() + item.id.get_storage_size()))
                if isinstance(item, h5py.Dataset)
                else None
            )
        )
    return [offset for offset in range(path.stat().st_size) if not any(offset in r for r in data)]


def test_flipped_metadata_bytes_give_the_weights_or_one_line_naming_the_file(tmp_path):
    bilm = tiny_bilm(seed=4)
    good = tmp_path / "weights.hdf5"
    bilm.to_files(tmp_path / "options.json", good)
    raw, offsets = good.read_bytes(), metadata_offsets(good)
    damaged, outcomes = tmp_path / "damaged.hdf5", set()
    for offset in offsets[:: len(offsets) // 100]:
        flipped = bytearray(raw)
        flipped[offset] ^= 0xFF
        damaged.write_bytes(bytes(flipped))
        try:
            read_weights(bilm.options, damaged)
            outcomes.add("read")  # a byte the reader does not need (padding, a free list)
        except ElmoWeightsError as err:
            assert str(err).startswith(f"{damaged}: ") and "\n" not in str(err), (offset, str(err))
            outcomes.add("refused")
    assert outcomes == {"read", "refused"}
