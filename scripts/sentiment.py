"""``sentiment``: the movie-review snippets to 5-class and binary ``.spacy`` splits.

    python scripts/sentiment.py SNIPPETS OUTPUT_DIR [--seed 13] [--max-per-split N]

Input: ``movieReviewSnippets_GroundTruth.txt`` (Hutto & Gilbert 2014, the
sentences SST was built from): ``id<TAB>mean rating<TAB>sentence`` per line,
ratings in -4..+4.

Five classes by the mean rating, boundaries at -2, -0.5, 0.5 and 2:

    very_negative  rating <= -2
    negative       -2 < rating < -0.5
    neutral        -0.5 <= rating <= 0.5
    positive       0.5 < rating < 2
    very_positive  rating >= 2

so ±2 go to the outer classes and ±0.5 to neutral (this reproduces the
published class sizes 2052/3009/562/2795/2187). The binary variant keeps the
same split and drops the neutral class: negative = the two negative classes,
positive = the two positive ones.

Split: the line numbers shuffled with ``random.Random(seed)``; the first 80%
are train, the next 10% dev, the rest test (seed 13: 8,484 / 1,060 / 1,061).

Output: ``OUTPUT_DIR/{fine,binary}/{train,dev,test}.spacy`` (spaCy English
tokenizer; ``doc.cats`` one-hot over the variant's labels),
``OUTPUT_DIR/manifest.json`` with the counts and ``OUTPUT_DIR/splits.json``
with the snippet ids of each split, in the order written.
"""

import json
import random
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Dict, List, NamedTuple

import spacy
import typer
from project_errors import ProjectDataError
from spacy.tokens import Doc, DocBin
from tqdm import tqdm

from spacy_elmo.files.hashing import file_sha256

FINE_LABELS = ("very_negative", "negative", "neutral", "positive", "very_positive")
BINARY_OF = {"very_negative": "negative", "negative": "negative", "positive": "positive", "very_positive": "positive"}
BINARY_LABELS = ("negative", "positive")
SPLITS = ("train", "dev", "test")
TRAIN_FRACTION = 0.8
DEV_FRACTION = 0.1

# What the pinned file (vaderSentiment==3.3.2) must give; checked when it is the input.
PINNED_SHA256 = "c8293b0d942e90e223ea2c0955d969040d1a1be514a978b9af0698940bd13350"
PINNED_CLASS_COUNTS = (2052, 3009, 562, 2795, 2187)
PINNED_SEED = 13
PINNED_SPLIT_SIZES = (8484, 1060, 1061)
PINNED_TEST_CLASS_COUNTS = (201, 293, 52, 284, 231)


class Snippet(NamedTuple):
    snippet_id: str
    rating: float
    text: str


def fine_label(rating: float) -> str:
    if rating <= -2:
        return "very_negative"
    if rating < -0.5:
        return "negative"
    if rating <= 0.5:
        return "neutral"
    if rating < 2:
        return "positive"
    return "very_positive"


def read_snippets(path: Path) -> List[Snippet]:
    """All lines of the ground-truth file; a malformed line raises, naming it."""
    snippets = []
    with path.open(encoding="utf8", newline="") as f:
        for number, line in enumerate(f, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            try:
                if len(fields) != 3 or not fields[2].strip():
                    raise ValueError("expected 'id<TAB>rating<TAB>sentence'")
                rating = float(fields[1])
                if not -4 <= rating <= 4:
                    raise ValueError(f"rating {rating} outside -4..4")
            except ValueError as err:
                raise ProjectDataError(f"{path}, line {number}: {err}: {line[:80]!r}") from None
            snippets.append(Snippet(fields[0], rating, fields[2].strip()))
    if not snippets:
        raise ProjectDataError(f"{path}: no snippets")
    return snippets


def split_indices(n: int, seed: int) -> Dict[str, List[int]]:
    order = list(range(n))
    random.Random(seed).shuffle(order)
    n_train = int(n * TRAIN_FRACTION)
    n_dev = int(n * DEV_FRACTION)
    return {
        "train": order[:n_train],
        "dev": order[n_train : n_train + n_dev],
        "test": order[n_train + n_dev :],
    }


def check_pinned(labels: List[str], splits: Dict[str, List[int]]) -> None:
    """The published counts for the pinned file with seed 13; raises if they differ."""
    classes = tuple(Counter(labels)[label] for label in FINE_LABELS)
    sizes = tuple(len(splits[split]) for split in SPLITS)
    test_counts = Counter(labels[i] for i in splits["test"])
    test_classes = tuple(test_counts[label] for label in FINE_LABELS)
    if (classes, sizes, test_classes) != (PINNED_CLASS_COUNTS, PINNED_SPLIT_SIZES, PINNED_TEST_CLASS_COUNTS):
        raise ProjectDataError(
            f"pinned snippets file gave classes {classes}, split {sizes}, test classes {test_classes}; "
            f"expected {PINNED_CLASS_COUNTS}, {PINNED_SPLIT_SIZES}, {PINNED_TEST_CLASS_COUNTS}"
        )


def write_variant(
    docs: Dict[int, Doc], labels: List[str], indices: List[int], label_set, label_of, path: Path
) -> Dict[str, int]:
    """Write one split of one variant; returns its class counts."""
    doc_bin = DocBin()
    counts: Counter[str] = Counter()
    for i in indices:
        if labels[i] not in label_of:
            continue
        label = label_of[labels[i]]
        # A new dict: the DocBin keeps a reference, and the other variant sets its own.
        docs[i].cats = {name: float(name == label) for name in label_set}
        doc_bin.add(docs[i])
        counts[label] += 1
    path.parent.mkdir(parents=True, exist_ok=True)
    doc_bin.to_disk(path)
    return {name: counts[name] for name in label_set}


def build_manifest(
    snippets_file: Path,
    sha256: str,
    seed: int,
    max_per_split: int,
    snippets: List[Snippet],
    labels: List[str],
    splits: Dict[str, List[int]],
) -> Dict[str, Any]:
    """manifest.json's settings and counts; its "variants" (each split's class counts) are the caller's to fill."""
    split_of_text = defaultdict(set)
    for split, indices in splits.items():
        for i in indices:
            split_of_text[snippets[i].text].add(split)
    return {
        "source": str(snippets_file),
        "sha256": sha256,
        "seed": seed,
        "fractions": {
            "train": TRAIN_FRACTION,
            "dev": DEV_FRACTION,
            "test": round(1 - TRAIN_FRACTION - DEV_FRACTION, 6),
        },
        "max_per_split": max_per_split,
        "binning": "very_negative <= -2 < negative < -0.5 <= neutral <= 0.5 < positive < 2 <= very_positive; binary drops neutral",
        "snippets": len(snippets),
        "classes": {label: labels.count(label) for label in FINE_LABELS},
        # The same sentence text in two splits (the file repeats a few sentences).
        "sentences_in_more_than_one_split": sum(len(found) > 1 for found in split_of_text.values()),
        "variants": {},
    }


def main(
    # fmt: off
    snippets_file: Path = typer.Argument(..., exists=True, dir_okay=False, help="movieReviewSnippets_GroundTruth.txt"),
    output_dir: Path = typer.Argument(..., file_okay=False, help="Writes fine/*.spacy, binary/*.spacy, manifest.json"),
    seed: int = typer.Option(PINNED_SEED, "--seed", help="Seed of the train/dev/test shuffle"),
    max_per_split: int = typer.Option(0, "--max-per-split", min=0, help="Keep only the first N of each split (0: all)"),
    # fmt: on
) -> None:
    """Bin the snippets into 5 classes (and a binary variant), split 80/10/10, write .spacy files."""
    try:
        snippets = read_snippets(snippets_file)
        labels = [fine_label(snippet.rating) for snippet in snippets]
        splits = split_indices(len(snippets), seed)
        sha256 = file_sha256(snippets_file)
        if sha256 == PINNED_SHA256 and seed == PINNED_SEED:
            check_pinned(labels, splits)
    except ProjectDataError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=1)
    if max_per_split:
        splits = {split: indices[:max_per_split] for split, indices in splits.items()}
    nlp = spacy.blank("en")
    kept = [i for indices in splits.values() for i in indices]
    texts = (snippets[i].text for i in kept)
    docs = dict(zip(kept, tqdm(nlp.pipe(texts), total=len(kept), desc="tokenising", unit=" snippets", leave=False)))
    variants = {
        "fine": (FINE_LABELS, {label: label for label in FINE_LABELS}),
        "binary": (BINARY_LABELS, BINARY_OF),
    }
    manifest = build_manifest(snippets_file, sha256, seed, max_per_split, snippets, labels, splits)
    for variant, (label_set, label_of) in variants.items():
        manifest["variants"][variant] = {
            split: write_variant(
                docs, labels, splits[split], label_set, label_of, output_dir / variant / f"{split}.spacy"
            )
            for split in SPLITS
        }
        typer.echo(
            f"{variant}: "
            + "; ".join(
                f"{split} {sum(counts.values())} {list(counts.values())}"
                for split, counts in manifest["variants"][variant].items()
            ),
            err=True,
        )
    (output_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf8")
    split_ids = {split: [snippets[i].snippet_id for i in indices] for split, indices in splits.items()}
    (output_dir / "splits.json").write_text(json.dumps(split_ids) + "\n", encoding="utf8")


if __name__ == "__main__":
    typer.run(main)
