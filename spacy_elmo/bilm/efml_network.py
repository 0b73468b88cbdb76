"""ELMoForManyLangs' network config: its schema (EFML's names in the messages), every size
bounded by the network's sanity bounds (``size_bounds.py``) before anything is built from
it, and the state dicts it implies (``token_embedder.pkl``'s and ``encoder.pkl``'s entries
and shapes). Read from a model directory by ``spacy_elmo/formats/efml.py``, or from a saved
pipeline's spec."""

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

from ..errors import ElmoOptionsError
from .efml_vocab import CHAR_DIC, WORD_DIC
from .size_bounds import ACTIVATIONS, MAX_FILTER_COUNT, MAX_FILTERS, MAX_PARAMETERS, MAX_SIZES

# word_dim has no bilm-tf counterpart in MAX_SIZES; bounded as projection_dim is (released: 100).
MAX_WORD_DIM = MAX_SIZES["projection_dim"]
Shape = Tuple[int, ...]


@dataclass
class EfmlNetwork:
    """The network config's settings (EFML's names in the messages)."""

    projection_dim: int
    lstm_dim: int
    n_layers: int
    cell_clip: float
    proj_clip: float
    activation: str
    filters: List[Tuple[int, int]]
    n_highway: int
    word_dim: int
    char_dim: int
    max_chars: int
    source: str

    @classmethod
    def from_dict(cls, data: Any, source: str) -> "EfmlNetwork":
        def section(name: str, kind: str) -> Dict[str, Any]:
            value = data.get(name) if isinstance(data, dict) else None
            if not isinstance(value, dict):
                raise ElmoOptionsError(f"{source}: missing section '{name}' (a JSON object)")
            if str(value.get("name", "")).lower() != kind:
                raise ElmoOptionsError(
                    f"{source}: {name}.name is {value.get('name')!r}; only {kind!r} is supported "
                    "(the released ELMoForManyLangs models use a cnn token embedder and the elmo encoder)"
                )
            return value

        enc, tok = section("encoder", "elmo"), section("token_embedder", "cnn")

        def number(part: Dict[str, Any], where: str, key: str, low: int, high: float, kind: type = int) -> Any:
            value: Any = part.get(key)
            ok = isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool)
            if not ok or not math.isfinite(value) or value < low:
                raise ElmoOptionsError(f"{source}: {where}.{key} must be a number >= {low}, got {value!r}")
            if value > high:
                raise ElmoOptionsError(
                    f"{source}: {where}.{key} is {value!r}, above the sane bound {high} (a damaged file?)"
                )
            return kind(value)

        activation = tok.get("activation")
        if activation not in ACTIVATIONS:
            raise ElmoOptionsError(
                f"{source}: token_embedder.activation must be one of {ACTIVATIONS}, got {activation!r}"
            )
        network = cls(
            # Every size is bounded here, before anything is built from it (issue 68: a billion
            # highway layers made the expected parameter names run for minutes).
            projection_dim=number(enc, "encoder", "projection_dim", 1, MAX_SIZES["projection_dim"]),
            lstm_dim=number(enc, "encoder", "dim", 1, MAX_SIZES["lstm_dim"]),
            n_layers=number(enc, "encoder", "n_layers", 1, MAX_SIZES["n_layers"]),
            cell_clip=number(enc, "encoder", "cell_clip", 0, math.inf, float),
            proj_clip=number(enc, "encoder", "proj_clip", 0, math.inf, float),
            activation=activation,
            filters=_filters(tok.get("filters"), source),
            n_highway=number(tok, "token_embedder", "n_highway", 0, MAX_SIZES["n_highway"]),
            word_dim=number(tok, "token_embedder", "word_dim", 0, MAX_WORD_DIM),
            char_dim=number(tok, "token_embedder", "char_dim", 0, MAX_SIZES["char_dim"]),
            max_chars=number(
                tok, "token_embedder", "max_characters_per_token", 1, MAX_SIZES["max_characters_per_token"]
            ),
            source=source,
        )
        network.check()
        return network

    def check(self) -> None:
        if not self.word_dim and not self.char_dim:
            raise ElmoOptionsError(f"{self.source}: token_embedder.word_dim and char_dim are both 0: no token input")
        if self.char_dim:
            if not self.filters:
                raise ElmoOptionsError(
                    f"{self.source}: token_embedder.filters is empty but char_dim is {self.char_dim}"
                )
            # EFML asserts room for [bow, <bos>'s 5 characters, eow] and the widest filter.
            needed = max(7, max(w for w, _ in self.filters))
            if self.max_chars < needed:
                raise ElmoOptionsError(
                    f"{self.source}: token_embedder.max_characters_per_token is {self.max_chars}; "
                    f"the sentence markers and filters need at least {needed}"
                )
        # Sizes within their bounds can still multiply out to more than a machine holds; a
        # saved pipeline builds the network before its weights are read. The embeddings'
        # rows come from the dictionaries (0 here), bounded by their files.
        shapes = {**token_embedder_shapes(self, 0, 0), **encoder_shapes(self)}
        count = sum(math.prod(shape) for shape, _ in shapes.values())
        if count > MAX_PARAMETERS:
            raise ElmoOptionsError(
                f"{self.source}: these sizes (encoder.dim {self.lstm_dim}, encoder.projection_dim "
                f"{self.projection_dim}, encoder.n_layers {self.n_layers}, ...) make {count:,} weights, "
                f"above the sane bound {MAX_PARAMETERS:,}"
            )

    def to_dict(self) -> Dict[str, Any]:
        """The network config in EFML's layout (``from_dict`` reads it back)."""
        return {
            "encoder": {
                "name": "elmo",
                "projection_dim": self.projection_dim,
                "dim": self.lstm_dim,
                "n_layers": self.n_layers,
                "cell_clip": self.cell_clip,
                "proj_clip": self.proj_clip,
            },
            "token_embedder": {
                "name": "cnn",
                "activation": self.activation,
                "filters": [list(f) for f in self.filters],
                "n_highway": self.n_highway,
                "word_dim": self.word_dim,
                "char_dim": self.char_dim,
                "max_characters_per_token": self.max_chars,
            },
        }

    @property
    def n_filters(self) -> int:
        return sum(n for _, n in self.filters) if self.char_dim else 0


def _filters(filters: Any, source: str) -> List[Tuple[int, int]]:
    """``token_embedder.filters``, checked and bounded as options.json's are."""
    key = f"{source}: token_embedder.filters"
    if not isinstance(filters, list) or not all(_is_pair(f) for f in filters):
        raise ElmoOptionsError(f"{key} must be [width, n_filters] pairs, got {repr(filters)[:100]}")
    if len(filters) > MAX_FILTERS:
        raise ElmoOptionsError(
            f"{key} lists {len(filters)} pairs, above the sane bound {MAX_FILTERS} (a damaged file?)"
        )
    for width, number in filters:
        if number > MAX_FILTER_COUNT:
            raise ElmoOptionsError(
                f"{key} has {number} filters of width {width}, above the sane bound {MAX_FILTER_COUNT} (a damaged file?)"
            )
    return [(int(w), int(n)) for w, n in filters]


def _is_pair(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    )


def token_embedder_shapes(net: EfmlNetwork, n_chars: int, n_words: int) -> Dict[str, Tuple[Shape, str]]:
    """``token_embedder.pkl``'s entries: EFML's ConvTokenEmbedder state dict."""
    shapes: Dict[str, Tuple[Shape, str]] = {}
    if net.word_dim:
        shapes["word_emb_layer.embedding.weight"] = ((n_words, net.word_dim), f"{WORD_DIC}'s size and word_dim")
    if net.char_dim:
        shapes["char_emb_layer.embedding.weight"] = ((n_chars, net.char_dim), f"{CHAR_DIC}'s size and char_dim")
        for i, (width, n) in enumerate(net.filters):
            shapes[f"convolutions.{i}.weight"] = ((n, net.char_dim, width), f"filter {[width, n]} and char_dim")
            shapes[f"convolutions.{i}.bias"] = ((n,), f"filter {[width, n]}")
        F = net.n_filters
        for k in range(net.n_highway):
            shapes[f"highways._layers.{k}.weight"] = ((2 * F, F), f"the filters' total {F}")
            shapes[f"highways._layers.{k}.bias"] = ((2 * F,), f"the filters' total {F}")
    emb_dim = net.word_dim + net.n_filters
    shapes["projection.weight"] = ((net.projection_dim, emb_dim), "projection_dim and word_dim + filters")
    shapes["projection.bias"] = ((net.projection_dim,), "projection_dim")
    return shapes


def encoder_shapes(net: EfmlNetwork) -> Dict[str, Tuple[Shape, str]]:
    """``encoder.pkl``'s entries: EFML's ElmobiLm (LstmCellWithProjection layers)."""
    P, C = net.projection_dim, net.lstm_dim
    shapes: Dict[str, Tuple[Shape, str]] = {}
    for direction in ("forward", "backward"):
        for k in range(net.n_layers):
            prefix = f"{direction}_layer_{k}"
            shapes[f"{prefix}.input_linearity.weight"] = ((4 * C, P), "dim and projection_dim")
            shapes[f"{prefix}.state_linearity.weight"] = ((4 * C, P), "dim and projection_dim")
            shapes[f"{prefix}.state_linearity.bias"] = ((4 * C,), "dim")
            shapes[f"{prefix}.state_projection.weight"] = ((P, C), "projection_dim and dim")
    return shapes
