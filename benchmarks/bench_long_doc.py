"""Memory and time of one very long Doc through the `elmo` component.

A doc without sentence boundaries runs in windows of `max_segment_length`
tokens, length-batched, so the biLM's working memory is bounded whatever the
doc length; what remains is the annotation itself, which the `store` setting
controls. Each setting runs in a fresh process and reports its peak RSS above
the process's baseline (model loaded, doc built).

    python benchmarks/bench_long_doc.py --tokens 100000 [--bilm-size small]
"""
import argparse
import multiprocessing
import resource
import tempfile
import time
from pathlib import Path

STORES = [("all", "float32"), ("all", "float16"), ("mix", "float32"), ("none", "float32")]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(store, dtype, n_tokens, bilm_dir, threads, queue):
    import spacy
    import torch
    from spacy.tokens import Doc

    torch.set_num_threads(threads)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"bilm_dir": str(bilm_dir), "store": store, "store_dtype": dtype, "cache_size_mb": 0})
    nlp("warm up")
    words = [f"w{i % 5000}" for i in range(n_tokens)]
    doc = Doc(nlp.vocab, words=words)
    baseline = peak_rss_mb()
    start = time.perf_counter()
    doc = nlp(doc)
    seconds = time.perf_counter() - start
    layers = doc._.elmo_layers
    queue.put((store, dtype, seconds, peak_rss_mb() - baseline, None if layers is None else layers.shape))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--bilm-size", default="small")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import torch

    from spacy_elmo.bilm import ElmoBiLM, preset

    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        bilm = ElmoBiLM(preset(args.bilm_size))
        bilm.to_files(Path(tmp) / "options.json", Path(tmp) / "weights.hdf5")
        layer_mb = bilm.n_output_layers * args.tokens * bilm.output_dim * 4 / 2**20
        print(f"{args.tokens} tokens, no sentence boundaries, random {args.bilm_size} biLM "
              f"({bilm.n_output_layers} layers x {bilm.output_dim}); all layers in float32 = {layer_mb:.0f} MB")
        print("store | dtype | seconds | tokens/s | peak RSS above baseline (MB) | doc._.elmo_layers")
        context = multiprocessing.get_context("spawn")
        for store, dtype in STORES:
            queue = context.Queue()
            process = context.Process(target=run, args=(store, dtype, args.tokens, tmp, args.threads, queue))
            process.start()
            result = queue.get()
            process.join()
            store, dtype, seconds, rss, shape = result
            print(f"{store} | {dtype} | {seconds:.1f} | {args.tokens / seconds:.0f} | {rss:.0f} | {shape}")


if __name__ == "__main__":
    main()
