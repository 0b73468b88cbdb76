"""The biLM hyper-parameters, read from and written to bilm-tf's options.json."""
import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Tuple, Union

from .char_ids import MAX_CHARACTERS_PER_TOKEN, N_CHARACTERS
from .errors import ElmoFileNotFoundError, ElmoOptionsError

ACTIVATIONS = ("relu", "tanh")
# Training files say 261 (no padding row), inference files 262; both describe
# the same 261-row char_embed dataset.
ACCEPTED_N_CHARACTERS = (N_CHARACTERS - 1, N_CHARACTERS)
_PUBLISHED_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]


@dataclass
class ElmoOptions:
    """Sizes of the character CNN and the biLSTM (the published options.json)."""

    char_dim: int
    filters: List[Tuple[int, int]]
    n_highway: int
    projection_dim: int
    lstm_dim: int
    n_layers: int
    cell_clip: float = 3.0
    proj_clip: float = 3.0
    use_skip_connections: bool = True
    activation: str = "relu"
    max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN
    n_characters: int = N_CHARACTERS
    # Keys of options.json we do not use (training settings, vocab size, ...),
    # kept so that a file read and written again loses nothing.
    extra: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    source: str = field(default="<options>", repr=False, compare=False)

    def __post_init__(self) -> None:
        self.filters = [tuple(f) for f in self.filters]  # type: ignore[misc]
        self.validate()

    @property
    def n_filters(self) -> int:
        """Width of the concatenated CNN output (F)."""
        return sum(n for _, n in self.filters)

    @property
    def output_dim(self) -> int:
        """Width of every layer output: forward and backward halves, 2P."""
        return 2 * self.projection_dim

    @property
    def n_output_layers(self) -> int:
        """The 2L+1 representations as L+1 layers of width 2P (layer 0 is [x; x])."""
        return self.n_layers + 1

    # The settings that shape the network (n_characters 261/262 are the same network).
    ARCHITECTURE_KEYS = (
        ("char_cnn.embedding.dim", "char_dim"),
        ("char_cnn.filters", "filters"),
        ("char_cnn.n_highway", "n_highway"),
        ("char_cnn.activation", "activation"),
        ("char_cnn.max_characters_per_token", "max_characters_per_token"),
        ("lstm.projection_dim", "projection_dim"),
        ("lstm.dim", "lstm_dim"),
        ("lstm.n_layers", "n_layers"),
        ("lstm.cell_clip", "cell_clip"),
        ("lstm.proj_clip", "proj_clip"),
        ("lstm.use_skip_connections", "use_skip_connections"),
    )

    def differences(self, other: "ElmoOptions") -> List[str]:
        """Human-readable differences in architecture: ``"lstm.dim: 64 here, 128 there"``."""
        found = []
        for key, attr in self.ARCHITECTURE_KEYS:
            mine, theirs = getattr(self, attr), getattr(other, attr)
            if attr == "filters":
                mine, theirs = [list(f) for f in mine], [list(f) for f in theirs]
            if mine != theirs:
                found.append(f"{key} is {mine!r} in {self.source} but {theirs!r} in {other.source}")
        return found

    def _fail(self, key: str, message: str) -> None:
        raise ElmoOptionsError(f"{self.source}: option '{key}' {message}")

    def validate(self) -> None:
        positive = {
            "char_cnn.embedding.dim": self.char_dim,
            "lstm.projection_dim": self.projection_dim,
            "lstm.dim": self.lstm_dim,
            "lstm.n_layers": self.n_layers,
        }
        for key, value in positive.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                self._fail(key, f"must be a positive integer, got {value!r}")
        if not isinstance(self.n_highway, int) or isinstance(self.n_highway, bool) or self.n_highway < 0:
            self._fail("char_cnn.n_highway", f"must be an integer >= 0, got {self.n_highway!r}")
        mcpt = self.max_characters_per_token
        if not isinstance(mcpt, int) or isinstance(mcpt, bool) or mcpt < 3:
            self._fail("char_cnn.max_characters_per_token", f"must be an integer >= 3, got {mcpt!r}")
        if not self.filters:
            self._fail("char_cnn.filters", "must list at least one [width, n_filters] pair")
        for width, number in self.filters:
            for v in (width, number):
                if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                    self._fail("char_cnn.filters", f"must hold positive integer pairs, got {[width, number]!r}")
            if width > mcpt:
                self._fail(
                    "char_cnn.filters",
                    f"has width {width}, wider than max_characters_per_token={mcpt}",
                )
        if self.activation not in ACTIVATIONS:
            self._fail("char_cnn.activation", f"must be one of {ACTIVATIONS}, got {self.activation!r}")
        if self.n_characters not in ACCEPTED_N_CHARACTERS:
            self._fail(
                "char_cnn.n_characters",
                f"must be 261 (training files) or 262 (inference files), got {self.n_characters!r}",
            )
        for key, clip in (("lstm.cell_clip", self.cell_clip), ("lstm.proj_clip", self.proj_clip)):
            if not isinstance(clip, (int, float)) or isinstance(clip, bool) or clip < 0:
                self._fail(key, f"must be a number >= 0 (0 = no clipping), got {clip!r}")
        if not isinstance(self.use_skip_connections, bool):
            self._fail("lstm.use_skip_connections", f"must be true or false, got {self.use_skip_connections!r}")

    # -- options.json -----------------------------------------------------
    @classmethod
    def from_dict(cls, data: Dict[str, Any], source: str = "<options>") -> "ElmoOptions":
        if not isinstance(data, dict):
            raise ElmoOptionsError(f"{source}: expected a JSON object, got {type(data).__name__}")
        data = copy.deepcopy(data)

        def take(section: str, key: str, default: Any = KeyError) -> Any:
            sub = data.get(section)
            if not isinstance(sub, dict):
                raise ElmoOptionsError(f"{source}: missing section '{section}' (a JSON object)")
            if key in sub:
                return sub.pop(key)
            if default is KeyError:
                raise ElmoOptionsError(f"{source}: missing option '{section}.{key}'")
            return default

        embedding = take("char_cnn", "embedding")
        if not isinstance(embedding, dict) or "dim" not in embedding:
            raise ElmoOptionsError(f"{source}: missing option 'char_cnn.embedding.dim'")
        char_dim = embedding.pop("dim")
        filters = take("char_cnn", "filters")
        if not isinstance(filters, list) or not all(
            isinstance(f, (list, tuple)) and len(f) == 2 for f in filters
        ):
            raise ElmoOptionsError(
                f"{source}: option 'char_cnn.filters' must be a list of [width, n_filters] pairs, got {filters!r}"
            )
        options = cls(
            char_dim=char_dim,
            filters=filters,
            n_highway=take("char_cnn", "n_highway"),
            activation=take("char_cnn", "activation", "relu"),
            max_characters_per_token=take("char_cnn", "max_characters_per_token", MAX_CHARACTERS_PER_TOKEN),
            n_characters=take("char_cnn", "n_characters", N_CHARACTERS),
            projection_dim=take("lstm", "projection_dim"),
            lstm_dim=take("lstm", "dim"),
            n_layers=take("lstm", "n_layers"),
            cell_clip=take("lstm", "cell_clip", 0),
            proj_clip=take("lstm", "proj_clip", 0),
            use_skip_connections=take("lstm", "use_skip_connections", False),
            source=source,
        )
        if embedding:
            data["char_cnn"]["embedding"] = embedding
        options.extra = data
        return options

    def to_dict(self) -> Dict[str, Any]:
        data = copy.deepcopy(self.extra)
        char_cnn = data.setdefault("char_cnn", {})
        char_cnn.setdefault("embedding", {})["dim"] = self.char_dim
        char_cnn.update(
            filters=[list(f) for f in self.filters],
            n_highway=self.n_highway,
            activation=self.activation,
            max_characters_per_token=self.max_characters_per_token,
            n_characters=self.n_characters,
        )
        data.setdefault("lstm", {}).update(
            projection_dim=self.projection_dim,
            dim=self.lstm_dim,
            n_layers=self.n_layers,
            cell_clip=self.cell_clip,
            proj_clip=self.proj_clip,
            use_skip_connections=self.use_skip_connections,
        )
        return data

    @classmethod
    def from_file(cls, path: Union[str, Path]) -> "ElmoOptions":
        path = Path(path)
        if not path.is_file():
            raise ElmoFileNotFoundError(f"options file not found: {path}")
        try:
            text = path.read_text(encoding="utf8")
        except UnicodeDecodeError as err:
            raise ElmoOptionsError(f"{path}: options file is not UTF-8 text ({err})") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ElmoOptionsError(
                f"{path}: options file is not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})"
            ) from None
        return cls.from_dict(data, source=str(path))

    def to_file(self, path: Union[str, Path]) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf8")


def preset(name: str) -> ElmoOptions:
    """The published sizes: "original", "medium", "small" (elmo-spec.md, section 1)."""
    sizes = {
        "original": dict(n_highway=2, projection_dim=512, lstm_dim=4096),
        "medium": dict(n_highway=1, projection_dim=256, lstm_dim=2048),
        "small": dict(n_highway=1, projection_dim=128, lstm_dim=1024),
    }
    if name not in sizes:
        raise ElmoOptionsError(f"unknown preset {name!r}; choose one of {sorted(sizes)}")
    return ElmoOptions(
        char_dim=16, filters=[tuple(f) for f in _PUBLISHED_FILTERS], n_layers=2, source=f"preset {name}", **sizes[name]
    )
