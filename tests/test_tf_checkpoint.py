"""bilm-tf TensorFlow checkpoints read and converted without TensorFlow.

The fixtures under data/tf_checkpoints/ were written by TensorFlow itself
(make_checkpoints.py there); tests/tf_checkpoint_writer.py writes the same format
(checked byte for byte against them here) for fresh random models of fresh shapes.
"""

import os
from pathlib import Path

import h5py
import numpy
import pytest
import torch
from typer.testing import CliRunner

from spacy_elmo.bilm import ElmoBiLM, ElmoOptions
from spacy_elmo.bilm.tf_layout import expected_shapes
from spacy_elmo.cli import app
from spacy_elmo.errors import ElmoCheckpointError, ElmoOptionsError, ElmoWeightsError
from spacy_elmo.formats.bilm_tf import write_weights
from spacy_elmo.formats.crc32c import _update_small, crc32c
from spacy_elmo.formats.tf_checkpoint import TFCheckpoint
from spacy_elmo.formats.tf_convert import checkpoint_names, convert_checkpoint, dump_weights_name

from .conftest import DATA, tiny_bilm
from .tf_checkpoint_writer import write_checkpoint

FIXTURES = DATA / "tf_checkpoints"
MODELS = ["two_layers", "no_skip", "sharded", "one_layer"]
SENTENCES = [["The", "cat", "sat", "."], ["Ünïcode", "wörds", "and", "a-very-long-token" * 5], ["x"]]


def fixture(name):
    """(directory, its checkpoint, {variable: array} as TensorFlow held them, dump_weights' datasets)."""
    directory = FIXTURES / name
    ckpt = TFCheckpoint(directory)
    held = {key[: -len(":0")]: value for key, value in numpy.load(directory / "all_variables.npz").items()}
    return directory, ckpt, held, dict(numpy.load(directory / "expected.npz"))


def our_name(dataset, n_layers):
    """dump_weights names a one-layer LSTM without MultiRNNCell/Cell0; the readers need it."""
    if n_layers == 1:
        return dataset.replace("/RNN/LSTMCell/", "/RNN/MultiRNNCell/Cell0/LSTMCell/")
    return dataset


def hdf5_arrays(path):
    found = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: found.update({name: obj[...]}) if isinstance(obj, h5py.Dataset) else None)
    return found


def one_line_error(call, *args, error=ElmoCheckpointError):
    with pytest.raises(error) as info:
        call(*args)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_crc32c_matches_its_check_value_and_the_plain_loop_at_every_size():
    assert crc32c(b"123456789") == 0xE3069283
    rng = numpy.random.default_rng(6301)
    for size in [0, 1, 4, 5, 16383, 16384, 16385, *rng.integers(16385, 300_000, 3)]:
        data = rng.bytes(int(size))
        assert crc32c(data) == _update_small(0xFFFFFFFF, data) ^ 0xFFFFFFFF, size


@pytest.mark.parametrize("name", MODELS)
def test_every_variable_tensorflow_saved_reads_back_bit_for_bit(name):
    _, ckpt, held, _ = fixture(name)
    assert sorted(ckpt.entries) == sorted(held)
    assert ckpt.n_shards == (3 if name == "sharded" else 1)
    for variable, value in held.items():
        array = ckpt.read(variable)
        assert array.dtype == value.dtype and array.shape == value.shape
        assert array.tobytes() == value.tobytes(), variable


@pytest.mark.parametrize("name", MODELS)
def test_the_test_writer_writes_what_tensorflow_writes(name, tmp_path):
    _, ckpt, held, _ = fixture(name)
    shard_of = {variable: entry.shard_id for variable, entry in ckpt.entries.items()}
    write_checkpoint(tmp_path / "ckpt", held, ckpt.n_shards, shard_of)
    assert (tmp_path / "ckpt.index").read_bytes() == ckpt.index_path.read_bytes()
    for k in range(ckpt.n_shards):
        suffix = f".data-{k:05d}-of-{ckpt.n_shards:05d}"
        assert (tmp_path / f"ckpt{suffix}").read_bytes() == ckpt.shard_path(k).read_bytes()


@pytest.mark.parametrize("name", MODELS)
def test_the_variable_names_are_dump_weights_names(name):
    directory, _, held, expected = fixture(name)
    options = ElmoOptions.from_file(directory / "options.json")
    assert sorted(our_name(d, options.n_layers) for d in expected) == sorted(expected_shapes(options))
    for dataset in expected:
        variable = checkpoint_names(our_name(dataset, options.n_layers), options.n_layers)[0]
        assert variable in held and dump_weights_name(variable) == dataset


@pytest.mark.parametrize("name", MODELS)
def test_the_converted_file_holds_the_checkpoints_weights_bit_for_bit(name, tmp_path):
    options = ElmoOptions.from_file(FIXTURES / name / "options.json")
    directory, ckpt, _, expected = fixture(name)
    convert_checkpoint(ckpt.prefix, directory / "options.json", tmp_path / "out")
    written = hdf5_arrays(tmp_path / "out" / "weights.hdf5")
    assert sorted(written) == sorted(our_name(d, options.n_layers) for d in expected)
    for dataset, array in expected.items():
        converted = written[our_name(dataset, options.n_layers)]
        assert converted.dtype == numpy.float32 and converted.tobytes() == array.tobytes(), dataset
    assert ElmoOptions.from_file(tmp_path / "out" / "options.json") == options
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no temporary left beside it


@pytest.mark.parametrize("name", MODELS)
def test_the_converted_directory_embeds_as_the_directly_written_hdf5(name, tmp_path):
    directory, _, _, expected = fixture(name)
    options = ElmoOptions.from_file(directory / "options.json")
    convert_checkpoint(directory, directory / "options.json", tmp_path / "converted")
    direct = tmp_path / "direct"
    direct.mkdir()
    options.to_file(direct / "options.json")
    write_weights({our_name(d, options.n_layers): a for d, a in expected.items()}, direct / "weights.hdf5")
    ours, theirs = ElmoBiLM.from_dir(tmp_path / "converted"), ElmoBiLM.from_dir(direct)
    for mine, reference in zip(ours.embed_batch(SENTENCES), theirs.embed_batch(SENTENCES)):
        assert mine.shape == (options.n_layers + 1, mine.shape[1], 2 * options.projection_dim)
        assert numpy.array_equal(mine, reference) and numpy.abs(mine).sum() > 0


def test_the_elmo_component_loads_a_converted_directory(tmp_path):
    import spacy

    directory = FIXTURES / "no_skip"
    convert_checkpoint(directory, directory / "options.json", tmp_path / "bilm")
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"bilm_dir": str(tmp_path / "bilm")})
    doc = nlp("The converted biLM runs in spaCy .")
    (expected,) = ElmoBiLM.from_dir(tmp_path / "bilm").embed_batch([[t.text for t in doc]])
    assert numpy.array_equal(doc._.elmo_layers, expected)


def training_state(bilm: ElmoBiLM, seed: int, vocab: int = 7):
    """A bilm-tf checkpoint's variables for ``bilm``: its weights under bilm-tf's names,
    plus what dump_weights leaves out (softmax, Adagrad slots, step counters)."""
    rng = numpy.random.default_rng(seed)
    P, n_layers = bilm.options.projection_dim, bilm.options.n_layers
    held = {checkpoint_names(d, n_layers)[0]: a for d, a in bilm.tf_arrays().items()}
    held.update({f"{v}/Adagrad": rng.standard_normal(a.shape).astype(numpy.float32) for v, a in held.items()})
    held["lm/softmax/W"] = rng.standard_normal((vocab, P)).astype(numpy.float32)
    held["lm/softmax/b"] = rng.standard_normal(vocab).astype(numpy.float32)
    held["global_step"] = numpy.float32(seed)
    held["train_perplexity"] = numpy.float32(12.5)
    return held


FRESH = [
    dict(n_layers=1, n_highway=0, filters=[(1, 3), (4, 6)], lstm_dim=9, projection_dim=5),
    dict(n_layers=3, n_highway=3, filters=[(2, 7)], lstm_dim=6, projection_dim=4, use_skip_connections=False),
    dict(n_layers=2, n_highway=1, char_dim=7, activation="tanh", lstm_dim=11, projection_dim=3),
]


@pytest.mark.parametrize("seed,overrides", list(enumerate(FRESH, start=6307)))
def test_fresh_models_convert_and_embed_exactly(seed, overrides, tmp_path):
    bilm = tiny_bilm(seed=seed, **overrides)
    write_checkpoint(tmp_path / "model.ckpt-5", training_state(bilm, seed), n_shards=1 + seed % 3)
    bilm.options.to_file(tmp_path / "options.json")
    arrays = convert_checkpoint(tmp_path / "model.ckpt-5.index", tmp_path / "options.json", tmp_path / "out")
    reference = bilm.tf_arrays()
    assert sorted(arrays) == sorted(reference)
    assert all(arrays[d].tobytes() == a.tobytes() for d, a in reference.items())
    converted = ElmoBiLM.from_dir(tmp_path / "out")
    for mine, expected in zip(converted.embed_batch(SENTENCES), bilm.embed_batch(SENTENCES)):
        assert numpy.array_equal(mine, expected)


# -- bad input: one line naming the file, nothing written -------------------------------
@pytest.fixture
def fresh(tmp_path):
    """A fresh checkpoint (prefix, its variables) and its options file."""
    bilm = tiny_bilm(seed=6311, n_highway=1, filters=[(1, 2), (3, 5)])
    held = training_state(bilm, 6311)
    bilm.options.to_file(tmp_path / "options.json")
    return tmp_path / "model.ckpt-9", held


def convert_fails(prefix, tmp_path, error=ElmoCheckpointError):
    message = one_line_error(convert_checkpoint, prefix, tmp_path / "options.json", tmp_path / "out", error=error)
    assert not (tmp_path / "out").exists() and not [p for p in os.listdir(tmp_path) if p.startswith(".")]
    return message


def test_a_missing_variable_is_named(fresh, tmp_path):
    prefix, held = fresh
    del held["lm/RNN_1/rnn/multi_rnn_cell/cell_1/lstm_cell/projection/kernel"]
    write_checkpoint(prefix, held)
    message = convert_fails(prefix, tmp_path)
    variable = "lm/RNN_1/rnn/multi_rnn_cell/cell_1/lstm_cell/projection/kernel"
    assert message.startswith(f"{prefix}.index: variable '{variable}' is missing (dataset 'RNN_1/RNN/MultiRNNCell/")


def test_a_wrong_shape_is_named(fresh, tmp_path):
    prefix, held = fresh
    held["lm/CNN/W_cnn_1"] = numpy.zeros((1, 3, 4, 6), numpy.float32)
    write_checkpoint(prefix, held)
    message = convert_fails(prefix, tmp_path)
    assert "variable 'lm/CNN/W_cnn_1' has shape (1, 3, 4, 6) but" in message and "needs (1, 3, 4, 5)" in message


def test_a_checkpoint_of_a_larger_model_names_the_option(fresh, tmp_path):
    prefix, held = fresh
    held["lm/CNN_high_1/W_carry"] = numpy.zeros((7, 7), numpy.float32)
    write_checkpoint(prefix, held)
    message = convert_fails(prefix, tmp_path)
    assert "'lm/CNN_high_1/W_carry' is not described by" in message and "'char_cnn.n_highway'" in message


def test_a_checkpoint_that_is_not_bilm_tfs_is_named(fresh, tmp_path):
    prefix, held = fresh
    write_checkpoint(prefix, {f"model/{name[3:]}/.ATTRIBUTES/VARIABLE_VALUE": a for name, a in held.items()})
    message = convert_fails(prefix, tmp_path)
    assert message.startswith(f"{prefix}.index: no variable under 'lm/'") and "not a bilm-tf training" in message


def test_non_float_and_nan_variables_are_refused(fresh, tmp_path):
    prefix, held = fresh
    held["lm/CNN/b_cnn_0"] = numpy.arange(2, dtype=numpy.int32)
    write_checkpoint(prefix, held)
    assert "'lm/CNN/b_cnn_0' has dtype DT_INT32, expected floats" in convert_fails(prefix, tmp_path)
    held["lm/CNN/b_cnn_0"] = numpy.array([0.5, numpy.nan], numpy.float32)
    write_checkpoint(prefix, held)
    assert "'lm/CNN/b_cnn_0' contains NaN" in convert_fails(prefix, tmp_path, error=ElmoWeightsError)


def flip_byte(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x40
    path.write_bytes(bytes(data))


# in the data block, the index block, the footer's block handles, its magic number
@pytest.mark.parametrize("position", [3, 100, -55, -48, -45, -1])
def test_a_damaged_index_is_named(fresh, tmp_path, position):
    prefix, held = fresh
    write_checkpoint(prefix, held)
    flip_byte(Path(f"{prefix}.index"), position)
    message = convert_fails(prefix, tmp_path)
    assert message.startswith(f"{prefix}.index: damaged TensorFlow checkpoint index: ")


def test_a_truncated_index_is_named(fresh, tmp_path):
    prefix, held = fresh
    write_checkpoint(prefix, held)
    index = Path(f"{prefix}.index")
    index.write_bytes(index.read_bytes()[:-100])
    assert "no table footer" in convert_fails(prefix, tmp_path)


@pytest.mark.parametrize("kind,name", [(1, "snappy"), (2, "zlib")])
def test_a_compressed_index_block_is_refused_by_name(fresh, tmp_path, kind, name):
    prefix, held = fresh
    write_checkpoint(prefix, held, compression=kind)
    assert f"is {name}-compressed, which this reader does not support" in convert_fails(prefix, tmp_path)


def data_offset(prefix, variable):
    entry = TFCheckpoint(prefix).entries[variable]
    return entry.offset + entry.size // 2


def test_a_damaged_data_shard_fails_the_crc_check_by_name(fresh, tmp_path):
    prefix, held = fresh
    write_checkpoint(prefix, held)
    flip_byte(
        Path(f"{prefix}.data-00000-of-00001"), data_offset(prefix, "lm/RNN_0/rnn/multi_rnn_cell/cell_0/lstm_cell/bias")
    )
    message = convert_fails(prefix, tmp_path)
    assert message.startswith(
        f"{prefix}.data-00000-of-00001: variable 'lm/RNN_0/rnn/multi_rnn_cell/cell_0/lstm_cell/bias'"
    )
    assert "fails its CRC check" in message


def test_damage_in_what_dump_weights_leaves_out_does_not_matter(fresh, tmp_path):
    prefix, held = fresh
    write_checkpoint(prefix, held)
    flip_byte(Path(f"{prefix}.data-00000-of-00001"), data_offset(prefix, "lm/softmax/W"))
    arrays = convert_checkpoint(prefix, tmp_path / "options.json", tmp_path / "out")
    assert arrays["CNN/b_cnn_0"].tobytes() == held["lm/CNN/b_cnn_0"].tobytes()


def test_a_truncated_or_missing_data_shard_is_named(fresh, tmp_path):
    prefix, held = fresh
    write_checkpoint(prefix, held, n_shards=2)
    second = Path(f"{prefix}.data-00001-of-00002")
    second.write_bytes(second.read_bytes()[: second.stat().st_size // 2])
    message = convert_fails(prefix, tmp_path)
    assert message.startswith(f"{second}: truncated data shard: variable '")
    second.unlink()
    assert convert_fails(prefix, tmp_path).startswith(f"{second}: data shard not found")


def test_the_checkpoint_is_found_from_its_directory_or_files(fresh, tmp_path):
    prefix, held = fresh
    write_checkpoint(prefix, held)
    for given in (f"{prefix}.index", f"{prefix}.data-00000-of-00001"):
        assert TFCheckpoint(given).prefix == prefix
    message = one_line_error(TFCheckpoint, tmp_path)
    assert "without a 'checkpoint' file" in message
    (tmp_path / "checkpoint").write_text(f'model_checkpoint_path: "{prefix.name}"\nall_model_checkpoint_paths: "x"\n')
    assert TFCheckpoint(tmp_path).prefix == prefix
    # an absolute path from the machine that trained it: the same name here
    (tmp_path / "checkpoint").write_text(f'model_checkpoint_path: "/gone/save_dir/{prefix.name}"\n')
    assert TFCheckpoint(tmp_path).prefix == prefix
    assert "checkpoint index not found: " in one_line_error(TFCheckpoint, tmp_path / "model.ckpt-1")


def test_an_output_directory_with_files_is_never_replaced(fresh, tmp_path):
    prefix, held = fresh
    write_checkpoint(prefix, held)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    message = one_line_error(convert_checkpoint, prefix, tmp_path / "options.json", tmp_path / "out")
    assert "exists and is not an empty directory" in message
    assert os.listdir(tmp_path / "out") == ["keep.txt"]
    (tmp_path / "out" / "keep.txt").unlink()  # an empty one is filled
    convert_checkpoint(prefix, tmp_path / "options.json", tmp_path / "out")
    assert sorted(os.listdir(tmp_path / "out")) == ["options.json", "weights.hdf5"]


def test_a_failed_write_leaves_nothing_behind(fresh, tmp_path, monkeypatch):
    import spacy_elmo.formats.tf_convert as tf_convert

    prefix, held = fresh
    write_checkpoint(prefix, held)

    def full_disk(arrays, path):
        Path(path).write_bytes(b"half")
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(tf_convert, "write_weights", full_disk)
    with pytest.raises(OSError):
        convert_checkpoint(prefix, tmp_path / "options.json", tmp_path / "out")
    assert not (tmp_path / "out").exists() and not [p for p in os.listdir(tmp_path) if p.startswith(".")]


def test_the_command_converts_and_reports_errors_in_one_line(fresh, tmp_path):
    prefix, held = fresh
    write_checkpoint(prefix, held)
    args = ["convert-checkpoint", str(prefix), str(tmp_path / "options.json"), str(tmp_path / "out")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    n_datasets = len(expected_shapes(ElmoOptions.from_file(tmp_path / "options.json")))
    assert f"wrote {n_datasets} datasets" in result.output
    assert torch.equal(
        torch.from_numpy(hdf5_arrays(tmp_path / "out" / "weights.hdf5")["CNN_proj/W_proj"]),
        torch.from_numpy(held["lm/CNN_proj/W_proj"]),
    )
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and result.output.strip().count("\n") == 0
    assert result.output.startswith("error: output directory")


def test_options_that_are_not_bilm_tfs_are_refused_before_reading(tmp_path):
    (tmp_path / "options.json").write_text('{"lstm": {}}')
    with pytest.raises(ElmoOptionsError, match="options.json: missing section 'char_cnn'"):
        convert_checkpoint(FIXTURES / "two_layers", tmp_path / "options.json", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def convert_command(prefix, options, out):
    """`convert-checkpoint` run as a user runs it: its exit code and output."""
    result = CliRunner().invoke(app, ["convert-checkpoint", str(prefix), str(options), str(out)])
    return result.exit_code, result.output


def hidden_leftovers(directory):
    return [p for p in os.listdir(directory) if p.startswith(".")]


@pytest.mark.parametrize(
    "place,problem",
    [
        ("under_a_file", "cannot be written: {tmp}/a_file is a file, not a directory"),
        ("dangling_symlink", "is a symlink to nowhere, which does not exist: give a new directory"),
        ("dot", "is the current directory (or holds it): give a new directory's name"),
        ("unwritable", "cannot be written: Permission denied"),
    ],
)
def test_an_output_place_that_cannot_be_written_is_one_line_naming_it(fresh, tmp_path, monkeypatch, place, problem):
    prefix, held = fresh
    write_checkpoint(prefix, held)
    (tmp_path / "a_file").write_text("mine")
    (tmp_path / "dangling").symlink_to("nowhere")
    (tmp_path / "here").mkdir()
    out = {"under_a_file": tmp_path / "a_file" / "out", "dangling_symlink": tmp_path / "dangling"}.get(
        place, tmp_path / "out"
    )
    if place == "dot":
        monkeypatch.chdir(tmp_path / "here")  # empty: once taken for a new directory to replace
        out = Path(".")
    if place == "unwritable":  # what chmod does to a user (root passes it): the probe is refused
        real_touch = Path.touch

        def forbidden(self, *args, **kwargs):
            if self.parent == tmp_path and ".probe" in self.name:
                raise PermissionError(13, "Permission denied", str(self))
            return real_touch(self, *args, **kwargs)

        monkeypatch.setattr(Path, "touch", forbidden)
    before = sorted(os.listdir(tmp_path))
    code, output = convert_command(prefix, tmp_path / "options.json", out)
    assert code == 1 and output.count("\n") == 1, output
    assert output == f"error: output directory {out} {problem.format(tmp=tmp_path)}\n"
    assert sorted(os.listdir(tmp_path)) == before and os.listdir(tmp_path / "here") == []


def test_a_read_only_file_system_is_one_line(fresh, tmp_path, read_only_tmpfs):
    prefix, held = fresh
    write_checkpoint(prefix, held)
    code, output = convert_command(prefix, tmp_path / "options.json", read_only_tmpfs / "out")
    assert (code, output) == (
        1,
        f"error: output directory {read_only_tmpfs / 'out'} cannot be written: Read-only file system\n",
    )


def test_a_symlink_to_an_empty_directory_fills_that_directory(fresh, tmp_path):
    prefix, held = fresh
    write_checkpoint(prefix, held)
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to("real")
    code, output = convert_command(prefix, tmp_path / "options.json", tmp_path / "link")
    assert code == 0, output
    assert (tmp_path / "link").is_symlink() and sorted(os.listdir(tmp_path / "real")) == [
        "options.json",
        "weights.hdf5",
    ]
    assert ElmoBiLM.from_dir(tmp_path / "link").options == ElmoOptions.from_file(tmp_path / "options.json")
    assert not hidden_leftovers(tmp_path)


@pytest.mark.parametrize("damage", ["not_utf8", "unreadable"])
def test_a_save_directorys_checkpoint_list_that_cannot_be_read_is_one_line(fresh, tmp_path, monkeypatch, damage):
    prefix, held = fresh
    write_checkpoint(prefix, held)
    listing = tmp_path / "checkpoint"
    if damage == "not_utf8":
        listing.write_bytes(b'model_checkpoint_path: "model.ckpt-\xff9"\n')
        problem = "line 1: not valid UTF-8 (byte 0xff at byte offset 35): not TensorFlow's checkpoint list"
    else:  # chmod 000 (root reads it anyway): its open is refused
        listing.write_text(f'model_checkpoint_path: "{prefix.name}"\n')
        real_open = Path.open

        def forbidden(self, *args, **kwargs):
            if self == listing:
                raise PermissionError(13, "Permission denied", str(self))
            return real_open(self, *args, **kwargs)

        monkeypatch.setattr(Path, "open", forbidden)
        problem = ": cannot read the checkpoint list: Permission denied"
    code, output = convert_command(tmp_path, tmp_path / "options.json", tmp_path / "out")
    assert code == 1 and output.count("\n") == 1, output
    assert output.startswith(f"error: {listing}{',' if damage == 'not_utf8' else ''}")
    assert problem in output and output.rstrip().endswith("the name before .index)")
    assert not (tmp_path / "out").exists()


def test_too_little_space_is_said_before_writing_and_nothing_is_left(fresh, tmp_path, monkeypatch):
    import shutil

    from spacy_elmo.files.disk_space import SPARE_BYTES

    prefix, held = fresh
    write_checkpoint(prefix, held)
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda path: real(path)._replace(free=SPARE_BYTES + 1000))
    code, output = convert_command(prefix, tmp_path / "options.json", tmp_path / "out")
    assert code == 1 and output.count("\n") == 1, output
    assert output.startswith(f"error: no space left on device for {tmp_path / 'out' / 'weights.hdf5'} (8.0 MiB free; ")
    assert output.endswith(" MiB and 8 MiB is kept spare)\n")
    assert not (tmp_path / "out").exists() and not hidden_leftovers(tmp_path)


def test_a_disk_that_fills_during_the_write_is_the_one_error_and_leaves_nothing(fresh, tmp_path, monkeypatch):
    import spacy_elmo.formats.tf_convert as tf_convert
    from spacy_elmo.errors import ElmoDiskFullError

    prefix, held = fresh
    write_checkpoint(prefix, held)

    def filling(arrays, path):  # what h5py raises as the disk fills under it
        Path(path).write_bytes(b"half")
        raise RuntimeError(f"Can't decrement id ref count (file write failed: filename = '{path}', errno = 28, ...)")

    monkeypatch.setattr(tf_convert, "write_weights", filling)
    with pytest.raises(ElmoDiskFullError) as err:
        convert_checkpoint(prefix, tmp_path / "options.json", tmp_path / "out")
    assert str(err.value) == f"no space left on device for {tmp_path / 'out' / 'weights.hdf5'}"
    assert not (tmp_path / "out").exists() and not hidden_leftovers(tmp_path)


def test_a_full_tmpfs_is_one_line_not_tracebacks_or_a_segfault(fresh, tmp_path, tiny_tmpfs):
    import subprocess
    import sys

    prefix, held = fresh
    write_checkpoint(prefix, held)
    args = ["convert-checkpoint", str(prefix), str(tmp_path / "options.json"), str(tiny_tmpfs / "out")]
    root = Path(__file__).parent.parent
    result = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=300,
    )
    assert result.returncode == 1, result.stderr[-2000:]
    assert result.stderr.startswith(f"error: no space left on device for {tiny_tmpfs / 'out' / 'weights.hdf5'} (")
    assert result.stderr.count("\n") == 1 and os.listdir(tiny_tmpfs) == []
