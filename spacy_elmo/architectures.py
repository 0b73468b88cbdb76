"""Registered model builders (the names configs use). Builders only: the
layers themselves live in ``spacy_elmo.layers``."""

from typing import Any, Callable, Dict, List, Optional

from spacy.ml.models.textcat import build_reduce_text_classifier
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Maxout, Model, chain, concatenate, with_array
from thinc.types import Floats2d, Floats3d

from .bilm import ElmoOptions
from .errors import ElmoError
from .layers.bilm_layer import DEFAULT_MAX_SEGMENT_LENGTH, build_bilm_model
from .layers.listener import build_listener, build_standalone, replace_listener
from .layers.pooling import zeros_for_empty
from .layers.scalar_mix import build_scalar_mix
from .listener_config import replace_listener_cfg

# ElmoOptions is the one schema: the sizes a config gives (all or none) and the defaults of the rest.
_SIZES = ElmoOptions.size_names()
_DEFAULT: Dict[str, Any] = {f.name: f.default for f in ElmoOptions.option_fields()}
# thinc's reductions that refuse a sequence of no tokens (reduce_mean gives zeros).
_REFUSE_EMPTY = ("reduce_first", "reduce_last", "reduce_max")


@registry.architectures("spacy-elmo.ElmoBiLM.v1")
def build_elmo_bilm_v1(
    char_dim: Optional[int] = None,
    filters: Optional[List[List[int]]] = None,
    n_highway: Optional[int] = None,
    projection_dim: Optional[int] = None,
    lstm_dim: Optional[int] = None,
    n_layers: Optional[int] = None,
    cell_clip: float = _DEFAULT["cell_clip"],
    proj_clip: float = _DEFAULT["proj_clip"],
    use_skip_connections: bool = _DEFAULT["use_skip_connections"],
    activation: str = _DEFAULT["activation"],
    max_characters_per_token: int = _DEFAULT["max_characters_per_token"],
    max_segment_length: int = DEFAULT_MAX_SEGMENT_LENGTH,
) -> Model[List[Doc], List[Floats3d]]:
    """The ELMo biLM: one ``(L+1, n_tokens, 2P)`` array per doc.

    The sizes are options.json's (char_cnn.embedding.dim, char_cnn.filters,
    char_cnn.n_highway, lstm.projection_dim, lstm.dim, lstm.n_layers, ...);
    weights that disagree with them are refused. Leave all six sizes null to
    take every setting from the weights instead. The biLM runs per sentence
    (when the doc has sentence boundaries), in windows of at most
    ``max_segment_length`` tokens.
    """
    arguments = locals()
    given = {name: arguments[name] for name in _SIZES}
    missing = [name for name, value in given.items() if value is None]
    if missing and len(missing) != len(_SIZES):
        raise ElmoError(
            f"spacy-elmo.ElmoBiLM.v1: set all of {', '.join(_SIZES)} or none of them (missing: {', '.join(missing)})"
        )
    options = None
    if not missing:
        options = ElmoOptions(
            cell_clip=cell_clip,
            proj_clip=proj_clip,
            use_skip_connections=use_skip_connections,
            activation=activation,
            max_characters_per_token=max_characters_per_token,
            source="[components.elmo.model]",
            **given,  # type: ignore[arg-type]
        )
    model = build_bilm_model(options, max_segment_length=max_segment_length)
    # Read by nlp.replace_listeners (on the producer's model, as spaCy expects).
    model.attrs["replace_listener"] = replace_listener
    model.attrs["replace_listener_cfg"] = replace_listener_cfg
    return model


@registry.architectures("spacy-elmo.ElmoListener.v1")
def build_elmo_listener_v1(
    upstream: str = "*",
    width: Optional[int] = None,
    n_layers: Optional[int] = None,
    layer_norm: bool = False,
    dropout: float = 0.0,
    layer_dropout: float = 0.0,
    mix_l2: float = 0.0,
    grad_factor: float = 0.0,
) -> Model[List[Doc], List[Floats2d]]:
    """ELMo for a downstream component: the upstream elmo component's layers
    through this component's own scalar mix (paper eq. 2).

    width/n_layers: 2P and L+1 (null: from the elmo component). grad_factor 0
    keeps the biLM frozen (the paper's feature-based use); > 0 fine-tunes it.
    """
    mix = build_scalar_mix(n_layers, width, layer_norm, dropout, layer_dropout, mix_l2)
    return build_listener(mix, upstream=upstream, grad_factor=grad_factor)


@registry.architectures("spacy-elmo.ElmoStandalone.v1")
def build_elmo_standalone_v1(
    bilm: Model[List[Doc], List[Floats3d]],
    width: Optional[int] = None,
    n_layers: Optional[int] = None,
    layer_norm: bool = False,
    dropout: float = 0.0,
    layer_dropout: float = 0.0,
    mix_l2: float = 0.0,
    grad_factor: float = 0.0,
) -> Model[List[Doc], List[Floats2d]]:
    """A biLM owned by one component plus its scalar mix (what replace_listeners makes)."""
    mix = build_scalar_mix(n_layers, width, layer_norm, dropout, layer_dropout, mix_l2)
    return build_standalone(bilm, mix, grad_factor=grad_factor)


@registry.architectures("spacy-elmo.ElmoConcat.v1")
def build_elmo_concat_v1(
    elmo: Model[List[Doc], List[Floats2d]], tok2vec: Model[List[Doc], List[Floats2d]]
) -> Model[List[Doc], List[Floats2d]]:
    """The paper's output-side variant ``[h_k; ELMo_k]``: the ELMo mix next to the
    *output* of a whole tok2vec (embedding + encoder), so the encoder never sees
    ELMo; only the component's own layers do."""
    model = concatenate(elmo, tok2vec)
    model.init = _init_without_labels(model.init)
    return model


@registry.architectures("spacy-elmo.ElmoTok2Vec.v1")
def build_elmo_tok2vec_v1(
    elmo: Model[List[Doc], List[Floats2d]],
    embed: Model[List[Doc], List[Floats2d]],
    encode: Model[List[Floats2d], List[Floats2d]],
    width: int,
) -> Model[List[Doc], List[Floats2d]]:
    """The paper's placement ``[x_k; ELMo_k]`` at the encoder's *input* (sec. 3.3):
    the component's ELMo mix concatenated with its token embedding (e.g.
    MultiHashEmbed, with or without static vectors), mixed down to the
    encoder's ``width`` by a Maxout (as MultiHashEmbed mixes its own features),
    then through the encoder (e.g. MaxoutWindowEncoder), which so combines ELMo
    across the sentence."""
    model = chain(concatenate(elmo, embed), _mix_down(width), encode)
    model.set_dim("nO", width)
    model.set_ref("elmo", elmo)
    model.set_ref("embed", embed)
    model.set_ref("encode", encode)
    return model


@registry.architectures("spacy-elmo.ElmoTok2Vec.v2")
def build_elmo_tok2vec_v2(
    elmo: Model[List[Doc], List[Floats2d]],
    embed: Model[List[Doc], List[Floats2d]],
    encode: Model[List[Floats2d], List[Floats2d]],
    width: int,
    elmo_output: Optional[Model[List[Doc], List[Floats2d]]] = None,
) -> Model[List[Doc], List[Floats2d]]:
    """ElmoTok2Vec.v1 (``[x_k; ELMo_k]`` at the encoder's input), plus, when
    ``elmo_output`` is given, ELMo again at the encoder's *output*
    ``[h_k; ELMo_k]`` (the paper's "both", sec. 3.3): a second listener with a
    scalar mix of its own, concatenated with the encoder's output (width
    ``width`` + 2P). Without ``elmo_output`` it is v1. The elmo component finds
    the output-side listener first: ``listener_mix_weights()[component]`` is
    ``[output side, input side]``."""
    inner = build_elmo_tok2vec_v1(elmo, embed, encode, width)
    if elmo_output is None:
        return inner
    model = build_elmo_concat_v1(elmo_output, inner)
    for name in ("elmo", "embed", "encode"):
        model.set_ref(name, inner.get_ref(name))
    model.set_ref("elmo_output", elmo_output)
    return model


@registry.architectures("spacy-elmo.ElmoOnlyTok2Vec.v1")
def build_elmo_only_tok2vec_v1(
    elmo: Model[List[Doc], List[Floats2d]],
    encode: Model[List[Floats2d], List[Floats2d]],
    width: int,
) -> Model[List[Doc], List[Floats2d]]:
    """ELMo as the only token representation, with an encoder above it: the
    component's ELMo mix mixed down to the encoder's ``width``, then the encoder
    (e.g. the CNN baseline's MaxoutWindowEncoder), so ELMo alone is compared
    with the CNN under the same encoder."""
    model = chain(elmo, _mix_down(width), encode)
    model.set_dim("nO", width)
    model.set_ref("elmo", elmo)
    model.set_ref("encode", encode)
    return model


@registry.architectures("spacy-elmo.TextCatReduce.v1")
def build_textcat_reduce_v1(
    tok2vec: Model[List[Doc], List[Floats2d]],
    exclusive_classes: bool,
    use_reduce_first: bool,
    use_reduce_last: bool,
    use_reduce_max: bool,
    use_reduce_mean: bool,
    nO: Optional[int] = None,
) -> Model[List[Doc], Floats2d]:
    """spaCy's ``spacy.TextCatReduce.v1`` (the same arguments, layers and results),
    except that a doc of no tokens pools to zeros under every reduction, so a
    batch may mix empty texts with others (spaCy's refuses one under first, last
    or max pooling)."""
    model = build_reduce_text_classifier(
        tok2vec, exclusive_classes, use_reduce_first, use_reduce_last, use_reduce_max, use_reduce_mean, nO
    )
    for node in list(model.walk()):
        node.layers[:] = [zeros_for_empty(layer) if layer.name in _REFUSE_EMPTY else layer for layer in node.layers]
    return model


def _init_without_labels(init: Callable) -> Callable:
    """A token layer's init that never sees the task's labels. thinc hands ``Y`` to a layer
    whose output width is unknown (a concatenation with a listener, until it is initialized),
    and a concatenation hands it on to every layer below, where e.g. StaticVectors would take
    the number of labels for its width."""

    def init_without_labels(model: Model, X: Optional[Any] = None, Y: Optional[Any] = None) -> None:
        init(model, X=X, Y=None)

    return init_without_labels


def _mix_down(width: int) -> Model[List[Floats2d], List[Floats2d]]:
    # A Maxout to the encoder's width, as MultiHashEmbed mixes its own features.
    return with_array(Maxout(width, nP=3, dropout=0.0, normalize=True))
