"""ELMoForManyLangs (HIT-SCIR's 44 languages) model directories, read as EFML reads them.

A directory holds ``config.json`` (its ``config_path`` names the network config),
``char.dic`` and/or ``word.dic`` (``token<TAB>id`` lines) and two torch state dicts,
``token_embedder.pkl`` and ``encoder.pkl``. What EFML 0.0.4.post2 does, kept here:

- ``config_path`` is tried in the directory, then by its file name in the directory,
  then in EFML's own package (we carry those two files: ``efml_configs.py``).
- A dictionary line is ``line.strip().split("\\t")``; one field means the token was
  whitespace (strip ate it) and stands for the full-width space U+3000.
- A token longer than ``max_characters_per_token - 2`` characters (code points) is
  cut to that length, for its word-dictionary lookup too. A token whose (cut) text is
  ``<bos>`` or ``<eos>`` is that sentence marker.
- A token's characters are ``[id of <eow>, chars..., id of <bow>, <pad>...]``: EFML
  swaps the two word-boundary ids (``bow_id, eow_id = <eow>, <bow>``); unknown
  characters and words are ``<oov>``; the char CNN runs over the whole padded width.

The ``.pkl`` files are pickles: they are loaded with ``weights_only=True`` and must
hold a plain dict of dense CPU tensors, so no code in them ever runs; in torch's zip
format each member is first read through its CRC-32, which ``torch.load`` skips.
Every size in the network config is bounded before anything is built from it.
"""

import math
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy
import torch
from torch import Tensor

from ..errors import ElmoFileNotFoundError, ElmoOptionsError, ElmoWeightsError, one_line_reason
from ..files.json_files import read_json
from ..files.paths import require_file
from ..files.text_lines import iter_utf8_lines
from .bilm_tf import ACTIVATIONS, MAX_FILTER_COUNT, MAX_FILTERS, MAX_PARAMETERS, MAX_SIZES
from .efml_configs import PACKAGED_CONFIGS, packaged_config

CONFIG_NAME = "config.json"
CHAR_DIC = "char.dic"
WORD_DIC = "word.dic"
TOKEN_EMBEDDER_NAME = "token_embedder.pkl"
ENCODER_NAME = "encoder.pkl"
BOS, EOS, BOW, EOW, OOV, PAD = "<bos>", "<eos>", "<bow>", "<eow>", "<oov>", "<pad>"
FULL_WIDTH_SPACE = "\u3000"
EFML_DIR_HINT = (
    f"an ELMoForManyLangs model directory holds {CONFIG_NAME}, {CHAR_DIC} and/or {WORD_DIC}, "
    f"{TOKEN_EMBEDDER_NAME} and {ENCODER_NAME}"
)
# word_dim has no bilm-tf counterpart in MAX_SIZES; bounded as projection_dim is (released: 100).
MAX_WORD_DIM = MAX_SIZES["projection_dim"]
# Token rows kept by a vocabulary's lookup cache before it starts afresh.
ROW_CACHE_SIZE = 200_000
Shape = Tuple[int, ...]


def is_efml_dir(path: Union[str, Path]) -> bool:
    path = Path(path)
    return (path / CONFIG_NAME).is_file() and (path / ENCODER_NAME).is_file()


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


def network_config_file(model_dir: Path) -> Tuple[Optional[Path], str]:
    """The network config ``config.json`` names, found as EFML finds it: its file in
    ``model_dir`` (None where EFML's packaged one is meant), and that config_path."""
    config_file = model_dir / CONFIG_NAME
    config = read_json(config_file, ElmoOptionsError)
    config_path = config.get("config_path") if isinstance(config, dict) else None
    if not isinstance(config_path, str) or not config_path:
        raise ElmoOptionsError(f"{config_file}: needs 'config_path', the network config's file name")
    candidates = (model_dir / config_path, model_dir / _file_name(config_path))
    return next((candidate for candidate in candidates if candidate.is_file()), None), config_path


def _file_name(config_path: str) -> str:
    return Path(config_path.replace("\\", "/")).name


def read_network_config(model_dir: Path) -> Tuple[Dict[str, Any], str]:
    """``config.json``'s network config and where it came from, found as EFML finds it."""
    path, config_path = network_config_file(model_dir)
    if path is not None:
        return read_json(path, ElmoOptionsError), str(path)
    name = _file_name(config_path)
    packaged = packaged_config(name)
    if packaged is None:
        raise ElmoFileNotFoundError(
            f"{model_dir / CONFIG_NAME}: its config_path {config_path!r} is neither in {model_dir} nor one of "
            f"ELMoForManyLangs' packaged configs {PACKAGED_CONFIGS}: put that file in the model directory"
        )
    return packaged, f"ELMoForManyLangs' packaged {name}"


def read_dictionary(path: Path) -> Dict[str, int]:
    """``token<TAB>id`` lines as EFML reads them; a later line for the same token wins
    (as in EFML's dict); two tokens with one id are refused."""
    require_file(path, "ELMoForManyLangs dictionary", hint=f" ({EFML_DIR_HINT})")
    lexicon: Dict[str, int] = {}
    owner: Dict[int, Tuple[str, int]] = {}
    for number, line in enumerate(iter_utf8_lines(path, ElmoWeightsError), start=1):
        fields = line.strip().split("\t")
        if fields == [""]:
            continue  # a blank line (EFML itself would fail on it)
        if len(fields) == 1:
            fields.insert(0, FULL_WIDTH_SPACE)
        index = _dictionary_id(fields[1]) if len(fields) == 2 else None
        if index is None:
            raise ElmoWeightsError(
                f"{path}, line {number}: expected 'token<TAB>id' with an integer id, got {_shown(line)}"
            )
        token = fields[0]
        if index in owner and owner[index][0] != token:
            first, first_line = owner[index]
            raise ElmoWeightsError(
                f"{path}, line {number}: id {index} is given to {token!r} and, on line {first_line}, to {first!r}: "
                "a damaged dictionary (each id must name one token)"
            )
        owner[index] = (token, number)
        lexicon[token] = index
    return lexicon


def _dictionary_id(text: str) -> Optional[int]:
    """An id as EFML's ``int()`` reads it, or None: ``isdecimal`` (not ``isdigit``, which
    "²" passes) and no more digits than ``int()`` converts."""
    if not text.isdecimal():
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _shown(text: str, limit: int = 80) -> str:
    """``repr(text)``, cut so that a damaged file's line keeps the message to one short line."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


def check_zip_members(path: Path) -> None:
    """Reads every member of a torch zip file (torch.save's format since 1.6) through its
    CRC-32, which ``torch.load`` does not check: a flipped byte in a tensor's data would
    load as another value. Older files are bare pickles without checksums; a file saved
    with torch's CRC-32s turned off records 0 for every member, so neither is checked."""
    with path.open("rb") as f:
        if f.read(4) != b"PK\x03\x04":
            return
    try:
        archive = zipfile.ZipFile(path)
    except ZIP_READ_ERRORS as err:
        raise ElmoWeightsError(
            f"{path}: cannot be read as a torch zip file ({one_line_reason(err)[:200]}): a truncated or damaged file"
        ) from err
    with archive:
        members = archive.infolist()
        for member in members:
            # torch's reader takes a member marked as a directory for an empty one, whatever
            # its CRC-32 says (a flipped attribute byte loaded another tensor's values).
            if member.is_dir() or member.external_attr & DOS_DIRECTORY:
                raise ElmoWeightsError(
                    f"{path}: member {member.filename!r} is marked as a directory, which torch.save never "
                    "writes: the file is damaged"
                )
        if any(member.CRC for member in members):
            for member in members:
                _check_zip_member(archive, member, path)


# What zipfile raises for a damaged archive or member (ValueError: a name that is not
# UTF-8, an offset out of range; zlib.error: damaged compressed data).
ZIP_READ_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    EOFError,
    OSError,
    NotImplementedError,
    ValueError,
    zlib.error,
)
DOS_DIRECTORY = 0x10  # the MS-DOS directory bit of a zip member's external attributes


def _check_zip_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, path: Path) -> None:
    try:
        data = archive.open(member)
    except (*ZIP_READ_ERRORS, RuntimeError) as err:  # RuntimeError: an encrypted member
        raise ElmoWeightsError(
            f"{path}: member {member.filename!r} has a damaged header ({one_line_reason(err)[:200]}): the file is damaged"
        ) from err
    with data:
        try:
            while data.read(1 << 20):
                pass
        except zipfile.BadZipFile as err:  # zipfile's only error once a member is open: its CRC-32
            raise ElmoWeightsError(
                f"{path}: member {member.filename!r} fails its CRC-32 check: the file is damaged; copy it again"
            ) from err
        except ZIP_READ_ERRORS as err:
            raise ElmoWeightsError(
                f"{path}: member {member.filename!r} cannot be read ({one_line_reason(err)[:200]}): "
                "a truncated or damaged file"
            ) from err


def _not_dense(tensor: Tensor) -> Optional[str]:
    """What keeps ``tensor`` from being a dense tensor of CPU data, or None."""
    if tensor.is_meta:
        return "meta"  # a shape without data
    if tensor.layout is not torch.strided:
        return "sparse" if str(tensor.layout).startswith("torch.sparse") else str(tensor.layout)
    if tensor.device.type != "cpu":
        return tensor.device.type
    return None


def read_state_dict(path: Path) -> Dict[str, Tensor]:
    """A ``.pkl`` state dict, unpickled with ``weights_only=True`` (plain tensors only),
    its zip members' CRC-32s checked first."""
    require_file(path, "ELMoForManyLangs weights file", hint=f" ({EFML_DIR_HINT})")
    check_zip_members(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises RuntimeError, EOFError, UnpicklingError, ...
        summary = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise ElmoWeightsError(
            f"{path}: cannot be read as a plain torch state dict ({summary}): a truncated file, or a pickle "
            "holding more than tensors (spacy-elmo unpickles .pkl files with weights_only=True, so no code runs)"
        ) from err
    if not isinstance(state, dict):
        raise ElmoWeightsError(f"{path} holds a {type(state).__name__}, not a state dict (a dict of tensors)")
    for key, value in state.items():
        if not isinstance(key, str) or not isinstance(value, Tensor):
            raise ElmoWeightsError(
                f"{path}: entry {key!r} is a {type(value).__name__}, not a tensor: not a plain state dict"
            )
        kind = _not_dense(value)
        if kind is not None:
            raise ElmoWeightsError(
                f"{path}: entry {key!r} is a {kind} tensor, not a dense tensor of CPU data: not a plain state dict"
            )
    return state


def check_state_dict(state: Dict[str, Tensor], expected: Dict[str, Tuple[Shape, str]], path: Path) -> Dict[str, Tensor]:
    """Every expected entry present with its shape, floats and finite; no others."""
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    if missing or unexpected:
        raise ElmoWeightsError(
            f"{path}: does not fit its config: "
            + "; ".join(p for p in (_listed("missing", missing), _listed("unexpected", unexpected)) if p)
        )
    checked = {}
    for key, (shape, why) in expected.items():
        tensor = state[key]
        if tuple(tensor.shape) != shape:
            raise ElmoWeightsError(f"{path}: {key} has shape {tuple(tensor.shape)} but {why} needs {shape}")
        if not tensor.is_floating_point():
            raise ElmoWeightsError(f"{path}: {key} has dtype {tensor.dtype}, expected floats")
        tensor = tensor.detach().to(torch.float32)
        if not bool(torch.isfinite(tensor).all()):
            raise ElmoWeightsError(f"{path}: {key} contains NaN or infinite values")
        checked[key] = tensor
    return checked


def _listed(what: str, keys: Sequence[str]) -> str:
    if not keys:
        return ""
    shown = ", ".join(keys[:4]) + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")
    return f"{what} {shown}"


class EfmlVocab:
    """Token text -> the row of ids the token encoder reads: ``[word id, char ids...]``,
    each shifted by +1 so that 0 means batch padding (a word-only model has no char ids,
    a char-only model a constant word column)."""

    def __init__(self, chars: Optional[Dict[str, int]], words: Optional[Dict[str, int]], max_chars: int):
        self.chars, self.words, self.max_chars = chars, words, max_chars
        if chars is not None:
            # EFML's create_one_batch: `bow_id, eow_id = ... ('<eow>', '<bow>', ...)`: swapped.
            self.start, self.end = chars[EOW], chars[BOW]
            self.char_oov, self.char_pad = chars[OOV], chars[PAD]
        if words is not None:
            self.word_oov = words[OOV]
        self.width = 1 + (max_chars if chars is not None else 0)
        self._rows: Dict[str, Tuple[int, ...]] = {}

    def token_row(self, token: str) -> Tuple[int, ...]:
        """A text token's row: cut to ``max_chars - 2`` characters first, as EFML's read_list."""
        row = self._rows.get(token)
        if row is None:
            if len(self._rows) >= ROW_CACHE_SIZE:
                self._rows.clear()
            cut = token[: self.max_chars - 2] if len(token) + 2 > self.max_chars else token
            row = self._rows[token] = self.row(cut)
        return row

    def row(self, text: str) -> Tuple[int, ...]:
        word = self.words.get(text, self.word_oov) + 1 if self.words is not None else 1
        if self.chars is None:
            return (word,)
        ids = [self.char_pad] * self.max_chars
        ids[0] = self.start
        if text in (BOS, EOS):
            ids[1], ids[2] = self.chars[text], self.end
        else:
            for k, char in enumerate(text):
                ids[k + 1] = self.chars.get(char, self.char_oov)
            ids[len(text) + 1] = self.end
        return (word, *(i + 1 for i in ids))

    def batch_ids(self, sentences: Sequence[Sequence[str]]) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """``(ids (batch, max_len + 2, width), lengths)`` with the markers, 0 at padding."""
        lengths = numpy.asarray([len(s) + 2 for s in sentences], dtype=numpy.int64)
        ids = numpy.zeros((len(sentences), int(lengths.max()) if len(sentences) else 2, self.width), dtype=numpy.int64)
        bos, eos = self.row(BOS), self.row(EOS)
        for k, tokens in enumerate(sentences):
            ids[k, : lengths[k]] = [bos, *(self.token_row(t) for t in tokens), eos]
        return ids, lengths


def checked_vocab(network: EfmlNetwork, chars: Any, words: Any, source: str) -> EfmlVocab:
    """The vocabularies a saved biLM carries, checked as the dictionary files are."""
    lexicons: List[Optional[Dict[str, int]]] = []
    for lexicon, needed, dim, name in (
        (chars, (BOW, EOW, OOV, PAD, BOS, EOS), network.char_dim, CHAR_DIC),
        (words, (OOV, PAD), network.word_dim, WORD_DIC),
    ):
        if not dim:
            lexicons.append(None)
            continue
        ok = isinstance(lexicon, dict) and all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0 for k, v in lexicon.items()
        )
        if not ok or len(set(lexicon.values())) != len(lexicon):
            raise ElmoWeightsError(f"{source}: its {name} vocabulary is not a map of tokens to distinct ids")
        check_specials(lexicon, f"{source}'s {name}", needed, len(lexicon))
        lexicons.append(lexicon)
    return EfmlVocab(lexicons[0], lexicons[1], network.max_chars)


def check_specials(lexicon: Dict[str, int], path: Union[str, Path], names: Sequence[str], rows: int) -> None:
    """EFML needs these entries; every id must index the embedding's ``rows``."""
    missing = [name for name in names if name not in lexicon]
    if missing:
        raise ElmoWeightsError(f"{path}: lacks the special entries {', '.join(missing)} that ELMoForManyLangs needs")
    outside = [token for token, index in lexicon.items() if index >= rows]
    if outside:
        raise ElmoWeightsError(
            f"{path}: {outside[0]!r} has id {lexicon[outside[0]]}, outside the embedding's {rows} rows"
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


@dataclass
class EfmlFiles:
    """A model directory's content, checked against itself."""

    network: EfmlNetwork
    vocab: EfmlVocab
    token_embedder: Dict[str, Tensor]
    encoder: Dict[str, Tensor]


# How a writer's guard names the network config (its file name varies).
NETWORK_CONFIG = f"network config ({CONFIG_NAME}'s config_path)"


def efml_dir_files(model_dir: Path) -> Dict[str, Path]:
    """The files ``read_efml_dir`` reads from ``model_dir``, by name (the network config
    when the directory holds it; both dictionaries, whichever the network uses): what
    a writer must not replace."""
    files = {CONFIG_NAME: model_dir / CONFIG_NAME}
    network_config, _ = network_config_file(model_dir)
    if network_config is not None:
        files[NETWORK_CONFIG] = network_config
    for name in (CHAR_DIC, WORD_DIC, TOKEN_EMBEDDER_NAME, ENCODER_NAME):
        files[name] = model_dir / name
    return files


def read_efml_dir(model_dir: Union[str, Path]) -> EfmlFiles:
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise ElmoFileNotFoundError(f"ELMoForManyLangs model directory not found (or not a directory): {model_dir}")
    if not (model_dir / CONFIG_NAME).is_file():
        raise ElmoFileNotFoundError(
            f"{model_dir} is not an ELMoForManyLangs model directory (no {CONFIG_NAME}): {EFML_DIR_HINT}; "
            "a bilm-tf directory (options.json + weights.hdf5) loads with ElmoBiLM.from_dir / bilm_dir"
        )
    data, source = read_network_config(model_dir)
    network = EfmlNetwork.from_dict(data, source)
    files = efml_dir_files(model_dir)  # what is read below: a writer's guard reads the same list
    chars = words = None
    if network.char_dim:
        chars = read_dictionary(files[CHAR_DIC])
        check_specials(chars, files[CHAR_DIC], (BOW, EOW, OOV, PAD, BOS, EOS), len(chars))
    if network.word_dim:
        words = read_dictionary(files[WORD_DIC])
        check_specials(words, files[WORD_DIC], (OOV, PAD), len(words))
    expected = token_embedder_shapes(network, len(chars or ()), len(words or ()))
    path = files[TOKEN_EMBEDDER_NAME]
    token_embedder = check_state_dict(read_state_dict(path), expected, path)
    path = files[ENCODER_NAME]
    encoder = check_state_dict(read_state_dict(path), encoder_shapes(network), path)
    return EfmlFiles(network, EfmlVocab(chars, words, network.max_chars), token_embedder, encoder)
