"""The ELMo listener: a downstream component's view of the elmo component.

During training the elmo component hands each listener the batch's layers and
a callback (``receive``); the listener mixes them with its own scalar mix and,
when its ``grad_factor`` is not 0, sends gradients back to the biLM. When the
producer did not run for this batch (prediction, or a frozen elmo in
``annotating_components``) the listener reads the layers from the Doc, and
returns zeros of the right width when there are none.

``nlp.replace_listeners`` swaps a listener for a standalone copy of the biLM
followed by the listener's own (trained) mix.
"""

import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

from spacy.pipeline.tok2vec import Tok2VecListener
from spacy.tokens import Doc
from thinc.api import Model, Optimizer
from thinc.types import Floats2d, Floats3d

from ..doc_data import annotated_by_elmo, layers_for_listener
from ..errors import ElmoError
from ..settings import KeptOnLoad, refuse_inference_only_fine_tuning
from ..spacy_frames import running_spacy_debug_model
from .scalar_mix import MixModel, mix_weights

ListenerModel = Model[List[Doc], List[Floats2d]]
LISTENER_NAME = "elmo_listener"
STANDALONE_NAME = "elmo_standalone"


class _ListenerState(KeptOnLoad):
    """What the producer sent for the current batch, and who listens: never saved (a load
    starts the loading listener's afresh)."""

    def __init__(self) -> None:
        self.batch_id: Optional[int] = None
        self.outputs: Optional[List[Floats3d]] = None
        self.backprop: Optional[Callable[[Optional[List[Floats3d]]], Any]] = None
        # Whether the listening component was told it gets zeros.
        self.warned_zeros = False
        # The sample batch of initialize(): spaCy predicts on it before any doc is annotated.
        self.init_batch: Optional[int] = None

    def clear(self) -> None:
        self.batch_id = self.outputs = self.backprop = None

    def on_load(self) -> None:
        self.clear()
        self.warned_zeros, self.init_batch = False, None

    def __reduce__(self) -> Any:
        # A pickled listener (spaCy's n_process under spawn) starts afresh, as a loaded one does.
        return _ListenerState, ()


def build_listener(mix: MixModel, upstream: str = "*", grad_factor: float = 0.0) -> ListenerModel:
    mix.attrs["input_gradient"] = grad_factor != 0
    return Model(
        LISTENER_NAME,
        listener_forward,
        init=listener_init,
        layers=[mix],
        dims={"nO": mix.maybe_get_dim("nO"), "nL": mix.maybe_get_dim("nL")},
        # listening_component and producer (the elmo component it reads): set by the producer;
        # saved, so a pipeline loaded without it can still name it. sized_by: the elmo component
        # whose biLM gave its sizes ("": none yet, or its own width/n_layers settings).
        attrs={
            "upstream_name": upstream,
            "grad_factor": grad_factor,
            "listening_component": "",
            "producer": "",
            "sized_by": "",
            "_state": _ListenerState(),
        },
    )


def name_listener(listener: ListenerModel, component: str, producer: str) -> None:
    """Which component this listener feeds (for its messages), and which elmo component's
    layers it reads from a doc (with upstream "*", the last elmo component before it)."""
    listener.attrs["listening_component"] = component
    listener.attrs["producer"] = producer


def is_listener(model: Model) -> bool:
    return model.name == LISTENER_NAME and "_state" in model.attrs


# A content hash of a batch, to check the listener got the producer's batch: spaCy's own.
batch_id = Tok2VecListener.get_batch_id


def receive(listener: ListenerModel, batch: int, outputs: List[Floats3d], backprop: Callable) -> None:
    state: _ListenerState = listener.attrs["_state"]
    state.batch_id, state.outputs, state.backprop = batch, outputs, backprop


def ignore_gradient(d_layers: Optional[List[Floats3d]]) -> None:
    """Where a frozen biLM's listeners send their gradient: nowhere."""
    return None


def gather_gradients(
    bilm: Model,
    n_listeners: int,
    backprop_layers: Callable[[List[Floats3d]], Any],
    sgd: Optional[Optimizer],
    losses: Dict[str, float],
    name: str,
) -> Callable[[Optional[List[Floats3d]]], None]:
    """Where each of ``n_listeners`` listeners of a fine-tuned biLM sends its gradient (None:
    it sends none): the sum goes into the biLM once the last has reported, then ``sgd`` steps
    it; ``losses[name]`` adds each gradient's squared sum (what spaCy's table shows)."""
    total: Optional[List[Floats3d]] = None
    waiting = n_listeners

    def accumulate(d_layers: Optional[List[Floats3d]]) -> None:
        nonlocal total, waiting
        if d_layers is not None:
            losses[name] += float(sum((d**2).sum(axis=None, keepdims=False) for d in d_layers))
            total = d_layers if total is None else [a + b for a, b in zip(total, d_layers)]
        waiting -= 1
        if waiting == 0 and total is not None:  # the last listener has reported
            backprop_layers(total)
            if sgd is not None:
                bilm.finish_update(sgd)

    return accumulate


def set_listener_dims(model: Model, n_layers: int, width: int, producer: str = "") -> None:
    """Tell a listener (and its mix) the sizes of the elmo component ``producer``'s biLM;
    refuse sizes that conflict with those it has, naming where each came from."""
    sizes = {"nL": n_layers, "nO": width}
    for node in (model, model.layers[0]):
        for dim, value in sizes.items():
            current = node.maybe_get_dim(dim)
            if current is not None and current != value:
                raise ElmoError(_size_conflict(model, producer, n_layers, width))
    for node in (model, model.layers[0]):
        for dim, value in sizes.items():
            if node.maybe_get_dim(dim) is None:
                node.set_dim(dim, value)
    if producer and not model.attrs.get("sized_by"):
        model.attrs["sized_by"] = producer


def _size_conflict(model: Model, producer: str, n_layers: int, width: int) -> str:
    """Why a listener's sizes and the biLM of ``producer`` disagree: its own settings, another
    elmo component that its upstream also matches, or that component's earlier biLM."""
    component = model.attrs.get("listening_component")
    whose = f"the ELMo listener of {component!r}" if component else "an ELMo listener"
    has, gives = _sizes(model.maybe_get_dim("nO"), model.maybe_get_dim("nL")), _sizes(width, n_layers)
    sized_by, upstream = model.attrs.get("sized_by", ""), model.attrs["upstream_name"]
    if not sized_by:
        return (
            f"{whose} was configured for {has} (its width/n_layers settings), but the biLM of the elmo component "
            f"{producer or upstream!r} gives {gives}: set the listener's width and n_layers to null to take them "
            "from the elmo component"
        )
    if sized_by != producer:
        return (
            f'{whose} has upstream "{upstream}", which matches two elmo components of different sizes: '
            f"{sized_by!r} ({has}) and {producer!r} ({gives}); set the listener's upstream to one of these names"
        )
    return (
        f"{whose} has the sizes of the elmo component {producer!r}'s earlier biLM ({has}), but its biLM now gives "
        f"{gives}: a listener keeps the sizes it was built with; build the listening component again"
    )


def _sizes(width: Optional[int], n_layers: Optional[int]) -> str:
    known = [f"width {width}" if width is not None else "", f"{n_layers} layers" if n_layers is not None else ""]
    return ", ".join(size for size in known if size)


def learned_mix(model: Model) -> Dict[str, Any]:
    """The trained layer weights softmax(s) and gamma of a listener (or standalone) model."""
    mix = model.layers[-1]
    if not mix.has_param("s") or mix.get_param("s") is None:
        raise ElmoError("this ELMo scalar mix is not initialized yet")
    weights = mix_weights(mix)
    return {
        "weights": [float(w) for w in mix.ops.to_numpy(weights)],
        "gamma": float(mix.ops.to_numpy(mix.get_param("gamma"))[0]),
    }


def listener_init(model: ListenerModel, X: Optional[List[Doc]] = None, Y=None) -> None:
    mix = model.layers[0]
    if not model.has_dim("nO") or not model.has_dim("nL"):
        upstream = model.attrs["upstream_name"]
        producer = "'elmo'" if upstream == "*" else repr(upstream)
        raise ElmoError(
            f"an ELMo listener does not know the biLM's size: put the {producer} component (with its "
            "weights) before the components that listen to it, or give the listener width and n_layers"
        )
    set_listener_dims(model, model.get_dim("nL"), model.get_dim("nO"), model.attrs.get("sized_by", ""))
    mix.initialize()
    model.attrs["_state"].init_batch = batch_id(X) if X else None


def listener_forward(model: ListenerModel, docs: List[Doc], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    mix: MixModel = model.layers[0]
    state: _ListenerState = model.attrs["_state"]
    if is_train and state.outputs is not None and state.backprop is not None:
        if batch_id(docs) != state.batch_id:
            raise ElmoError(
                "an ELMo listener got a different batch than the one the elmo component sent "
                "(are two components sharing one listener?)"
            )
        send_upstream = state.backprop
        mixed, backprop_mix = mix(state.outputs, is_train)
        grad_factor = model.attrs["grad_factor"]

        def backprop(dY: List[Floats2d]) -> List:
            d_layers = backprop_mix(dY)
            state.clear()
            # None tells the producer this listener sends no gradient (frozen biLM).
            send_upstream([d * grad_factor for d in d_layers] if grad_factor else None)
            return []

        return mixed, backprop
    layers = [layers_for_listener(doc, model.attrs.get("producer")) for doc in docs]
    if is_train and any(layer is None and len(doc) for layer, doc in zip(layers, docs)):
        raise ElmoError(_no_layers_in_training(model))
    missing = [doc for layer, doc in zip(layers, docs) if layer is None and len(doc)]
    if missing and not state.warned_zeros and batch_id(docs) != state.init_batch:
        state.warned_zeros = True
        warnings.warn(_zeros_warning(model, missing, len(docs)), stacklevel=2)
    width = model.get_dim("nO")
    present = [model.ops.asarray3f(layer) for layer in layers if layer is not None]
    mixed_present, backprop_mix = mix(present, is_train)
    mixed_iter = iter(mixed_present)
    outputs = [
        next(mixed_iter) if layer is not None else model.ops.alloc2f(len(doc), width)
        for layer, doc in zip(layers, docs)
    ]

    def backprop_local(dY: List[Floats2d]) -> List:
        # The mix still learns; the biLM did not run here, so nothing goes upstream.
        backprop_mix([d for d, layer in zip(dY, layers) if layer is not None])
        return []

    return outputs, backprop_local


def _no_layers_in_training(model: ListenerModel) -> str:
    producer = model.attrs.get("producer") or "elmo"
    if running_spacy_debug_model():
        return (
            f"spacy debug model runs the upstream of spaCy's own listeners only (tok2vec, transformer), not "
            f"the {producer!r} component this ELMo listener reads: debug the biLM with `spacy debug model CONFIG "
            f"{producer}` and the listening component with a short `spacy train` (--training.max_steps 10)"
        )
    return (
        f"an ELMo listener found no ELMo layers on a training doc: the {producer!r} component neither ran "
        "its update (frozen) nor annotated the docs. Add it to [training] annotating_components, "
        "or remove it from frozen_components."
    )


def _zeros_warning(model: ListenerModel, missing: List[Doc], n_docs: int) -> str:
    """Why a listener feeds zeros: its elmo component did not run on the docs, or it did but the
    docs were saved or copied since (a doc carries only what ``store`` keeps on it)."""
    component = model.attrs.get("listening_component")
    whose = f"the ELMo listener of {repr(component) if component else 'a component'}"
    producer = model.attrs.get("producer") or "elmo"
    found = f"{whose} found no ELMo layers on {len(missing)} of {n_docs} doc(s) and feeds it zeros, so its predictions are not what it was trained on"
    if any(annotated_by_elmo(doc) for doc in missing):
        return (
            f"{found}: the {producer!r} component ran on these docs, but they were saved or copied since (DocBin, "
            f"pickle, n_process), which carries only what its store keeps: run {producer!r} on "
            f'them again, or set its store to "all".'
        )
    return (
        f"{found}: the {producer!r} component did not run. Enable it (nlp.enable_pipe({producer!r}), or leave it "
        "out of disable=, exclude= and select_pipes), or give the component its own biLM with nlp.replace_listeners."
    )


# -- after nlp.replace_listeners ------------------------------------------------
def build_standalone(bilm: Model, mix: MixModel, grad_factor: float = 0.0) -> ListenerModel:
    """The biLM and a mix in one model, owned by a single component."""
    mix.attrs["input_gradient"] = grad_factor != 0
    return Model(
        STANDALONE_NAME,
        standalone_forward,
        init=standalone_init,
        layers=[bilm, mix],
        dims={"nO": mix.maybe_get_dim("nO") or bilm.maybe_get_dim("nO")},
        attrs={"grad_factor": grad_factor},
    )


def standalone_init(model: ListenerModel, X: Optional[List[Doc]] = None, Y=None) -> None:
    bilm, mix = model.layers
    if bilm.maybe_get_dim("nO") is None:
        raise ElmoError("the standalone ELMo model has no biLM weights to initialize from")
    if model.attrs["grad_factor"]:
        refuse_inference_only_fine_tuning(bilm.attrs["settings"].precision, tuner=())
    for dim in ("nL", "nO"):
        if mix.maybe_get_dim(dim) is None:
            mix.set_dim(dim, bilm.get_dim(dim))
    model.set_dim("nO", bilm.get_dim("nO"), force=True)
    if not mix.has_param("s") or mix.get_param("s") is None:
        mix.initialize()


def standalone_forward(model: ListenerModel, docs: List[Doc], is_train: bool):
    bilm, mix = model.layers
    grad_factor = model.attrs["grad_factor"]
    if is_train and grad_factor:
        layers, backprop_bilm = bilm(docs, is_train=True)
    else:  # frozen biLM: cached inference, no gradient, no optimizer step
        layers, backprop_bilm = bilm.predict(docs), None
    mixed, backprop_mix = mix(layers, is_train)

    def backprop(dY: List[Floats2d]) -> List:
        d_layers = backprop_mix(dY)
        if backprop_bilm is not None:
            backprop_bilm([d * grad_factor for d in d_layers])
        return []

    return mixed, backprop


def replace_listener(bilm_copy: Model, listener: ListenerModel, producer: Any) -> ListenerModel:
    """``replace_listener`` hook for ``nlp.replace_listeners`` (set on the producer's model)."""
    return build_standalone(bilm_copy, listener.layers[0], listener.attrs["grad_factor"])
