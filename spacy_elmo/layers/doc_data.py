"""What the elmo component leaves on a Doc, and how listeners read it back.

Kept in ``doc.user_data`` as plain arrays:

* ``layers``: all ``(L+1, n, 2P)`` layers (store="all"), float32 or float16;
* ``mix``: only the token mix ``(n, 2P)`` (store="mix");
* ``token_mix``: the layer weights behind ``token._.elmo``;
* ``pending``: a full-precision copy for downstream listeners when the stored
  form is not (float16, mix only, or nothing stored); each listening
  component takes it once and the last one frees it.
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
    store: str,
    dtype: str,
    token_mix: List[float],
    n_listeners: int,
) -> None:
    """Annotate one doc with its ``(L+1, n, 2P)`` float32 layers. Unless they are stored as
    they are, the doc holds them for ``n_listeners`` reads (``layers_for_listener``): one per
    listener, and a component may have two (ELMo at its encoder's input and output)."""
    for key in (KEY_LAYERS, KEY_MIX, KEY_PENDING):
        doc.user_data.pop(key, None)
    layers = _to_numpy(layers)
    if store == "all":
        doc.user_data[KEY_LAYERS] = layers.astype(dtype, copy=False)
    elif store == "mix":
        doc.user_data[KEY_MIX] = token_mix_reducer(token_mix, dtype)(layers)
    doc.user_data[KEY_TOKEN_MIX] = list(token_mix)
    full_precision_stored = store == "all" and dtype == "float32"
    if n_listeners and not full_precision_stored:
        doc.user_data[KEY_PENDING] = [layers, n_listeners]


def token_mix_reducer(token_mix: List[float], dtype: str) -> Callable[[Any], numpy.ndarray]:
    """What store="mix" keeps of a ``(L+1, k, 2P)`` piece of layers: its ``(k, 2P)`` token mix."""
    weights = numpy.asarray(token_mix, dtype="float32")
    return lambda layers: numpy.tensordot(weights, _to_numpy(layers), axes=(0, 0)).astype(dtype, copy=False)


def layers_reducer(dtype: str) -> Callable[[Any], numpy.ndarray]:
    """What store="all" keeps of a piece when no listener reads it: the piece token-major,
    ``(k, L+1, 2P)``, already in ``dtype`` (so float16 layers never exist in float32 whole)."""
    return lambda layers: _to_numpy(layers).transpose(1, 0, 2).astype(dtype)


def store_doc_reduced(
    doc: Doc, reduced: Optional[numpy.ndarray], *, store: str, dtype: str, token_mix: List[float], shape: Sequence[int]
) -> None:
    """Annotate a doc as ``store_doc_layers`` does when no listener needs its float32 layers,
    from its pieces as the reducer left them, token-major (``layers_reducer``: store="all";
    ``token_mix_reducer``: store="mix"), or from nothing (store="none"). ``shape`` is one
    token's stored shape: ``(L+1, 2P)`` for "all", ``(2P,)`` for "mix"."""
    for key in (KEY_LAYERS, KEY_MIX, KEY_PENDING):
        doc.user_data.pop(key, None)
    if store != "none":
        if reduced is None:  # an empty doc
            reduced = numpy.zeros((len(doc), *shape), dtype=dtype)
        if store == "all":
            doc.user_data[KEY_LAYERS] = reduced.transpose(1, 0, 2)  # a view: (L+1, n, 2P), no copy
        else:
            doc.user_data[KEY_MIX] = reduced
    doc.user_data[KEY_TOKEN_MIX] = list(token_mix)


def layers_for_listener(doc: Doc):
    """The layers a downstream listener should use, or None if the doc has none."""
    stored = doc.user_data.get(KEY_LAYERS)
    pending = doc.user_data.get(KEY_PENDING)
    if pending is None:
        return stored
    layers, left = pending
    if left <= 1:
        del doc.user_data[KEY_PENDING]
    else:
        pending[1] = left - 1
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
