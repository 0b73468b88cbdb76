"""ELMoForManyLangs (HIT-SCIR's 44 languages) model directories, read as EFML reads them.

A directory holds ``config.json`` (its ``config_path`` names the network config),
``char.dic`` and/or ``word.dic`` (``token<TAB>id`` lines, ``efml_dictionaries.py``) and two
torch state dicts, ``token_embedder.pkl`` and ``encoder.pkl`` (``efml_state_dicts.py``).
``config_path`` is tried in the directory, then by its file name in the directory, then in
EFML's own package (we carry those two files: ``efml_configs.py``), as EFML 0.0.4.post2
does. The network config's schema and bounds and the run-time vocabulary are the
network's (``bilm/efml_network.py``, ``bilm/efml_vocab.py``).
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

from torch import Tensor

from ..bilm.efml_network import EfmlNetwork, encoder_shapes, token_embedder_shapes
from ..bilm.efml_vocab import CHAR_DIC, CHAR_SPECIALS, WORD_DIC, WORD_SPECIALS, EfmlVocab, check_specials
from ..errors import ElmoFileNotFoundError, ElmoOptionsError
from ..files.json_files import read_json
from .efml_configs import PACKAGED_CONFIGS, packaged_config
from .efml_dictionaries import read_dictionary
from .efml_names import CONFIG_NAME, EFML_DIR_HINT, ENCODER_NAME, TOKEN_EMBEDDER_NAME
from .efml_state_dicts import check_state_dict, read_state_dict


def is_efml_dir(path: Union[str, Path]) -> bool:
    path = Path(path)
    return (path / CONFIG_NAME).is_file() and (path / ENCODER_NAME).is_file()


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
        check_specials(chars, files[CHAR_DIC], CHAR_SPECIALS, len(chars))
    if network.word_dim:
        words = read_dictionary(files[WORD_DIC])
        check_specials(words, files[WORD_DIC], WORD_SPECIALS, len(words))
    expected = token_embedder_shapes(network, len(chars or ()), len(words or ()))
    path = files[TOKEN_EMBEDDER_NAME]
    token_embedder = check_state_dict(read_state_dict(path), expected, path)
    path = files[ENCODER_NAME]
    encoder = check_state_dict(read_state_dict(path), encoder_shapes(network), path)
    return EfmlFiles(network, EfmlVocab(chars, words, network.max_chars), token_embedder, encoder)
