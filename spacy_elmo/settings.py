"""The elmo component's run-time settings: how this process runs the biLM and what a Doc keeps.

One object, ``ElmoSettings``, resolved and checked once where the settings are chosen (the
component's construction, which ``spacy.load`` runs from the saved config.cfg and its
overrides; ``layers.bilm_layer.configure``), carried by the biLM's thinc model
(``attrs["settings"]``) and only read after that, never decided per batch. None is learned, so
none is saved: a load keeps the loading model's settings (``KeptOnLoad``, the one load hook), and a
saved pipeline's config.cfg is where they come from again.

Whether the biLM trains is not one of them: each listener's config says it (``grad_factor``),
and the component reads it from the listeners it holds when it needs it (``trains_bilm``). A
copy here would go stale, as spaCy re-links listeners by emptying ``listener_map`` directly
(``Language._link_components``); the one rule about it, fp32 only, is
``refuse_inference_only_fine_tuning`` below.

It sits under neither the layers nor the pipe (as ``doc_data.py`` does): both read it.
"""

from dataclasses import asdict, dataclass, replace
from typing import Any, Dict, Optional, Sequence, Tuple

from thinc.api import deserialize_attr, serialize_attr

from .bilm.precision import Device, check_precision
from .defaults import DEFAULT_MAX_SEGMENT_LENGTH
from .doc_data import DTYPE_CHOICES, STORE_CHOICES, check_token_mix
from .errors import ElmoError


class KeptOnLoad:
    """What a model carries in its attrs for this process only (its settings, its cache of
    outputs): never saved, and a load keeps the loading model's (``on_load`` says what it
    then does with it). The one load protocol for everything that is not learned."""

    def on_load(self) -> None:
        pass


@serialize_attr.register(KeptOnLoad)
def _not_saved(_, value: KeptOnLoad, name: str, model) -> bytes:
    return b""


@deserialize_attr.register(KeptOnLoad)
def _kept_on_load(current: KeptOnLoad, value: Any, name: str, model) -> KeptOnLoad:
    current.on_load()
    return current


@dataclass(frozen=True)
class ElmoSettings(KeptOnLoad):
    """``precision``: "fp32" (exact), "int8" or "bf16" (inference only; see bilm/precision.py),
    checked for ``device``, where the biLM runs; ``max_segment_length``: the biLM's window;
    ``cache_size_mb``: memory for cached biLM outputs (0: none); ``store``, ``store_dtype``,
    ``token_mix``: what the Doc keeps (``doc_data.DocStore``); ``vector_hooks``: whether spaCy's
    ``.vector``/``.similarity`` give the stored token mix (``pipeline/extensions.py``)."""

    precision: str = "fp32"
    device: str = "cpu"
    max_segment_length: int = DEFAULT_MAX_SEGMENT_LENGTH
    cache_size_mb: float = 0.0
    store: str = "all"
    store_dtype: str = "float32"
    token_mix: Optional[Tuple[float, ...]] = None
    vector_hooks: bool = True

    def changed(self, device: Device, prefix: str = "", **changes: Any) -> "ElmoSettings":
        """These settings with ``changes``, all checked where the biLM runs, ``device``
        (``prefix`` starts each message's name of a setting: "elmo " for the component's)."""
        if "token_mix" in changes:
            mix = changes["token_mix"]
            check_token_mix(mix)  # the message shows it as given
            changes["token_mix"] = None if mix is None else tuple(mix)
        settings = replace(self, device=str(device), **changes)
        settings._check(prefix)
        return settings

    def _check(self, prefix: str) -> None:
        if self.store not in STORE_CHOICES:
            raise ElmoError(f"{prefix}store must be one of {STORE_CHOICES}, got {self.store!r}")
        if self.store_dtype not in DTYPE_CHOICES:
            raise ElmoError(f"{prefix}store_dtype must be one of {DTYPE_CHOICES}, got {self.store_dtype!r}")
        cache = self.cache_size_mb
        if isinstance(cache, bool) or not isinstance(cache, (int, float)):
            raise ElmoError(f"{prefix}cache_size_mb must be a number of megabytes (0: no cache), got {cache!r}")
        if cache < 0:
            raise ElmoError(f"{prefix}cache_size_mb must be >= 0, got {cache}")
        if not isinstance(self.vector_hooks, bool):
            raise ElmoError(f"{prefix}vector_hooks must be true or false, got {self.vector_hooks!r}")
        check_precision(self.precision, f"{prefix}precision", device=self.device)
        length = self.max_segment_length
        if not isinstance(length, int) or isinstance(length, bool) or length < 1:
            raise ElmoError(f"max_segment_length must be an integer >= 1, got {length!r}")

    def component_cfg(self) -> Dict[str, Any]:
        """The component's own settings, as its factory names them (its ``cfg``)."""
        cfg = asdict(self)
        for name in ("device", "max_segment_length"):  # where the biLM runs; the model config's
            del cfg[name]
        cfg["token_mix"] = None if self.token_mix is None else list(self.token_mix)
        return cfg


def refuse_inference_only_fine_tuning(precision: str, tuner: Optional[Sequence[str]] = None) -> None:
    """The one rule: fine-tuning (a listener with grad_factor > 0) needs precision "fp32", as
    int8 and bf16 run without gradients. ``tuner``: the listening components that fine-tune
    (the component's initialize), () for a standalone model (replace_listeners), None for
    the biLM's own training forward: each entry point's message names what it knows."""
    if precision == "fp32":
        return
    if tuner is None:
        raise ElmoError(
            f"the biLM runs at precision {precision!r}, which is for inference only: "
            "fine-tuning it (a listener with grad_factor > 0) needs precision 'fp32'"
        )
    if not tuner:
        raise ElmoError(
            f"the standalone ELMo model fine-tunes its biLM (grad_factor > 0), but the biLM runs at precision "
            f"{precision!r}, which is for inference only: train at 'fp32', or set grad_factor 0"
        )
    raise ElmoError(
        f"elmo precision {precision!r} is for inference only, but the listener of "
        f"{', '.join(repr(name) for name in tuner)} fine-tunes the biLM (grad_factor > 0): train with "
        f"the elmo component's precision 'fp32' (switch to int8 after training), or set grad_factor 0"
    )
