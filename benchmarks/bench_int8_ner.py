"""Downstream effect of int8 and bf16: one trained NER pipeline scored at each precision.

    python benchmarks/bench_int8_ner.py PIPELINE_DIR corpus/conll/dev.spacy [--gold-preproc]
        [--precision fp32 int8 bf16] [--force-bf16]

The pipeline is loaded once per precision, with ``[components.elmo] precision``
overridden (the user's way to switch: a config override at load); all score
the same examples. Prints each F1, each one's difference from fp32, and the
seconds each evaluation took (read those only on an idle machine). bf16 runs
where the CPU has native bf16; elsewhere it is skipped, or with
``--force-bf16`` run emulated (labelled so: its F1 is a native CPU's up to
summation order, its seconds are not).
"""

import argparse
import os
import time
from pathlib import Path
from typing import cast

import spacy
from machine import header
from spacy.training import Corpus

from spacy_elmo.bilm.precision import FORCE_BF16_ENV, PRECISIONS, native_cpu_bf16
from spacy_elmo.pipeline.elmo import ElmoComponent


def score(pipeline: Path, data: Path, precision: str, gold_preproc: bool):
    nlp = spacy.load(pipeline, config={"components": {"elmo": {"precision": precision}}})
    running = cast(ElmoComponent, nlp.get_pipe("elmo")).settings.precision
    if running != precision:  # else the comparison would be fp32 against itself
        raise SystemExit(f"error: {pipeline} was loaded to run at {precision} but runs at {running}")
    examples = list(Corpus(data, gold_preproc=gold_preproc)(nlp))
    start = time.perf_counter()
    scores = nlp.evaluate(examples)
    return scores, time.perf_counter() - start, sum(len(eg.reference) for eg in examples)


def labelled_precisions(asked, force_bf16: bool):
    """``{precision: label}`` in the order asked, fp32 first (the baseline); bf16 only
    where native or forced (then labelled emulated)."""
    labels = {}
    for precision in ["fp32"] + [p for p in asked if p != "fp32"]:
        if precision != "bf16" or native_cpu_bf16():
            labels[precision] = precision
        elif force_bf16:
            os.environ[FORCE_BF16_ENV] = "1"  # the pipeline refuses emulated bf16 otherwise
            labels[precision] = "bf16 (emulated)"
        else:
            print("bf16: skipped: no native bf16 on this CPU (AVX512-BF16/AMX); --force-bf16 runs it emulated")
    return labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pipeline", type=Path)
    parser.add_argument("data", type=Path)
    parser.add_argument("--gold-preproc", action="store_true", help="as the pipeline was trained (e.g. the yardstick)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--precision",
        nargs="+",
        choices=PRECISIONS,
        default=["fp32", "int8"],
        help="precisions to score (fp32, the baseline, always runs)",
    )
    parser.add_argument(
        "--force-bf16",
        action="store_true",
        help="score bf16 on a CPU without native bf16 too (emulated: same F1, slow)",
    )
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    print(header(args.threads))
    results = {}
    labels = labelled_precisions(args.precision, args.force_bf16)
    for precision, label in labels.items():
        scores, seconds, n_tokens = score(args.pipeline, args.data, precision, args.gold_preproc)
        results[precision] = 100 * scores["ents_f"]
        print(
            f"{label}: ents_f {results[precision]:.2f} ({n_tokens} tokens in {seconds:.1f} s, "
            f"{n_tokens / seconds:.0f} tokens/s)"
        )
    for precision, label in labels.items():
        if precision != "fp32":
            print(f"{label} - fp32: {results[precision] - results['fp32']:+.2f} F1")


if __name__ == "__main__":
    main()
