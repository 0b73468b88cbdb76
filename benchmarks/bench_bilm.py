"""CPU inference speed of the biLM: fp32 (exact), int8, bf16, and the type cache.

    python benchmarks/bench_bilm.py [--sizes original small] [--threads 2] [--repeats 7] [--force-bf16]

Random-weight models of the published sizes. Prints the CPU, then:

1. fp32, int8 and bf16 side by side: 32 sentences of ~25 tokens of real text
   (the reference fixture's news), stateless, type cache off: tokens/s,
   executed GFLOP/s, fp32's fraction of the ceiling and each other precision's
   speed-up over fp32 (each repeat times the ceiling and every precision in
   turn; medians over ``--repeats``); int8's and bf16's deviation from fp32 per
   layer (max abs, mean cosine over tokens). bf16 runs where the CPU has native
   bf16 (AVX512-BF16/AMX; its matmul ceiling printed beside fp32's), else only
   with ``--force-bf16``, labelled "bf16 (emulated)": torch's emulation, whose
   speed says nothing about a native CPU (its deviation is the same).
2. The type cache: a stream of distinct sentences (``--text``: one tokenised
   sentence per line, or a .spacy file's sentences; by default the held-out
   pretraining text when the project built it, else the fixture),
   batches of 32, fp32, cache off vs on (cold at the start of each pass), on
   the small size by default (``--cache-sizes``): tokens/s, speed-up and hit rate.

FLOPs counted are the ones executed: the LSTM over every position it runs
(tokens, <S>, </S>, padding), the char CNN over each distinct token at the
width it runs (content + widest filter, see ``char_encoder.py``), the highway
and projection per distinct token; a multiply-add is 2 FLOPs.
"""

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Dict, List

import numpy
import torch
from layer_deviation import layer_deviation
from machine import header, matmul_ceiling, median_seconds

from spacy_elmo.bilm import ElmoBiLM, batch_char_ids, preset
from spacy_elmo.bilm.char_encoder import CNN_CHUNK_TOKENS, PAD_ID
from spacy_elmo.bilm.id_batches import length_batches
from spacy_elmo.bilm.precision import FORCE_BF16_ENV, native_cpu_bf16

ROOT = Path(__file__).parent.parent
SENTENCES = ROOT / "tests" / "data" / "bilm_tf_reference" / "sentences.json"
HELD_OUT_TEXT = ROOT / "corpus" / "pretrain" / "dev.txt"


def fixture_words():
    return [w for group in json.loads(SENTENCES.read_text()) for s in group for w in s.split()]


def benchmark_sentences(n_sentences: int, n_tokens: int):
    """Real text (the reference fixture's news sentences) cut into ~n_tokens pieces."""
    words = fixture_words()
    out, start = [], 0
    for i in range(n_sentences):
        length = n_tokens + (i % 7) - 3  # 22..28 tokens, mean ~25
        if start + length > len(words):
            start = 0
        out.append(words[start : start + length])
        start += length
    return out


def stream_sentences(path: Path, n_sentences: int):
    """A text file (one tokenised sentence per line) or a .spacy file (its docs' sentences)."""
    if path.is_file() and path.suffix == ".spacy":
        import spacy
        from spacy.tokens import DocBin

        docs = DocBin().from_disk(path).get_docs(spacy.blank("en").vocab)
        sentences = [[token.text for token in sent] for doc in docs for sent in doc.sents]
        return sentences[:n_sentences], str(path)
    if path.is_file():
        lines = [line.split() for line in path.read_text(encoding="utf8").splitlines() if line.strip()]
        return lines[:n_sentences], str(path)
    words = fixture_words()
    return [words[i : i + 25] for i in range(0, min(len(words), 25 * n_sentences), 25)], str(SENTENCES)


def executed_flops(options, sentences) -> float:
    ids, _ = batch_char_ids(sentences)
    positions = sum(
        len(group) * (max(len(sentences[i]) for i in group) + 2)
        for group in length_batches([len(s) for s in sentences])
    )
    types = numpy.unique(ids.reshape(-1, ids.shape[-1]), axis=0)
    content = numpy.sort((types != PAD_ID).sum(axis=1))
    max_width = max(w for w, _ in options.filters)
    columns = [
        min(options.max_characters_per_token, int(content[i : i + CNN_CHUNK_TOKENS].max()) + max_width)
        for i in range(0, len(content), CNN_CHUNK_TOKENS)
        for _ in content[i : i + CNN_CHUNK_TOKENS]
    ]
    C, P, F, d = options.lstm_dim, options.projection_dim, options.n_filters, options.char_dim
    cnn = sum(2 * max(cols - w + 1, 0) * w * d * n for cols in columns for w, n in options.filters)
    dense = len(types) * (options.n_highway * 2 * F * 2 * F + 2 * F * P)
    lstm_step = 2 * (2 * P * 4 * C) + 2 * C * P  # [x, h] W_0 and the projection
    return cnn + dense + positions * 2 * options.n_layers * lstm_step


def precisions_to_run(force_bf16: bool):
    """``{precision: label}``: bf16 only where native, or forced (then labelled emulated)."""
    labels = {"fp32": "fp32", "int8": "int8"}
    if native_cpu_bf16():
        labels["bf16"] = "bf16"
    elif force_bf16:
        os.environ[FORCE_BF16_ENV] = "1"  # the biLM refuses emulated bf16 otherwise
        labels["bf16"] = "bf16 (emulated)"
    else:
        print("bf16: skipped: no native bf16 on this CPU (AVX512-BF16/AMX); --force-bf16 runs it emulated")
    return labels


def bench_precisions(size: str, sentences, repeats: int, labels) -> None:
    """Every precision timed in alternation with the ceiling, so that a machine whose speed
    drifts (shared hosts do) affects each ratio's two sides alike; medians of the ratios."""
    torch.manual_seed(0)
    options = preset(size)
    model = ElmoBiLM(options, type_cache_size=0).eval()
    n_tokens = sum(len(s) for s in sentences)
    gflops = executed_flops(options, sentences) / 1e9
    results: Dict[str, List[numpy.ndarray]] = {}
    seconds: Dict[str, List[float]] = {precision: [] for precision in labels}
    ceilings: List[float] = []
    for precision in seconds:
        model.set_precision(precision)
        results[precision] = model.embed_batch(sentences)  # also the warm-up (packing)
    for _ in range(repeats):
        ceilings.append(matmul_ceiling())
        for precision in seconds:
            model.set_precision(precision)
            model.embed_batch(sentences[:1])  # repack outside the timing
            seconds[precision].append(median_seconds(lambda: model.embed_batch(sentences), 1))
    fractions = [gflops / t / c for t, c in zip(seconds["fp32"], ceilings)]
    for precision, label in labels.items():
        t = statistics.median(seconds[precision])
        print(f"{size} | {label} | {n_tokens / t:.1f} tokens/s | {gflops / t:.1f} GFLOP/s")
    print(
        f"{size} | fp32: {statistics.median(fractions):.3f} of the fp32 ceiling (median of {repeats}; "
        f"range {min(fractions):.3f}-{max(fractions):.3f}; ceiling median {statistics.median(ceilings):.1f} GFLOP/s)"
    )
    if labels.get("bf16") == "bf16":  # native: how far it gets towards its own ceiling
        bf16_ceiling = matmul_ceiling(torch.bfloat16)
        fraction = gflops / statistics.median(seconds["bf16"]) / bf16_ceiling
        print(
            f"{size} | bf16: {fraction:.3f} of the bf16 ceiling ({bf16_ceiling:.1f} GFLOP/s, "
            f"{bf16_ceiling / statistics.median(ceilings):.2f}x the fp32 one)"
        )
    for precision, label in labels.items():
        if precision == "fp32":
            continue
        speedups = [f / x for f, x in zip(seconds["fp32"], seconds[precision])]
        print(
            f"{size} | {label}: {statistics.median(speedups):.2f}x fp32's tokens/s (median; range "
            f"{min(speedups):.2f}-{max(speedups):.2f})"
        )
        for layer, (max_abs, cosine) in enumerate(layer_deviation(results["fp32"], results[precision])):
            print(f"{size} | {label} vs fp32, layer {layer}: max abs {max_abs:.4f}, mean cosine {cosine:.6f}")


def bench_type_cache(size: str, stream, repeats: int) -> None:
    torch.manual_seed(0)
    model = ElmoBiLM(preset(size)).eval()
    batches = [stream[i : i + 32] for i in range(0, len(stream), 32)]
    n_tokens = sum(len(s) for s in stream)

    def run_pass(cache_size: int):
        model.set_type_cache_size(cache_size)  # a fresh (cold) cache each pass
        for batch in batches:
            model.embed_batch(batch)

    run_pass(0)  # warm-up
    off, on = [], []
    for _ in range(repeats):  # alternating, so that drift affects both alike
        off.append(timed(lambda: run_pass(0)))
        on.append(timed(lambda: run_pass(16384)))
    stats = model.type_cache.stats()
    speedups = [a / b for a, b in zip(off, on)]
    print(
        f"{size} | type cache off {n_tokens / statistics.median(off):.1f} tokens/s | "
        f"on {n_tokens / statistics.median(on):.1f} tokens/s | {statistics.median(speedups):.2f}x "
        f"(range {min(speedups):.2f}-{max(speedups):.2f}) | hit rate {stats['hit_rate']:.3f} "
        f"({stats['types']} types kept)"
    )


def timed(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["original", "small"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sentences", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=25)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--text",
        type=Path,
        default=HELD_OUT_TEXT,
        help="the type cache's stream of sentences: one tokenised sentence per line, or a .spacy file",
    )
    parser.add_argument("--stream-sentences", type=int, default=640)
    parser.add_argument(
        "--force-bf16",
        action="store_true",
        help="run bf16 on a CPU without native bf16 too (torch emulates it: its speed means nothing)",
    )
    parser.add_argument(
        "--cache-sizes", nargs="*", default=["small"], help="sizes the type cache is measured on (none: skip it)"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sentences = benchmark_sentences(args.sentences, args.tokens)
    print(header(args.threads))
    print(
        f"{len(sentences)} sentences, {sum(map(len, sentences))} tokens, stateless, type cache off; "
        f"median of {args.repeats} runs"
    )
    labels = precisions_to_run(args.force_bf16)
    for size in args.sizes:
        bench_precisions(size, sentences, args.repeats, labels)
    if args.cache_sizes:
        stream, source = stream_sentences(args.text, args.stream_sentences)
        print(f"type cache: {len(stream)} sentences of {source}, batches of 32, fp32, median of {args.repeats} passes")
        for size in args.cache_sizes:
            bench_type_cache(size, stream, args.repeats)


if __name__ == "__main__":
    main()
