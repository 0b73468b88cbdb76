"""`embed` and the component name their weights alike, and `embed` replaces no file it reads
(issue 76 items 12, 14, 16; issue 75: one resolution of the weights)."""

import os

import pytest
import spacy
from typer.testing import CliRunner

from spacy_elmo.cli import app, embed_writer
from spacy_elmo.cli import embed as embed_module
from spacy_elmo.errors import ElmoError, ElmoFileNotFoundError

from . import test_cli_embed
from .test_cli_embed import run_embed

files = test_cli_embed.files  # the fixture: a tiny biLM's files and an input text


def one_line_error(args):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def test_the_spacy_tokenizer_pipeline_is_never_the_output(files, monkeypatch, tmp_path):
    """It once replaced PIPE/tokenizer with the HDF5 output and exited 0; spacy.load(PIPE) then failed."""
    _, options, weights, text = files
    pipeline = tmp_path / "pipe"
    spacy.blank("en").to_disk(pipeline)
    monkeypatch.setattr(embed_module, "load_bilm", lambda **kwargs: pytest.fail("weights were loaded"))
    for name in ("tokenizer", "config.cfg", "vocab/strings.json"):
        out = pipeline / name
        before = out.read_bytes()
        line = one_line_error(
            ["embed", str(text), str(out), "--options-file", str(options), "--weight-file", str(weights)]
            + ["--spacy-tokenizer", str(pipeline), "--overwrite"]
        )
        assert line.startswith(f"error: OUTPUT_FILE {out} is the file {name} of the --spacy-tokenizer pipeline ")
        assert out.read_bytes() == before
    spacy.load(pipeline)


def test_a_symlink_loop_as_bilm_dir_is_named_as_the_component_names_it(files, tmp_path):
    _, _, _, text = files
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    line = one_line_error(["embed", str(text), str(tmp_path / "o.hdf5"), "--bilm-dir", str(loop)])
    assert line == f"error: biLM directory not found (or not a directory): {loop}"
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"bilm_dir": str(loop)})
    with pytest.raises(ElmoFileNotFoundError, match=f"elmo bilm_dir not found \\(or not a directory\\): {loop}"):
        nlp("text")


def test_an_empty_bilm_dir_is_refused_alike_by_embed_and_the_component(files, tmp_path):
    """embed took "" as the current directory; the component raised a builtin FileNotFoundError."""
    _, _, _, text = files
    line = one_line_error(["embed", str(text), str(tmp_path / "o.hdf5"), "--bilm-dir", ""])
    assert line == "error: --bilm-dir is empty: name a path, or leave it out"
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"bilm_dir": ""})
    with pytest.raises(ElmoFileNotFoundError, match="^elmo bilm_dir is empty: name a path, or leave it null$"):
        nlp("text")


def test_a_bilm_dir_whose_name_is_not_utf8_is_refused_in_one_line(files, tmp_path):
    """A config cannot hold the name (spaCy's own check of the component's config raises
    UnicodeEncodeError before the component exists), so embed refuses it too."""
    _, options, weights, text = files
    directory = os.fsdecode(os.fsencode(str(tmp_path)) + b"/bilm\xff")
    try:
        os.mkdir(directory)
    except OSError:  # a file system that takes UTF-8 names only (APFS)
        pytest.skip("this file system refuses a name that is not UTF-8")
    for name in ("options.json", "weights.hdf5"):
        os.link(options.parent / name, os.path.join(directory, name))
    line = one_line_error(["embed", str(text), str(tmp_path / "o.hdf5"), "--bilm-dir", directory])
    assert line.startswith("error: --bilm-dir b'") and line.endswith(
        "bilm\\xff' has a name that is not valid UTF-8: rename it, or give a link to it with a UTF-8 name"
    )
    from spacy_elmo.loaders import resolve_bilm

    with pytest.raises(ElmoError, match="^elmo bilm_dir b'.*' has a name that is not valid UTF-8"):
        resolve_bilm(bilm_dir=directory)


def test_an_output_removed_while_embed_writes_it_is_said_to_be_lost(files, monkeypatch):
    """The run died with FileNotFoundError on its final rename."""
    tmp, options, weights, text = files
    out = tmp / "o.hdf5"
    original = embed_writer.write_batch

    def removing_the_partial(*args, **kwargs):
        original(*args, **kwargs)
        embed_writer.partial_path(out).unlink(missing_ok=True)

    monkeypatch.setattr(embed_writer, "write_batch", removing_the_partial)
    result = run_embed(options, weights, text, out)
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines()[-1] == (
        f"error: {out}.partial was removed while this run wrote it: this run's output is lost, nothing else "
        "(the input and the biLM untouched); run the command again to redo it"
    )
    assert "Traceback" not in result.output and not out.exists()
    monkeypatch.setattr(embed_writer, "write_batch", original)
    assert run_embed(options, weights, text, out).exit_code == 0 and out.is_file()


def test_embed_and_the_component_share_the_default_window_length():
    import inspect

    from spacy_elmo.defaults import DEFAULT_MAX_SEGMENT_LENGTH
    from spacy_elmo.settings import ElmoSettings

    option = inspect.signature(embed_module.embed_command).parameters["max_length"].default
    assert option.default == DEFAULT_MAX_SEGMENT_LENGTH == ElmoSettings().max_segment_length
    source = inspect.getsource(embed_module)
    assert "256" not in source.replace("sha256", "")
