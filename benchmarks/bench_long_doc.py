"""Memory and time of one very long Doc through the `elmo` component.

A doc without sentence boundaries runs in windows of `max_segment_length`
tokens, length-batched, so the biLM's working memory is bounded whatever the
doc length; what remains is the annotation itself, which the `store` setting
controls. Each setting runs in a fresh process and reports its peak RSS above
the process's baseline (model loaded, doc built).

    python benchmarks/bench_long_doc.py --tokens 100000 [--bilm-size small]
    python benchmarks/bench_long_doc.py --edge-cosine [--text corpus/pretrain/dev.txt]

``--edge-cosine``: how much context tokens near a window edge lose. Real text
(the given file's lines joined into one run, no sentence boundaries) through
the bundled English biLM: the top layer of each token, as cosine to a run of
the whole text at once, for tokens within 8 of a 256-token boundary ("edge")
and the rest ("middle"), with hard windows (spacy-elmo 0.1) and with the
overlapping windows the component uses now.
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
    parser.add_argument("--bilm-size", default="small")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--edge-cosine", action="store_true", help="the window-edge context figure instead of memory and time")
    parser.add_argument("--text", type=Path, default=Path("corpus/pretrain/dev.txt"))
    args = parser.parse_args()
    if args.edge_cosine:
        edge_cosine(args.text)
        return
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
