"""Memory and time of one very long Doc through the `elmo` component.

A doc without sentence boundaries runs in windows of `max_segment_length`
tokens, length-batched, each batch's outputs copied into the doc's layers and
freed, so the biLM's working memory is bounded whatever the doc length; what
remains is the annotation itself, which the `store` setting controls: "all"
holds the doc's (L+1, n, 2P) layers once, "mix" and "none" (with no listening
component) never build them. Each setting runs in a fresh process and reports
its peak RSS above the process's baseline (model loaded, doc built), at the
given size and at a quarter of it: the batches' working memory (a constant, some
100 MB for the small biLM) is in both, so their difference per token is what
the doc costs, to set beside the size of its layers in float32 (give at least
10,000 tokens: the quarter must fill whole batches, about 2,000 tokens of
256-token windows, for the working memory to cancel).

glibc's malloc raises its mmap threshold to the largest buffer freed so far,
so torch's per-batch buffers then come from the heap and fragment it: RSS keeps
growing with the number of batches although the live memory does not (a small
biLM, store "none", 2,000 -> 8,000 tokens: +68 MB by default, +8 MB with the
threshold fixed). ``--fixed-mmap-threshold`` runs the settings with
MALLOC_MMAP_THRESHOLD_=65536 (big buffers always mmap'd, returned on free) to
show the live memory; without it, what a user's process sees.

    python benchmarks/bench_long_doc.py --tokens 50000 [--bilm-size small|medium|original|default]
        [--cache-size-mb 1024]
    python benchmarks/bench_long_doc.py --edge-cosine [--text corpus/pretrain/dev.txt]

``--edge-cosine``: how much context tokens near a window edge lose. Real text
(the given file's lines joined into one run, no sentence boundaries) through
the bundled English biLM: the top layer of each token, as cosine to a run of
the whole text at once, for tokens within 8 of a 256-token boundary ("edge")
and the rest ("middle"), with hard windows (spacy-elmo 0.1) and with the
overlapping windows the component uses now.
"""

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

from machine import in_fresh_process

STORES = [("all", "float32"), ("all", "float16"), ("mix", "float32"), ("none", "float32")]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(store, dtype, n_tokens, bilm_dir, threads, cache_mb, queue):
    import spacy
    import torch
    from spacy.tokens import Doc

    torch.set_num_threads(threads)
    nlp = spacy.blank("en")
    config = {"bilm_dir": str(bilm_dir), "store": store, "store_dtype": dtype, "cache_size_mb": cache_mb}
    nlp.add_pipe("elmo", config=config)
    nlp("warm up")
    words = [f"w{i % 5000}" for i in range(n_tokens)]
    doc = Doc(nlp.vocab, words=words)
    baseline = peak_rss_mb()
    start = time.perf_counter()
    doc = nlp(doc)
    seconds = time.perf_counter() - start
    peak = peak_rss_mb() - baseline  # before doc._.elmo_layers, which returns stored float16 as a float32 copy
    layers = doc._.elmo_layers
    queue.put((store, dtype, seconds, peak, None if layers is None else layers.shape))


def edge_cosine(text: Path, n_tokens: int = 2048, window: int = 256) -> None:
    import numpy
    import spacy
    from spacy.tokens import Doc

    from spacy_elmo.bilm import ElmoBiLM
    from spacy_elmo.loaders import DEFAULT_BILM_DIR

    words = " ".join(text.read_text(encoding="utf8").splitlines()).split()[:n_tokens]
    bilm = ElmoBiLM.from_dir(DEFAULT_BILM_DIR)
    full = bilm.embed_batch([words])[0][-1]
    hard = numpy.concatenate([bilm.embed_batch([words[i : i + window]])[0][-1] for i in range(0, len(words), window)])
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"bilm_dir": str(DEFAULT_BILM_DIR)})
    strided = nlp(Doc(nlp.vocab, words=words))._.elmo_layers[-1]

    def cosines(a):
        return (a * full).sum(-1) / (numpy.linalg.norm(a, axis=-1) * numpy.linalg.norm(full, axis=-1))

    positions = numpy.arange(len(words))
    edge = numpy.abs(((positions + window // 2) % window) - window // 2) < 8
    edge &= (positions >= 8) & (positions < len(words) - 8)  # a boundary inside the text
    print(f"{len(words)} tokens of {text}, bundled biLM, top layer, cosine to one run of the whole text")
    print("windows | edge tokens: mean / min | middle tokens: mean / min")
    for name, layers in (("hard (0.1)", hard), ("overlapping (now)", strided)):
        c = cosines(layers)
        print(f"{name} | {c[edge].mean():.4f} / {c[edge].min():.4f} | {c[~edge].mean():.4f} / {c[~edge].min():.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument(
        "--bilm-size", default="small", help="small, medium, original (random weights) or default (bundled)"
    )
    parser.add_argument(
        "--cache-size-mb",
        type=float,
        default=0.0,
        help="the component's output cache (its default is 1024; 0 measures the doc alone)",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--fixed-mmap-threshold",
        action="store_true",
        help="glibc: MALLOC_MMAP_THRESHOLD_=65536 in the measured processes (see above)",
    )
    parser.add_argument(
        "--edge-cosine", action="store_true", help="the window-edge context figure instead of memory and time"
    )
    parser.add_argument("--text", type=Path, default=Path("corpus/pretrain/dev.txt"))
    args = parser.parse_args()
    if args.edge_cosine:
        edge_cosine(args.text)
        return
    if args.fixed_mmap_threshold:
        os.environ["MALLOC_MMAP_THRESHOLD_"] = "65536"  # read by glibc when each spawned process starts
    with tempfile.TemporaryDirectory() as tmp:
        bilm_dir, what = bilm_for(args.bilm_size, Path(tmp))
        from spacy_elmo.bilm import ElmoOptions

        options = ElmoOptions.from_file(bilm_dir / "options.json")
        layer_mb = options.n_output_layers * args.tokens * options.output_dim * 4 / 2**20
        print(
            f"{args.tokens} tokens, no sentence boundaries, {what} ({options.n_output_layers} layers x "
            f"{options.output_dim}); all layers in float32 = {layer_mb:.0f} MB "
            f"({layer_mb * 2**20 / args.tokens / 1024:.1f} KB/token); cache_size_mb {args.cache_size_mb}"
            + ("; MALLOC_MMAP_THRESHOLD_=65536" if args.fixed_mmap_threshold else "")
        )
        quarter = args.tokens // 4
        print(
            f"store | dtype | seconds | tokens/s | peak RSS above baseline (MB) | the same at {quarter} tokens | "
            "KB per token between the two | doc._.elmo_layers"
        )
        for store, dtype in STORES:
            seconds, rss, shape = measure(store, dtype, args.tokens, bilm_dir, args.threads, args.cache_size_mb)
            _, rss_quarter, _ = measure(store, dtype, quarter, bilm_dir, args.threads, args.cache_size_mb)
            # The batches' working memory is the same at both sizes: the difference is what grows per token.
            per_token = (rss - rss_quarter) * 1024 / max(args.tokens - quarter, 1)
            print(
                f"{store} | {dtype} | {seconds:.1f} | {args.tokens / seconds:.0f} | {rss:.0f} | {rss_quarter:.0f} | "
                f"{per_token:.2f} | {shape}"
            )


def measure(store, dtype, n_tokens, bilm_dir, threads, cache_mb):
    """One setting in a fresh process: (seconds, peak RSS above baseline in MB, layers' shape)."""
    _, _, seconds, rss, shape = in_fresh_process(run, store, dtype, n_tokens, bilm_dir, threads, cache_mb)
    return seconds, rss, shape


def bilm_for(size: str, tmp: Path):
    """The bundled English biLM ("default"), or a random one of a published size."""
    if size == "default":
        from spacy_elmo.loaders import DEFAULT_BILM_DIR

        return DEFAULT_BILM_DIR, "the bundled English biLM"
    import torch

    from spacy_elmo.bilm import ElmoBiLM, preset

    torch.manual_seed(0)
    ElmoBiLM(preset(size)).to_files(tmp / "options.json", tmp / "weights.hdf5")
    return tmp, f"random {size} biLM"


if __name__ == "__main__":
    main()
