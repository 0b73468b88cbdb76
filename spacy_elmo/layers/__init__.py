"""thinc glue: the biLM wrapped for spaCy Docs, the scalar mix, the listener."""

from .bilm_layer import build_bilm_model, get_bilm, set_bilm
from .listener import build_listener, build_standalone, learned_mix
from .scalar_mix import build_scalar_mix

__all__ = [
    "build_bilm_model",
    "build_listener",
    "build_scalar_mix",
    "build_standalone",
    "get_bilm",
    "learned_mix",
    "set_bilm",
]
