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


@pytest.mark.parametrize("command", ["embed", "pretrain", "perplexity", "convert-checkpoint"])
def test_each_commands_arguments_are_named_alike_and_none_looks_like_options(command):
    """convert-checkpoint's usage once read `[OPTIONS] {CKPT_PREFIX} {OPTIONS} {OUT_DIR}`: an argument
    named OPTIONS beside the options, and upper case where embed's are lower case."""
    import re

    text, _ = run_help([command, "--help"])
    usage = text.split(f"Usage: python -m spacy_elmo {command} [OPTIONS] ")[1].split("  ")[0]
    arguments = re.findall(r"\{([^}]*)\}", usage)
    assert arguments and all(re.fullmatch(r"[a-z_]+", name) for name in arguments), usage
    assert not any(name == "options" for name in arguments)


def test_convert_checkpoints_usage_names_its_three_arguments():
    text, _ = run_help(["convert-checkpoint", "--help"])
    assert "[OPTIONS] {checkpoint_prefix} {options_file} {output_dir}" in text
    assert "checkpoint_prefix <path> The checkpoint prefix" in text and "OPTIONS <path>" not in text
