"""Downstream effect of int8: one trained NER pipeline scored with fp32 and with int8 ELMo features.

    python benchmarks/bench_int8_ner.py PIPELINE_DIR corpus/conll/dev.spacy [--gold-preproc]

The pipeline is loaded twice, with ``[components.elmo] precision`` overridden
to "fp32" and to "int8" (the user's way to switch: a config override at load);
both score the same examples. Prints each F1, their difference, and the
seconds each evaluation took (read those only on an idle machine).
"""
import argparse
import time
from pathlib import Path

import spacy
from spacy.training import Corpus

from machine import header


def score(pipeline: Path, data: Path, precision: str, gold_preproc: bool):
    nlp = spacy.load(pipeline, config={"components": {"elmo": {"precision": precision}}})
    running = nlp.get_pipe("elmo").model.attrs["precision"]
    if running != precision:  # else the comparison would be fp32 against itself
        raise SystemExit(f"error: {pipeline} was loaded to run at {precision} but runs at {running}")
    examples = list(Corpus(data, gold_preproc=gold_preproc)(nlp))
    start = time.perf_counter()
    scores = nlp.evaluate(examples)
    return scores, time.perf_counter() - start, sum(len(eg.reference) for eg in examples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pipeline", type=Path)
    parser.add_argument("data", type=Path)
    parser.add_argument("--gold-preproc", action="store_true", help="as the pipeline was trained (e.g. the yardstick)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    print(header(args.threads))
    results = {}
    for precision in ("fp32", "int8"):
        scores, seconds, n_tokens = score(args.pipeline, args.data, precision, args.gold_preproc)
        results[precision] = 100 * scores["ents_f"]
        print(f"{precision}: ents_f {results[precision]:.2f} ({n_tokens} tokens in {seconds:.1f} s, "
              f"{n_tokens / seconds:.0f} tokens/s)")
    print(f"int8 - fp32: {results['int8'] - results['fp32']:+.2f} F1")


if __name__ == "__main__":
    main()
