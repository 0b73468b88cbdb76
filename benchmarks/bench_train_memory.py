"""Resident memory while `spacy train` runs a config: how it grows per step, and
how much of it the biLM's output cache holds.

Each setting trains the config for ``--steps`` steps in a fresh process
(``--threads`` torch threads, 1 by default as in the project's runs) and
samples its RSS every ``--every`` steps through ``[training.before_update]``;
the growth is the least-squares slope of RSS over the steps from ``--warmup``
on (by then the first epoch has filled the cache, so what still grows is not
the cache). Two settings: glibc's default malloc, and
MALLOC_MMAP_THRESHOLD_=65536 (big buffers always mmap'd and returned on free;
see benchmarks/bench_long_doc.py): if RSS grows by default but hardly with the
fixed threshold, the growth is the heap fragmenting, not live memory.

    python benchmarks/bench_train_memory.py configs/search/textcat_vectors_elmo_bilstm.cfg \\
        corpus/sentiment/fine/subsets/train_10pct.spacy corpus/sentiment/fine/dev.spacy \\
        --vectors assets/en_core_web_md --bilm-dir training/bilm --steps 800
"""

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from machine import cpu_model, in_fresh_process

SETTINGS = [("glibc default", None), ("MALLOC_MMAP_THRESHOLD_=65536", "65536")]


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def output_caches(nlp) -> List[Tuple[int, float, int, int]]:
    """(entries, MB, hits, misses) of every biLM output cache in the pipeline."""
    from spacy_elmo.layers.bilm_output_cache import LayerCache

    found = []
    for _, pipe in nlp.pipeline:
        model = getattr(pipe, "model", None)
        for node in model.walk() if model is not None else []:
            cache = node.attrs.get("cache")
            if isinstance(cache, LayerCache):
                found.append((len(cache), cache.nbytes / 2**20, cache.hits, cache.misses))
    return found


def train_and_sample(config: Path, overrides: Dict[str, object], every: int, threads: int, queue) -> None:
    """The child process: train, and put [(step, RSS MB)] and the caches' last state on the queue."""
    import spacy
    import torch
    from spacy.cli.train import train

    torch.set_num_threads(threads)
    samples: List[Tuple[int, float]] = []
    caches: List[Tuple[int, float, int, int]] = []

    @spacy.registry.callbacks("bench_train_memory.sample.v1")
    def make_sampler():
        def sample(nlp, args):
            if args["step"] % every == 0:
                samples.append((args["step"], rss_mb()))
                caches[:] = output_caches(nlp)

        return sample

    overrides = {**overrides, "training.before_update": {"@callbacks": "bench_train_memory.sample.v1"}}
    # spaCy's training table to stderr: stdout is for the figures.
    with tempfile.TemporaryDirectory() as output, contextlib.redirect_stdout(sys.stderr):
        train(config, Path(output), overrides=overrides)
    queue.put((samples, caches))


def slope_per_1000(samples: List[Tuple[int, float]], warmup: int) -> float:
    points = [(step, rss) for step, rss in samples if step >= warmup]
    if len(points) < 2:
        return float("nan")
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    covariance = sum((x - mean_x) * (y - mean_y) for x, y in points)
    variance = sum((x - mean_x) ** 2 for x, _ in points)
    return 1000 * covariance / variance


def measure(config: Path, overrides, every: int, threads: int, threshold: Optional[str]):
    """One setting in a fresh process (glibc reads its malloc settings at start)."""
    if threshold is None:
        os.environ.pop("MALLOC_MMAP_THRESHOLD_", None)
    else:
        os.environ["MALLOC_MMAP_THRESHOLD_"] = threshold
    return in_fresh_process(train_and_sample, config, overrides, every, threads)


def config_overrides(args) -> Dict[str, object]:
    from spacy.util import load_config

    paths = load_config(args.config, interpolate=False)["paths"]
    overrides: Dict[str, object] = {
        "paths.train": str(args.train),
        "paths.dev": str(args.dev),
        "training.max_steps": args.steps,
    }
    if args.vectors is not None:
        overrides["paths.vectors"] = str(args.vectors)
    if args.bilm_dir is not None and "elmo_options" in paths:
        overrides["paths.elmo_options"] = str(args.bilm_dir / "options.json")
        overrides["paths.elmo_weights"] = str(args.bilm_dir / "weights.hdf5")
    return overrides


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", type=Path)
    parser.add_argument("train", type=Path)
    parser.add_argument("dev", type=Path)
    parser.add_argument("--vectors", type=Path, default=None, help="paths.vectors")
    parser.add_argument("--bilm-dir", type=Path, default=None, help="paths.elmo_options/elmo_weights from here")
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--every", type=int, default=50, help="sample RSS every this many steps")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=200, help="fit the growth from this step on")
    args = parser.parse_args()
    overrides = config_overrides(args)
    print(f"CPU: {cpu_model()}; torch threads: {args.threads}; {args.config}, {args.steps} steps on {args.train}")
    print("malloc | RSS at warmup (MB) | RSS at end (MB) | growth (MB per 1,000 steps) | biLM output caches")
    for name, threshold in SETTINGS:
        samples, caches = measure(args.config, overrides, args.every, args.threads, threshold)
        at_warmup = next((rss for step, rss in samples if step >= args.warmup), float("nan"))
        cache_text = "; ".join(
            f"{entries} entries, {mb:.0f} MB, {hits / max(hits + misses, 1):.0%} hits"
            for entries, mb, hits, misses in caches
        )
        print(
            f"{name} | {at_warmup:.0f} | {samples[-1][1]:.0f} | {slope_per_1000(samples, args.warmup):.0f} | "
            f"{cache_text or 'none'}"
        )


if __name__ == "__main__":
    main()
