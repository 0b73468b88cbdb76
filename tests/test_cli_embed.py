"""`python -m spacy_elmo embed`: AllenNLP-compatible output, resume, errors."""

import json
import os
import subprocess
import sys
import time

import h5py
import numpy
import pytest
from typer.testing import CliRunner

from spacy_elmo.bilm import ElmoBiLM
from spacy_elmo.cli import app, embed_writer
from spacy_elmo.cli import embed as embed_module
from spacy_elmo.files.hashing import arrays_sha256

from .conftest import crash_embed_on_batch, tiny_bilm

# What torchrun sets beside RANK and WORLD_SIZE.
TORCHRUN_ENV = {
    "LOCAL_RANK": "0",
    "LOCAL_WORLD_SIZE": "2",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
    "TORCHELASTIC_RUN_ID": "test",
}

LINES = [
    "The quick brown fox .",
    "Blank lines are kept as empty datasets :",
    "",
    "Naïve café — “quotes” 🙂",
    "short",
    "A much longer sentence with many more tokens than the others here .",
    "The quick brown fox .",
]


@pytest.fixture
def files(tmp_path):
    model = tiny_bilm(seed=21)
    options, weights = tmp_path / "options.json", tmp_path / "weights.hdf5"
    model.to_files(options, weights)
    text = tmp_path / "input.txt"
    text.write_text("\n".join(LINES) + "\n", encoding="utf8")
    return tmp_path, options, weights, text


def run_embed(options, weights, text, out, *extra):
    args = ["embed", str(text), str(out), "--options-file", str(options), "--weight-file", str(weights), *extra]
    return CliRunner().invoke(app, args)


def read_output(path):
    with h5py.File(path, "r") as f:
        data = {k: f[k][...] for k in f if k != "sentence_to_index"}
        index = json.loads(f["sentence_to_index"][0])
    return data, index


@pytest.mark.parametrize("layers", ["all", "top", "average"])
def test_layers_and_allennlp_layout(files, layers):
    tmp, options, weights, text = files
    result = run_embed(options, weights, text, tmp / "out.hdf5", "--layers", layers, "--batch-size", "2")
    assert result.exit_code == 0, result.output
    data, index = read_output(tmp / "out.hdf5")
    assert sorted(data, key=int) == [str(i) for i in range(len(LINES))]
    expected = ElmoBiLM.from_files(options, weights).embed_batch([line.split() for line in LINES])
    for i, full in enumerate(expected):
        want = {"all": full, "top": full[-1], "average": full.mean(axis=0)}[layers]
        assert data[str(i)].shape == want.shape
        numpy.testing.assert_allclose(data[str(i)], want, atol=1e-5)
    assert data["2"].shape[-2] == 0  # the blank line
    assert index["Naïve café — “quotes” 🙂"] == "3"
    assert index["The quick brown fox ."] == "6"  # repeated sentences map to the last line, like AllenNLP
    assert not list(tmp.glob("out.hdf5.*"))  # no partial/progress files left


def test_stateful_runs_lines_in_file_order(files):
    tmp, options, weights, text = files
    assert run_embed(options, weights, text, tmp / "s.hdf5", "--stateful", "--batch-size", "3").exit_code == 0
    data, _ = read_output(tmp / "s.hdf5")
    model = ElmoBiLM.from_files(options, weights)
    sentences = [line.split() for line in LINES]
    for start in range(0, len(LINES), 3):
        batch = model.embed_batch(sentences[start : start + 3], stateful=True)
        for offset, want in enumerate(batch):
            numpy.testing.assert_allclose(data[str(start + offset)], want, atol=1e-5)
    stateless, _ = read_output_after(run_embed, files, "plain.hdf5")
    assert numpy.abs(stateless["4"] - data["4"]).max() > 1e-4


def read_output_after(runner, files, name, *extra):
    tmp, options, weights, text = files
    assert runner(options, weights, text, tmp / name, *extra).exit_code == 0
    return read_output(tmp / name)


@pytest.mark.parametrize("stateful", [False, True])
def test_interrupted_run_resumes_to_the_same_output(files, monkeypatch, stateful):
    tmp, options, weights, text = files
    flags = ["--batch-size", "2"] + (["--stateful"] if stateful else [])
    reference, _ = read_output_after(run_embed, files, "full.hdf5", *flags)

    monkeypatch.setattr(embed_writer, "CHECKPOINT_SECONDS", 0.0)
    original = crash_embed_on_batch(monkeypatch, 3)
    out = tmp / "resumed.hdf5"
    with pytest.raises(KeyboardInterrupt):
        embed_module.embed_file(
            text, out, ElmoBiLM.from_files(options, weights), batch_size=2, stateful=stateful, progress=False
        )
    assert not out.exists() and out.with_name("resumed.hdf5.partial").exists()
    progress = json.loads(out.with_name("resumed.hdf5.progress.json").read_text())
    assert progress["done_batches"] == 2

    monkeypatch.setattr(ElmoBiLM, "embed_batch", original)
    resumed_calls = {"n": 0}

    def counting(self, *args, **kwargs):
        resumed_calls["n"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ElmoBiLM, "embed_batch", counting)
    embed_module.embed_file(
        text, out, ElmoBiLM.from_files(options, weights), batch_size=2, stateful=stateful, progress=False
    )
    assert resumed_calls["n"] == 2  # 4 batches in all, 2 were done before the crash
    data, _ = read_output(out)
    assert sorted(data) == sorted(reference)
    for key in reference:
        numpy.testing.assert_allclose(data[key], reference[key], atol=1e-6)


def test_resume_with_other_settings_is_refused(files, monkeypatch):
    tmp, options, weights, text = files
    out = tmp / "o.hdf5"
    out.with_name("o.hdf5.partial").write_bytes(b"")
    out.with_name("o.hdf5.progress.json").write_text(json.dumps({"run": {"layers": "top"}, "done_batches": 1}))
    result = run_embed(options, weights, text, out)
    assert result.exit_code == 1
    assert "holds a run with other settings" in result.output


def test_invalid_utf8_names_the_line(files):
    tmp, options, weights, _ = files
    bad = tmp / "bad.txt"
    bad.write_bytes(b"fine line\nsecond \xff\xfe line\n")
    result = run_embed(options, weights, bad, tmp / "o.hdf5")
    assert result.exit_code == 1
    assert "bad.txt, line 2: not valid UTF-8 (byte 0xff at byte offset 7)" in result.output
    assert "Traceback" not in result.output


def test_bad_weight_file_is_a_clean_error(files):
    tmp, options, _, text = files
    junk = tmp / "junk.hdf5"
    junk.write_text("not a model")
    result = run_embed(options, junk, text, tmp / "o.hdf5")
    assert result.exit_code == 1
    assert "junk.hdf5: not an HDF5 file" in result.output


def test_bad_layers_choice(files):
    tmp, options, weights, text = files
    result = run_embed(options, weights, text, tmp / "o.hdf5", "--layers", "middle")
    assert result.exit_code == 1 and "--layers must be one of" in result.output


def test_spacy_tokenizer_option(files):
    tmp, options, weights, _ = files
    text = tmp / "raw.txt"
    text.write_text("Don't split me naively.\n", encoding="utf8")
    data, _ = read_output_after(run_embed, (tmp, options, weights, text), "tok.hdf5", "--spacy-tokenizer", "en")
    assert data["0"].shape[1] == 6  # Do n't split me naively .
    # The rows' tokens are stored beside them: sentence_to_index holds only the line.
    assert read_tokens(tmp / "tok.hdf5") == {"0": ["Do", "n't", "split", "me", "naively", "."]}
    plain, _ = read_output_after(run_embed, (tmp, options, weights, text), "plain.hdf5")
    assert plain["0"].shape[1] == 4
    assert read_tokens(tmp / "plain.hdf5") == {"0": ["Don't", "split", "me", "naively."]}


def read_tokens(path):
    """Each dataset's ``tokens`` attribute: its rows' tokens."""
    with h5py.File(path, "r") as f:
        return {k: json.loads(f[k].attrs["tokens"]) for k in f if k != "sentence_to_index"}


def test_the_final_progress_line_is_shown_once(files, monkeypatch):
    """It was shown twice: by the last batch's update, then again by the bar's close."""
    tmp, options, weights, text = files
    original = ElmoBiLM.embed_batch

    def slow(self, *args, **kwargs):  # past tqdm's 0.1 s between refreshes: each update shows
        time.sleep(0.15)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ElmoBiLM, "embed_batch", slow)
    result = run_embed(options, weights, text, tmp / "o.hdf5", "--batch-size", "4")
    assert result.exit_code == 0, result.output
    assert result.output.count("4/7") == 1 and result.output.count("7/7") == 1, result.output


def test_embed_names_the_biLM_it_used_once(files):
    tmp, options, weights, text = files
    sha = arrays_sha256(*ElmoBiLM.from_files(options, weights).content())
    result = run_embed(options, weights, text, tmp / "o.hdf5")
    assert result.exit_code == 0, result.output
    named = f"embed: using {options} + {weights} (bilm-tf format), content sha256 {sha}"
    assert result.output.count("embed: using") == 1 and named in result.output, result.output
    result = CliRunner().invoke(app, ["embed", str(text), str(tmp / "d.hdf5"), "--bilm-dir", str(tmp)])
    assert f"embed: using {tmp} (bilm-tf format), content sha256 {sha}" in result.output, result.output


def test_embed_names_an_elmoformanylangs_biLM_and_its_format(files, tmp_path):
    pytest.importorskip("elmoformanylangs")  # builds the directory (the test extra has it)
    from .efml_models import make_efml_dir

    model_dir = make_efml_dir(tmp_path / "efml", 5)
    sha = arrays_sha256(*ElmoBiLM.from_efml(model_dir).content())
    result = CliRunner().invoke(app, ["embed", str(files[3]), str(tmp_path / "o.hdf5"), "--bilm-dir", str(model_dir)])
    assert result.exit_code == 0, result.output
    assert f"embed: using {model_dir} (ELMoForManyLangs format), content sha256 {sha}" in result.output


def test_module_entry_point(files):
    tmp, options, weights, text = files
    out = tmp / "module.hdf5"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "spacy_elmo",
            "embed",
            str(text),
            str(out),
            "--options-file",
            str(options),
            "--weight-file",
            str(weights),
            "--layers",
            "top",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "sent/s" in proc.stderr  # the progress bar
    assert read_output(out)[0]["0"].shape == (5, 16)


def test_without_weight_options_the_bundled_biLM_embeds(files):
    from spacy_elmo.loaders import DEFAULT_BILM_DIR

    tmp, _, _, text = files
    out = tmp / "default.hdf5"
    result = CliRunner().invoke(app, ["embed", str(text), str(out), "--layers", "top"])
    assert result.exit_code == 0, result.output
    data, _ = read_output(out)
    bundled = ElmoBiLM.from_dir(DEFAULT_BILM_DIR)
    expected = bundled.embed_batch([LINES[0].split()])[0][-1]
    numpy.testing.assert_allclose(data["0"], expected, atol=1e-5)
    assert data["0"].shape == (5, bundled.options.output_dim)
    named = f"embed: using the bundled biLM ({DEFAULT_BILM_DIR}, bilm-tf format), content sha256 "
    assert named + arrays_sha256(*bundled.content()) in result.output


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--layers", "middle"], "--layers must be one of"),
        (["--device", "gpu9"], "--device 'gpu9': not a torch device"),
        (["--options-file", "nowhere.json"], "--options-file and --weight-file go together"),
        (["--batch-size", "0"], "--batch-size must be >= 1, got 0"),
        (["--max-length", "-1"], "--max-length must be >= 0 (0: no windows), got -1"),
    ],
)
def test_bad_options_fail_before_any_weights_load(files, monkeypatch, extra, message):
    tmp, _, _, text = files
    monkeypatch.setattr(embed_module, "load_bilm", lambda **kwargs: pytest.fail("weights were loaded"))
    result = CliRunner().invoke(app, ["embed", str(text), str(tmp / "o.hdf5"), *extra])
    assert result.exit_code == 1 and message in result.output
    assert len(result.output.strip().splitlines()) == 1  # one line, no traceback


@pytest.mark.parametrize(
    "name,message", [("no-such-input.txt", "input file not found: {}"), ("a-dir", "the input {} is a directory")]
)
def test_a_missing_input_file_is_one_line_error_and_writes_nothing(files, monkeypatch, name, message):
    tmp, options, weights, _ = files
    missing = tmp / name
    if name == "a-dir":
        missing.mkdir()
    monkeypatch.setattr(embed_module, "load_bilm", lambda **kwargs: pytest.fail("weights were loaded"))
    result = run_embed(options, weights, missing, tmp / "o.hdf5")
    assert result.exit_code == 1 and "error: " + message.format(missing) in result.output
    assert len(result.output.strip().splitlines()) == 1  # one line, no traceback
    assert not list(tmp.glob("o.hdf5*"))


@pytest.mark.parametrize("extra", [[], ["--stateful"]])
def test_an_empty_input_file_gives_an_empty_index_and_no_datasets(files, extra):
    tmp, options, weights, text = files
    text.write_bytes(b"")
    out = tmp / "empty.hdf5"
    result = run_embed(options, weights, text, out, *extra)
    assert result.exit_code == 0, result.output
    assert f"wrote 0 sentences to {out}" in result.output
    with h5py.File(out, "r") as f:
        assert list(f) == ["sentence_to_index"]
    assert read_output(out) == ({}, {})
    assert not list(tmp.glob("empty.hdf5.*"))  # no partial/progress/state files left


def test_very_long_lines_run_in_the_components_windows(files):
    import spacy
    from spacy.tokens import Doc

    tmp, options, weights, _ = files
    words = [f"w{i % 13}" for i in range(300)]
    text = tmp / "long.txt"
    text.write_text(" ".join(words) + "\nshort line\n", encoding="utf8")
    data, _ = read_output_after(run_embed, (tmp, options, weights, text), "long.hdf5", "--max-length", "40")
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"options_file": str(options), "weight_file": str(weights)})
    nlp.get_pipe("elmo").configure(max_segment_length=40)
    expected = nlp(Doc(nlp.vocab, words=words))._.elmo_layers
    assert data["0"].shape == expected.shape == (3, 300, 16)
    numpy.testing.assert_allclose(data["0"], expected, atol=1e-5)
    whole = ElmoBiLM.from_files(options, weights).embed_batch([words])[0]
    assert not numpy.allclose(data["0"], whole, atol=1e-3)  # windowed, not one 300-token run
    numpy.testing.assert_allclose(
        data["1"], ElmoBiLM.from_files(options, weights).embed_batch([["short", "line"]])[0], atol=1e-5
    )


@pytest.mark.slow  # torchrun and two embedding processes (~20 s): make test-slow
def test_torchrun_processes_share_the_lines_and_merge_to_the_single_process_file(files):
    """2 CPU processes under torchrun: each writes its part, process 0 merges; every
    dataset equals the single-process run's byte for byte (one thread per process in both)."""
    tmp, options, weights, text = files
    text.write_text("\n".join(LINES * 5) + "\n", encoding="utf8")  # 35 lines: 18 batches of 2
    common = [str(text), "--options-file", str(options), "--weight-file", str(weights), "--batch-size", "2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    single = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "embed", common[0], str(tmp / "one.hdf5"), *common[1:]],
        capture_output=True,
        text=True,
        env=env,
    )
    assert single.returncode == 0, single.stderr
    shared = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "spacy_elmo",
            "embed",
            common[0],
            str(tmp / "two.hdf5"),
            *common[1:],
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert shared.returncode == 0, shared.stderr
    one, one_index = read_output(tmp / "one.hdf5")
    two, two_index = read_output(tmp / "two.hdf5")
    assert one_index == two_index and sorted(one) == sorted(two) and len(one) == 35
    assert all(one[k].tobytes() == two[k].tobytes() for k in one)
    assert not list(tmp.glob("two.hdf5.*"))  # parts, partials and progress files are gone


def test_a_finished_part_is_kept_when_the_shared_run_is_rerun(files, monkeypatch):
    tmp, options, weights, text = files
    bilm = ElmoBiLM.from_files(options, weights)
    out = tmp / "shared.hdf5"
    monkeypatch.setattr(embed_writer, "MERGE_POLL_SECONDS", 0.01)
    # Process 1 alone finishes its part; process 0 would wait for it, so it runs second.
    embed_module.embed_file(text, out, bilm, batch_size=2, share=(1, 2), progress=False)
    part = embed_module.part_path(out, 1, 2)
    assert part.is_file() and not out.exists()
    calls = []
    original = ElmoBiLM.embed_batch
    monkeypatch.setattr(ElmoBiLM, "embed_batch", lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
    embed_module.embed_file(text, out, bilm, batch_size=2, share=(1, 2), progress=False)
    assert calls == []  # the finished part was not redone
    embed_module.embed_file(text, out, bilm, batch_size=2, share=(0, 2), progress=False)
    merged, index = read_output(out)
    expected = bilm.embed_batch([line.split() for line in LINES])
    assert len(merged) == len(LINES) and len(index) == len(set(LINES))
    for k, array in enumerate(expected):
        numpy.testing.assert_allclose(merged[str(k)], array, atol=1e-5)
    assert read_tokens(out) == {str(k): line.split() for k, line in enumerate(LINES)}  # the merge keeps them
    assert not part.exists()


@pytest.mark.parametrize(
    "extra,env,message",
    [
        (["--precision", "int4"], {}, "--precision must be one of"),
        (["--precision", "int8", "--device", "cuda"], {}, "--precision 'int8' runs on the CPU only"),
        (["--stateful"], {"RANK": "0", "WORLD_SIZE": "2", **TORCHRUN_ENV}, "--stateful carries state"),
    ],
)
def test_more_bad_options_fail_before_any_weights_load(files, monkeypatch, extra, env, message):
    tmp, _, _, text = files
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(embed_module, "load_bilm", lambda **kwargs: pytest.fail("weights were loaded"))
    result = CliRunner().invoke(app, ["embed", str(text), str(tmp / "o.hdf5"), *extra])
    assert result.exit_code == 1 and message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_an_unwritable_output_path_fails_before_any_weights_load(files, monkeypatch):
    tmp, _, _, text = files
    monkeypatch.setattr(embed_module, "load_bilm", lambda **kwargs: pytest.fail("weights were loaded"))
    (tmp / "a_file").write_text("x")
    for out, message in ((tmp / "a_file" / "o.hdf5", "cannot be written"), (tmp, "is a directory")):
        result = CliRunner().invoke(app, ["embed", str(text), str(out)])
        assert result.exit_code == 1 and "OUTPUT_FILE" in result.output and message in result.output
        assert len(result.output.strip().splitlines()) == 1


def test_int8_embeds_close_to_fp32(files):
    tmp, options, weights, text = files
    exact, _ = read_output_after(run_embed, files, "fp32.hdf5")
    quantized, _ = read_output_after(run_embed, files, "int8.hdf5", "--precision", "int8")
    keys = [k for k in exact if exact[k].size]
    a = numpy.concatenate([exact[k] for k in keys], axis=1)
    b = numpy.concatenate([quantized[k] for k in keys], axis=1)
    assert numpy.abs(a - b).max() > 1e-4  # int8 really ran
    cosine = (a * b).sum(-1) / (numpy.linalg.norm(a, axis=-1) * numpy.linalg.norm(b, axis=-1))
    assert cosine.min() > 0.98 and cosine.mean() > 0.995  # and stayed close (random tiny weights)


def test_stateful_run_killed_between_state_and_progress_resumes_to_the_same_output(files, monkeypatch):
    """The kill lands after a checkpoint's state file is written but before its progress
    file: the resumed run must take the state the last progress file vouches for."""
    tmp, options, weights, text = files
    reference, _ = read_output_after(run_embed, files, "full.hdf5", "--stateful", "--batch-size", "2")
    monkeypatch.setattr(embed_writer, "CHECKPOINT_SECONDS", 0.0)
    original = embed_writer.write_json_atomic
    calls = {"n": 0}

    def killed_at_second_progress(path, data):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        original(path, data)

    monkeypatch.setattr(embed_writer, "write_json_atomic", killed_at_second_progress)
    out = tmp / "resumed.hdf5"
    bilm = ElmoBiLM.from_files(options, weights)
    with pytest.raises(KeyboardInterrupt):
        embed_module.embed_file(text, out, bilm, batch_size=2, stateful=True, progress=False)
    assert json.loads(out.with_name("resumed.hdf5.progress.json").read_text())["done_batches"] == 1
    monkeypatch.setattr(embed_writer, "write_json_atomic", original)
    embed_module.embed_file(
        text, out, ElmoBiLM.from_files(options, weights), batch_size=2, stateful=True, progress=False
    )
    data, _ = read_output(out)
    assert sorted(data) == sorted(reference)
    for key in reference:
        numpy.testing.assert_array_equal(data[key], reference[key])
    assert not list(tmp.glob("resumed.hdf5.*"))  # no state, progress or partial file left


def test_the_output_is_on_disk_before_the_progress_file_vouches_for_it(files, monkeypatch):
    tmp, options, weights, text = files
    events = []
    real_fsync = os.fsync

    def recording_fsync(fd):
        events.append(("fsync", os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))))
        real_fsync(fd)

    original = embed_writer.write_json_atomic
    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(embed_writer, "CHECKPOINT_SECONDS", 0.0)
    monkeypatch.setattr(
        embed_writer, "write_json_atomic", lambda p, d: events.append(("progress", d["done_batches"])) or original(p, d)
    )
    embed_module.embed_file(
        text, tmp / "o.hdf5", ElmoBiLM.from_files(options, weights), batch_size=3, stateful=True, progress=False
    )
    progress_at = [k for k, event in enumerate(events) if event[0] == "progress"]
    assert [events[k][1] for k in progress_at] == [1, 2, 3]
    for k in progress_at:
        before = [name for kind, name in events[:k] if kind == "fsync"]
        batches = events[k][1]
        # Since the previous progress file: the HDF5 output, then this checkpoint's state file, both synced.
        assert before[-2] == "o.hdf5.partial" and before[-1].startswith(f".o.hdf5.state-{batches}.npz.tmp")


def test_an_existing_output_is_not_replaced_without_overwrite(files, monkeypatch):
    tmp, options, weights, text = files
    out = tmp / "kept.hdf5"
    out.write_bytes(b"someone else's file")
    result = run_embed(options, weights, text, out)
    assert result.exit_code == 1 and "already exists: give --overwrite" in result.output
    assert len(result.output.strip().splitlines()) == 1 and out.read_bytes() == b"someone else's file"
    assert run_embed(options, weights, text, out, "--overwrite").exit_code == 0
    data, _ = read_output(out)
    assert len(data) == len(LINES)
    assert run_embed(options, weights, text, out).exit_code == 1  # a finished run is not redone either


def test_embed_windows_lines_as_the_component_does_by_default():
    # The CLI may not import the layers (its --help stays free of torch): both take the default
    # from spacy_elmo.defaults, which imports nothing; this keeps the two equal.
    import inspect

    from spacy_elmo.layers.bilm_layer import DEFAULT_MAX_SEGMENT_LENGTH

    option = inspect.signature(embed_module.embed_command).parameters["max_length"].default
    assert option.default == DEFAULT_MAX_SEGMENT_LENGTH
    assert inspect.signature(embed_module.embed_file).parameters["max_length"].default == DEFAULT_MAX_SEGMENT_LENGTH
