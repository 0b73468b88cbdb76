"""Cost of a training epoch: NER with ELMo (configs/ner_elmo.cfg, or the config
--elmo-config names) vs the CNN baseline (configs/ner_cnn.cfg), on the same
data and batches.

The target (issue "spaCy integration", item 6): after the first epoch, which
fills the cache, an ELMo epoch costs at most 1.5x a CNN epoch, because a
frozen biLM is never recomputed for a sentence it has seen.

    python benchmarks/bench_train_epoch.py --train corpus/conll/train.spacy --limit 2000 \\
        --bilm-dir training/bilm        # or --bilm-size small (random weights)

The 2026-11-23 figure in docs/speed.md timed ELMo on the encoder's output, the
ner_elmo.cfg of that day: --elmo-config ner_elmo_output.cfg times that model.

Without --train, a synthetic corpus (random entity sentences) is used.

``--grad-factor G`` (> 0) also times the ELMo config fine-tuning its biLM (the
listener at ``--listener`` gets ``grad_factor = G``): no cache can serve it, so
every epoch runs the biLM forward and backward; it prints that epoch's cost
beside the frozen one and the words per second of each.
"""

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import List, Tuple

import spacy
import torch
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from spacy.training.batchers import minibatch_by_words
from spacy.training.initialize import init_nlp
from spacy.util import load_config
from thinc.api import fix_random_seed

from spacy_elmo.bilm import ElmoBiLM, preset

CONFIGS = Path(__file__).parent.parent / "configs"


def synthetic_docs(nlp, n_sentences: int):
    rng = random.Random(0)
    names, places = ["Alice", "Bob", "Carol", "Dmitri", "Eun-ji"], ["Paris", "Lagos", "Quito", "Oslo", "Pune"]
    filler = "the a report said on Monday that talks in with over new old market officials".split()
    docs = []
    for _ in range(n_sentences):
        words: List[str] = []
        ents: List[Tuple[str, int]] = []
        for _ in range(rng.randint(8, 25)):
            roll = rng.random()
            if roll < 0.08:
                ents.append(("PER", len(words)))
                words.append(rng.choice(names))
            elif roll < 0.14:
                ents.append(("LOC", len(words)))
                words.append(rng.choice(places))
            else:
                words.append(rng.choice(filler))
        doc = Doc(nlp.vocab, words=words + ["."])
        doc.ents = [doc[i : i + 1].char_span(0, len(doc[i]), label=label) for label, i in ents]
        docs.append(doc)
    return docs


def load_docs(nlp, path, limit):
    docs = list(DocBin().from_disk(path).get_docs(nlp.vocab))
    return docs[:limit] if limit else docs


def run_config(config_name, docbin_bytes, epochs, overrides, batch_words):
    """Seconds per epoch of nlp.update over the corpus, batched by words like spacy train."""
    config = load_config(CONFIGS / config_name, overrides=overrides, interpolate=False)
    fix_random_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        train_path = Path(tmp) / "train.spacy"
        train_path.write_bytes(docbin_bytes)
        config["paths"]["train"] = str(train_path)
        config["paths"]["dev"] = str(train_path)
        nlp = init_nlp(config.interpolate())
    references = list(DocBin().from_bytes(docbin_bytes).get_docs(nlp.vocab))
    examples = [
        Example(Doc(nlp.vocab, words=[t.text for t in d], spaces=[bool(t.whitespace_) for t in d]), d)
        for d in references
    ]
    optimizer = nlp.create_optimizer()
    times = []
    for _ in range(epochs):
        random.Random(0).shuffle(examples)
        start = time.perf_counter()
        for batch in minibatch_by_words(examples, size=batch_words):
            nlp.update(batch, sgd=optimizer, drop=0.1)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", type=Path, help="a .spacy NER corpus (default: synthetic)")
    parser.add_argument("--limit", type=int, default=2000, help="docs to use")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--bilm-dir", type=Path, help="options.json + weights.hdf5 (default: random weights)")
    parser.add_argument("--bilm-size", default="small", help="preset for random weights: small, medium, original")
    parser.add_argument(
        "--batch-words", type=int, default=1000, help="words per update (the configs' final batch size)"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--elmo-config", default="ner_elmo.cfg", help="the ELMo config in configs/ to time")
    parser.add_argument(
        "--grad-factor", type=float, default=0.0, help="also time the ELMo config fine-tuning its biLM (0: frozen only)"
    )
    parser.add_argument(
        "--listener", default="components.ner.model.tok2vec.elmo", help="the ELMo config's listener block"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    vocab_nlp = spacy.blank("en")
    docs = load_docs(vocab_nlp, args.train, args.limit) if args.train else synthetic_docs(vocab_nlp, args.limit)
    n_tokens = sum(len(d) for d in docs)
    with tempfile.TemporaryDirectory() as tmp:
        if args.bilm_dir:
            options, weights = args.bilm_dir / "options.json", args.bilm_dir / "weights.hdf5"
            described = str(args.bilm_dir)
        else:
            torch.manual_seed(0)
            options, weights = Path(tmp) / "options.json", Path(tmp) / "weights.hdf5"
            ElmoBiLM(preset(args.bilm_size)).to_files(options, weights)
            described = f"random {args.bilm_size} preset"
        elmo_overrides = {"paths.elmo_options": str(options), "paths.elmo_weights": str(weights)}
        print(
            f"{len(docs)} docs, {n_tokens} tokens ({'synthetic' if not args.train else args.train}); "
            f"biLM: {described}; {args.threads} threads; {args.batch_words} words per update"
        )
        data = DocBin(docs=docs).to_bytes()
        results = {
            "ner_cnn.cfg": run_config("ner_cnn.cfg", data, args.epochs, {}, args.batch_words),
            args.elmo_config: run_config(args.elmo_config, data, args.epochs, elmo_overrides, args.batch_words),
        }
        if args.grad_factor:
            tuned = {**elmo_overrides, f"{args.listener}.grad_factor": args.grad_factor}
            name = f"{args.elmo_config}, grad_factor {args.grad_factor:g}"
            results[name] = run_config(args.elmo_config, data, args.epochs, tuned, args.batch_words)
    print("config | " + " | ".join(f"epoch {i + 1} s" for i in range(args.epochs)) + " | words/s after epoch 1")
    for name, times in results.items():
        later = times[1:] or times
        words_per_second = n_tokens * len(later) / sum(later)
        print(f"{name} | " + " | ".join(f"{t:.1f}" for t in times) + f" | {words_per_second:,.0f}")
    cnn_later = sum(results["ner_cnn.cfg"][1:]) / max(len(results["ner_cnn.cfg"]) - 1, 1)
    elmo_later = sum(results[args.elmo_config][1:]) / max(len(results[args.elmo_config]) - 1, 1)
    print(f"after the first epoch: ELMo/CNN epoch time = {elmo_later / cnn_later:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
