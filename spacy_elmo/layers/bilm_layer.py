"""The biLM as a thinc model: ``List[Doc] -> List[Floats3d]``, one
``(L+1, n_tokens, 2P)`` array per doc.

The torch module sits in thinc's PyTorch wrapper with a shim that says when an
update changed the weights (``bilm_shim.py``). Its sizes may be unknown when the model is built (a config with null
sizes): they arrive with the weights (``set_bilm``), and a serialized model
carries its options, so loading rebuilds the right-sized module without the
original files (the format: ``bilm_serialization.py``).

Prediction runs per segment (sentence or window), length-batched, through a
bounded cache, each batch's outputs copied into the docs' layers and freed;
training (fine-tuning) runs the same length batches with autograd, uncached.
"""

from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Protocol, Sequence, Tuple

import torch
from spacy.tokens import Doc
from thinc.api import (
    ArgsKwargs,
    Model,
    get_torch_default_device,
    torch2xp,
    xp2torch,
)
from thinc.types import Floats3d

from ..bilm import ElmoBiLM, ElmoOptions
from ..bilm.id_batches import IdsBatch, length_batches
from ..bilm.windows import WindowAssembly
from ..errors import ElmoError, ElmoNoWeightsError, ElmoWeightsError
from ..settings import DEFAULT_MAX_SEGMENT_LENGTH, ElmoSettings, refuse_inference_only_fine_tuning
from .bilm_output_cache import LayerCache
from .bilm_segments import Segment, batch_segments
from .bilm_serialization import deserialize_bilm, serialize_bilm
from .bilm_shim import bilm_slot, bilm_wrapper

BilmModel = Model[List[Doc], List[Floats3d]]


# What spacy-elmo 0.x saved of its settings in a model's attrs: read by a load, never used.
LEGACY_SETTING_ATTRS = ("max_segment_length", "precision")


def build_bilm_model(
    options: Optional[ElmoOptions], max_segment_length: int = DEFAULT_MAX_SEGMENT_LENGTH, cache_mb: float = 0.0
) -> BilmModel:
    """``options=None`` defers the sizes until weights are set."""
    settings = ElmoSettings().changed(
        get_torch_default_device(), max_segment_length=max_segment_length, cache_size_mb=cache_mb
    )

    at_model_precision = AtModelPrecision()
    wrapper = bilm_wrapper(
        ElmoBiLM(options) if options is not None else None,
        convert_inputs=_convert_inputs,
        convert_outputs=_convert_outputs,
        serialize_bilm=serialize_bilm,
        deserialize_bilm=deserialize_bilm,
        on_loaded=at_model_precision,
    )
    model: BilmModel = Model(
        "elmo_bilm",
        bilm_forward,
        layers=[wrapper],
        dims={
            "nO": options.output_dim if options else None,
            "nL": options.n_output_layers if options else None,
        },
        attrs={
            # How this process runs the biLM (precision, window, cache size; see settings.py).
            "settings": settings,
            "cache": LayerCache(settings.cache_size_mb),
            # The sizes the config asked for (None: whatever the weights have).
            "expected_options": options.to_dict() if options else None,
            # A module built from config sizes is random until weights arrive:
            # never let it pass for a trained biLM.
            "weights_loaded": False,
        },
    )
    at_model_precision.model = model
    return model


class AtModelPrecision:
    """The wrapper's ``on_loaded``: a loaded biLM runs at this model's precision, a run-time
    choice a load leaves as it is, and the one place a load applies it. An object, not a closure,
    so the model pickles; a thinc copy of the model shares it (``__deepcopy__``), so its loads
    follow the original's precision: replace_listeners' copies have the same one."""

    def __init__(self) -> None:
        self.model: Optional[BilmModel] = None

    def __call__(self, bilm: torch.nn.Module) -> None:
        if isinstance(bilm, ElmoBiLM) and self.model is not None:
            bilm.set_precision(settings_of(self.model).kernel_precision)

    def __deepcopy__(self, memo: Dict[int, Any]) -> "AtModelPrecision":
        return self


def settings_of(model: BilmModel) -> ElmoSettings:
    return model.attrs["settings"]


def configure(model: BilmModel, prefix: str = "", **changes: Any) -> ElmoSettings:
    """Change the model's settings (``ElmoSettings`` fields), all checked now, for the device
    thinc runs torch on, before any weights load; a new precision applies to the biLM now and
    to every biLM the model is given later (``set_bilm``, a load), so no batch decides it."""
    settings = model.attrs["settings"].changed(get_torch_default_device(), prefix, **changes)
    model.attrs["settings"] = settings
    if "cache_size_mb" in changes:
        model.attrs["cache"] = LayerCache(settings.cache_size_mb)
    bilm = get_bilm(model)
    if bilm is not None and "precision" in changes:
        bilm.set_precision(settings.kernel_precision)
    return settings


def set_precision(model: BilmModel, precision: str) -> None:
    """How prediction runs the biLM: "fp32" (exact), "int8" (CPU) or "bf16" (where the
    device has native bf16, else refused unless forced), the last two inference only."""
    configure(model, precision=precision)


def get_bilm(model: BilmModel) -> Optional[ElmoBiLM]:
    """The torch biLM, once it has real weights (None before)."""
    bilm = bilm_slot(model.layers[0]).bilm
    return bilm if isinstance(bilm, ElmoBiLM) and model.attrs["weights_loaded"] else None


def set_bilm(model: BilmModel, bilm: ElmoBiLM) -> None:
    """Give the model its weights (checked against the sizes the config asked for), run at
    the model's precision."""
    _install_bilm(model, bilm)
    bilm.set_precision(settings_of(model).kernel_precision)


def _install_bilm(model: BilmModel, bilm: ElmoBiLM) -> None:
    """The biLM in the model's slot, on thinc's device, its sizes the model's; its cache emptied."""
    expected = model.attrs["expected_options"]
    if expected is not None:
        wanted = ElmoOptions.from_dict(expected, source="the component's model config")
        differences = wanted.differences(bilm.options)
        if differences:
            raise ElmoError(
                f"the biLM weights ({bilm.options.source}) do not fit the elmo model config: "
                + "; ".join(differences)
                + ". Set these sizes in [components.elmo.model] (or set them all to null to take "
                "the sizes from the weights)."
            )
    bilm_slot(model.layers[0]).bilm = bilm.to(get_torch_default_device()).eval()
    model.set_dim("nO", bilm.output_dim, force=True)
    model.set_dim("nL", bilm.n_output_layers, force=True)
    model.attrs["weights_loaded"] = True
    model.attrs["cache"].clear()


def forget_bilm(model: BilmModel) -> Callable[[], None]:
    """Drop the biLM before loading a saved one, so that only what the saved data holds can
    pass ``adopt_loaded_bilm`` (never the config's random module or an earlier biLM).
    Returns what puts the earlier biLM back, for a load that fails."""
    slot = bilm_slot(model.layers[0])
    earlier = slot.bilm, model.attrs["weights_loaded"]
    slot.bilm, model.attrs["weights_loaded"] = None, False

    def restore() -> None:
        slot.bilm, model.attrs["weights_loaded"] = earlier

    return restore


def adopt_loaded_bilm(model: BilmModel) -> None:
    """After ``model.from_bytes``: use the biLM the saved data held; none is an error."""
    bilm = bilm_slot(model.layers[0]).bilm
    if not isinstance(bilm, ElmoBiLM):
        raise ElmoWeightsError("it holds no biLM (saved before any weights were loaded, or damaged)")
    for name in LEGACY_SETTING_ATTRS:
        model.attrs.pop(name, None)
    _install_bilm(model, bilm)  # the load already ran it at the model's precision (at_model_precision)


def _weights_key(bilm: ElmoBiLM) -> Tuple:
    # int8/bf16 outputs differ from fp32 ones: a precision change empties the cache too.
    return (bilm.precision, bilm.weights_generation)


def _require_bilm(model: BilmModel) -> ElmoBiLM:
    bilm = get_bilm(model)
    if bilm is None:
        raise ElmoNoWeightsError(
            "the ELMo biLM has no weights yet: load them (see the 'elmo' component's "
            "options_file/weight_file/bilm_dir settings or [initialize.components.elmo.weights])"
        )
    return bilm


class StoredForm(Protocol):
    """What a doc stores of its layers, piece by piece (``doc_data.DocStore``): a ``(L+1, k,
    2P)`` piece -> an array with the k tokens on ``token_axis`` (or None: nothing)."""

    token_axis: int

    def stored_form(self, layers: Any) -> Any: ...


def bilm_forward(model: BilmModel, docs: Sequence[Doc], is_train: bool) -> Tuple[List[Floats3d], Callable]:
    if is_train:
        return _forward_with_gradients(model, docs)
    return predict_docs(model, docs), _no_gradient


def predict_docs(model: BilmModel, docs: Sequence[Doc], store: Optional[StoredForm] = None) -> List[Any]:
    """The one prediction: each doc's ``(L+1, n, 2P)`` layers, or their stored form (``store``),
    assembled as its segments stream out of the biLM. With a ``store`` no doc's float32 layers
    exist whole: memory is the stored forms, one batch, and what the cache is allowed."""
    bilm = _require_bilm(model)
    segments, texts = batch_segments(docs, model.attrs["settings"].max_segment_length)
    return assemble(model, docs, _predicted_segments(model, bilm, segments, texts), store)


def _predicted_segments(
    model: BilmModel, bilm: ElmoBiLM, segments: List[Segment], texts: List[Tuple[str, ...]]
) -> Iterator[Tuple[Segment, Floats3d]]:
    """Every segment with its ``(L+1, k, 2P)`` output, batch by batch through the cache (each
    distinct segment computed once): a batch is freed once its segments are consumed."""
    cache: LayerCache = model.attrs["cache"]
    cache.check_weights(_weights_key(bilm))
    todo: Dict[Tuple[str, ...], List[int]] = {}
    for k, key in enumerate(texts):
        hit = cache.get(key) if cache.max_bytes else None
        if hit is None:
            todo.setdefault(key, []).append(k)
        else:
            yield segments[k], hit
    keys = list(todo)
    wrapper = model.layers[0]
    for batch in bilm.id_batches(keys, length_batches([len(key) for key in keys])):
        layers = wrapper.predict((batch.ids, batch.lengths))
        for i, output in batch.sentences(layers):
            for k in todo[keys[i]]:
                yield segments[k], output
            cache.put(keys[i], output)
        del layers


def assemble(
    model: BilmModel, docs: Sequence[Doc], outputs: Iterable[Tuple[Segment, Any]], store: Optional[StoredForm] = None
) -> List[Any]:
    """The one segment-to-doc assembler: each doc's layers (or their stored form, ``store``),
    its segments' own tokens placed as they arrive (``bilm.windows.WindowAssembly``). A doc
    in one segment is that segment's output, uncopied; an empty doc gets ``(L+1, 0, 2P)``
    zeros (or their stored form)."""
    assembly = WindowAssembly([len(doc) for doc in docs], 1 if store is None else store.token_axis)
    for (index, window), output in outputs:
        piece = window.owned(output)
        if store is not None:
            piece = store.stored_form(piece)
            if piece is None:
                continue
        assembly.place(index, window, piece)
    results = assembly.results
    if any(result is None for result in results):
        empty = _zero_layers(model, 0)
        empty = empty if store is None else store.stored_form(empty)
        results = [empty if result is None else result for result in results]
    return results


def _zero_layers(model: BilmModel, n_tokens: int) -> Floats3d:
    """``(L+1, n_tokens, 2P)`` zeros: an empty doc's layers."""
    return model.ops.alloc3f(model.get_dim("nL"), n_tokens, model.get_dim("nO"))


def _no_gradient(d_layers: Any) -> List:
    return []


def _forward_with_gradients(model: BilmModel, docs: Sequence[Doc]) -> Tuple[List[Floats3d], Callable]:
    """Fine-tuning: autograd through the segments in length-sorted batches (as prediction
    batches them: one batch padded to its longest sentence cost several times the
    compute on CoNLL's lengths), no cache (the weights are about to change). The fp32 rule
    ran before training (the component's initialize); a bare model reads its resolved precision."""
    bilm = _require_bilm(model)
    settings = settings_of(model)
    if not settings.kernel_precision.trains:
        refuse_inference_only_fine_tuning(settings.precision)
    segments, texts = batch_segments(docs, settings.max_segment_length)
    batches: List[Callable[[List[Floats3d]], None]] = []

    def trained_segments() -> Iterator[Tuple[Segment, Floats3d]]:
        for batch in bilm.id_batches(texts, length_batches([len(text) for text in texts])):
            layers, backprop_layers = model.layers[0]((batch.ids, batch.lengths), is_train=True)
            batches.append(_batch_backprop(model, batch, segments, layers.shape, layers.dtype, backprop_layers))
            for k, output in batch.sentences(layers, copy=False):
                yield segments[k], output

    doc_outputs = assemble(model, docs, trained_segments())

    def backprop(d_docs: List[Floats3d]) -> List:
        for backprop_batch in batches:
            backprop_batch(d_docs)
        return []

    return doc_outputs, backprop


def _batch_backprop(
    model: BilmModel, batch: IdsBatch, segments: List[Segment], shape, dtype, backprop_layers: Callable
) -> Callable[[List[Floats3d]], None]:
    """One batch's share of the docs' gradient, placed where its segments' own tokens sat."""

    def backprop(d_docs: List[Floats3d]) -> None:
        d_layers = model.ops.alloc(shape, dtype=dtype)
        for row, k in enumerate(batch.rows):
            index, window = segments[k]
            first = 1 + window.own_start - window.start  # position 0 is the <S> boundary
            d_layers[:, row, first : first + window.own_end - window.own_start] = d_docs[index][
                :, window.own_start : window.own_end
            ]
        backprop_layers(d_layers)

    return backprop


# -- the PyTorchWrapper's conversions ---------------------------------------
def _convert_inputs(model: Model, X: Tuple[Any, Any], is_train: bool):
    ids, lengths = X
    return ArgsKwargs(args=(torch.from_numpy(ids), torch.from_numpy(lengths)), kwargs={}), _no_gradient


def _convert_outputs(model: Model, inputs_outputs, is_train: bool):
    _, layers_torch = inputs_outputs
    layers = torch2xp(layers_torch, ops=model.ops)

    def backprop(d_layers) -> ArgsKwargs:
        grads = xp2torch(d_layers, device=layers_torch.device)
        return ArgsKwargs(args=(layers_torch,), kwargs={"grad_tensors": grads})

    return layers, backprop
