"""CPU inference speed of the biLM (issue: "Speed on CPU").

Builds random-weight models of the published sizes, embeds 32 sentences of
~25 tokens of real text (stateless, fp32), and prints tokens/s, the GFLOP/s
the model executed, and that as a fraction of this machine's fp32 matmul
ceiling, measured in the same run.

    python benchmarks/bench_bilm.py [--sizes original small] [--threads 2]

FLOPs counted: the LSTM over every position it runs (tokens, <S>, </S> and
padding), the char encoder over the distinct tokens it encodes (repeated
tokens are encoded once), multiply-adds as 2 FLOPs.
"""
import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from spacy_elmo.bilm import ElmoBiLM, batch_char_ids, preset

SENTENCES = Path(__file__).parent.parent / "tests" / "data" / "bilm_tf_reference" / "sentences.json"


def benchmark_sentences(n_sentences: int, n_tokens: int):
    """Real text (the reference fixture's news sentences) cut into ~n_tokens pieces."""
    words = [w for group in json.loads(SENTENCES.read_text()) for s in group for w in s.split()]
    out, start = [], 0
    for i in range(n_sentences):
        length = n_tokens + (i % 7) - 3  # 22..28 tokens, mean ~25
        if start + length > len(words):
            start = 0
        out.append(words[start : start + length])
        start += length
    return out


def matmul_ceiling(dtype=torch.float32, n: int = 2048, repeats: int = 8) -> float:
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    for _ in range(2):
        a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def executed_flops(options, sentences) -> float:
    ids, lengths = batch_char_ids(sentences)
    positions = ids.shape[0] * ids.shape[1]
    n_unique = len({tuple(row) for row in ids.reshape(-1, ids.shape[-1]).tolist()})
    C, P, F, d = options.lstm_dim, options.projection_dim, options.n_filters, options.char_dim
    mcpt = options.max_characters_per_token
    cnn = sum(2 * (mcpt - w + 1) * w * d * n for w, n in options.filters)
    highway = options.n_highway * 2 * F * 2 * F
    proj = 2 * F * P
    lstm_step = 2 * (2 * P * 4 * C) + 2 * C * P  # [x, h] W_0 and the projection
    lstm = 2 * options.n_layers * lstm_step  # both directions
    return n_unique * (cnn + highway + proj) + positions * lstm


def bench(size: str, sentences, repeats: int, ceiling: float):
    torch.manual_seed(0)
    options = preset(size)
    model = ElmoBiLM(options).eval()
    n_params = sum(p.numel() for p in model.parameters())
    n_tokens = sum(len(s) for s in sentences)
    model.embed_batch(sentences)  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model.embed_batch(sentences)
        times.append(time.perf_counter() - start)
    best, median = min(times), statistics.median(times)
    gflops = executed_flops(options, sentences) / 1e9
    return {
        "size": size,
        "params_M": round(n_params / 1e6, 2),
        "tokens": n_tokens,
        "tokens_per_s": round(n_tokens / median, 1),
        "tokens_per_s_best": round(n_tokens / best, 1),
        "GFLOP_per_batch": round(gflops, 2),
        "GFLOP_per_s": round(gflops / median, 1),
        "fraction_of_ceiling": round(gflops / median / ceiling, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["original", "small"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sentences", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=25)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sentences = benchmark_sentences(args.sentences, args.tokens)
    ceiling = matmul_ceiling()
    print(f"torch {torch.__version__}, {args.threads} threads, fp32 matmul ceiling {ceiling:.1f} GFLOP/s")
    print(f"{len(sentences)} sentences, {sum(map(len, sentences))} tokens, stateless, fp32")
    header = ["size", "params_M", "tokens_per_s", "tokens_per_s_best", "GFLOP_per_s", "fraction_of_ceiling"]
    print(" | ".join(header))
    for size in args.sizes:
        row = bench(size, sentences, args.repeats, ceiling)
        print(" | ".join(str(row[h]) for h in header))


if __name__ == "__main__":
    main()
