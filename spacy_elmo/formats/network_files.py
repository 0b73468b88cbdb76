"""The network's file entry points as the formats carry them out: ``ElmoBiLM.from_files``,
``from_dir``, ``from_efml`` and ``to_files``, ``ElmoOptions.from_file`` and ``to_file`` call
these through the package's wiring (``spacy_elmo/bilm_files.py``), so the network imports
nothing of the formats. Each reads its files with its format's module and builds the network
from what they hold; precision and device stay the network's (its classmethods check the
precision before calling here, and place the biLM after)."""

from pathlib import Path
from typing import Union

from ..bilm.efml_model import EfmlTokenEncoder
from ..bilm.elmo_bilm import ElmoBiLM
from .bilm_dir import EFML_FORMAT, OPTIONS_NAME, WEIGHTS_NAME, bilm_dir_files, bilm_dir_format, check_bilm_dir
from .bilm_tf import read_options, read_weights, write_options, write_weights
from .efml import read_efml_dir

PathLike = Union[str, Path]
__all__ = ["read_bilm_dir", "read_bilm_files", "read_efml_bilm", "read_options", "write_bilm_files", "write_options"]


def read_bilm_files(options_file: PathLike, weight_file: PathLike) -> ElmoBiLM:
    """bilm-tf/AllenNLP ``options.json`` + ``weights.hdf5`` as a biLM (``ElmoBiLM.from_files``)."""
    options = read_options(options_file)
    arrays = read_weights(options, weight_file)  # shapes checked against the options before allocating
    bilm = ElmoBiLM(options)
    bilm.load_tf_arrays(arrays)
    return bilm


def read_bilm_dir(path: Path) -> ElmoBiLM:
    """A biLM directory, whichever format it holds (``ElmoBiLM.from_dir``)."""
    check_bilm_dir(path)
    if bilm_dir_format(path) == EFML_FORMAT:
        return read_efml_bilm(path)
    files = bilm_dir_files(path)  # what is read: a writer's guard reads the same list
    return read_bilm_files(files[OPTIONS_NAME], files[WEIGHTS_NAME])


def read_efml_bilm(model_dir: PathLike) -> ElmoBiLM:
    """An ELMoForManyLangs model directory as a biLM, its network exactly (``ElmoBiLM.from_efml``)."""
    files = read_efml_dir(model_dir)
    encoder = EfmlTokenEncoder(files.network, files.vocab)
    bilm = ElmoBiLM(encoder.options(), token_encoder=encoder)
    bilm.load_efml_state(files.token_embedder, files.encoder)
    return bilm


def write_bilm_files(bilm: ElmoBiLM, options_file: PathLike, weight_file: PathLike, dtype: str) -> None:
    """The bilm-tf layout (``ElmoBiLM.to_files``): the weights, then the options."""
    options_file = Path(options_file)
    options_file.parent.mkdir(parents=True, exist_ok=True)
    write_weights(bilm.tf_arrays(), weight_file, dtype=dtype)
    write_options(bilm.options, options_file)
