"""Bad sizes, damaged saved pipelines and resume files, a full disk: each fails at
once with one line naming the file and what is wrong, before any allocation or work."""

import json
from pathlib import Path

import pytest

from spacy_elmo.bilm import ElmoBiLM, ElmoOptions, ElmoOptionsError, ElmoWeightsError
from spacy_elmo.bilm.tf_layout import MAX_PARAMETERS, n_parameters

from .conftest import crash_embed_on_batch, tiny_bilm, tiny_options


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


# -- a saved pipeline's elmo files ---------------------------------------------
@pytest.fixture
def saved_pipeline(tmp_path, bilm_files):
    from .conftest import make_nlp

    nlp = make_nlp(bilm_files)
    nlp("warm up")  # loads the weights
    return nlp, tmp_path / "pipeline"


def test_a_saved_pipeline_carries_no_setting_so_none_can_be_damaged(saved_pipeline):
    """Settings are run-time choices the pipeline's config.cfg gives: the elmo component saves
    none (no elmo/cfg, none in elmo/model), so a value changed in the running pipe, or one an
    earlier version saved, never reaches a load. (It was saved, checked at load and replaced.)"""
    import spacy
    import srsly

    nlp, path = saved_pipeline
    nlp.get_pipe("elmo").configure(max_segment_length=3)
    nlp.get_pipe("elmo").model.attrs["max_segment_length"] = -1  # what spacy-elmo 0.x saved
    nlp.to_disk(path)
    assert not (path / "elmo" / "cfg").exists()
    attrs = srsly.msgpack_loads((path / "elmo" / "model").read_bytes())["attrs"][0]
    assert attrs["settings"] == b""
    loaded = spacy.load(path).get_pipe("elmo")
    assert loaded.settings.max_segment_length == 256 and "max_segment_length" not in loaded.model.attrs
    fresh = spacy.blank("en")
    fresh.add_pipe("elmo")
    fresh.from_bytes(nlp.to_bytes())
    assert fresh.get_pipe("elmo").settings.max_segment_length == 256


@pytest.mark.parametrize("content", [b"", b"{not json", b"[1, 2]"])
def test_an_elmo_cfg_an_earlier_version_saved_is_never_read(saved_pipeline, content):
    import spacy

    nlp, path = saved_pipeline
    nlp.to_disk(path)
    cfg = path / "elmo" / "cfg"
    cfg.write_bytes(content)
    assert spacy.load(path)("works again")._.elmo_layers.shape == (3, 2, 16)


def test_a_missing_elmo_model_is_our_error_naming_the_file(saved_pipeline):
    import spacy

    from spacy_elmo.errors import ElmoFileNotFoundError

    nlp, path = saved_pipeline
    nlp.to_disk(path)
    (path / "elmo" / "model").unlink()
    with pytest.raises(ElmoFileNotFoundError) as err:
        spacy.load(path)
    assert "\n" not in str(err.value) and str(path / "elmo" / "model") in str(err.value)
    assert isinstance(err.value, FileNotFoundError)  # callers catching the builtin still do


# -- pretraining: a full disk, damaged resume files --------------------------
def _pretrain(output_dir, train, **overrides):
    from spacy_elmo.pretrain import load_config, pretrain

    from .test_pretrain import TINY

    settings = {"paths.train": str(train), "training.max_steps": 4, "training.checkpoint_every_steps": 2}
    settings.update(overrides)
    return pretrain(load_config(TINY, settings), output_dir, progress=False)


@pytest.mark.parametrize("how", ["torch", "hdf5"])
def test_a_full_disk_says_so_and_where_and_that_the_last_checkpoint_is_intact(tmp_path, text_files, monkeypatch, how):
    import errno

    import torch

    from spacy_elmo.pretrain import PretrainDataError, outputs
    from spacy_elmo.pretrain.outputs import load_checkpoint

    train, _ = text_files
    out = tmp_path / "out"
    real_save, real_write_weights = torch.save, outputs.write_weights
    calls = {"save": 0}

    def full_on_second_checkpoint(obj, f, *args, **kwargs):
        calls["save"] += 1
        if calls["save"] == 2:
            f.write(b"some bytes, then")
            raise OSError(errno.ENOSPC, "No space left on device")  # what a Python file object raises
        return real_save(obj, f, *args, **kwargs)

    def full_weights(arrays, path, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))  # what h5py raises

    if how == "torch":
        monkeypatch.setattr(torch, "save", full_on_second_checkpoint)
    else:
        monkeypatch.setattr(
            outputs,
            "write_weights",
            lambda *a, **k: (
                calls.__setitem__("save", calls["save"] + 1)
                or (full_weights(*a, **k) if calls["save"] == 2 else real_write_weights(*a, **k))
            ),
        )
    with pytest.raises(PretrainDataError) as err:
        _pretrain(out, train)
    message = str(err.value)
    assert "\n" not in message and "no space left on device" in message
    written = "checkpoint.pt" if how == "torch" else "weights.hdf5"
    assert str(out / written) in message
    assert f"{out / 'checkpoint.pt'} (step {2 if how == 'torch' else 4}), is intact" in message
    assert load_checkpoint(out / "checkpoint.pt")["step"] == (2 if how == "torch" else 4)
    assert not list(out.glob(".*.tmp*"))  # no half-written file left behind
    monkeypatch.undo()
    assert _pretrain(out, train, **{"training.max_steps": 6})["steps"] == 6  # resumes from it


def test_a_really_full_disk_is_an_errno_not_torchs_enforce_fail(tmp_path, monkeypatch):
    """torch's own file writer says only 'enforce fail at inline_container.cc' on a full disk;
    the checkpoint goes through a Python file object, which raises ENOSPC (here: /dev/full)."""
    import contextlib
    import errno
    import os

    import torch

    from spacy_elmo.pretrain import outputs

    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    monkeypatch.setattr(outputs, "atomic_path", lambda path: contextlib.nullcontext(Path("/dev/full")))
    with pytest.raises(OSError) as err:
        outputs.save_checkpoint(tmp_path / "checkpoint.pt", {"weights": torch.ones(100_000)})
    assert err.value.errno == errno.ENOSPC


@pytest.mark.parametrize(
    "content,problem",
    [(b"", "is empty"), (b"[paths\ntrain = ", "cannot be parsed"), (b"[paths]\ntrain = null\n", "lacks [system]")],
)
def test_a_damaged_config_beside_a_checkpoint_is_named_with_what_to_do(tmp_path, text_files, content, problem):
    from spacy_elmo.pretrain import PretrainConfigError

    train, _ = text_files
    out = tmp_path / "out"
    _pretrain(out, train)
    (out / "config.cfg").write_bytes(content)
    with pytest.raises(PretrainConfigError) as err:
        _pretrain(out, train, **{"training.max_steps": 6})
    message = str(err.value)
    assert "\n" not in message and str(out / "config.cfg") in message and problem in message
    assert "other settings" not in message and "fresh output directory" in message


def test_a_checkpoint_lacking_its_contents_is_named(tmp_path, text_files):
    import torch

    from spacy_elmo.pretrain import PretrainDataError

    train, _ = text_files
    out = tmp_path / "out"
    _pretrain(out, train)
    torch.save({"model": {}}, out / "checkpoint.pt")
    with pytest.raises(PretrainDataError, match=r"checkpoint.pt: the checkpoint lacks optimizer, step"):
        _pretrain(out, train, **{"training.max_steps": 6})


def test_a_resume_rewrites_config_only_when_it_changes_and_atomically(tmp_path, text_files):
    train, _ = text_files
    out = tmp_path / "out"
    _pretrain(out, train)
    config = out / "config.cfg"
    before = config.stat()
    _pretrain(out, train)  # the same settings: nothing to do, nothing rewritten
    after = config.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    _pretrain(out, train, **{"training.max_steps": 6})
    changed = config.stat()
    assert changed.st_ino != before.st_ino  # replaced by a new file, never rewritten in place
    assert "max_steps = 6" in config.read_text()


# -- embed: damaged resume files ---------------------------------------------
@pytest.fixture
def interrupted_embed(tmp_path, bilm_files, monkeypatch):
    """A stateful embed run killed after two of its four batches were checkpointed."""
    from spacy_elmo.cli import embed as embed_module
    from spacy_elmo.cli import embed_writer

    from .test_cli_embed import LINES

    options, weights = bilm_files
    text = tmp_path / "input.txt"
    text.write_text("\n".join(LINES) + "\n", encoding="utf8")
    monkeypatch.setattr(embed_writer, "CHECKPOINT_SECONDS", 0.0)
    original = crash_embed_on_batch(monkeypatch, 3)
    out = tmp_path / "out.hdf5"
    with pytest.raises(KeyboardInterrupt):
        embed_module.embed_file(
            text, out, ElmoBiLM.from_files(options, weights), batch_size=2, stateful=True, progress=False
        )
    monkeypatch.setattr(ElmoBiLM, "embed_batch", original)

    def resume():
        embed_module.embed_file(
            text, out, ElmoBiLM.from_files(options, weights), batch_size=2, stateful=True, progress=False
        )

    return out, resume


def saved_state(out):
    """The one state file a stateful run keeps: OUTPUT.state-N.npz of its last checkpoint."""
    (state,) = out.parent.glob(out.name + ".state-*.npz")
    return state


@pytest.mark.parametrize(
    "suffix,content",
    [
        (".progress.json", b""),
        (".progress.json", b'{"run": '),
        (".progress.json", b"[1]"),
        (".partial", b"not hdf5 at all"),
        (".state.npz", b"PK\x03\x04 torn"),
        (".state.npz", None),
    ],
)
def test_damaged_embed_resume_files_are_named_with_what_to_do(interrupted_embed, suffix, content):
    from spacy_elmo.errors import EmbedInputError

    out, resume = interrupted_embed
    damaged = saved_state(out) if suffix == ".state.npz" else out.with_name(out.name + suffix)
    assert damaged.exists()
    if content is None:
        damaged.unlink()
    else:
        damaged.write_bytes(content)
    with pytest.raises(EmbedInputError) as err:
        resume()
    message = str(err.value)
    assert "\n" not in message and str(damaged) in message and "start afresh" in message


def test_a_saved_state_of_the_wrong_width_is_named(interrupted_embed):
    import numpy

    from spacy_elmo.errors import EmbedInputError

    out, resume = interrupted_embed
    state = saved_state(out)
    arrays = dict(numpy.load(state))
    arrays["1_0_c"] = arrays["1_0_c"][:, :3]
    numpy.savez(state, **arrays)
    with pytest.raises(EmbedInputError, match=r"state-\d+\.npz is damaged \(the saved LSTM state's array 1_0_c"):
        resume()
