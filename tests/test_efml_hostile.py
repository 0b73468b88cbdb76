"""ELMoForManyLangs directories built to break the reader (issue 68): sizes that would run
for minutes, damaged tensor bytes, ids int() cannot read, tensors that are not dense
CPU floats. Each is a one-line error naming the file and what in it is wrong."""

import json
import struct
import time
import zipfile

import pytest
import torch

pytest.importorskip("elmoformanylangs")  # make_efml_dir builds models with EFML's classes

from spacy_elmo.bilm import ElmoBiLM  # noqa: E402
from spacy_elmo.errors import ElmoOptionsError, ElmoWeightsError  # noqa: E402
from spacy_elmo.formats.efml_configs import packaged_config  # noqa: E402
from spacy_elmo.formats.efml_state_dicts import read_state_dict  # noqa: E402

from .efml_models import make_efml_dir  # noqa: E402

HUGE = 10**9
RELEASED_SHAPES = packaged_config("cnn_50_100_512_4096_sample.json")


def _one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message and len(message) < 400, message
    return message


@pytest.mark.parametrize(
    "field,value,named",
    [
        ("encoder.projection_dim", HUGE, "encoder.projection_dim"),
        ("encoder.dim", HUGE, "encoder.dim"),
        ("encoder.n_layers", HUGE, "encoder.n_layers"),
        ("token_embedder.n_highway", HUGE, "token_embedder.n_highway"),
        ("token_embedder.word_dim", HUGE, "token_embedder.word_dim"),
        ("token_embedder.char_dim", HUGE, "token_embedder.char_dim"),
        ("token_embedder.max_characters_per_token", HUGE, "token_embedder.max_characters_per_token"),
        ("token_embedder.filters", [[1, HUGE]], "token_embedder.filters"),
        ("token_embedder.filters", [[1, 2]] * 1000, "token_embedder.filters"),
    ],
)
def test_a_size_above_its_bound_fails_fast_naming_the_file_and_field(tmp_path, field, value, named):
    model_dir = make_efml_dir(tmp_path / "m", 31, scale=0.4)
    config = model_dir / "network.json"
    network = json.loads(config.read_text())
    section, name = field.split(".")
    network[section][name] = value
    config.write_text(json.dumps(network))
    start = time.perf_counter()
    with pytest.raises(ElmoOptionsError) as err:
        ElmoBiLM.from_efml(model_dir)
    took = time.perf_counter() - start
    message = _one_line(err)
    assert message.startswith(f"{config}: {named} ") and "above the sane bound" in message
    assert took < 1.0, f"{took:.2f} s before the error"


LARGE_BUT_IN_BOUNDS = {"encoder.dim": 65536, "encoder.projection_dim": 16384, "encoder.n_layers": 64}


def test_sizes_in_bounds_that_make_too_many_weights_fail_fast(tmp_path):
    model_dir = make_efml_dir(tmp_path / "m", 38, scale=0.4)
    config = model_dir / "network.json"
    network = json.loads(config.read_text())
    for field, value in LARGE_BUT_IN_BOUNDS.items():
        section, name = field.split(".")
        network[section][name] = value
    config.write_text(json.dumps(network))
    with pytest.raises(ElmoOptionsError) as err:
        ElmoBiLM.from_efml(model_dir)
    message = _one_line(err)
    assert message.startswith(f"{config}: these sizes (encoder.dim 65536, encoder.projection_dim 16384, ")
    assert "above the sane bound 1,000,000,000" in message


def test_a_saved_biLM_whose_settings_make_too_many_weights_is_refused_before_building_it():
    """A saved pipeline builds the network from its settings before reading the weights."""
    network = json.loads(json.dumps(RELEASED_SHAPES))
    for field, value in LARGE_BUT_IN_BOUNDS.items():
        section, name = field.split(".")
        network[section][name] = value
    with pytest.raises(ElmoOptionsError, match=r"^the saved biLM: these sizes .* above the sane bound"):
        ElmoBiLM.from_efml_spec({"network": network, "chars": {}, "words": {}}, "the saved biLM")


def _member_data(path, member_suffix):
    """(name, first byte, length) of the zip member whose name ends with ``member_suffix``."""
    with zipfile.ZipFile(path) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith(member_suffix))
    assert info.compress_type == zipfile.ZIP_STORED  # as torch.save writes every member
    header = path.read_bytes()[info.header_offset : info.header_offset + 30]
    name_length, extra_length = struct.unpack("<HH", header[26:30])  # the local header's last two fields
    return info.filename, info.header_offset + 30 + name_length + extra_length, info.file_size


def _flip(path, position, original):
    damaged = bytearray(original)
    damaged[position] ^= 0xFF
    path.write_bytes(bytes(damaged))


def test_a_flipped_byte_in_a_tensor_member_is_named(tmp_path):
    model_dir = make_efml_dir(tmp_path / "m", 32, scale=0.4)
    path = model_dir / "encoder.pkl"
    name, start, size = _member_data(path, "/data/0")
    _flip(path, start + size // 2, path.read_bytes())
    with pytest.raises(ElmoWeightsError) as err:
        ElmoBiLM.from_efml(model_dir)
    message = _one_line(err)
    assert message.startswith(f"{path}: member '{name}' fails its CRC-32 check"), message


def test_no_flipped_byte_of_the_tensor_data_loads_silently(tmp_path):
    """Every byte of every tensor's data, flipped in turn: always refused, naming that member."""
    sizes = {"encoder.n_layers": 1, "encoder.projection_dim": 2, "encoder.dim": 2}
    model_dir = make_efml_dir(tmp_path / "m", 33, scale=0.4, **sizes)
    path = model_dir / "encoder.pkl"
    original = path.read_bytes()
    with zipfile.ZipFile(path) as archive:
        members = [i.filename.split("/", 1)[1] for i in archive.infolist() if "/data/" in i.filename]
    assert len(members) == 8  # 4 tensors a direction
    tried = 0
    for suffix in members:
        name, start, size = _member_data(path, suffix)
        for position in range(start, start + size):
            _flip(path, position, original)
            with pytest.raises(ElmoWeightsError, match=f"member '{name}' fails its CRC-32 check"):
                read_state_dict(path)
            tried += 1
    path.write_bytes(original)
    assert tried == 4 * 2 * (8 * 2 + 8 * 2 + 8 + 2 * 2) and read_state_dict(path).keys()


def test_a_file_saved_without_crcs_still_loads(tmp_path):
    """torch.save can be told not to compute CRC-32s; it then writes 0 for every member."""
    if not hasattr(torch.serialization, "set_crc32_options"):
        pytest.skip("this torch always writes CRC-32s")
    model_dir = make_efml_dir(tmp_path / "m", 34, scale=0.4)
    path = model_dir / "encoder.pkl"
    state = torch.load(path, weights_only=True)
    torch.serialization.set_crc32_options(False)
    try:
        torch.save(state, path)
    finally:
        torch.serialization.set_crc32_options(True)
    with zipfile.ZipFile(path) as archive:
        assert {i.CRC for i in archive.infolist()} == {0}
    loaded = read_state_dict(path)
    assert all(torch.equal(loaded[k], v) for k, v in state.items()) and loaded.keys() == state.keys()


@pytest.mark.parametrize("name", ["word.dic", "char.dic"])
@pytest.mark.parametrize("bad_id", ["\u00b2", "9" * 5000])  # isdigit() but not int(); more digits than int() reads
def test_a_dictionary_id_int_cannot_read_is_one_line_naming_the_file_and_line(tmp_path, name, bad_id):
    model_dir = make_efml_dir(tmp_path / "m", 35, scale=0.4, **{"token_embedder.word_dim": 3})
    path = model_dir / name
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2].split("\t")[0] + "\t" + bad_id
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ElmoWeightsError) as err:
        ElmoBiLM.from_efml(model_dir)
    assert _one_line(err).startswith(f"{path}, line 3: expected 'token<TAB>id' with an integer id")


def test_unicode_decimal_ids_are_read_as_efmls_int_reads_them(tmp_path):
    model_dir = make_efml_dir(tmp_path / "m", 36, scale=0.4, **{"token_embedder.word_dim": 3})
    path = model_dir / "word.dic"
    expected = ElmoBiLM.from_efml(model_dir).embed_batch([["the", "cat"]])[0]
    arabic = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
    path.write_text(path.read_text(encoding="utf-8").translate(arabic), encoding="utf-8")
    assert (ElmoBiLM.from_efml(model_dir).embed_batch([["the", "cat"]])[0] == expected).all()


def _sparse(tensor):
    return tensor.to_sparse()


def _meta(tensor):
    return torch.empty(tensor.shape, device="meta")


def _sparse_csr(tensor):
    return tensor.to_sparse_csr()


@pytest.mark.parametrize("kind,make", [("sparse", _sparse), ("sparse", _sparse_csr), ("meta", _meta)])
@pytest.mark.parametrize(
    "name,key",
    [("encoder.pkl", "backward_layer_0.state_linearity.weight"), ("token_embedder.pkl", "projection.weight")],
)
def test_a_tensor_that_is_not_dense_cpu_data_is_named(tmp_path, kind, make, name, key):
    model_dir = make_efml_dir(tmp_path / "m", 37, scale=0.4)
    path = model_dir / name
    state = torch.load(path, weights_only=True)
    state[key] = make(state[key])
    torch.save(state, path)
    with pytest.raises(ElmoWeightsError) as err:
        ElmoBiLM.from_efml(model_dir)
    message = _one_line(err)
    assert message.startswith(f"{path}: entry '{key}' is a {kind} tensor"), message


def _append_second_copy(path):
    """A crafted .pkl: its first tensor member written again under the same name, zeros
    instead of its values, with a valid CRC-32 (``zipfile`` only warns). The member's name."""
    with zipfile.ZipFile(path) as archive:
        name = next(i.filename for i in archive.infolist() if "/data/" in i.filename)
        size = archive.getinfo(name).file_size
    with pytest.warns(UserWarning, match="Duplicate name"), zipfile.ZipFile(path, "a") as archive:
        archive.writestr(zipfile.ZipInfo(name), bytes(size))  # stored, as torch.save writes them
    return name


def test_a_second_member_of_the_same_name_is_refused_naming_it(tmp_path):
    """torch.load reads the last copy without a word (issue 76, item 15)."""
    model_dir = make_efml_dir(tmp_path / "m", 34, scale=0.4)
    path = model_dir / "encoder.pkl"
    name = _append_second_copy(path)
    with pytest.raises(ElmoWeightsError) as err:
        ElmoBiLM.from_efml(model_dir)
    assert _one_line(err) == (
        f"{path}: member '{name}' appears twice, which torch.save never writes (torch would load the last "
        "copy): the file was altered"
    )
