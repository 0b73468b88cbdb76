"""``install_default``: make ``ship``'s float16 biLM the package's default weights.

    python scripts/install_default.py SHIPPED_DIR

Copies ``options.json``, ``weights.hdf5`` and ``provenance.json`` from
SHIPPED_DIR (``ship``'s output, ``training/default_bilm`` in ``project.yml``),
and its LM head (``vocab.txt``, ``softmax.hdf5``) where ``ship`` kept one,
to ``spacy_elmo/data/default_bilm`` (replacing the folder, keeping its
NOTICE.md), which ``nlp.add_pipe("elmo")`` loads when given no weights and
the wheel bundles. The only step of the project that
writes into the package: run it on purpose, then commit the folder.
"""

import shutil
from pathlib import Path

import typer
from project_errors import ProjectDataError
from ship import BILM_FILES, HEAD_FILES, fresh_tmp, swap_in

from spacy_elmo.bilm import ElmoBiLM
from spacy_elmo.loaders import DEFAULT_BILM_DIR

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)
# Which texts the bundled biLM learned from, under which terms: written by hand, so carried over
# from the folder being replaced (a biLM trained on other sources needs it rewritten).
NOTICE_NAME = "NOTICE.md"


def install(shipped_dir: Path, dest: Path = DEFAULT_BILM_DIR) -> Path:
    missing = [name for name in BILM_FILES if not (shipped_dir / name).is_file()]
    head = [name for name in HEAD_FILES if (shipped_dir / name).is_file()]
    if head and len(head) < len(HEAD_FILES):
        missing += [name for name in HEAD_FILES if name not in head]
    if missing:
        raise ProjectDataError(f"{shipped_dir}: no {', '.join(missing)} (run `spacy project run ship-default` first)")
    ElmoBiLM.from_dir(shipped_dir)  # the package must be able to load what it bundles
    tmp = fresh_tmp(dest)
    for name in BILM_FILES + tuple(head):
        shutil.copyfile(shipped_dir / name, tmp / name)
    if (dest / NOTICE_NAME).is_file():
        shutil.copyfile(dest / NOTICE_NAME, tmp / NOTICE_NAME)
    swap_in(tmp, dest)
    return dest


@app.command()
def main(
    shipped_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="`ship`'s output folder"),
):
    """Copy SHIPPED_DIR into the package's default-weights folder."""
    try:
        out = install(shipped_dir)
    except ProjectDataError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=1)
    typer.echo(f"default biLM installed in {out}")
    if (out / NOTICE_NAME).is_file():
        typer.echo(f"{NOTICE_NAME} kept: check that it names the texts this biLM learned from")


if __name__ == "__main__":
    app()
