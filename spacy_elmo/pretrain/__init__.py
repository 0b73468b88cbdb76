"""Pretraining and fine-tuning the biLM on your own text (``python -m spacy_elmo pretrain``)."""
from .config import DEFAULT_CONFIG, PretrainConfigError, load_config
from .corpus import Corpus, PretrainDataError
from .train import pretrain
from .vocab import Vocabulary

__all__ = ["DEFAULT_CONFIG", "Corpus", "PretrainConfigError", "PretrainDataError", "Vocabulary", "load_config", "pretrain"]
