"""bilm-tf's ``weights.hdf5``: dataset names, shapes, checked reading, atomic writing, and the
parameters as the float32 arrays written there (``host_array``).

Only datasets are read (plain float arrays): a weight file cannot run code, and
only its own (no links, no data kept in other files).
"""

import math
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import h5py
import numpy
import torch

from ..errors import ElmoOptionsError, ElmoWeightsError
from ..file_safety import HDF5_READ_ERRORS, atomic_path, one_line_reason, require_file
from .char_ids import N_CHARACTERS
from .options import BILM_DIR_HINT, ElmoOptions

_key = ElmoOptions.json_key  # options.json's names, as error messages spell them

Shape = Tuple[int, ...]
# Ten times the largest published biLM's 93.6 million (4 GB in float32): larger
# options come from a damaged or mistyped file.
MAX_PARAMETERS = 1_000_000_000


def host_array(tensor: torch.Tensor, copy: bool = True) -> numpy.ndarray:
    """``tensor``'s values as a float32 array on the host: its own copy, or (``copy=False``,
    for arrays written straight to a file) sharing a CPU float32 tensor's memory."""
    return tensor.detach().to("cpu", torch.float32, copy=copy).numpy()


def lstm_prefix(direction: int, layer: int) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def expected_shapes(options: ElmoOptions) -> Dict[str, Tuple[Shape, str]]:
    """Every dataset of the file: ``name -> (shape, the options that size it)``."""
    F, P, C, d = options.n_filters, options.projection_dim, options.lstm_dim, options.char_dim
    dim, filters, proj, lstm = (_key(n) for n in ("char_dim", "filters", "projection_dim", "lstm_dim"))
    shapes: Dict[str, Tuple[Shape, str]] = {
        "char_embed": ((N_CHARACTERS - 1, d), f"{dim}={d}"),
    }
    for i, (width, n) in enumerate(options.filters):
        why = f"{filters}[{i}]={[width, n]}, {dim}={d}"
        shapes[f"CNN/W_cnn_{i}"] = ((1, width, d, n), why)
        shapes[f"CNN/b_cnn_{i}"] = ((n,), why)
    for k in range(options.n_highway):
        why = f"{filters} sum to {F}"
        for part in ("transform", "carry"):
            shapes[f"CNN_high_{k}/W_{part}"] = ((F, F), why)
            shapes[f"CNN_high_{k}/b_{part}"] = ((F,), why)
    why = f"{filters} sum to {F}, {proj}={P}"
    shapes["CNN_proj/W_proj"] = ((F, P), why)
    shapes["CNN_proj/b_proj"] = ((P,), f"{proj}={P}")
    for direction in range(2):
        for layer in range(options.n_layers):
            prefix = lstm_prefix(direction, layer)
            why = f"{proj}={P}, {lstm}={C}"
            shapes[f"{prefix}/W_0"] = ((2 * P, 4 * C), why)
            shapes[f"{prefix}/B"] = ((4 * C,), f"{lstm}={C}")
            shapes[f"{prefix}/W_P_0"] = ((C, P), why)
    return shapes


# Families of datasets whose extra members mean the options describe a
# smaller model than the file holds.
_COUNTED = (
    (re.compile(r"^CNN/W_cnn_(\d+)$"), ElmoOptions.json_key("filters")),
    (re.compile(r"^CNN_high_(\d+)/"), ElmoOptions.json_key("n_highway")),
    (re.compile(r"^RNN_[01]/RNN/MultiRNNCell/Cell(\d+)/"), ElmoOptions.json_key("n_layers")),
)


def read_weights(options: ElmoOptions, weight_file: Union[str, Path]) -> Dict[str, numpy.ndarray]:
    """All datasets the options call for, checked for presence, shape and finiteness.
    Every shape is checked before any data is read (and before the caller allocates a
    model), so options that do not fit the file fail at once, whatever their sizes."""
    path = require_file(weight_file, "weight file", BILM_DIR_HINT)
    if not h5py.is_hdf5(str(path)):
        raise ElmoWeightsError(
            f"{path}: not an HDF5 file (expected bilm-tf's weights.hdf5; "
            "an AllenNLP model archive or a PyTorch checkpoint is not a weight file)"
        )
    expected = expected_shapes(options)
    try:
        with h5py.File(path, "r") as f:
            _check_no_unexpected(own_datasets(f, path), expected, options, path)
            _check_shapes(f, expected, options, path)
            return {
                name: checked_array(f[name], f"{path}: dataset '{name}'", shape, f"{options.source} needs", why)
                for name, (shape, why) in expected.items()
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


def _check_shapes(f: h5py.File, expected: Dict[str, Tuple[Shape, str]], options: ElmoOptions, path: Path) -> None:
    for name, (shape, why) in expected.items():
        if name not in f or not isinstance(f[name], h5py.Dataset):
            raise ElmoWeightsError(f"{path}: dataset '{name}' is missing (needed by {options.source}: {why})")
        dataset = f[name]
        if tuple(dataset.shape) != shape:
            raise ElmoWeightsError(
                f"{path}: dataset '{name}' has shape {tuple(dataset.shape)} but {options.source} needs {shape} ({why})"
            )
        if dataset.dtype.kind != "f":
            raise ElmoWeightsError(f"{path}: dataset '{name}' has dtype {dataset.dtype}, expected floats")


def n_parameters(options: ElmoOptions) -> int:
    """How many weights the options describe (the biLM without its LM head)."""
    return sum(math.prod(shape) for shape, _ in expected_shapes(options).values())


def check_model_size(options: ElmoOptions) -> None:
    """Options within every per-option bound can still multiply out to more weights than
    a machine holds: refused before anything is allocated."""
    count = n_parameters(options)
    if count > MAX_PARAMETERS:
        raise ElmoOptionsError(
            f"{options.source}: these sizes ({_key('lstm_dim')} {options.lstm_dim}, {_key('projection_dim')} "
            f"{options.projection_dim}, {_key('n_layers')} {options.n_layers}, ...) make {count:,} weights, "
            f"above the sane bound {MAX_PARAMETERS:,}"
        )


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


def larger_model_option(name: str) -> Optional[str]:
    """The option that counts the family of dataset ``name`` (a filter, highway or LSTM
    layer), if it is in one: an unexpected member means the options describe a smaller model."""
    return next((option for pattern, option in _COUNTED if pattern.match(name)), None)


def _check_no_unexpected(found, expected, options: ElmoOptions, path: Path) -> None:
    for name in found:
        option = None if name in expected else larger_model_option(name)
        if option:
            raise ElmoWeightsError(
                f"{path}: dataset '{name}' is not described by {options.source} "
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
