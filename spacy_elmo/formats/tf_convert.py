"""bilm-tf's training checkpoints to weights.hdf5, as bilm-tf's ``dump_weights`` writes it.

``dump_weights`` (bilm/training.py) builds the model from options.json under the
variable scope ``lm``, restores the checkpoint with a name-based Saver and writes
every trainable variable except the softmax, renamed: the leading ``lm/`` dropped,
``rnn``/``multi_rnn_cell``/``cell_K``/``lstm_cell`` to ``RNN``/``MultiRNNCell``/
``CellK``/``LSTMCell``, an LSTM's ``kernel``/``bias``/``projection/kernel`` to
``W_0``/``B``/``W_P_0``. The optimizer's slots, ``global_step`` and
``train_perplexity`` are not trainable: left out. ``char_embed`` is written as
trained, 261 rows (readers add the padding row). The arrays are copied bit for bit.

One difference: bilm-tf builds a one-layer LSTM without a MultiRNNCell, so
dump_weights names its datasets ``RNN_0/RNN/LSTMCell/...``, which neither
AllenNLP nor spacy-elmo reads; they are written as ``.../MultiRNNCell/Cell0/...``.

Built on the network's layout (``bilm/tf_layout.py``), as every format is: nothing in ``bilm/``
imports a format.
"""

from pathlib import Path
from typing import Dict, List, Tuple, Union

import numpy

from ..bilm.options import ElmoOptions
from ..bilm.tf_layout import check_model_size, expected_shapes, larger_model_option
from ..errors import ElmoCheckpointError
from ..files.atomic import atomic_dir
from ..files.disk_space import full_disk_as, hdf5_bytes, require_free_space
from ..files.paths import require_new_dir
from .bilm_dir import OPTIONS_NAME, WEIGHTS_NAME
from .bilm_tf import checked_array, read_options, write_options, write_weights
from .tf_checkpoint import TensorEntry, TFCheckpoint

SCOPE = "lm/"
_RENAMES = (
    ("/rnn/", "/RNN/"),
    ("/multi_rnn_cell/", "/MultiRNNCell/"),
    ("/cell_", "/Cell"),
    ("/lstm_cell/", "/LSTMCell/"),
)
_SINGLE_CELL = "MultiRNNCell/Cell0/"
_FLOATS = ("DT_FLOAT", "DT_HALF", "DT_DOUBLE")


def dump_weights_name(variable: str) -> str:
    """The dataset name dump_weights gives a checkpoint variable."""
    name = variable
    while name[:1] in ("l", "m", "/"):  # its str.lstrip('lm/'): the characters, not the prefix
        name = name[1:]
    for old, new in _RENAMES:
        name = name.replace(old, new)
    if "/RNN/" in name:
        if "projection" in name:
            name = name.replace("projection/kernel", "W_P_0")
        else:
            name = name.replace("/kernel", "/W_0").replace("/bias", "/B")
    return name


def _our_name(dataset: str, n_layers: int) -> str:
    """A one-layer model's dump_weights name as the readers spell it."""
    if n_layers == 1 and dataset.startswith("RNN_") and "/RNN/LSTMCell/" in dataset:
        return dataset.replace("/RNN/LSTMCell/", f"/RNN/{_SINGLE_CELL}LSTMCell/")
    return dataset


def checkpoint_names(dataset: str, n_layers: int) -> List[str]:
    """The checkpoint names that hold ``dataset``, bilm-tf's own first (for one layer it
    builds no MultiRNNCell; that spelling is accepted after it)."""
    names = [dataset.replace(f"/RNN/{_SINGLE_CELL}", "/RNN/")] if n_layers == 1 else []
    names.append(dataset)
    found = []
    for name in names:
        if name.startswith("RNN_"):
            for old, new in _RENAMES:
                name = name.replace(new, old)
            name = name.replace("/W_P_0", "/projection/kernel").replace("/W_0", "/kernel").replace("/B", "/bias")
        found.append(SCOPE + name)
    return found


def _is_slot(dataset: str, expected) -> bool:
    """An optimizer's slot of a weight (``VAR/Adagrad``, ``VAR/Adam_1``, ...): named after it."""
    parts = dataset.split("/")
    return any("/".join(parts[:k]) in expected for k in range(1, len(parts)))


def _check_no_larger_model(ckpt: TFCheckpoint, options: ElmoOptions, expected) -> None:
    """A weight beyond the options' filters, highway or LSTM layers: the wrong options file.
    (dump_weights would silently leave it out: it builds the graph from the options.)"""
    for variable in ckpt.entries:
        if not variable.startswith(SCOPE) or "softmax" in variable:
            continue
        dataset = _our_name(dump_weights_name(variable), options.n_layers)
        option = None if dataset in expected or _is_slot(dataset, expected) else larger_model_option(dataset)
        if option:
            raise ElmoCheckpointError(
                f"{ckpt.index_path}: variable '{variable}' is not described by {options.source} "
                f"(check '{option}': the checkpoint holds a larger model than the options say)"
            )


def _find_variables(ckpt: TFCheckpoint, options: ElmoOptions) -> Dict[str, Tuple[TensorEntry, str]]:
    """dataset -> (its checkpoint variable, why the options need it); every shape and
    dtype checked before any data is read."""
    if not any(variable.startswith(SCOPE) for variable in ckpt.entries):
        some = ", ".join(sorted(ckpt.entries)[:3])
        raise ElmoCheckpointError(
            f"{ckpt.index_path}: no variable under '{SCOPE}' (bilm-tf's scope; this checkpoint holds {some}, ...): "
            "not a bilm-tf training checkpoint"
        )
    expected = expected_shapes(options)
    _check_no_larger_model(ckpt, options, expected)
    found = {}
    for dataset, (shape, why) in expected.items():
        names = checkpoint_names(dataset, options.n_layers)
        entry = next((ckpt.entries[name] for name in names if name in ckpt.entries), None)
        what = f"{ckpt.index_path}: variable '{entry.name if entry else names[0]}'"
        if entry is None:
            raise ElmoCheckpointError(f"{what} is missing (dataset '{dataset}', needed by {options.source}: {why})")
        if entry.shape != shape:
            raise ElmoCheckpointError(f"{what} has shape {entry.shape} but {options.source} needs {shape} ({why})")
        if entry.dtype_name not in _FLOATS:
            raise ElmoCheckpointError(f"{what} has dtype {entry.dtype_name}, expected floats")
        found[dataset] = (entry, why)
    return found


def checkpoint_arrays(ckpt: TFCheckpoint, options: ElmoOptions) -> Dict[str, numpy.ndarray]:
    """The weights.hdf5 datasets of a bilm-tf checkpoint, as float32 arrays."""
    check_model_size(options)
    variables = _find_variables(ckpt, options)
    return {
        dataset: checked_array(
            ckpt.read(entry.name), f"{ckpt.index_path}: variable '{entry.name}'", entry.shape, "needs", why
        )
        for dataset, (entry, why) in variables.items()
    }


def convert_checkpoint(
    prefix: Union[str, Path], options_file: Union[str, Path], out_dir: Union[str, Path]
) -> Dict[str, numpy.ndarray]:
    """Write ``out_dir`` (options.json + weights.hdf5, a biLM directory) from a bilm-tf
    checkpoint and its options.json; returns the arrays written. ``out_dir`` is written
    whole or not at all (its temporary removed on any failure), never over an existing
    non-empty directory, and not begun without room for it: h5py can crash on a full disk."""
    target = require_new_dir(out_dir, "output directory", ElmoCheckpointError)
    options = read_options(options_file)
    arrays = checkpoint_arrays(TFCheckpoint(prefix), options)
    weights = Path(out_dir) / WEIGHTS_NAME
    with full_disk_as(weights):
        require_free_space(target / WEIGHTS_NAME, hdf5_bytes(arrays.values()))
        with atomic_dir(target) as tmp:
            write_options(options, tmp / OPTIONS_NAME)
            write_weights(arrays, tmp / WEIGHTS_NAME)
    return arrays
