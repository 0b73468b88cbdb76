"""Which tokens a doc's stored ELMo arrays belong to, and how the arrays follow them.

spaCy re-indexes ``doc.tensor`` when ``doc.retokenize()`` merges or splits tokens and slices
it in ``span.as_doc()``, but leaves ``doc.user_data``, where the ELMo arrays live, as it was.
So the elmo component records each token's characters beside its arrays (``record_tokens``),
and a read first asks ``token_spans``: for each token the doc has now, the recorded tokens its
characters came from. A merged token reads the mean of its parts (as ``span._.elmo`` does), a
piece of a split token the vector of the token it was cut from, a token of ``as_doc`` its own;
a token made of no recorded characters means the arrays belong to another text.

``as_doc`` is told apart from a retokenized doc by an anchor: a ``user_data`` key in the form
spaCy gives a token's extension value (``("._.", name, char offset, None)``), whose offset
``as_doc`` (and ``Doc.from_docs``) shift with the text. No extension of that name is registered,
so nothing reads it as one.
"""

import weakref
from typing import Any, List, Optional, Tuple

import numpy
from spacy.tokens import Doc
from thinc.api import get_array_module

KEY_TOKENS: Any = ("spacy_elmo", "tokens")
# The record of a doc that stores no arrays (store "none"): weak keys, it goes with the doc.
_BESIDE: "weakref.WeakKeyDictionary[Doc, numpy.ndarray]" = weakref.WeakKeyDictionary()
ANCHOR_NAME = "spacy_elmo_text_start"
# The anchor as recorded, the recorded text starting at this doc's character 0.
_ANCHOR_AT_START: Any = ("._.", ANCHOR_NAME, 0, None)  # Any: spaCy's stub keys user_data by str; spaCy uses tuples
# For each token the doc has now: the first and last recorded token it overlaps (inclusive).
Spans = Tuple[numpy.ndarray, numpy.ndarray]
# Above this many tokens a read maps the whole doc with numpy (faster than checking each in Python).
_FEW_TOKENS = 64


def token_offsets(doc: Doc) -> numpy.ndarray:
    """``(n, 2)`` int64: each token's first character and the one after its last."""
    starts_lengths = doc.to_array(["IDX", "LENGTH"]).astype("int64").reshape(len(doc), 2)
    return numpy.stack([starts_lengths[:, 0], starts_lengths.sum(axis=1)], axis=1)


def record_tokens(doc: Doc, in_user_data: bool) -> None:
    """Record the tokens the doc's arrays belong to: in ``user_data`` where arrays are stored
    there (the record goes where they go: DocBin, as_doc), else beside the doc, for the layers
    held for its listeners only (they never leave the process)."""
    forget_tokens(doc)
    if in_user_data:
        doc.user_data[KEY_TOKENS] = token_offsets(doc)
        doc.user_data[_ANCHOR_AT_START] = True
    else:
        _BESIDE[doc] = token_offsets(doc)


def forget_tokens(doc: Doc) -> None:
    _BESIDE.pop(doc, None)
    doc.user_data.pop(KEY_TOKENS, None)
    for key in _anchors(doc):
        del doc.user_data[key]


def token_spans(doc: Doc) -> Optional[Spans]:
    """None where the recorded tokens are the doc's (or none were recorded: arrays stored by
    spacy-elmo 0.2.0); else the recorded tokens each token of the doc came from. Raises
    ``TokensChanged`` where some token came from none of them."""
    recorded, text_start = doc.user_data.get(KEY_TOKENS), 0
    if recorded is None:
        recorded = _BESIDE.get(doc)
        if recorded is None:
            return None
    else:
        anchors = _anchors(doc)
        if len(anchors) != 1:
            raise TokensChanged(f"{len(anchors)} texts' anchors (a doc made of several docs)")
        text_start = anchors[0][2]  # where the recorded text starts in this doc's
    now = token_offsets(doc)
    recorded = numpy.asarray(recorded, dtype="int64") + text_start
    if now.shape == recorded.shape and (now == recorded).all():
        return None
    first = numpy.searchsorted(recorded[:, 1], now[:, 0], side="right")  # the first ending after its start
    last = numpy.searchsorted(recorded[:, 0], now[:, 1], side="left") - 1  # the last starting before its end
    if (first > last).any():  # so first < len(recorded) and last >= 0
        raise TokensChanged("a token made of characters the stored tokens do not have")
    return first, last


def tokens_unchanged(doc: Doc, start: int, end: int) -> bool:
    """Whether the doc's tokens ``start:end`` are, row for row, the recorded ones (the same
    characters): a read of those few tokens may then trust their rows without mapping the whole
    doc (a merge or split elsewhere leaves them as they are), which keeps a loop over
    ``token._.elmo`` linear. False where unsure (a long range, no record, an anchor ``as_doc``
    shifted): the caller then follows the whole doc. The anchor is looked up by its key, not
    found among every key (``_anchors``): user_data holds a key per token extension value set,
    so a scan per token read would make such a loop quadratic again."""
    recorded = doc.user_data.get(KEY_TOKENS)
    if recorded is None or end - start > _FEW_TOKENS or end > len(recorded) or _ANCHOR_AT_START not in doc.user_data:
        return False
    rows = numpy.asarray(recorded[start:end], dtype="int64")
    now = [(token.idx, token.idx + len(token)) for token in doc[start:end]]
    return rows.shape == (len(now), 2) and bool((rows == numpy.asarray(now, dtype="int64").reshape(-1, 2)).all())


def follow_tokens(array, spans: Spans, axis: int):
    """``array`` with its token axis ``axis`` made the doc's tokens: a recorded token's row
    where a token is one or a piece of one, the mean of its parts where it merges several."""
    first, last = spans
    xp = get_array_module(array)
    rows = xp.moveaxis(array, axis, 0)
    followed = rows[xp.asarray(first)]  # a copy
    for token in numpy.flatnonzero(last > first):
        parts = rows[int(first[token]) : int(last[token]) + 1]
        followed[token] = parts.astype("float32").mean(axis=0).astype(array.dtype)
    return xp.ascontiguousarray(xp.moveaxis(followed, 0, axis))


def _anchors(doc: Doc) -> List[Any]:
    return [key for key in doc.user_data if isinstance(key, tuple) and key[:2] == ("._.", ANCHOR_NAME)]


class TokensChanged(Exception):
    """The stored arrays cannot be mapped onto the doc's tokens (internal: the reader drops them)."""
