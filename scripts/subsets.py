"""``subsets``: nested, seeded training subsets of whole documents, for the learning curve.

    python scripts/subsets.py TRAIN.spacy OUT_DIR --percents 1,5,10,25 [--seed 13]

The documents are shuffled once with ``--seed``; the subset of p% is the
shortest prefix of that order holding at least p% of the training sentences
(a CoNLL document's sentences; a sentiment snippet counts as one). Every
subset is therefore a prefix of the next larger one. Writes
``OUT_DIR/train_{p}pct.spacy`` and ``OUT_DIR/subsets.json`` (the seed, the
sha256 of TRAIN and, per subset, its document indices and sentence count),
so the sample is written down and checked when it is made again.
"""

import random
from pathlib import Path
from typing import Any, Dict, List, Sequence

import spacy
import typer
from project_errors import ProjectDataError
from spacy.tokens import Doc, DocBin

from spacy_elmo.files.hashing import file_sha256
from spacy_elmo.files.json_files import read_json, write_json_atomic

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)


def sentence_count(doc: Doc) -> int:
    return sum(1 for _ in doc.sents) if doc.has_annotation("SENT_START") else 1


def nested_subsets(sentences_per_doc: Sequence[int], percents: Sequence[float], seed: int) -> Dict[str, List[int]]:
    """Document indices per percent: prefixes of one seeded order (smaller ones nest in larger ones)."""
    order = list(range(len(sentences_per_doc)))
    random.Random(seed).shuffle(order)
    total = sum(sentences_per_doc)
    subsets = {}
    for percent in sorted(percents):
        wanted, taken, prefix = total * percent / 100, 0, []
        for index in order:
            if taken >= wanted:
                break
            prefix.append(index)
            taken += sentences_per_doc[index]
        subsets[subset_name(percent)] = sorted(prefix)
    return subsets


def check_written_down(listing: Path, record: Dict) -> None:
    """The same data and seed must give the subsets written down earlier (a changed
    sampling rule would silently change every learning-curve point)."""
    if not listing.is_file():
        return
    old = read_json(listing, ProjectDataError)
    if (old["train_sha256"], old["seed"]) != (record["train_sha256"], record["seed"]):
        return
    for name, subset in record["subsets"].items():
        if name in old["subsets"] and old["subsets"][name]["docs"] != subset["docs"]:
            raise ProjectDataError(f"{listing}: {name} differs from the subset written down for the same data and seed")


def subset_name(percent: float) -> str:
    return f"train_{percent:g}pct"


def parse_percents(text: str) -> List[float]:
    try:
        percents = [float(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise typer.BadParameter(f"--percents must be comma-separated numbers, got {text!r}") from None
    if not percents or any(not 0 < p < 100 for p in percents):
        raise typer.BadParameter(f"--percents must lie strictly between 0 and 100, got {text!r}")
    return percents


@app.command()
def main(
    train: Path = typer.Argument(..., exists=True, dir_okay=False, help="the full training .spacy"),
    out_dir: Path = typer.Argument(..., help="where train_{p}pct.spacy and subsets.json go"),
    percents: str = typer.Option("1,5,10,25", "--percents", help="subset sizes, % of the training sentences"),
    seed: int = typer.Option(13, "--seed", help="the one shuffle of the documents"),
):
    """Write nested seeded subsets of TRAIN (whole documents)."""
    nlp = spacy.blank("en")
    docs = list(DocBin().from_disk(train).get_docs(nlp.vocab))
    if not docs:
        raise ProjectDataError(f"{train}: no documents")
    counts = [sentence_count(doc) for doc in docs]
    subsets = nested_subsets(counts, parse_percents(percents), seed)
    record: Dict[str, Any] = {
        "train": str(train),
        "train_sha256": file_sha256(train),
        "seed": seed,
        "total_sentences": sum(counts),
        "subsets": {
            name: {"docs": indices, "sentences": sum(counts[i] for i in indices)} for name, indices in subsets.items()
        },
    }
    listing = out_dir / "subsets.json"
    check_written_down(listing, record)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, indices in subsets.items():
        DocBin(docs=[docs[i] for i in indices], store_user_data=True).to_disk(out_dir / f"{name}.spacy")
        typer.echo(f"{name}: {len(indices)} documents, {record['subsets'][name]['sentences']} sentences")
    write_json_atomic(listing, record, indent=1)


if __name__ == "__main__":
    app()
