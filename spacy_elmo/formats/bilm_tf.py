"""bilm-tf's files: ``options.json`` (read as JSON, checked for hostile content, written
atomically) and ``weights.hdf5`` (its datasets checked against the layout the network
expects, read as float32 arrays; written atomically). The names and shapes the network
expects, and the options' schema, are the network's (``bilm/tf_layout.py``, ``bilm/options.py``).

Only datasets are read (plain float arrays): a weight file cannot run code, and
only its own (no links, no data kept in other files).
"""

import json
from pathlib import Path
from typing import Any, Dict, List, Union

import h5py
import numpy

from ..bilm.options import ElmoOptions
from ..bilm.tf_layout import Shape, WeightsLayout, weights_layout
from ..errors import HDF5_READ_ERRORS, ElmoOptionsError, ElmoWeightsError, one_line_reason
from ..files.atomic import atomic_path, write_text_atomic
from ..files.json_files import parse_json
from ..files.paths import require_file

# What a directory given as the options or weight file should have been.
BILM_DIR_HINT = (
    " (a biLM directory goes to bilm_dir / ElmoBiLM.from_dir; the files are options.json and weights.hdf5 in it)"
)


def read_options_file(path: Union[str, Path]) -> Any:
    """``options.json``'s content, any JSON value; a file that is not UTF-8 JSON (or is
    built to break the parser) is one line naming it."""
    path = require_file(path, "options file", BILM_DIR_HINT)
    try:
        text = path.read_text(encoding="utf8")
    except UnicodeDecodeError as err:
        raise ElmoOptionsError(f"{path}: options file is not UTF-8 text ({err})") from err
    try:
        return parse_json(text)
    except json.JSONDecodeError as err:
        raise ElmoOptionsError(
            f"{path}: options file is not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})"
        ) from err
    except ValueError as err:  # a hostile file: huge integers, deep nesting
        raise ElmoOptionsError(f"{path}: options file is not valid JSON ({err})") from err


def read_options(path: Union[str, Path]) -> ElmoOptions:
    """``options.json`` checked against the options' schema (``ElmoOptions.from_file``)."""
    return ElmoOptions.from_dict(read_options_file(path), source=str(Path(path)))


def write_options(options: ElmoOptions, path: Union[str, Path]) -> None:
    """``options.json``, written atomically (``ElmoOptions.to_file``)."""
    write_text_atomic(path, json.dumps(options.to_dict(), indent=2) + "\n")


def read_weights(options: ElmoOptions, weight_file: Union[str, Path]) -> Dict[str, numpy.ndarray]:
    """All datasets the options call for (``bilm/tf_layout.py``), checked for presence, shape
    and finiteness, every shape before any data is read (and before the caller allocates a
    model), so options that do not fit the file fail at once, whatever their sizes."""
    return read_datasets(weight_file, weights_layout(options))


def read_datasets(weight_file: Union[str, Path], layout: WeightsLayout) -> Dict[str, numpy.ndarray]:
    """All datasets of ``layout``, checked for presence, shape and finiteness. Every shape
    is checked before any data is read (and before the caller allocates a model), so a
    layout that does not fit the file fails at once, whatever its sizes."""
    path = require_file(weight_file, "weight file", BILM_DIR_HINT)
    if not h5py.is_hdf5(str(path)):
        raise ElmoWeightsError(
            f"{path}: not an HDF5 file (expected bilm-tf's weights.hdf5; "
            "an AllenNLP model archive or a PyTorch checkpoint is not a weight file)"
        )
    try:
        with h5py.File(path, "r") as f:
            _check_no_unexpected(own_datasets(f, path), layout, path)
            _check_shapes(f, layout, path)
            return {
                name: checked_array(f[name], f"{path}: dataset '{name}'", shape, f"{layout.source} needs", why)
                for name, (shape, why) in layout.shapes.items()
            }
    except ElmoWeightsError:
        raise
    except HDF5_READ_ERRORS as err:
        reason = one_line_reason(err)
        raise ElmoWeightsError(f"{path}: cannot read the HDF5 file (truncated or damaged?): {reason}") from err


# Why links and data kept elsewhere are refused, and what to do.
_OWN_DATA = "a weight file holds all its datasets itself (write it again with plain datasets)"


def own_datasets(f: h5py.File, path: Path) -> List[str]:
    """The names of every dataset in the file, once each is known to be a hard link whose
    bytes lie in this file: a soft or external link, external storage or a virtual
    dataset would make the reader load another dataset or another file's bytes as
    weights, so each is refused by name."""
    found: List[str] = []
    groups, seen = [("", f)], {hash(f.id)}
    while groups:
        prefix, group = groups.pop()
        for name in group:
            full = prefix + name
            link = group.get(name, getlink=True)
            if isinstance(link, h5py.SoftLink):
                raise ElmoWeightsError(f"{path}: '{full}' is a soft link (to '{link.path}'): {_OWN_DATA}")
            if isinstance(link, h5py.ExternalLink):
                raise ElmoWeightsError(
                    f"{path}: '{full}' is an external link (to '{link.path}' in {link.filename}): {_OWN_DATA}"
                )
            item = group[name]
            if isinstance(item, h5py.Dataset):
                _check_own_storage(item, full, path)
                found.append(full)
            elif isinstance(item, h5py.Group) and hash(item.id) not in seen:  # a group hard-linked twice: once
                seen.add(hash(item.id))
                groups.append((full + "/", item))
    return found


def _check_own_storage(dataset: h5py.Dataset, name: str, path: Path) -> None:
    if dataset.is_virtual:
        raise ElmoWeightsError(
            f"{path}: dataset '{name}' is a virtual dataset (its data comes from other datasets): {_OWN_DATA}"
        )
    if dataset.external:
        where = dataset.external[0][0]
        where = where.decode("utf8", "replace") if isinstance(where, bytes) else where
        raise ElmoWeightsError(f"{path}: dataset '{name}' keeps its data in another file ({where}): {_OWN_DATA}")


def _check_shapes(f: h5py.File, layout: WeightsLayout, path: Path) -> None:
    for name, (shape, why) in layout.shapes.items():
        if name not in f or not isinstance(f[name], h5py.Dataset):
            raise ElmoWeightsError(f"{path}: dataset '{name}' is missing (needed by {layout.source}: {why})")
        dataset = f[name]
        if tuple(dataset.shape) != shape:
            raise ElmoWeightsError(
                f"{path}: dataset '{name}' has shape {tuple(dataset.shape)} but {layout.source} needs {shape} ({why})"
            )
        if dataset.dtype.kind != "f":
            raise ElmoWeightsError(f"{path}: dataset '{name}' has dtype {dataset.dtype}, expected floats")


def checked_array(value: Any, what: str, shape: Shape, needs: str, why: str = "") -> numpy.ndarray:
    """``value`` (an HDF5 dataset or an array) read as float32, once its shape, dtype
    and values are checked: every weight a biLM loads passes here. The shape and dtype
    are checked before anything is read."""
    if not (hasattr(value, "shape") and isinstance(getattr(value, "dtype", None), numpy.dtype)):
        raise ElmoWeightsError(f"{what} is a {type(value).__name__}, not an array of floats")
    if tuple(value.shape) != shape:
        raise ElmoWeightsError(
            f"{what} has shape {tuple(value.shape)} but {needs} {shape}" + (f" ({why})" if why else "")
        )
    if value.dtype.kind != "f":
        raise ElmoWeightsError(f"{what} has dtype {value.dtype}, expected floats")
    try:
        array = numpy.asarray(value[...], dtype=numpy.float32)
    except OSError as err:
        raise ElmoWeightsError(f"{what} cannot be read (truncated file?): {err}") from err
    if not numpy.isfinite(array).all():
        raise ElmoWeightsError(f"{what} contains NaN or infinite values")
    return array


def _check_no_unexpected(found: List[str], layout: WeightsLayout, path: Path) -> None:
    for name in found:
        option = None if name in layout.shapes else layout.family_option(name)
        if option:
            raise ElmoWeightsError(
                f"{path}: dataset '{name}' is not described by {layout.source} "
                f"(check '{option}': the file holds a larger model than the options say)"
            )


def write_weights(arrays: Dict[str, numpy.ndarray], weight_file: Union[str, Path], dtype: str = "float32") -> None:
    """Write the datasets atomically: a crash never leaves a half-written file.

    ``dtype="float16"`` halves the file (readers upcast to float32).
    """
    if dtype not in ("float32", "float16"):
        raise ElmoWeightsError(f"weight files are float32 or float16, not {dtype!r}")
    path = Path(weight_file)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as f:
            for name, array in arrays.items():
                f.create_dataset(name, data=numpy.asarray(array, dtype=dtype))
