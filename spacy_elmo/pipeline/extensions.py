"""User-facing annotations: ``doc._.elmo_layers``, ``token._.elmo``, ``span._.elmo``."""

from spacy.tokens import Doc, Span, Token

from ..doc_data import stored_layers, token_vectors


def _token_elmo(token: Token):
    vectors = token_vectors(token.doc, token.i, token.i + 1)
    return None if vectors is None else vectors[0]


def _span_elmo(span: Span):
    if len(span) == 0:
        return None
    vectors = token_vectors(span.doc, span.start, span.end)
    return None if vectors is None else vectors.mean(axis=0)


def install_extensions() -> None:
    """Register the extensions (idempotent)."""
    if not Doc.has_extension("elmo_layers"):
        Doc.set_extension("elmo_layers", getter=stored_layers)
    if not Token.has_extension("elmo"):
        Token.set_extension("elmo", getter=_token_elmo)
    if not Span.has_extension("elmo"):
        Span.set_extension("elmo", getter=_span_elmo)
