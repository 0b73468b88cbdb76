"""spacy-elmo: ELMo (Peters et al. 2018) as a spaCy component."""

from typing import Any

from .about import __version__
from .errors import ElmoError, ElmoOptionsError, ElmoWeightsError

__all__ = ["ElmoBiLM", "ElmoOptions", "ElmoError", "ElmoOptionsError", "ElmoWeightsError", "__version__"]


def __getattr__(name: str) -> Any:
    # The biLM classes import torch: only when asked for, so `python -m spacy_elmo --help` stays fast.
    if name in ("ElmoBiLM", "ElmoOptions"):
        from . import bilm

        return getattr(bilm, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
