"""What the elmo component leaves on a Doc, and how listeners read it back.

Kept in ``doc.user_data`` as plain arrays:

* ``layers``: all ``(L+1, n, 2P)`` layers (store="all"), float32 or float16;
* ``mix``: only the token mix ``(n, 2P)`` (store="mix");
* ``token_mix``: the layer weights behind ``token._.elmo``;
* ``source``: the name of the elmo component that wrote the three above (with
  two elmo components, the later one's are what the doc shows);
* ``tokens`` and an anchor: the tokens the arrays belong to (``doc_tokens``): after
  ``doc.retokenize()`` or ``span.as_doc()`` the arrays follow the tokens at the next read
  (``follow_tokens_of``), or are dropped with one warning;
Held for the listeners, outside ``doc.user_data`` (``held_for_listeners``): per
elmo component that has listeners, its full-precision layers for them when the
stored form is not (float16, mix only, or nothing stored; None: the stored float32
layers, which another elmo component replacing them moves here). They stay while the
doc lives (weak keys: they go with it), so a listener reads its own upstream's layers
as often as it is asked, as spaCy's listeners read ``doc.tensor`` (a component run
again, ``nlp.rehearse``'s two copies of a model). Not in ``user_data``, which
``DocBin``, pickle and ``spacy apply`` write out: a saved or copied doc carries only
what ``store`` keeps, and a GPU copy never meets msgpack.
"""

import math
import warnings
import weakref
from numbers import Real
from typing import Any, Dict, List, Optional, Sequence

import numpy
from spacy.tokens import Doc
from thinc.api import get_array_module

from .doc_tokens import (
    KEY_TOKENS,
    TokensChanged,
    follow_tokens,
    forget_tokens,
    record_tokens,
    token_spans,
    tokens_unchanged,
)
from .errors import ElmoError

# Any: spaCy's stub types doc.user_data as Dict[str, Any], though spaCy keys it by tuples too.
KEY_LAYERS: Any = ("spacy_elmo", "layers")
KEY_MIX: Any = ("spacy_elmo", "mix")
KEY_TOKEN_MIX: Any = ("spacy_elmo", "token_mix")
KEY_SOURCE: Any = ("spacy_elmo", "source")
STORE_CHOICES = ("all", "mix", "none")
# A doc's entry goes with the doc (weak keys).
# Where spacy-elmo 0.2.0 kept the held layers, in user_data (DocBin wrote them out).
LEGACY_KEY_PENDING: Any = ("spacy_elmo", "pending")
_HELD: "weakref.WeakKeyDictionary[Doc, Dict[Any, Any]]" = weakref.WeakKeyDictionary()
DTYPE_CHOICES = ("float32", "float16")


def check_token_mix(token_mix: Optional[Sequence[float]]) -> None:
    """Layer weights: finite non-negative numbers, not all 0 (None: the plain average)."""
    if token_mix is None:
        return
    numbers = isinstance(token_mix, (list, tuple)) and all(
        isinstance(w, Real) and not isinstance(w, bool) and math.isfinite(w) for w in token_mix
    )
    if not numbers or not any(w > 0 for w in token_mix) or any(w < 0 for w in token_mix):
        raise ElmoError(f"elmo token_mix must be non-negative layer weights with a positive sum, got {token_mix!r}")


def check_token_mix_length(token_mix: Optional[Sequence[float]], n_layers: int) -> None:
    """One weight per layer of the biLM (known once its weights are)."""
    if token_mix is not None and len(token_mix) != n_layers:
        raise ElmoError(
            f"elmo token_mix has {len(token_mix)} weights, but the biLM gives {n_layers} layers (the token "
            f"layer and {n_layers - 1} LSTM layers): give {n_layers} weights, or null for the plain average"
        )


def token_mix_weights(token_mix: Optional[Sequence[float]], n_layers: int) -> List[float]:
    """Normalised layer weights; None means the plain average. Scaled by the largest first,
    so weights whose sum overflows (1e308 + 1e308) still mix rather than all become 0."""
    if token_mix is None:
        return [1.0 / n_layers] * n_layers
    check_token_mix_length(token_mix, n_layers)
    largest = max(float(w) for w in token_mix)
    scaled = [float(w) / largest for w in token_mix]
    return [w / sum(scaled) for w in scaled]


class DocStore:
    """What the elmo component named ``source`` leaves on a Doc: ``store`` ("all" layers,
    the token "mix" or "none") in ``dtype``, with the (normalised) ``token_mix`` weights.
    The one place that knows the three stores; made once per setting by the component.

    ``keep`` is what a doc stores of a ``(L+1, k, 2P)`` piece of its layers, on the host,
    with the tokens on axis ``token_axis``: a doc's stored form is its pieces' kept parts
    in token order, so it can be assembled piece by piece and its float32 layers need
    never exist whole (``layers/bilm_layer.assemble``)."""

    def __init__(self, source: str, store: str, dtype: str, token_mix: List[float]) -> None:
        self.source, self.store, self.dtype, self.token_mix = source, store, dtype, list(token_mix)
        self.token_axis = 0 if store == "mix" else 1
        self._weights = numpy.asarray(token_mix, dtype="float32")

    def keep(self, layers) -> Optional[numpy.ndarray]:
        """``(L+1, k, 2P)`` layers (on any device) -> what the doc stores of them (None: nothing)."""
        if self.store == "all":
            return _to_numpy(layers).astype(self.dtype, copy=False)  # float32 on the host: no copy
        if self.store == "mix":
            xp = get_array_module(layers)  # mixed where the layers are: only (k, 2P) goes to the host
            mixed = xp.tensordot(xp.asarray(self._weights), layers, axes=(0, 0))
            return _to_numpy(mixed).astype(self.dtype, copy=False)
        return None

    def annotate(self, doc: Doc, stored: Optional[numpy.ndarray]) -> None:
        """Annotate one doc with its stored form (``keep``'s, assembled)."""
        follow_tokens_of(doc)  # what another elmo component holds for its listeners, first
        _clear_stored(doc, self.source)
        if self.store == "all":
            doc.user_data[KEY_LAYERS] = stored
        elif self.store == "mix":
            doc.user_data[KEY_MIX] = stored
        doc.user_data[KEY_TOKEN_MIX] = list(self.token_mix)
        record_tokens(doc, in_user_data=stored is not None)

    def annotate_for_listeners(self, doc: Doc, layers) -> None:
        """Annotate one doc from its ``(L+1, n, 2P)`` float32 layers and hold them for its
        listeners (``layers_for_listener``) while the doc lives."""
        stored = self.keep(layers)
        self.annotate(doc, stored)
        # Listeners read the layers where the biLM left them (on a GPU: the device copy; only
        # what the Doc stores goes to the host). None: the stored float32 layers are that array.
        _HELD.setdefault(doc, {})[self.source] = None if stored is layers else layers


def _clear_stored(doc: Doc, source: str) -> None:
    """Make room for ``source``'s annotation: the stored form goes, and what ``source``
    held for its listeners, but not what another elmo component holds for its own."""
    held = _HELD.get(doc, {})
    held.pop(source, None)
    previous = doc.user_data.get(KEY_SOURCE)
    if previous in held and held[previous] is None:  # its listeners read the stored layers: keep them
        held[previous] = doc.user_data.get(KEY_LAYERS)
    if not held:
        _HELD.pop(doc, None)
    doc.user_data.pop(LEGACY_KEY_PENDING, None)  # a doc annotated (or saved) by spacy-elmo 0.2.0
    doc.user_data.pop(KEY_LAYERS, None)
    doc.user_data.pop(KEY_MIX, None)
    forget_tokens(doc)
    doc.user_data[KEY_SOURCE] = source


def follow_tokens_of(doc: Doc) -> None:
    """Make the doc's stored arrays, and those held for its listeners, those of the tokens it
    has now (``doc_tokens``: spaCy's retokenize and as_doc leave user_data as it was), or
    drop them with one warning where they belong to another text; never another token's."""
    try:
        spans = token_spans(doc)
    except TokensChanged as changed:
        _drop_stored(doc, str(changed))
        return
    if spans is None:
        if KEY_TOKENS not in doc.user_data and _stored_count(doc) not in (None, len(doc)):  # spacy-elmo 0.2.0's
            _drop_stored(doc, f"{_stored_count(doc)} stored tokens for {len(doc)}")
        return
    for key, axis in ((KEY_LAYERS, 1), (KEY_MIX, 0)):
        if doc.user_data.get(key) is not None:
            doc.user_data[key] = follow_tokens(doc.user_data[key], spans, axis)
    held = _HELD.get(doc, {})
    for source, layers in held.items():
        if layers is not None:  # None: the stored float32 layers, which followed above
            held[source] = follow_tokens(layers, spans, 1)
    record_tokens(doc, in_user_data=_stored_count(doc) is not None)


def _stored_count(doc: Doc) -> Optional[int]:
    layers, mix = doc.user_data.get(KEY_LAYERS), doc.user_data.get(KEY_MIX)
    return layers.shape[1] if layers is not None else (mix.shape[0] if mix is not None else None)


def _drop_stored(doc: Doc, why: str) -> None:
    """The arrays go (once: the next read finds none), with one warning saying why."""
    _HELD.pop(doc, None)
    doc.user_data.pop(KEY_LAYERS, None)
    doc.user_data.pop(KEY_MIX, None)
    doc.user_data.pop(KEY_SOURCE, None)  # as if elmo never ran: no reader then blames its store
    forget_tokens(doc)
    warnings.warn(
        f"the ELMo layers and vectors stored on this doc belong to other tokens ({why}), so they are "
        "dropped: run the elmo component on the doc as it is now",
        stacklevel=2,
    )


def layers_for_listener(doc: Doc, source: Optional[str] = None):
    """The layers a listener of the elmo component ``source`` should use (None: of the one
    that wrote the doc's stored layers), or None if the doc has none of that component's."""
    follow_tokens_of(doc)
    stored_by = doc.user_data.get(KEY_SOURCE)
    source = source or stored_by
    held = _HELD.get(doc, {})
    if source not in held:  # nothing held (no listener then, or a saved or copied doc): the stored layers
        return doc.user_data.get(KEY_LAYERS) if stored_by in (None, source) else None
    layers = held[source]
    return doc.user_data.get(KEY_LAYERS) if layers is None else layers


def annotated_by_elmo(doc: Doc) -> bool:
    """Whether an elmo component annotated the doc (or the doc it was saved or copied from)."""
    return doc.user_data.get(KEY_SOURCE) is not None


def held_for_listeners(doc: Doc) -> Dict[Any, Any]:
    """What the doc holds for its listeners, per elmo component (a copy)."""
    return dict(_HELD.get(doc, {}))


def stored_layers(doc: Doc):
    """``doc._.elmo_layers``: float32 ``(L+1, n, 2P)``, or None if not stored."""
    follow_tokens_of(doc)
    layers = doc.user_data.get(KEY_LAYERS)
    return None if layers is None else layers.astype("float32", copy=False)


def token_vectors(doc: Doc, start: int, end: int):
    """The token mix for tokens ``start:end`` as float32 ``(end - start, 2P)``, or None."""
    if not tokens_unchanged(doc, start, end):
        follow_tokens_of(doc)
    mix = doc.user_data.get(KEY_MIX)
    if mix is not None:
        return mix[start:end].astype("float32", copy=False)
    layers = doc.user_data.get(KEY_LAYERS)
    if layers is None:
        return None
    weights = numpy.asarray(doc.user_data[KEY_TOKEN_MIX], dtype="float32")
    return numpy.tensordot(weights, layers[:, start:end].astype("float32", copy=False), axes=(0, 0))


def _to_numpy(array):
    return array.get() if hasattr(array, "get") else numpy.asarray(array)  # cupy -> numpy
