"""spacy-elmo: ELMo (Peters et al. 2018) as a spaCy component."""

from typing import Any

from . import bilm_files
from .about import __version__
from .errors import ElmoError, ElmoOptionsError, ElmoWeightsError

__all__ = ["ElmoBiLM", "ElmoOptions", "ElmoError", "ElmoOptionsError", "ElmoWeightsError", "__version__"]


def _network_files() -> Any:
    # The formats build on the network and it may not import them: their entry points are
    # handed to it here, above both, and imported when first used (see bilm_files.py).
    from .formats import network_files

    return network_files


bilm_files.provide(_network_files)


def __getattr__(name: str) -> Any:
    # The biLM classes import torch: only when asked for, so `python -m spacy_elmo --help` stays fast.
    if name in ("ElmoBiLM", "ElmoOptions"):
        from . import bilm

        return getattr(bilm, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
