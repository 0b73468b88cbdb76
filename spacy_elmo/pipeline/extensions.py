"""User-facing annotations: ``doc._.elmo_layers``, ``token._.elmo``, ``span._.elmo``, and
spaCy's own vector API (``.vector``, ``.has_vector``, ``.similarity`` of a Token, Span or
Doc) on the same token mix, through the doc's user hooks (``add_vector_hooks``)."""

import warnings
from typing import Any, Optional, Set, Union

import numpy
from spacy.errors import Warnings
from spacy.tokens import Doc, Span, Token

from ..doc_data import KEY_MIX, KEY_SOURCE, stored_layers, token_vectors
from ..errors import ElmoError


def _doc_elmo_layers(doc: Doc):
    layers = stored_layers(doc)
    if layers is None:
        _hint_store(doc)
    return layers


def _token_elmo(token: Token):
    vectors = token_vectors(token.doc, token.i, token.i + 1)
    if vectors is None:
        _hint_store(token.doc)
    return None if vectors is None else vectors[0]


def _span_elmo(span: Span):
    if len(span) == 0:
        return None
    vectors = token_vectors(span.doc, span.start, span.end)
    if vectors is None:
        _hint_store(span.doc)
    return None if vectors is None else vectors.mean(axis=0)


_HINTED: Set[str] = set()  # the components whose `store` was named once in this process


def _hint_store(doc: Doc) -> None:
    """One line, once per component and process, where a getter returns None because the component
    ran but its ``store`` keeps less (the shipped configs set "none"): which setting keeps it."""
    source = doc.user_data.get(KEY_SOURCE)
    if source is None or source in _HINTED:
        return
    _HINTED.add(source)
    if KEY_MIX in doc.user_data:
        kept, empty = "only the token mix (store 'mix')", "doc._.elmo_layers is"
    else:
        kept, empty = "no vectors (store 'none')", "doc._.elmo_layers, token._.elmo and span._.elmo are"
    warnings.warn(
        f"the '{source}' component keeps {kept} on the Doc, so {empty} None: set its store to 'all' to keep "
        f"every layer, or 'mix' for the token vectors ([components.{source}] store, or "
        f"nlp.add_pipe('elmo', config={{'store': 'all'}}))",
        stacklevel=4,  # the code that read the extension (through spaCy's underscore)
    )


def install_extensions() -> None:
    """Register the extensions (idempotent)."""
    if not Doc.has_extension("elmo_layers"):
        Doc.set_extension("elmo_layers", getter=_doc_elmo_layers)
    if not Token.has_extension("elmo"):
        Token.set_extension("elmo", getter=_token_elmo)
    if not Span.has_extension("elmo"):
        Span.set_extension("elmo", getter=_span_elmo)


# -- spaCy's vector API. The hooks are module functions, so a pickled doc keeps them.
def add_vector_hooks(doc: Doc) -> None:
    """Make the doc's, its spans' and tokens' ``.vector`` the ELMo token mix (``token._.elmo``)
    and its mean over the span or doc, ``.has_vector`` true, and ``.similarity`` their cosine.
    The elmo component does this for every doc it annotates (its ``vector_hooks`` setting);
    call it on a doc read back from a ``DocBin`` or another process, which keep the stored
    mix but not spaCy's user hooks."""
    if token_vectors(doc, 0, 0) is None:
        raise ElmoError(
            "this doc carries no ELMo vectors (its elmo component stores none, or it never ran): add_vector_hooks "
            "needs a doc annotated with store 'all' or 'mix' (or read back from a DocBin with store_user_data)"
        )
    doc.user_hooks.update(vector=_doc_vector, vector_norm=_doc_vector_norm, has_vector=_has_vector, similarity=_cosine)
    doc.user_span_hooks.update(vector=_span_vector, has_vector=_has_vector, similarity=_cosine)
    doc.user_token_hooks.update(vector=_token_vector, has_vector=_has_vector, similarity=_cosine)


def _mean_vector(doc: Doc, start: int, end: int) -> numpy.ndarray:
    vectors = token_vectors(doc, start, end)
    if vectors is None:  # the stored vectors were removed from the doc
        return numpy.zeros((0,), dtype="float32")
    return vectors.mean(axis=0) if len(vectors) else numpy.zeros((vectors.shape[1],), dtype="float32")


def _doc_vector(doc: Doc) -> numpy.ndarray:
    return _mean_vector(doc, 0, len(doc))


def _doc_vector_norm(doc: Doc) -> float:
    return float(numpy.linalg.norm(_doc_vector(doc)))


def _span_vector(span: Span) -> numpy.ndarray:
    return _mean_vector(span.doc, span.start, span.end)


def _token_vector(token: Token) -> numpy.ndarray:
    vector = _token_elmo(token)
    return numpy.zeros((0,), dtype="float32") if vector is None else vector


def _has_vector(item: Union[Doc, Span, Token]) -> bool:
    doc = item if isinstance(item, Doc) else item.doc
    return (isinstance(item, Token) or len(item) > 0) and token_vectors(doc, 0, 0) is not None


def _cosine(item: Union[Doc, Span, Token], other: Any) -> float:
    """The cosine of the two vectors; 0.0 with spaCy's W008 where one has none (as spaCy does)."""
    this_vector, other_vector = numpy.asarray(item.vector), numpy.asarray(other.vector)
    this_norm, other_norm = _norm(this_vector), _norm(other_vector)
    if not this_norm or not other_norm:
        if not item.has_vector or not other.has_vector:
            warnings.warn(Warnings.W008.format(obj=type(item).__name__), stacklevel=3)  # the caller of .similarity
        return 0.0
    if this_vector.shape != other_vector.shape:
        raise ElmoError(
            f"cannot compare a {type(item).__name__}'s ELMo vector of width {this_vector.shape[0]} with a "
            f"{type(other).__name__}'s vector of width {other_vector.shape[0]}: they come from different models"
        )
    return float(numpy.dot(this_vector, other_vector) / (this_norm * other_norm))


def _norm(vector: Any) -> Optional[float]:
    return float(numpy.linalg.norm(vector)) if vector.size else None
