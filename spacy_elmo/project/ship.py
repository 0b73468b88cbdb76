"""``ship``: make a pretrained biLM the package's default weights.

    python -m spacy_elmo.project.ship BILM_DIR [DEST] [--max-mb 25]

Writes ``options.json`` + float16 ``weights.hdf5`` (half the size; readers
upcast to float32) and ``provenance.json`` (the training config, steps, dev
perplexity) to DEST, by default ``spacy_elmo/data/default_bilm``, which
``nlp.add_pipe("elmo")`` loads when given no weights. Refuses a result over
``--max-mb`` megabytes.
"""
import json
import shutil
from pathlib import Path

import typer

from ..bilm import ElmoBiLM
from ..loaders import DEFAULT_BILM_DIR
from . import ProjectDataError

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)


def ship(bilm_dir: Path, dest: Path, max_mb: float = 25.0) -> Path:
    bilm = ElmoBiLM.from_dir(bilm_dir)
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    bilm.to_files(tmp / "options.json", tmp / "weights.hdf5", dtype="float16")
    size_mb = sum(p.stat().st_size for p in tmp.iterdir()) / 1e6
    if size_mb > max_mb:
        shutil.rmtree(tmp)
        raise ProjectDataError(f"{bilm_dir}: the float16 biLM takes {size_mb:.1f} MB, over the {max_mb} MB limit")
    metrics = [json.loads(line) for line in (bilm_dir / "metrics.jsonl").read_text(encoding="utf8").splitlines()
               if line.strip()] if (bilm_dir / "metrics.jsonl").is_file() else []
    train = [r for r in metrics if "loss" in r]
    provenance = {
        "trained_with": "python -m spacy_elmo pretrain (see config.cfg)",
        "config": (bilm_dir / "config.cfg").read_text(encoding="utf8") if (bilm_dir / "config.cfg").is_file() else None,
        "steps": train[-1]["step"] if train else None,
        "training_seconds": train[-1]["elapsed"] if train else None,
        "perplexity": json.loads((bilm_dir / "perplexity.json").read_text()) if (bilm_dir / "perplexity.json").is_file() else None,
        "size_mb": round(size_mb, 2),
    }
    (tmp / "provenance.json").write_text(json.dumps(provenance, indent=2) + "\n", encoding="utf8")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


@app.command()
def main(
    bilm_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="a `pretrain` output directory"),
    dest: Path = typer.Argument(DEFAULT_BILM_DIR, help="where the default weights go"),
    max_mb: float = typer.Option(25.0, "--max-mb", help="refuse a biLM larger than this"),
):
    """Copy BILM_DIR as float16 into the package's default-weights folder."""
    out = ship(bilm_dir, dest, max_mb)
    typer.echo(f"default biLM written to {out} ({json.loads((out / 'provenance.json').read_text())['size_mb']} MB)")


if __name__ == "__main__":
    app()
