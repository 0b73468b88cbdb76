"""The ELMo biLM in plain PyTorch: no spaCy, no thinc, no file format (``spacy_elmo.formats`` reads them)."""

from ..errors import ElmoError, ElmoFileNotFoundError, ElmoOptionsError, ElmoWeightsError
from .char_ids import batch_char_ids, sentence_char_ids, token_char_ids
from .elmo_bilm import ElmoBiLM
from .options import ElmoOptions, preset

__all__ = [
    "ElmoBiLM",
    "ElmoOptions",
    "ElmoError",
    "ElmoFileNotFoundError",
    "ElmoOptionsError",
    "ElmoWeightsError",
    "batch_char_ids",
    "preset",
    "sentence_char_ids",
    "token_char_ids",
]
