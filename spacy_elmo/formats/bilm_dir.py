"""A biLM directory: bilm-tf's ``options.json`` + ``weights.hdf5`` (what ``pretrain`` writes),
or else an ELMoForManyLangs model directory."""

from pathlib import Path
from typing import Dict

from ..errors import ElmoFileNotFoundError
from .efml import EFML_DIR_HINT, efml_dir_files, is_efml_dir

# File names inside a biLM directory (what `pretrain` writes).
OPTIONS_NAME = "options.json"
WEIGHTS_NAME = "weights.hdf5"


def check_bilm_dir(path: Path, what: str = "biLM directory") -> None:
    """``path`` is a directory with options.json and weights.hdf5; else one line saying what is missing."""
    if not path.is_dir():
        raise ElmoFileNotFoundError(f"{what} not found (or not a directory): {path}")
    missing = [name for name in (OPTIONS_NAME, WEIGHTS_NAME) if not (path / name).is_file()]
    if missing and not is_efml_dir(path):
        raise ElmoFileNotFoundError(
            f"{what} {path} has no {' and no '.join(missing)}: a biLM directory holds {OPTIONS_NAME} and "
            f"{WEIGHTS_NAME} (as `python -m spacy_elmo pretrain` writes them); {EFML_DIR_HINT}"
        )


# The formats a biLM directory can hold.
BILM_TF_FORMAT = "bilm-tf"
EFML_FORMAT = "ELMoForManyLangs"


def bilm_dir_format(path: Path) -> str:
    """How ``ElmoBiLM.from_dir`` reads ``path``: bilm-tf's two files, else (without
    weights.hdf5) an ELMoForManyLangs directory."""
    return EFML_FORMAT if not (path / WEIGHTS_NAME).is_file() and is_efml_dir(path) else BILM_TF_FORMAT


def bilm_dir_files(path: Path) -> Dict[str, Path]:
    """The files ``ElmoBiLM.from_dir`` reads from ``path``, by name: what a writer must not replace."""
    if bilm_dir_format(path) == EFML_FORMAT:
        return efml_dir_files(path)
    return {OPTIONS_NAME: path / OPTIONS_NAME, WEIGHTS_NAME: path / WEIGHTS_NAME}
