"""``ship``: a pretrained biLM as the float16 files the package bundles.

    python scripts/ship.py BILM_DIR DEST [--max-mb 25]

Writes ``options.json`` + float16 ``weights.hdf5`` (half the size; readers
upcast to float32) and ``provenance.json`` (the training config, steps, dev
perplexity) to DEST, a project output (``training/default_bilm`` in
``project.yml``). Refuses a result over ``--max-mb`` megabytes. Putting it
into the package is a separate, deliberate step: ``install_default.py``.
"""
import json
import shutil
from pathlib import Path

import typer

from project_errors import ProjectDataError
from spacy_elmo.bilm import ElmoBiLM
from spacy_elmo.bilm.model import OPTIONS_NAME, WEIGHTS_NAME
from spacy_elmo.io import read_jsonl

PROVENANCE_NAME = "provenance.json"
# What ship writes and install_default copies: the package's default_bilm folder.
SHIPPED_FILES = (OPTIONS_NAME, WEIGHTS_NAME, PROVENANCE_NAME)

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)


def fresh_tmp(dest: Path) -> Path:
    """An empty folder next to `dest` to build it in (see ``swap_in``)."""
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def swap_in(tmp: Path, dest: Path) -> None:
    """Replace `dest` with the finished `tmp`: a failure before this leaves the old `dest` whole."""
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)


def provenance(bilm_dir: Path, size_mb: float) -> dict:
    """How the biLM in `bilm_dir` was trained (``pretrain``'s outputs), for provenance.json."""
    train = [r for r in read_jsonl(bilm_dir / "metrics.jsonl") if "loss" in r]
    config, perplexity = bilm_dir / "config.cfg", bilm_dir / "perplexity.json"
    return {
        "trained_with": "python -m spacy_elmo pretrain (see config.cfg)",
        "config": config.read_text(encoding="utf8") if config.is_file() else None,
        "steps": train[-1]["step"] if train else None,
        "training_seconds": train[-1]["elapsed"] if train else None,
        "perplexity": json.loads(perplexity.read_text()) if perplexity.is_file() else None,
        "size_mb": round(size_mb, 2),
    }


def ship(bilm_dir: Path, dest: Path, max_mb: float = 25.0) -> Path:
    bilm = ElmoBiLM.from_dir(bilm_dir)
    tmp = fresh_tmp(dest)
    bilm.to_files(tmp / OPTIONS_NAME, tmp / WEIGHTS_NAME, dtype="float16")
    size_mb = sum(p.stat().st_size for p in tmp.iterdir()) / 1e6
    if size_mb > max_mb:
        shutil.rmtree(tmp)
        raise ProjectDataError(f"{bilm_dir}: the float16 biLM takes {size_mb:.1f} MB, over the {max_mb} MB limit")
    (tmp / PROVENANCE_NAME).write_text(json.dumps(provenance(bilm_dir, size_mb), indent=2) + "\n", encoding="utf8")
    swap_in(tmp, dest)
    return dest


@app.command()
def main(
    bilm_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="a `pretrain` output directory"),
    dest: Path = typer.Argument(..., help="where the float16 biLM goes (a project output, not the package)"),
    max_mb: float = typer.Option(25.0, "--max-mb", help="refuse a biLM larger than this"),
):
    """Write BILM_DIR as float16, with its provenance, to DEST."""
    out = ship(bilm_dir, dest, max_mb)
    typer.echo(f"float16 biLM written to {out} ({json.loads((out / PROVENANCE_NAME).read_text())['size_mb']} MB)")


if __name__ == "__main__":
    app()
