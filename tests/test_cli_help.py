"""`python -m spacy_elmo ... --help` answers without importing torch or spaCy (they take seconds)."""

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "spacy", "thinc")
# Runs the CLI as `python -m spacy_elmo ARGS` would, then reports which heavy modules it imported.
WRAPPER = """
import json, runpy, sys
args, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sys.argv = ["spacy_elmo"] + args
try:
    runpy.run_module("spacy_elmo", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
print(json.dumps(sorted(name for name in heavy if name in sys.modules)))
"""


def run_help(args):
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, json.dumps(args), json.dumps(HEAVY)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    *help_lines, imported = proc.stdout.strip().splitlines()
    return " ".join(" ".join(help_lines).split()), json.loads(imported)


@pytest.mark.parametrize(
    "args,shows",
    [
        (["--help"], "embed"),
        (["embed", "--help"], "--precision"),
        (["pretrain", "--help"], "--progress"),
        (["perplexity", "--help"], "--text-format"),
        (["convert-checkpoint", "--help"], "dump_weights would write"),
    ],
)
def test_help_imports_neither_torch_nor_spacy(args, shows):
    text, imported = run_help(args)
    assert shows in text
    assert imported == []


def test_embed_help_states_the_measured_int8_deviation():
    text, _ = run_help(["embed", "--help"])
    assert "max abs difference from fp32 0.11-0.15 per layer" in text and "1e-2" not in text


def test_embed_help_points_to_its_docs_page():
    """It once said "see `embed`'s module docs", which a user of the command line cannot open."""
    text, _ = run_help(["embed", "--help"])
    assert "docs/embed.md" in text and "module docs" not in text


def test_embed_help_names_its_arguments_as_its_errors_do():
    """They were lower case (``{input_file} {output_file}``), while its errors say OUTPUT_FILE."""
    text, _ = run_help(["embed", "--help"])
    assert "INPUT_FILE OUTPUT_FILE" in text.replace("{", "").replace("}", "") and "output_file" not in text
