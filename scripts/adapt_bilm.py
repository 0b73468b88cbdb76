"""``adapt-bilm``: continue a biLM on a task's *training* text (the paper's supplement).

    python scripts/adapt_bilm.py TEXT_DIR OUTPUT_DIR --init-dir BILM \\
        --exclude corpus/conll/dev.spacy --exclude corpus/conll/test.spacy \\
        [--config configs/pretrain_adapt.cfg] [--head-steps 100] [--steps 200] [PRETRAIN OVERRIDES...]

TEXT_DIR holds ``train.txt`` and ``dev.txt`` (one tokenised sentence per
line), as ``pretrain_corpus.py --sources task_train`` writes them from the
task's training split. A line that matches a sentence of an ``--exclude``
file (the task's dev and test splits; the same match key as
``pretrain_corpus.py``) makes the step refuse, naming the count, before any
training: the biLM must never see evaluation text.

Three ``pretrain`` runs, each resumable (re-run to continue; a larger
``--steps`` trains on):

1. ``OUTPUT_DIR_head``: the starting biLM fixed, a fresh LM head trained
   alone for ``--head-steps`` (the bundled biLM ships without a head, so its
   perplexity needs one); (2) starts from it.
2. ``OUTPUT_DIR``: warm-started from (1), the biLM and the head trained
   together for ``--steps``; an ordinary biLM directory (options.json,
   weights.hdf5, vocab.txt, softmax.hdf5) the task configs take through
   ``--paths.elmo_options`` and ``--paths.elmo_weights``. Its perplexity is
   the "after" figure.
3. ``OUTPUT_DIR_before``: the starting biLM fixed, its head trained alone for
   as many steps as (1) and (2) together, on the same text. Its perplexity is
   the "before" figure: (1)'s head alone is far from fitted after ``--head-steps``
   (measured on CoNLL's held-out 2% of its text: 465.6 after 100 steps, still falling fast), so beside
   (2) it would credit the adaptation with what is only more head training.

All three share one vocabulary, so their perplexities compare.
"""

from pathlib import Path
from typing import Dict, List, Set

import typer
from pretrain_corpus import eval_keys, make_nlp, match_key
from project_errors import ProjectDataError

from spacy_elmo.errors import ElmoError
from spacy_elmo.files.paths import require_file
from spacy_elmo.files.text_lines import iter_utf8_lines

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)


def overlap_count(text_files: List[Path], excluded: Dict[str, Set[str]]) -> Dict[str, int]:
    """Lines of the text files whose match key is an evaluation sentence's, per --exclude file."""
    counts: Dict[str, int] = {}
    for path in text_files:
        for line in iter_utf8_lines(path, ProjectDataError):
            for found_in in sorted(excluded.get(match_key(line), ())):
                counts[found_in] = counts.get(found_in, 0) + 1
    return counts


def check_no_overlap(text_files: List[Path], exclude: List[Path]) -> None:
    counts = overlap_count(text_files, eval_keys(exclude, make_nlp()))
    if counts:
        listed = ", ".join(f"{n} sentence(s) of {name}" for name, n in counts.items())
        raise ProjectDataError(
            f"{' and '.join(map(str, text_files))}: the text overlaps the evaluation splits ({listed}); "
            "adapt-bilm trains on the task's training split only: rebuild the text with "
            "pretrain_corpus.py --exclude (it drops those sentences)"
        )


def run_pretrain(config: Path, output_dir: Path, overrides: Dict[str, object]) -> Dict:
    from spacy_elmo.pretrain import load_config, pretrain

    return pretrain(load_config(config, overrides), output_dir)


def head_dir_of(output_dir: Path) -> Path:
    return output_dir.with_name(output_dir.name + "_head")


def before_dir_of(output_dir: Path) -> Path:
    return output_dir.with_name(output_dir.name + "_before")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def main(
    ctx: typer.Context,
    text_dir: Path = typer.Argument(..., help="train.txt and dev.txt: the task's training text"),
    output_dir: Path = typer.Argument(
        ..., help="The adapted biLM; the head-only runs go to OUTPUT_DIR_head and OUTPUT_DIR_before"
    ),
    init_dir: Path = typer.Option(..., "--init-dir", help="The biLM to adapt (e.g. spacy_elmo/data/default_bilm)"),
    exclude: List[Path] = typer.Option(..., "--exclude", help="The task's dev and test .spacy files (repeat)"),
    config: Path = typer.Option(Path("configs/pretrain_adapt.cfg"), "--config"),
    head_steps: int = typer.Option(100, "--head-steps", min=1, help="Steps of the head-only run"),
    steps: int = typer.Option(200, "--steps", min=1, help="Steps of the adaptation (biLM and head)"),
):
    """Refuse evaluation text; fit a head to the starting biLM; adapt both; then the fixed biLM's
    head alone for the same number of steps (the fair "before")."""
    from spacy.cli._util import parse_config_overrides

    try:
        train, dev = (
            require_file(text_dir / name, "adapt-bilm text (pretrain_corpus.py writes it)")
            for name in ("train.txt", "dev.txt")
        )
        check_no_overlap([train, dev], exclude)
        extra = parse_config_overrides(ctx.args)
        paths = {"paths.train": str(train), "paths.dev": str(dev)}
        head_dir = head_dir_of(output_dir)
        head_only = {**paths, "paths.init_dir": str(init_dir), "training.train_only": "head"}
        run_pretrain(config, head_dir, {**head_only, "training.max_steps": head_steps, **extra})
        summary = run_pretrain(
            config, output_dir, {**paths, "paths.init_dir": str(head_dir), "training.max_steps": steps, **extra}
        )
        before = {**head_only, "training.max_steps": head_steps + steps, **extra}
        run_pretrain(config, before_dir_of(output_dir), before)
    except ElmoError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=1)
    typer.echo(f"adapted biLM in {output_dir} ({summary['steps']} steps; head-only start in {head_dir})", err=True)


if __name__ == "__main__":
    app()
