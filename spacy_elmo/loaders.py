"""Where a biLM comes from: ``resolve_bilm``, the one road from a config to a biLM (a
registered loader, else ``weight_source``: the files or directory a config names, else the
bundled biLM; ``embed`` resolves its options through ``weight_source`` too), and
the registered weight loaders for ``[initialize.components.elmo.weights]``.

Each loader returns a zero-argument callable, so nothing is read until the
component is initialized.
"""

import os
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence, Tuple, Union

from confection import ConfigValidationError
from spacy.util import registry

from .bilm import ElmoBiLM
from .errors import ElmoError, ElmoFileNotFoundError, ElmoNoWeightsError
from .files.paths import require_file
from .formats.bilm_dir import WEIGHTS_NAME, check_bilm_dir
from .formats.bilm_tf import BILM_DIR_HINT

PathLike = Union[str, Path]
# How a component's config names the three ways of giving weights (a command spells them as its options).
CONFIG_KEYS = ("options_file", "weight_file", "bilm_dir")
# What the three are, as the loader's own errors name them.
PATH_KINDS = ("options file", "weight file", "biLM directory")
# The English biLM that ships with the package (built by the project's `all` workflow).
DEFAULT_BILM_DIR = Path(__file__).parent / "data" / "default_bilm"
NO_WEIGHTS_HELP = (
    "The '{name}' component has no biLM weights. Give them in one of these ways:\n"
    "  * bilm-tf/AllenNLP files: nlp.add_pipe('elmo', config={{'options_file': 'options.json', "
    "'weight_file': 'weights.hdf5'}})\n"
    "  * a biLM you pretrained (`python -m spacy_elmo pretrain`): config={{'bilm_dir': 'OUTPUT_DIR'}}\n"
    '  * with spacy train: [initialize.components.{name}.weights] @misc = "spacy-elmo.WeightsFromFiles.v1" '
    '(options_file, weight_file) or "spacy-elmo.WeightsFromDir.v1" (path)\n'
    "Normally the bundled English biLM (spacy_elmo/data/default_bilm) is the fallback, but this install "
    "lacks it (expected in {expected}): reinstall spacy-elmo, or pretrain a biLM on your own text with "
    "`python -m spacy_elmo pretrain`."
)


class ElmoConfigError(ConfigValidationError, ElmoError):
    """A registered loader's arguments that do not go together: a ConfigValidationError, so
    ``spacy train`` and ``spacy debug config`` show it as a config error (no traceback).
    Here, not in errors.py: confection is not imported for ``python -m spacy_elmo --help``."""


def default_bilm_dir() -> Optional[Path]:
    """The bundled biLM's directory, or None if this install has none."""
    return DEFAULT_BILM_DIR if (DEFAULT_BILM_DIR / WEIGHTS_NAME).is_file() else None


def bundled_bilm_dir(name: str = "elmo", spelling: Optional[Tuple[str, str, str]] = None) -> Path:
    """The bundled biLM's directory; an install without one is refused with what to give
    the component ``name`` (or, with ``spelling``, the command whose options those are) instead."""
    path = default_bilm_dir()
    if path is None:
        if spelling is not None:
            options, weights, directory = spelling
            raise ElmoNoWeightsError(f"this install has no bundled biLM: give {options}/{weights} or {directory}")
        raise ElmoNoWeightsError(NO_WEIGHTS_HELP.format(name=name, expected=DEFAULT_BILM_DIR))
    return path


def resolve_bilm(
    options_file: Optional[PathLike] = None,
    weight_file: Optional[PathLike] = None,
    bilm_dir: Optional[PathLike] = None,
    loader: Optional[Callable[[], ElmoBiLM]] = None,
    name: str = "elmo",
) -> ElmoBiLM:
    """The biLM a component's config asks for: ``loader`` (a registered loader from
    ``[initialize.components.NAME.weights]``), else what ``weight_source`` resolves."""
    if loader is not None:
        return loader()
    return load_bilm(**weight_source(options_file, weight_file, bilm_dir, name))


def weight_source(
    options_file: Optional[PathLike] = None,
    weight_file: Optional[PathLike] = None,
    bilm_dir: Optional[PathLike] = None,
    name: str = "elmo",
    spelling: Optional[Tuple[str, str, str]] = None,
) -> Dict[str, Optional[PathLike]]:
    """The one resolution of the weights a user names, for ``load_bilm``: the files or the
    directory (of either format) they name, checked without reading them, else the bundled
    biLM. ``spelling``: a command's three options (None: component ``name``'s config keys)."""
    check_weight_pairing(options_file, weight_file, bilm_dir, spelling=spelling or CONFIG_KEYS)
    given = (options_file, weight_file, bilm_dir)
    if all(path is None for path in given):  # "" is named too
        return {"options_file": None, "weight_file": None, "bilm_dir": bundled_bilm_dir(name, spelling)}
    if spelling is None:  # checked at the component's first use: each named by the component and its key
        labels = tuple(f"{name} {key}" for key in CONFIG_KEYS)
        check_named(given, labels, "leave it null")
    else:  # a command's option, and each path by what it is (as the loader names it)
        check_named(given, spelling, "leave it out")
        labels = PATH_KINDS
    check_weight_source(options_file, weight_file, bilm_dir, labels)
    return {"options_file": options_file, "weight_file": weight_file, "bilm_dir": bilm_dir}


def check_named(paths: Sequence[Optional[PathLike]], labels: Sequence[str], unset: str) -> None:
    """Each path given is a name UTF-8 can write, not empty. ``unset``: how the user leaves one out.
    A name UTF-8 cannot write (bytes the file system decoded as surrogates) is refused: a
    pipeline's config, where a component keeps the path, is UTF-8 (spaCy's own check of a
    component's config raises UnicodeEncodeError on it), so the component cannot take it, nor
    then ``embed``."""
    for path, label in zip(paths, labels):
        if path is not None and not str(path).strip():
            raise ElmoFileNotFoundError(f"{label} is empty: name a path, or {unset}")
        if path is not None and not is_utf8(str(path)):
            raise ElmoError(
                f"{label} {os.fsencode(str(path))!r} has a name that is not valid UTF-8: rename it, or give a "
                "link to it with a UTF-8 name"
            )


def is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def load_bilm(
    options_file: Optional[PathLike] = None, weight_file: Optional[PathLike] = None, bilm_dir: Optional[PathLike] = None
) -> ElmoBiLM:
    """A biLM from bilm-tf/AllenNLP files or from a biLM directory."""
    check_weight_pairing(options_file, weight_file, bilm_dir)
    if bilm_dir is not None:
        return ElmoBiLM.from_dir(bilm_dir)
    if options_file is None or weight_file is None:
        raise ElmoError("no biLM named: give options_file + weight_file, or bilm_dir")
    return ElmoBiLM.from_files(options_file, weight_file)


def check_weight_pairing(
    options_file: Optional[PathLike],
    weight_file: Optional[PathLike],
    bilm_dir: Optional[PathLike],
    spelling: Tuple[str, str, str] = CONFIG_KEYS,
) -> None:
    """The one rule of naming a biLM: options_file and weight_file together, or bilm_dir,
    not both (none at all: the caller's default). ``spelling``: how the caller's user
    writes the three (config keys, CLI options)."""
    options, weights, directory = spelling
    if half_pair(options_file, weight_file):
        raise ElmoError(f"{options} and {weights} go together: give both (or {directory})")
    if bilm_dir is not None and options_file is not None:
        raise ElmoError(f"give either {directory} or {options} + {weights}, not both")


def half_pair(options_file: Optional[PathLike], weight_file: Optional[PathLike]) -> Optional[Tuple[str, str]]:
    """``(the one given, the one missing)`` when only one of options_file and weight_file is given."""
    if (options_file is None) == (weight_file is None):
        return None
    return ("options_file", "weight_file") if weight_file is None else ("weight_file", "options_file")


@registry.misc("spacy-elmo.WeightsFromFiles.v1")
def weights_from_files_v1(options_file: str, weight_file: str) -> Callable[[], ElmoBiLM]:
    """bilm-tf / AllenNLP ``options.json`` + ``weights.hdf5``."""
    return lambda: load_bilm(options_file=options_file, weight_file=weight_file)


@registry.misc("spacy-elmo.WeightsOrDefault.v1")
def weights_or_default_v1(
    options_file: Optional[str] = None, weight_file: Optional[str] = None
) -> Callable[[], ElmoBiLM]:
    """bilm-tf / AllenNLP files when given (both), else the English biLM bundled with
    the package: what the shipped configs use, so ``--paths.elmo_*`` is an override."""
    unpaired = half_pair(options_file, weight_file)
    if unpaired:
        given, missing = unpaired
        raise ElmoConfigError(
            errors=[
                {
                    "loc": [missing],
                    "msg": f"null, but {given} is set: give options_file and weight_file together "
                    "(spacy train: --paths.elmo_options and --paths.elmo_weights), or neither for the bundled biLM",
                }
            ],
            parent="spacy-elmo.WeightsOrDefault.v1",
        )
    if options_file is None:
        return default_weights_v1()
    return weights_from_files_v1(options_file, weight_file)


def check_weight_source(
    options_file: Optional[PathLike],
    weight_file: Optional[PathLike],
    bilm_dir: Optional[PathLike],
    labels: Sequence[str],
) -> None:
    """The paths given exist (without reading them), each named by its label (e.g. "elmo weight_file")."""
    for path, label in ((options_file, labels[0]), (weight_file, labels[1])):
        if path is not None:
            require_file(path, label, BILM_DIR_HINT)
    if bilm_dir is not None:
        check_bilm_dir(Path(bilm_dir), labels[2])


@registry.misc("spacy-elmo.WeightsFromDir.v1")
def weights_from_dir_v1(path: str) -> Callable[[], ElmoBiLM]:
    """A directory with ``options.json`` + ``weights.hdf5`` (``python -m spacy_elmo pretrain`` output)."""
    return lambda: load_bilm(bilm_dir=path)


@registry.misc("spacy-elmo.DefaultWeights.v1")
def default_weights_v1() -> Callable[[], ElmoBiLM]:
    """The English biLM bundled with the package."""

    return lambda: resolve_bilm()
