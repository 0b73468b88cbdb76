"""Pretraining and fine-tuning the biLM on your own text (``python -m spacy_elmo pretrain``)."""

from ..errors import PretrainConfigError, PretrainDataError
from .config import DEFAULT_CONFIG, load_config
from .corpus import Corpus
from .train import pretrain
from .vocab import Vocabulary

__all__ = [
    "DEFAULT_CONFIG",
    "Corpus",
    "PretrainConfigError",
    "PretrainDataError",
    "Vocabulary",
    "load_config",
    "pretrain",
]
