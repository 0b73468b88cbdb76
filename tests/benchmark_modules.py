"""The benchmarks' own modules (benchmarks/ is no package: its scripts import their
siblings by name), imported for the tests that check them."""

import importlib
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = str(Path(__file__).parent.parent / "benchmarks")


def benchmark_module(name: str) -> ModuleType:
    """``benchmarks/<name>.py``, with benchmarks/ on ``sys.path`` only while it is imported."""
    sys.path.insert(0, BENCHMARKS)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(BENCHMARKS)
