"""``ship``: a pretrained biLM as the float16 files the package bundles.

    python scripts/ship.py BILM_DIR DEST [--max-mb 25]

Writes ``options.json`` + float16 ``weights.hdf5`` (half the size; readers
upcast to float32), ``vocab.txt`` + float16 ``softmax.hdf5`` (so the shipped
biLM can be warm-started: ``pretrain --paths.init_dir``) and
``provenance.json`` (the training config, steps, tokens seen, also before a
warm start, hours, held-out perplexity, the corpus report) to DEST, a project output (``training/default_bilm`` in
``project.yml``). Refuses a result over ``--max-mb`` megabytes. Putting it
into the package is a separate, deliberate step: ``install_default.py``.
"""
import json
import shutil
from pathlib import Path
from typing import Optional

import h5py
import numpy
import typer
from confection import Config

from project_errors import ProjectDataError
from spacy_elmo.bilm import ElmoBiLM
from spacy_elmo.bilm.model import OPTIONS_NAME, WEIGHTS_NAME
from spacy_elmo.io import read_jsonl
from spacy_elmo.pretrain.outputs import SOFTMAX_NAME, VOCAB_NAME

PROVENANCE_NAME = "provenance.json"
# What ship writes and install_default copies: the package's default_bilm folder.
SHIPPED_FILES = (OPTIONS_NAME, WEIGHTS_NAME, VOCAB_NAME, SOFTMAX_NAME, PROVENANCE_NAME)

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


def warm_start_provenance(config_text: Optional[str]) -> Optional[dict]:
    """The provenance of the biLM this one was warm-started from (``paths.init_dir``), if it has one."""
    if not config_text:
        return None
    init_dir = Config().from_str(config_text, interpolate=False)["paths"].get("init_dir")
    path = Path(init_dir) / PROVENANCE_NAME if init_dir else None
    return json.loads(path.read_text(encoding="utf8")) if path is not None and path.is_file() else None


def provenance(bilm_dir: Path, size_mb: float, corpus_report: Optional[Path] = None) -> dict:
    """How the biLM in `bilm_dir` was trained (``pretrain``'s outputs), for provenance.json."""
    train = [r for r in read_jsonl(bilm_dir / "metrics.jsonl") if "loss" in r]
    config, perplexity = bilm_dir / "config.cfg", bilm_dir / "perplexity.json"
    config_text = config.read_text(encoding="utf8") if config.is_file() else None
    before = warm_start_provenance(config_text)
    tokens = train[-1]["tokens"] if train else None
    earlier = (before or {}).get("tokens_seen_total", (before or {}).get("tokens_seen", 0))
    seconds = train[-1]["elapsed"] if train else None
    earlier_seconds = (before or {}).get("training_seconds_total", (before or {}).get("training_seconds", 0))
    return {
        "trained_with": "python -m spacy_elmo pretrain (see config.cfg)",
        "config": config_text,
        "steps": train[-1]["step"] if train else None,
        "tokens_seen": tokens,
        "tokens_seen_total": tokens + (earlier or 0) if tokens is not None else None,
        "training_seconds": seconds,
        "training_seconds_total": seconds + (earlier_seconds or 0) if seconds is not None else None,
        "perplexity": json.loads(perplexity.read_text()) if perplexity.is_file() else None,
        "corpus": json.loads(corpus_report.read_text())["total"] if corpus_report is not None else None,
        "warm_started_from": before,
        "size_mb": round(size_mb, 2),
    }


def write_half_softmax(source: Path, dest: Path) -> None:
    """``pretrain``'s softmax.hdf5 with float16 arrays (its kind and settings kept)."""
    with h5py.File(source, "r") as f, h5py.File(dest, "w") as out:
        for key, value in f.attrs.items():
            out.attrs[key] = value
        for name in f.keys():
            array = numpy.asarray(f[name])
            out.create_dataset(name, data=array.astype(numpy.float16) if array.dtype.kind == "f" else array)


def ship(bilm_dir: Path, dest: Path, max_mb: float = 25.0, corpus_report: Optional[Path] = None) -> Path:
    bilm = ElmoBiLM.from_dir(bilm_dir)
    for name in (VOCAB_NAME, SOFTMAX_NAME):
        if not (bilm_dir / name).is_file():
            raise ProjectDataError(f"{bilm_dir}: no {name} (ship takes a `pretrain` output directory)")
    tmp = fresh_tmp(dest)
    bilm.to_files(tmp / OPTIONS_NAME, tmp / WEIGHTS_NAME, dtype="float16")
    shutil.copyfile(bilm_dir / VOCAB_NAME, tmp / VOCAB_NAME)
    write_half_softmax(bilm_dir / SOFTMAX_NAME, tmp / SOFTMAX_NAME)
    size_mb = sum(p.stat().st_size for p in tmp.iterdir()) / 1e6
    if size_mb > max_mb:
        shutil.rmtree(tmp)
        raise ProjectDataError(f"{bilm_dir}: the float16 biLM takes {size_mb:.1f} MB, over the {max_mb} MB limit")
    (tmp / PROVENANCE_NAME).write_text(json.dumps(provenance(bilm_dir, size_mb, corpus_report), indent=2) + "\n", encoding="utf8")
    swap_in(tmp, dest)
    return dest


@app.command()
def main(
    bilm_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="a `pretrain` output directory"),
    dest: Path = typer.Argument(..., help="where the float16 biLM goes (a project output, not the package)"),
    max_mb: float = typer.Option(25.0, "--max-mb", help="refuse a biLM larger than this"),
    corpus_report: Optional[Path] = typer.Option(None, "--corpus-report", exists=True, dir_okay=False, help="pretrain_corpus's report.json: its totals go into the provenance"),
):
    """Write BILM_DIR as float16, with its provenance, to DEST."""
    out = ship(bilm_dir, dest, max_mb, corpus_report)
    typer.echo(f"float16 biLM written to {out} ({json.loads((out / PROVENANCE_NAME).read_text())['size_mb']} MB)")


if __name__ == "__main__":
    app()
