"""The ``elmo`` pipeline component: runs the biLM, annotates Docs, feeds listeners.

Follows spaCy's Tok2Vec producer/listener pattern. During ``update`` the
batch's layers go straight to the listeners of downstream components; with
every listener frozen (``grad_factor = 0``, the default) the biLM runs without
gradients through a bounded cache, so later epochs do not recompute it.
"""

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.vocab import Vocab
from thinc.api import Config, Model, Optimizer
from thinc.types import Floats3d

from ..doc_data import DocStore, check_token_mix_length, token_mix_weights
from ..errors import ElmoError, ElmoWeightsError
from ..layers.bilm_layer import (
    DEFAULT_MAX_SEGMENT_LENGTH,
    adopt_loaded_bilm,
    configure,
    forget_bilm,
    get_bilm,
    predict_docs,
    set_bilm,
    settings_of,
)
from ..layers.listener import (
    batch_id,
    gather_gradients,
    ignore_gradient,
    is_listener,
    learned_mix,
    name_listener,
    receive,
    set_listener_dims,
)
from ..loaders import check_weight_pairing, resolve_bilm
from ..settings import ElmoSettings, refuse_inference_only_fine_tuning
from .cache_progress import CacheFillProgress
from .extensions import add_vector_hooks, install_extensions
from .saved import check_saved_component

DEFAULT_ELMO_MODEL = Config().from_str(
    f"""
[model]
@architectures = "spacy-elmo.ElmoBiLM.v1"
max_segment_length = {DEFAULT_MAX_SEGMENT_LENGTH}
"""
)["model"]

# The component's settings (its cfg) and their defaults: the factory's and the class's.
DEFAULT_SETTINGS: Dict[str, Any] = {
    "store": "all",
    "store_dtype": "float32",
    "token_mix": None,
    "cache_size_mb": 1024,
    "precision": "fp32",
    "vector_hooks": True,
}


@Language.factory(
    "elmo",
    assigns=["doc._.elmo_layers", "token._.elmo", "span._.elmo"],
    default_config={
        "model": DEFAULT_ELMO_MODEL,
        "options_file": None,
        "weight_file": None,
        "bilm_dir": None,
        **DEFAULT_SETTINGS,
    },
)
def make_elmo(
    nlp: Language,
    name: str,
    model: Model[List[Doc], List[Floats3d]],
    options_file: Optional[str],
    weight_file: Optional[str],
    bilm_dir: Optional[str],
    store: str,
    store_dtype: str,
    token_mix: Optional[List[float]],
    cache_size_mb: float,
    precision: str,
    vector_hooks: bool,
) -> "ElmoComponent":
    """ELMo contextual vectors for every token.

    options_file/weight_file (bilm-tf/AllenNLP files) or bilm_dir (a
    pretraining output) name the weights (none: the English biLM bundled with
    the package); they are checked and read once, at initialize or the first doc, so
    building the pipe reads no file and a saved pipeline (which carries its weights)
    never needs them. store: what
    stays on the Doc ("all" layers, the token "mix", or "none");
    store_dtype: "float32" or "float16"; token_mix: layer weights for
    token._.elmo (null: the average); cache_size_mb: memory for cached biLM
    outputs (0: no cache); precision: "fp32" (exact), "int8" (quantized
    matmuls on CPU: faster, inference only, not exact: its measured deviation
    is in docs/python.md and `embed --help`) or "bf16"
    (bfloat16 matmuls, inference only, where the CPU has native bf16: AVX512-BF16
    or AMX; refused elsewhere unless SPACY_ELMO_FORCE_BF16=1); vector_hooks: spaCy's
    Token/Span/Doc .vector and .similarity give the token mix (where the store keeps it
    and the pipeline has no static vectors).
    """
    return ElmoComponent(
        nlp.vocab,
        model,
        name,
        options_file=options_file,
        weight_file=weight_file,
        bilm_dir=bilm_dir,
        store=store,
        store_dtype=store_dtype,
        token_mix=token_mix,
        cache_size_mb=cache_size_mb,
        precision=precision,
        vector_hooks=vector_hooks,
    )


class ElmoComponent(TrainablePipe):
    def __init__(
        self,
        vocab: Vocab,
        model: Model[List[Doc], List[Floats3d]],
        name: str = "elmo",
        *,
        options_file: Optional[str] = None,
        weight_file: Optional[str] = None,
        bilm_dir: Optional[str] = None,
        store: str = DEFAULT_SETTINGS["store"],
        store_dtype: str = DEFAULT_SETTINGS["store_dtype"],
        token_mix: Optional[List[float]] = DEFAULT_SETTINGS["token_mix"],
        cache_size_mb: float = DEFAULT_SETTINGS["cache_size_mb"],
        precision: str = DEFAULT_SETTINGS["precision"],
        vector_hooks: bool = DEFAULT_SETTINGS["vector_hooks"],
    ) -> None:
        self.vocab = vocab
        self.model = model
        self.name = name
        # Every setting checked here, once, and carried by the model (settings.py).
        configure(
            model,
            "elmo ",
            store=store,
            store_dtype=store_dtype,
            token_mix=token_mix,
            cache_size_mb=cache_size_mb,
            precision=precision,
            vector_hooks=vector_hooks,
        )
        check_weight_pairing(options_file, weight_file, bilm_dir)
        # Only read when the model has no weights yet (never after loading a saved pipeline).
        self._weight_source = {"options_file": options_file, "weight_file": weight_file, "bilm_dir": bilm_dir}
        self.listener_map: Dict[str, List[Model]] = {}
        self._doc_store_made: Optional[Tuple[Tuple, DocStore]] = None
        self._cache_fill = CacheFillProgress(name)
        install_extensions()

    # -- listeners (spaCy's ListenedToComponent protocol) ---------------------
    @property
    def listeners(self) -> List[Model]:
        return [m for c in self.listening_components for m in self.listener_map[c]]

    @property
    def listening_components(self) -> List[str]:
        return list(self.listener_map.keys())

    def add_listener(self, listener: Model, component_name: str) -> None:
        self.listener_map.setdefault(component_name, [])
        if listener not in self.listener_map[component_name]:
            self.listener_map[component_name].append(listener)
        name_listener(listener, component_name, self.name)
        if self.has_weights:
            set_listener_dims(listener, self.model.get_dim("nL"), self.model.get_dim("nO"), self.name)

    def remove_listener(self, listener: Model, component_name: str) -> bool:
        if listener in self.listener_map.get(component_name, []):
            self.listener_map[component_name].remove(listener)
            if not self.listener_map[component_name]:
                del self.listener_map[component_name]
            return True
        return False

    def find_listeners(self, component: Any) -> None:
        names = ("*", self.name)
        if isinstance(getattr(component, "model", None), Model):
            for node in component.model.walk():
                if is_listener(node) and node.attrs["upstream_name"] in names:
                    self.add_listener(node, component.name)

    @property
    def settings(self) -> ElmoSettings:
        """The component's run-time settings (``settings.py``): its model carries them."""
        return settings_of(self.model)

    @property
    def cfg(self) -> Dict[str, Any]:  # type: ignore[override]
        """The component's settings as its factory names them (read only: ``configure`` changes them)."""
        return self.settings.component_cfg()

    def configure(self, **changes: Any) -> None:
        """Change settings of the component (its factory's names), each checked now."""
        configure(self.model, "elmo ", **changes)
        if self.has_weights:
            self._check_token_mix()

    # -- serialization: a saved pipeline carries its biLM, and only that one runs; it saves no
    # setting (no cfg: config.cfg gives them, and a load keeps the loading pipe's) --
    def to_disk(self, path: Any, *, exclude: Iterable[str] = tuple()) -> None:
        self._ensure_weights()
        super().to_disk(path, exclude=[*exclude, "cfg"])

    def to_bytes(self, *, exclude: Iterable[str] = tuple()) -> bytes:
        self._ensure_weights()
        return super().to_bytes(exclude=[*exclude, "cfg"])

    def from_disk(self, path: Any, *, exclude: Iterable[str] = tuple()) -> "ElmoComponent":
        path = Path(path)
        check_saved_component(path, self.name, exclude)
        with self._loading(str(path / "model"), exclude):
            super().from_disk(path, exclude=[*exclude, "cfg"])  # a cfg an earlier version saved: unread
        return self

    def from_bytes(self, bytes_data: bytes, *, exclude: Iterable[str] = tuple()) -> "ElmoComponent":
        with self._loading("its model from bytes", exclude):
            super().from_bytes(bytes_data, exclude=[*exclude, "cfg"])
        return self

    @contextmanager
    def _loading(self, what: str, exclude: Iterable[str]) -> Iterator[None]:
        """Loading restores the saved model; then the biLM must be the saved one (never a
        fallback). The settings stay this pipe's: the model's hook keeps them (settings.py)."""
        with_model = "model" not in exclude
        restore_bilm = forget_bilm(self.model) if with_model else None
        try:
            yield
            if with_model:
                adopt_loaded_bilm(self.model)
        except (ValueError, LookupError, TypeError) as err:  # our ElmoErrors, damaged msgpack
            if restore_bilm is not None:
                restore_bilm()
            raise ElmoWeightsError(f"component '{self.name}': cannot load {what}: {err}") from err
        if with_model:
            self._check_token_mix()

    @property
    def trains_bilm(self) -> bool:
        """Whether any listener fine-tunes the biLM (grad_factor > 0); else it is frozen."""
        return bool(self._tuning_components())

    def _tuning_components(self) -> List[str]:
        """The listening components whose listener fine-tunes the biLM."""
        return [
            name
            for name in self.listening_components
            if any(listener.attrs.get("grad_factor", 0) for listener in self.listener_map[name])
        ]

    def listener_mix_weights(self) -> Dict[str, List[Dict[str, Any]]]:
        """The learned scalar-mix weights and gamma of each listening component."""
        return {
            name: [learned_mix(listener) for listener in self.listener_map[name]] for name in self.listening_components
        }

    # -- weights ----------------------------------------------------------------
    @property
    def has_weights(self) -> bool:
        return get_bilm(self.model) is not None

    def _ensure_weights(self, loader: Optional[Callable[[], Any]] = None) -> None:
        """The biLM the config asks for (``loaders.resolve_bilm``), once: at initialize (where
        ``loader`` replaces any), or else at first use; never after a load (it brings one)."""
        if loader is not None or not self.has_weights:
            self._set_weights(resolve_bilm(**self._weight_source, loader=loader, name=self.name))

    def _set_weights(self, bilm: Any) -> None:
        set_bilm(self.model, bilm)
        for listener in self.listeners:
            set_listener_dims(listener, self.model.get_dim("nL"), self.model.get_dim("nO"), self.name)
        self._check_token_mix()

    def _check_token_mix(self) -> None:
        """token_mix's length, once the weights say how many layers there are."""
        check_token_mix_length(self.settings.token_mix, self.model.get_dim("nL"))

    # -- the pipe API -------------------------------------------------------------
    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        weights: Optional[Callable[[], Any]] = None,
    ) -> None:
        """Load the weights: ``weights`` (a loader from [initialize.components.elmo]),
        else the component's own options_file/weight_file/bilm_dir, else the bundled
        default English biLM (``spacy_elmo/data/default_bilm``)."""
        validate_get_examples(get_examples, "ElmoComponent.initialize")
        if nlp is not None:
            check_upstream_names(nlp)
        self._refuse_inference_only_fine_tuning()
        self._ensure_weights(weights)

    def _refuse_inference_only_fine_tuning(self) -> None:
        """int8 and bf16 are inference only: a listener that fine-tunes the biLM is refused before training starts."""
        tuning = self._tuning_components()
        if tuning:
            refuse_inference_only_fine_tuning(self.settings.precision, tuner=tuning)

    # The one prediction road: predict, then set_annotations, for every store. When no
    # listener reads a doc's float32 layers, predict keeps only the stored form (float16
    # layers, the mix, or nothing), piece by piece, so a long doc's float32 layers never
    # exist at once.
    def predict(self, docs: Sequence[Doc]) -> List[Any]:
        """Each doc's ``(L+1, n, 2P)`` layers when listeners read them, else its stored form."""
        self._ensure_weights()
        return predict_docs(self.model, list(docs), None if self._read_by_listeners() else self._doc_store())

    def set_annotations(self, docs: Sequence[Doc], predictions: List[Any]) -> None:
        store, read = self._doc_store(), self._read_by_listeners()
        for doc, prediction in zip(docs, predictions):
            if read:
                store.annotate_for_listeners(doc, prediction)
            else:
                store.annotate(doc, prediction)
        self._add_vector_hooks(docs)

    def _doc_store(self) -> DocStore:
        """What the Doc keeps, made once per setting it depends on (the store, its dtype,
        the token mix and the biLM's layer count), not per batch."""
        n_layers, settings = self.model.get_dim("nL"), self.settings
        store, dtype, mix = settings.store, settings.store_dtype, settings.token_mix
        key = (self.name, store, dtype, mix, n_layers)
        if self._doc_store_made is None or self._doc_store_made[0] != key:
            self._doc_store_made = (key, DocStore(self.name, store, dtype, token_mix_weights(mix, n_layers)))
        return self._doc_store_made[1]

    def _add_vector_hooks(self, docs: Sequence[Doc]) -> None:
        """spaCy's vector API on the stored token mix, unless static vectors give it (as in
        spaCy, they win), nothing is stored, or the vector_hooks setting is off."""
        if self.settings.vector_hooks and self.settings.store != "none" and not self.vocab.vectors.size:
            for doc in docs:
                add_vector_hooks(doc)

    def _read_by_listeners(self) -> bool:
        """Whether a listener reads this component's layers from a doc: a "*" listener that
        two elmo components link reads the later one's (name_listener), so the earlier holds none for it."""
        return any(listener.attrs.get("producer") == self.name for listener in self.listeners)

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """Send the batch's layers to the listeners; backprop into the biLM only
        when a listener fine-tunes it (``grad_factor`` != 0)."""
        if losses is None:
            losses = {}
        validate_examples(examples, "ElmoComponent.update")
        self._ensure_weights()
        losses.setdefault(self.name, 0.0)
        docs = [eg.predicted for eg in examples]
        listeners = self.listeners
        if not listeners:
            return losses
        batch = batch_id(docs)
        if not self.trains_bilm:
            with self._cache_fill.watch(self.model.attrs["cache"], len(docs)):
                layers = self.model.predict(docs)  # frozen: cached, no gradients, no optimizer step
            for listener in listeners:
                receive(listener, batch, layers, ignore_gradient)
            return losses
        layers, backprop_layers = self.model.begin_update(docs)
        report = gather_gradients(self.model, len(listeners), backprop_layers, sgd, losses, self.name)
        for listener in listeners:
            receive(listener, batch, layers, report)
        return losses

    def get_loss(self, examples: Iterable[Example], scores: Any) -> None:
        pass

    def add_label(self, label: str) -> int:
        raise NotImplementedError("the elmo component has no labels")


def check_upstream_names(nlp: Language) -> None:
    """A listener whose upstream names no elmo component meets none, and would be told to put
    'elmo' before it though it is there: say the name is unknown, and name the elmo components."""
    producers = [name for name, pipe in nlp.components if isinstance(pipe, ElmoComponent)]
    for name, pipe in nlp.pipeline:
        model = getattr(pipe, "model", None)
        for node in model.walk() if isinstance(model, Model) else ():
            upstream = node.attrs["upstream_name"] if is_listener(node) else "*"
            if upstream not in ("*", *producers):
                raise ElmoError(
                    f"the ELMo listener of {name!r} listens to upstream {upstream!r}, but no elmo component "
                    f"has that name (this pipeline's elmo components: {', '.join(map(repr, producers))}): set "
                    'the listener\'s upstream to one of them, or to "*" for the elmo component before it'
                )
