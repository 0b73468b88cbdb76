"""The biLM hyper-parameters: the one schema of bilm-tf's options.json (its keys, defaults
and bounds). The file is ``spacy_elmo/formats/bilm_tf.py``'s: ``from_file``/``to_file``
reach it through the package's wiring (``spacy_elmo/bilm_files.py``)."""

import copy
import math
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Tuple, Union, cast

from .. import bilm_files
from ..errors import ElmoOptionsError
from ..json_depth import check_json_depth
from .char_ids import MAX_CHARACTERS_PER_TOKEN, N_CHARACTERS
from .size_bounds import ACTIVATIONS, MAX_FILTER_COUNT, MAX_FILTERS, MAX_SIZES

# Training files say 261 (no padding row), inference files 262; both describe
# the same 261-row char_embed dataset.
ACCEPTED_N_CHARACTERS = (N_CHARACTERS - 1, N_CHARACTERS)
_PUBLISHED_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]


_REQUIRED = object()  # in options.json: no default, the file must give it


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _pop_option(data: Dict[str, Any], json_key: str, file_default: Any, source: str) -> Any:
    """Take ``json_key`` (``section.name`` or ``section.sub.name``) out of ``data``; what
    is left is the file's unused keys. A sub-object emptied by this is removed."""
    *sections, name = json_key.split(".")
    if not isinstance(data.get(sections[0]), dict):
        raise ElmoOptionsError(f"{source}: missing section '{sections[0]}' (a JSON object)")
    parents = [data]
    for section in sections:
        node = parents[-1].get(section)
        if not isinstance(node, dict):
            node = {}
        parents.append(node)
    if name in parents[-1]:
        value = parents[-1].pop(name)
        if len(sections) > 1 and not parents[-1]:
            parents[-2].pop(sections[-1], None)
        return value
    if file_default is _REQUIRED:
        raise ElmoOptionsError(f"{source}: missing option '{json_key}'")
    return file_default


def _option(json_key: str, default: Any = MISSING, file_default: Any = _REQUIRED, architecture: bool = True):
    """A field of ElmoOptions: its options.json key (``section.name``), the default of a
    file that omits it (bilm-tf's own: no clipping, no skip connections), and whether
    it shapes the network."""
    metadata = {"json": json_key, "file_default": file_default, "architecture": architecture}
    return field(default=default, metadata=metadata)


@dataclass
class ElmoOptions:
    """Sizes of the character CNN and the biLSTM (the published options.json).

    The one schema: every list of option names (options.json keys, pretraining's
    ``[model]`` section, the ``spacy-elmo.ElmoBiLM.v1`` arguments) comes from
    these fields and their metadata."""

    char_dim: int = _option("char_cnn.embedding.dim")
    filters: List[Tuple[int, int]] = _option("char_cnn.filters")
    n_highway: int = _option("char_cnn.n_highway")
    projection_dim: int = _option("lstm.projection_dim")
    lstm_dim: int = _option("lstm.dim")
    n_layers: int = _option("lstm.n_layers")
    cell_clip: float = _option("lstm.cell_clip", 3.0, file_default=0)
    proj_clip: float = _option("lstm.proj_clip", 3.0, file_default=0)
    use_skip_connections: bool = _option("lstm.use_skip_connections", True, file_default=False)
    activation: str = _option("char_cnn.activation", "relu", file_default="relu")
    max_characters_per_token: int = _option(
        "char_cnn.max_characters_per_token", MAX_CHARACTERS_PER_TOKEN, file_default=MAX_CHARACTERS_PER_TOKEN
    )
    # 261 (training files) and 262 (inference files) are the same network.
    n_characters: int = _option("char_cnn.n_characters", N_CHARACTERS, file_default=N_CHARACTERS, architecture=False)
    # Keys of options.json we do not use (training settings, vocab size, ...),
    # kept so that a file read and written again loses nothing.
    extra: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    source: str = field(default="<options>", repr=False, compare=False)
    # Width of the concatenated CNN output (F), from ``filters``.
    n_filters: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.filters = [tuple(f) for f in self.filters]  # type: ignore[misc]  # JSON rows: validate() checks lengths
        self.validate()
        self.n_filters = sum(n for _, n in self.filters)

    @classmethod
    def option_fields(cls) -> List[Field]:
        """The fields that are options.json settings, in file order."""
        return [f for f in fields(cls) if "json" in f.metadata]

    @classmethod
    def architecture_names(cls) -> List[str]:
        """The settings that shape the network: pretraining's [model] section."""
        return [f.name for f in cls.option_fields() if f.metadata["architecture"]]

    @classmethod
    def size_names(cls) -> List[str]:
        """The settings without a default: what a config must give (or leave all to the weights)."""
        return [f.name for f in cls.option_fields() if f.default is MISSING]

    @classmethod
    def json_key(cls, name: str) -> str:
        return next(f.metadata["json"] for f in cls.option_fields() if f.name == name)

    @property
    def output_dim(self) -> int:
        """Width of every layer output: forward and backward halves, 2P."""
        return 2 * self.projection_dim

    @property
    def n_output_layers(self) -> int:
        """The 2L+1 representations as L+1 layers of width 2P (layer 0 is [x; x])."""
        return self.n_layers + 1

    def differences(self, other: "ElmoOptions") -> List[str]:
        """Human-readable differences in architecture: ``"lstm.dim: 64 here, 128 there"``."""
        found = []
        for attr in self.architecture_names():
            key = self.json_key(attr)
            mine, theirs = getattr(self, attr), getattr(other, attr)
            if attr == "filters":
                mine, theirs = [list(f) for f in mine], [list(f) for f in theirs]
            if mine != theirs:
                found.append(f"{key} is {mine!r} in {self.source} but {theirs!r} in {other.source}")
        return found

    def _fail(self, key: str, message: str) -> None:
        raise ElmoOptionsError(f"{self.source}: option '{key}' {message}")

    def validate(self) -> None:
        key = self.json_key
        for name in ("char_dim", "projection_dim", "lstm_dim", "n_layers"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                self._fail(key(name), f"must be a positive integer, got {value!r}")
        if not _is_int(self.n_highway) or self.n_highway < 0:
            self._fail(key("n_highway"), f"must be an integer >= 0, got {self.n_highway!r}")
        mcpt = self.max_characters_per_token
        if not _is_int(mcpt) or mcpt < 3:
            self._fail(key("max_characters_per_token"), f"must be an integer >= 3, got {mcpt!r}")
        for name, bound in MAX_SIZES.items():
            if getattr(self, name) > bound:
                self._fail(key(name), f"is {getattr(self, name)!r}, above the sane bound {bound} (a damaged file?)")
        self._validate_filters(mcpt)
        if self.activation not in ACTIVATIONS:
            self._fail(key("activation"), f"must be one of {ACTIVATIONS}, got {self.activation!r}")
        if self.n_characters not in ACCEPTED_N_CHARACTERS:
            self._fail(
                key("n_characters"),
                f"must be {ACCEPTED_N_CHARACTERS[0]} (training files) or {ACCEPTED_N_CHARACTERS[1]} (inference files), "
                f"got {self.n_characters!r}",
            )
        for name in ("cell_clip", "proj_clip"):
            clip = getattr(self, name)
            # NaN passes every comparison, so finiteness is checked by name (JSON allows NaN, Infinity).
            if not isinstance(clip, (int, float)) or isinstance(clip, bool) or not math.isfinite(clip) or clip < 0:
                self._fail(key(name), f"must be a finite number >= 0 (0 = no clipping), got {clip!r}")
        if not isinstance(self.use_skip_connections, bool):
            self._fail(key("use_skip_connections"), f"must be true or false, got {self.use_skip_connections!r}")

    def _validate_filters(self, max_width: int) -> None:
        key = self.json_key("filters")
        if not self.filters:
            self._fail(key, "must list at least one [width, n_filters] pair")
        if len(self.filters) > MAX_FILTERS:
            self._fail(key, f"lists {len(self.filters)} pairs, above the sane bound {MAX_FILTERS} (a damaged file?)")
        for width, number in self.filters:
            if not (_is_int(width) and _is_int(number) and width >= 1 and number >= 1):
                self._fail(key, f"must hold positive integer pairs, got {[width, number]!r}")
            if width > max_width:
                self._fail(key, f"has width {width}, wider than max_characters_per_token={max_width}")
            if number > MAX_FILTER_COUNT:
                self._fail(key, f"has {number} filters of width {width}, above the sane bound {MAX_FILTER_COUNT}")

    # -- options.json -----------------------------------------------------
    @classmethod
    def from_dict(cls, data: Dict[str, Any], source: str = "<options>") -> "ElmoOptions":
        if not isinstance(data, dict):
            raise ElmoOptionsError(f"{source}: expected a JSON object, got {type(data).__name__}")
        try:
            check_json_depth(data)  # before the copy, which would recurse
        except ValueError as err:
            raise ElmoOptionsError(f"{source}: options {err}") from err
        data = copy.deepcopy(data)
        settings = {
            f.name: _pop_option(data, f.metadata["json"], f.metadata["file_default"], source)
            for f in cls.option_fields()
        }
        filters = settings["filters"]
        if not isinstance(filters, list) or not all(isinstance(f, (list, tuple)) and len(f) == 2 for f in filters):
            raise ElmoOptionsError(
                f"{source}: option '{cls.json_key('filters')}' must be a list of [width, n_filters] pairs, got {filters!r}"
            )
        return cls(**settings, extra=data, source=source)

    def to_dict(self) -> Dict[str, Any]:
        data = copy.deepcopy(self.extra)
        for f in self.option_fields():
            *sections, name = f.metadata["json"].split(".")
            node = data
            for section in sections:
                node = node.setdefault(section, {})
            value = getattr(self, f.name)
            node[name] = [list(pair) for pair in value] if f.name == "filters" else value
        return data

    @classmethod
    def from_file(cls, path: Union[str, Path]) -> "ElmoOptions":
        """An ``options.json`` (read by ``formats/bilm_tf.py``)."""
        return cast(ElmoOptions, bilm_files.formats().read_options(path))

    def to_file(self, path: Union[str, Path]) -> None:
        """Written atomically (by ``formats/bilm_tf.py``)."""
        bilm_files.formats().write_options(self, path)


def preset(name: str) -> ElmoOptions:
    """The published sizes (bilm-tf's README): "original" (2x4096_512_2048cnn_2xhighway),
    "medium" (2x2048_256_2048cnn_1xhighway), "small" (2x1024_128_2048cnn_1xhighway)."""
    sizes: Dict[str, Dict[str, Any]] = {
        "original": dict(n_highway=2, projection_dim=512, lstm_dim=4096),
        "medium": dict(n_highway=1, projection_dim=256, lstm_dim=2048),
        "small": dict(n_highway=1, projection_dim=128, lstm_dim=1024),
    }
    if name not in sizes:
        raise ElmoOptionsError(f"unknown preset {name!r}; choose one of {sorted(sizes)}")
    return ElmoOptions(
        char_dim=16,
        filters=[(width, n) for width, n in _PUBLISHED_FILTERS],
        n_layers=2,
        source=f"preset {name}",
        **sizes[name],
    )
