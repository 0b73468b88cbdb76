"""How far one run's layer outputs are from another's (int8 or bf16 against fp32): the
figure bench_bilm.py and gpu_check.py report, and tests/test_bf16_inference.py bounds."""

from typing import List, Sequence, Tuple

import numpy


def layer_deviation(exact: Sequence[numpy.ndarray], approximate: Sequence[numpy.ndarray]) -> List[Tuple[float, float]]:
    """Per layer of ``(L+1, n, D)`` arrays (one per sentence): ``(max |approximate - exact|,
    mean cosine of the token vectors)``."""
    rows = []
    for layer in range(exact[0].shape[0]):
        a = numpy.concatenate([e[layer] for e in exact]).astype(numpy.float64)
        b = numpy.concatenate([x[layer] for x in approximate]).astype(numpy.float64)
        cosine = (a * b).sum(-1) / (numpy.linalg.norm(a, axis=-1) * numpy.linalg.norm(b, axis=-1))
        rows.append((float(numpy.abs(a - b).max()), float(cosine.mean())))
    return rows
