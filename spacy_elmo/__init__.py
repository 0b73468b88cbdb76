"""spacy-elmo: ELMo (Peters et al. 2018) as a spaCy component."""
from .about import __version__
from .bilm import ElmoBiLM, ElmoError, ElmoOptions, ElmoOptionsError, ElmoWeightsError

__all__ = ["ElmoBiLM", "ElmoOptions", "ElmoError", "ElmoOptionsError", "ElmoWeightsError", "__version__"]
