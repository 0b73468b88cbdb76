"""What the elmo component leaves on a Doc, and how listeners read it back.

Kept in ``doc.user_data`` as plain arrays:

* ``layers``: all ``(L+1, n, 2P)`` layers (store="all"), float32 or float16;
* ``mix``: only the token mix ``(n, 2P)`` (store="mix");
* ``token_mix``: the layer weights behind ``token._.elmo``;
* ``source``: the name of the elmo component that wrote the three above (with
  two elmo components, the later one's are what the doc shows);
* ``pending``: per elmo component that has listeners, ``[layers, reads left]``:
  its full-precision layers for them when the stored form is not (float16, mix
  only, or nothing stored; None: the stored float32 layers, which another elmo
  component replacing them moves here). Each of its listeners takes them once
  and the last one frees them, so a listener reads its own upstream's layers.
"""

import math
from numbers import Real
from typing import Any, Callable, List, Optional, Sequence

import numpy
from spacy.tokens import Doc

from ..errors import ElmoError

# Any: spaCy's stub types doc.user_data as Dict[str, Any], though spaCy keys it by tuples too.
KEY_LAYERS: Any = ("spacy_elmo", "layers")
KEY_MIX: Any = ("spacy_elmo", "mix")
KEY_TOKEN_MIX: Any = ("spacy_elmo", "token_mix")
KEY_PENDING: Any = ("spacy_elmo", "pending")
KEY_SOURCE: Any = ("spacy_elmo", "source")
STORE_CHOICES = ("all", "mix", "none")
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


def store_doc_layers(
    doc: Doc,
    layers,
    *,
    source: str,
    store: str,
    dtype: str,
    token_mix: List[float],
    n_listeners: int,
) -> None:
    """Annotate one doc with the ``(L+1, n, 2P)`` float32 layers of the elmo component named
    ``source``; the doc holds them for ``n_listeners`` reads (``layers_for_listener``): one per
    listener, and a component may have two (ELMo at its encoder's input and output)."""
    _clear_stored(doc, source)
    layers = _to_numpy(layers)
    if store == "all":
        doc.user_data[KEY_LAYERS] = layers.astype(dtype, copy=False)  # float32: no copy
    elif store == "mix":
        doc.user_data[KEY_MIX] = token_mix_reducer(token_mix, dtype)(layers)
    doc.user_data[KEY_TOKEN_MIX] = list(token_mix)
    if n_listeners:
        full_precision_stored = store == "all" and dtype == "float32"
        doc.user_data.setdefault(KEY_PENDING, {})[source] = [None if full_precision_stored else layers, n_listeners]


def token_mix_reducer(token_mix: List[float], dtype: str) -> Callable[[Any], numpy.ndarray]:
    """What store="mix" keeps of a ``(L+1, k, 2P)`` piece of layers: its ``(k, 2P)`` token mix."""
    weights = numpy.asarray(token_mix, dtype="float32")
    return lambda layers: numpy.tensordot(weights, _to_numpy(layers), axes=(0, 0)).astype(dtype, copy=False)


def layers_reducer(dtype: str) -> Callable[[Any], numpy.ndarray]:
    """What store="all" keeps of a piece when no listener reads it: the piece token-major,
    ``(k, L+1, 2P)``, already in ``dtype`` (so float16 layers never exist in float32 whole)."""
    return lambda layers: _to_numpy(layers).transpose(1, 0, 2).astype(dtype)


def store_doc_reduced(
    doc: Doc,
    reduced: Optional[numpy.ndarray],
    *,
    source: str,
    store: str,
    dtype: str,
    token_mix: List[float],
    shape: Sequence[int],
) -> None:
    """Annotate a doc as ``store_doc_layers`` does when no listener needs its float32 layers,
    from its pieces as the reducer left them, token-major (``layers_reducer``: store="all";
    ``token_mix_reducer``: store="mix"), or from nothing (store="none"). ``shape`` is one
    token's stored shape: ``(L+1, 2P)`` for "all", ``(2P,)`` for "mix"."""
    _clear_stored(doc, source)
    if store != "none":
        if reduced is None:  # an empty doc
            reduced = numpy.zeros((len(doc), *shape), dtype=dtype)
        if store == "all":
            doc.user_data[KEY_LAYERS] = reduced.transpose(1, 0, 2)  # a view: (L+1, n, 2P), no copy
        else:
            doc.user_data[KEY_MIX] = reduced
    doc.user_data[KEY_TOKEN_MIX] = list(token_mix)


def _clear_stored(doc: Doc, source: str) -> None:
    """Make room for ``source``'s annotation: the stored form goes, and what ``source``
    held for its listeners, but not what another elmo component holds for its own."""
    pending = doc.user_data.get(KEY_PENDING)
    if isinstance(pending, dict):
        pending.pop(source, None)
        previous = pending.get(doc.user_data.get(KEY_SOURCE))
        if previous is not None and previous[0] is None:  # its listeners read the stored layers: keep them
            previous[0] = doc.user_data.get(KEY_LAYERS)
    if not isinstance(pending, dict) or not pending:  # (a list: a doc annotated before per-component reads)
        doc.user_data.pop(KEY_PENDING, None)
    doc.user_data.pop(KEY_LAYERS, None)
    doc.user_data.pop(KEY_MIX, None)
    doc.user_data[KEY_SOURCE] = source


def layers_for_listener(doc: Doc, source: Optional[str] = None):
    """The layers a listener of the elmo component ``source`` should use (None: of the one
    that wrote the doc's stored layers), or None if the doc has none of that component's."""
    stored_by = doc.user_data.get(KEY_SOURCE)
    source = source or stored_by
    pending = doc.user_data.get(KEY_PENDING) or {}
    held = pending.get(source)
    if held is None:  # every listener took its read, or a doc saved with its layers
        return doc.user_data.get(KEY_LAYERS) if stored_by in (None, source) else None
    layers, left = held
    if layers is None:  # the stored float32 layers are the full-precision ones
        layers = doc.user_data.get(KEY_LAYERS)
    if left <= 1:
        del pending[source]
        if not pending:
            del doc.user_data[KEY_PENDING]
    else:
        held[1] = left - 1
    return layers


def stored_layers(doc: Doc):
    """``doc._.elmo_layers``: float32 ``(L+1, n, 2P)``, or None if not stored."""
    layers = doc.user_data.get(KEY_LAYERS)
    return None if layers is None else layers.astype("float32", copy=False)


def token_vectors(doc: Doc, start: int, end: int):
    """The token mix for tokens ``start:end`` as float32 ``(end - start, 2P)``, or None."""
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
