"""Pretraining speed: tokens/s of training steps for the small biLM.

    python benchmarks/bench_pretrain.py [--config configs/pretrain_small.cfg] [--precision fp32 bf16] [--steps 8]
        [--profile STEPS]

Builds the model, softmax and batch size of a pretraining config (by default
``configs/pretrain_small.cfg``: the published small configuration,
2x1024_128_2048cnn_1xhighway, with an adaptive softmax over a 50k vocabulary)
and trains on synthetic Zipfian text (pseudo-words of 2-12 letters, sentences
of 15-35 tokens) exactly as ``pretrain`` does (dropout, AdamW, grad clip). Prints tokens/s per precision, the executed GFLOP/s (FLOPs
of one step counted by torch's FlopCounterMode) and the fraction of the
matmul ceiling of that precision, measured beside each of ``--repeats`` timings
(medians reported). The precisions' repeats alternate (fp32, bf16, fp32, ...),
on the same batches, so host drift moves both: with both, the bf16/fp32 ratio
of the medians and of each repeat's pair are printed. FLOPs are counted with the packed kernels swapped for plain
aten matmuls (``unpacked``, which sets ``kernels.PACKING``): FlopCounterMode does not see the packed ops.
``--profile N`` then prints where N steps' time went per precision
(``torch.profiler``, ops by self CPU time: shares, which may be taken beside other jobs),
the seconds a step spends in matrix products and in the rest, and with both precisions
the bound on bf16 / fp32 that the fp32 step's non-matmul share leaves (Amdahl: products
as much faster as the ceilings, the rest unchanged).

bf16 runs only where the CPU has native bf16 (AVX512-BF16 or AMX): elsewhere
torch emulates it and a step takes minutes, so the script prints the bf16
matmul ceiling and skips the run (``--force-bf16`` runs it anyway).
"""

import argparse
import statistics
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List, NamedTuple

import numpy
import torch
from machine import header
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from spacy_elmo.bilm import kernels
from spacy_elmo.bilm.elmo_bilm import ElmoBiLM
from spacy_elmo.bilm.language_model import BidirectionalLM
from spacy_elmo.bilm.lm_head import build_lm_head
from spacy_elmo.bilm.precision import native_cpu_bf16
from spacy_elmo.pretrain import load_config
from spacy_elmo.pretrain.batches import epoch_batches, make_batch
from spacy_elmo.pretrain.config import model_options, widen_model
from spacy_elmo.pretrain.corpus import Corpus
from spacy_elmo.pretrain.train import make_optimizer, train_step
from spacy_elmo.pretrain.vocab import Vocabulary


def timed_ceiling(dtype: torch.dtype, size: int = 1024, seconds: float = 2.0) -> float:
    """Matmul GFLOP/s over a fixed time (bf16 emulated on a CPU without it is too slow for
    ``machine.matmul_ceiling``'s big fixed-count runs)."""
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    a @ b
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        n += 1
    return 2 * size**3 * n / (time.perf_counter() - start) / 1e9


def synthetic_corpus(n_sentences: int, vocab_size: int, seed: int = 0):
    rng = numpy.random.default_rng(seed)
    letters = numpy.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = ["".join(rng.choice(letters, rng.integers(2, 13))) for _ in range(vocab_size)]
    ranks = numpy.minimum(rng.zipf(1.1, size=n_sentences * 25) - 1, vocab_size - 1)
    corpus = Corpus()
    lengths = rng.integers(15, 36, size=n_sentences)
    sentences, pos = [], 0
    for n in lengths:
        sentences.append(corpus.encode([words[r] for r in ranks[pos : pos + n]]))
        pos += n
    return corpus, sentences


class TrainingText(NamedTuple):
    corpus: Corpus
    sentences: list
    vocab_size: int
    type_words: numpy.ndarray  # each corpus type's vocabulary id
    batches: list


def training_text(config, batch_tokens: int) -> TrainingText:
    """Synthetic sentences, their vocabulary's word ids and the epoch's batches."""
    vocab_size = config["vocab"]["max_size"]
    corpus, sentences = synthetic_corpus(40000, vocab_size * 4)
    vocab = Vocabulary.build(corpus.types, corpus.type_counts(sentences), max_size=vocab_size)
    batches = epoch_batches([len(s) for s in sentences], batch_tokens, 0, 0)
    return TrainingText(corpus, sentences, len(vocab), vocab.ids(corpus.types), batches)


def language_model(config, vocab_size: int) -> BidirectionalLM:
    training = config["training"]
    torch.manual_seed(0)
    bilm = ElmoBiLM(model_options(config))
    head = build_lm_head(
        training["softmax"],
        bilm.options.projection_dim,
        vocab_size,
        n_samples=training["n_samples"],
        cutoffs=training["adaptive_cutoffs"],
        div_value=training["adaptive_div_value"],
    )
    return BidirectionalLM(bilm, head).train()


def make_step(precision: str, config, text: TrainingText):
    """``step(i)``: one training step as ``pretrain`` runs it (batch building included) on the
    epoch's i-th batch, cycling; returns the tokens it predicted."""
    corpus, sentences, _, type_words, batches = text
    training = config["training"]
    lm = language_model(config, text.vocab_size)
    optimizer = make_optimizer(config, lm)  # the update pretrain runs (fused AdamW where there is one)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")

    def step(i: int) -> int:
        batch = make_batch([sentences[j] for j in batches[i % len(batches)]], corpus.type_chars, type_words)
        train_step(lm, optimizer, batch, training["dropout"], training["grad_clip"], autocast)
        return int((batch[3] - 2).sum())

    return step


# The ops a step's matrix products run as (packed oneDNN/MKL kernels, plain aten).
GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "mkldnn::_linear_pointwise", "mkl::_mkl_linear")


class StepTime(NamedTuple):
    """One precision's profiled step: seconds per step in matrix products and in all the rest."""

    gemm: float
    other: float


def print_profile(precision: str, step, first: int, steps: int, rows: int = 15) -> StepTime:
    """Where a step's time goes: ``torch.profiler``'s ops by self CPU time over ``steps`` steps of
    ``step`` (already warmed up by the timings) from batch ``first`` on, as shares of the total."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(first, first + steps):
            step(i)
    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in events)
    print(f"{precision} profile, {steps} steps: self CPU time by op (share of {total / 1e6:.2f} s)")
    for event in events[:rows]:
        print(f"  {event.self_cpu_time_total / total:6.1%}  {event.count:6d} calls  {event.key}")
    gemm = sum(e.self_cpu_time_total for e in events if e.key in GEMM_OPS) / 1e6 / steps
    other = total / 1e6 / steps - gemm
    print(f"  matrix products ({', '.join(GEMM_OPS)}): {gemm:.3f} s a step; all the rest: {other:.3f} s a step")
    return StepTime(gemm, other)


def print_bound(fp32: StepTime, bf16: StepTime, ceiling_ratio: float) -> None:
    """Amdahl's bound on bf16 / fp32 from the fp32 profile: its matrix products sped up by the ratio
    of the matmul ceilings, everything else as fast as in fp32 (casts free)."""
    bound = (fp32.gemm + fp32.other) / (fp32.gemm / ceiling_ratio + fp32.other)
    print(
        f"bf16 / fp32 bound: {bound:.2f}x if every matrix product ran {ceiling_ratio:.2f}x faster (the ceilings' "
        f"ratio) and the rest ({fp32.other / (fp32.gemm + fp32.other):.0%} of the fp32 step) took as long; "
        f"measured: products {fp32.gemm / bf16.gemm:.2f}x faster, the rest {fp32.other / bf16.other:.2f}x"
    )


class Timings(NamedTuple):
    """One precision's repeats: tokens/s and the matmul ceiling timed beside each."""

    flops_per_token: float
    rates: List[float]
    ceilings: List[float]


@contextmanager
def unpacked() -> Iterator[None]:
    """fp32 kernels built inside run as plain aten matmuls: what torch's FlopCounterMode
    can count (it knows nothing of the packed oneDNN/MKL ops)."""
    before, kernels.PACKING = kernels.PACKING, False
    try:
        yield
    finally:
        kernels.PACKING = before


def warm_up(step, text: TrainingText) -> Timings:
    """Batch 0 warms up, batch 1 counts the FLOPs of a step (plain aten matmuls: see above)."""
    step(0)
    with unpacked(), FlopCounterMode(display=False) as counter:
        step(1)
    flops = counter.get_total_flops() / sum(len(text.sentences[j]) for j in text.batches[1])
    return Timings(flops, [], [])


def time_repeat(precision: str, step, timings: Timings, steps: int, repeat: int) -> None:
    """One repeat: ``steps`` calls of ``step`` on batches 2 on (the same batches for every
    precision), and the precision's matmul ceiling timed just before (shared hosts drift)."""
    timings.ceilings.append(timed_ceiling(torch.bfloat16 if precision == "bf16" else torch.float32))
    tokens, start = 0, time.perf_counter()
    for i in range(2, 2 + steps):
        tokens += step(i + repeat * steps)
    timings.rates.append(tokens / (time.perf_counter() - start))


def report(precision: str, timings: Timings, steps: int) -> float:
    """Print one precision's medians and return its median tokens/s."""
    rates, flops = timings.rates, timings.flops_per_token
    fractions = [rate * flops / 1e9 / ceiling for rate, ceiling in zip(rates, timings.ceilings)]
    rate = statistics.median(rates)
    print(
        f"{precision}: {rate:7.0f} tokens/s (median of {len(rates)} x {steps} steps; "
        f"range {min(rates):.0f}-{max(rates):.0f})  {flops / 1e6:.1f} MFLOP/token  "
        f"{rate * flops / 1e9:.1f} GFLOP/s  fraction of the matmul ceiling "
        f"{statistics.median(fractions):.2f} (range {min(fractions):.2f}-{max(fractions):.2f}; "
        f"{precision} matmul ceiling {statistics.median(timings.ceilings):.1f} GFLOP/s)"
    )
    return rate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--config", type=Path, default=Path(__file__).parent.parent / "configs" / "pretrain_small.cfg")
    parser.add_argument("--batch-tokens", type=int, default=None, help="default: the --config's batch_size")
    parser.add_argument("--force-bf16", action="store_true")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--profile", type=int, default=0, help="after the timings, profile this many steps per precision (shares)"
    )
    args = parser.parse_args()
    if args.profile < 0:
        parser.error(f"--profile: a number of steps >= 0, got {args.profile}")
    torch.set_num_threads(args.threads)
    print(header(args.threads))
    # Only the architecture and [training] are read (a warm-start config needs a starting biLM to run).
    config = load_config(args.config, {"paths.train": "unused", "paths.init_dir": "unused"})
    widen_model(config, args.config)  # the width a warm-start config trains at
    training = config["training"]
    batch_tokens = args.batch_tokens or training["batch_size"]
    native_bf16 = native_cpu_bf16()
    text = training_text(config, batch_tokens)
    print(
        f"{args.config.name}: projection {config['model']['projection_dim']}, threads {torch.get_num_threads()}, "
        f"torch {torch.__version__}, softmax {training['softmax']}, "
        f"vocab {text.vocab_size}, batch {batch_tokens} tokens, native bf16: {native_bf16}"
    )
    steps = {}
    for precision in args.precision:
        if precision == "bf16" and not (native_bf16 or args.force_bf16):
            ceiling = timed_ceiling(torch.bfloat16)
            print(
                f"bf16: skipped: no native bf16 on this CPU (matmul ceiling {ceiling:.1f} GFLOP/s, "
                f"emulated); --force-bf16 runs it anyway"
            )
            continue
        steps[precision] = make_step(precision, config, text)
    # The precisions' repeats alternate, so a host drifting during the run moves both alike.
    timings = {precision: warm_up(step, text) for precision, step in steps.items()}
    for repeat in range(args.repeats):
        for precision, step in steps.items():
            time_repeat(precision, step, timings[precision], args.steps, repeat)
    rates = {precision: report(precision, timings[precision], args.steps) for precision in steps}
    if args.profile:
        profiled = {
            precision: print_profile(precision, step, 2 + args.repeats * args.steps, args.profile)
            for precision, step in steps.items()
        }
        if len(profiled) == 2:
            ratio = statistics.median(timings["bf16"].ceilings) / statistics.median(timings["fp32"].ceilings)
            print_bound(profiled["fp32"], profiled["bf16"], ratio)
    if "fp32" in rates and "bf16" in rates:
        paired = [b / f for b, f in zip(timings["bf16"].rates, timings["fp32"].rates)]
        print(
            f"bf16 / fp32 tokens/s: {rates['bf16'] / rates['fp32']:.2f}x (same run; repeats alternating, "
            f"each repeat's pair: median {statistics.median(paired):.2f}x, range {min(paired):.2f}-{max(paired):.2f})"
        )


if __name__ == "__main__":
    main()
