"""How far float32 runs of a biLM are from a float64 run of the same weights, by input length.

Per input (a text cut to N tokens; one token repeated N times, the input on which the
recurrence amplifies rounding most) it prints max |float32 - float64| over every layer and
token for three float32 runs:

* fresh: a new biLM, the input alone (what a pipeline just loaded computes);
* warm: every token type first encoded in another batch (the type cache filled by earlier
  docs, as in the pipeline that was saved);
* plain: unpacked fp32 matmuls (torch.addmm) instead of the oneDNN/MKL-packed ones;

and fresh-warm, fresh-plain: what two float32 runs differ by. Long inputs run as the elmo
component runs them, in overlapping windows of --max-length tokens (256, its default; 0:
one segment, as `embed --max-length 0`). A check, not a timing.

    python benchmarks/float64_drift.py                       # the bundled biLM
    python benchmarks/float64_drift.py --lengths 300 1000 --max-length 0
"""

import argparse
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy
import torch

from spacy_elmo.bilm import ElmoBiLM
from spacy_elmo.bilm.id_batches import sentence_layers
from spacy_elmo.bilm.windows import strided_windows
from spacy_elmo.layers.bilm_layer import DEFAULT_MAX_SEGMENT_LENGTH
from spacy_elmo.loaders import DEFAULT_BILM_DIR

TEXT = (
    "The city council met on Tuesday to discuss the new budget . Berlin is the capital of Germany and "
    "its largest city , with about 3.8 million people . She said the plan would cost more than expected , "
    "but that it was worth it . ELMo vectors depend on the context a word appears in ."
).split()
REPEATED = "Berlin"
PATHS = ("fresh", "warm", "plain")


def load(bilm_dir: Path, path: str = "fresh", float64: bool = False) -> ElmoBiLM:
    """The biLM of ``bilm_dir`` as one run uses it: float64 (no type cache), or float32 with
    unpacked kernels (``path`` "plain")."""
    bilm = ElmoBiLM.from_dir(bilm_dir)
    if float64:
        bilm = bilm.double()
        bilm.set_type_cache_size(0)
    for layer in [*bilm.bilstm.forward_layers, *bilm.bilstm.backward_layers]:
        layer.use_packed_weights = path != "plain"
    return bilm


def run_layers(bilm: ElmoBiLM, tokens: Sequence[str], max_length: int) -> numpy.ndarray:
    """``(L+1, n, 2P)`` in the biLM's own dtype (float64 stays float64), windowed as the
    component windows a segment longer than ``max_length`` (0: one segment)."""
    windows = strided_windows(0, len(tokens), max_length or len(tokens))
    ids, lengths = bilm.batch_ids([list(tokens[w.start : w.end]) for w in windows])
    with torch.no_grad():
        layers = bilm(torch.from_numpy(ids), torch.from_numpy(lengths)).cpu().numpy()
    kept = [w.owned(sentence_layers(layers, row, lengths[row])) for row, w in enumerate(windows)]
    return numpy.concatenate(kept, axis=1).astype(numpy.float64)


def warm_up(bilm: ElmoBiLM, tokens: Sequence[str]) -> None:
    """Encode every type of ``tokens`` first in another batch (other rows, another order)."""
    types = list(dict.fromkeys(tokens))[::-1]
    run_layers(bilm, types + TEXT[:7], 0)


def float32_runs(bilm_dir: Path, tokens: Sequence[str], max_length: int) -> Dict[str, numpy.ndarray]:
    """Each of ``PATHS``' float32 layers of ``tokens``."""
    runs = {}
    for path in PATHS:
        bilm = load(bilm_dir, path)
        if path == "warm":
            warm_up(bilm, tokens)
        runs[path] = run_layers(bilm, tokens, max_length)
    return runs


def max_abs(a: numpy.ndarray, b: numpy.ndarray) -> float:
    return float(numpy.abs(a - b).max())


def drift(bilm_dir: Path, tokens: Sequence[str], max_length: int, reference: Optional[ElmoBiLM] = None) -> Dict:
    """``{path: max abs from float64}`` and the float32 runs' differences from each other."""
    reference = reference or load(bilm_dir, float64=True)
    exact = run_layers(reference, tokens, max_length)
    runs = float32_runs(bilm_dir, tokens, max_length)
    figures = {path: max_abs(layers, exact) for path, layers in runs.items()}
    figures["fresh-warm"] = max_abs(runs["fresh"], runs["warm"])
    figures["fresh-plain"] = max_abs(runs["fresh"], runs["plain"])
    figures["largest value"] = float(numpy.abs(exact).max())
    return figures


def inputs(n: int) -> Dict[str, List[str]]:
    return {"text": (TEXT * (n // len(TEXT) + 1))[:n], f"{REPEATED} x N": [REPEATED] * n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bilm-dir", type=Path, default=None, help="a biLM directory (default: the bundled one)")
    parser.add_argument("--lengths", type=int, nargs="+", default=[10, 30, 100, 256, 300, 1000])
    parser.add_argument("--max-length", type=int, default=DEFAULT_MAX_SEGMENT_LENGTH, help="0: one segment")
    args = parser.parse_args()
    bilm_dir: Path = args.bilm_dir or DEFAULT_BILM_DIR
    reference = load(bilm_dir, float64=True)
    columns = [*PATHS, "fresh-warm", "fresh-plain"]
    print(f"biLM {bilm_dir}, windows of {args.max_length or 'any number of'} tokens; max abs over all layers")
    print(f"{'input':>12} {'N':>5} " + " ".join(f"{c:>11}" for c in columns) + "  (float64 - float32 for the first 3)")
    for n in args.lengths:
        for name, tokens in inputs(n).items():
            figures = drift(bilm_dir, tokens, args.max_length, reference)
            print(f"{name:>12} {n:>5} " + " ".join(f"{figures[c]:>11.2e}" for c in columns), flush=True)


if __name__ == "__main__":
    main()
