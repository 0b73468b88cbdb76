"""The biLM's weights as bilm-tf names them: each array's name and shape from the options
(what ``weights.hdf5`` and a bilm-tf checkpoint hold, ``weights_layout``), the size bound,
and the parameters as the float32 arrays written there (``host_array``). The files
themselves are ``spacy_elmo/formats/``'s, which read them against this layout."""

import math
import re
from typing import Any, Callable, Dict, NamedTuple, Optional, Sequence, Tuple

import numpy
import torch

from ..errors import ElmoOptionsError
from .char_ids import N_CHARACTERS
from .options import ElmoOptions
from .size_bounds import MAX_PARAMETERS

Shape = Tuple[int, ...]
_key = ElmoOptions.json_key  # options.json's names, as error messages spell them


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


def larger_model_option(name: str) -> Optional[str]:
    """The option that counts the family of dataset ``name`` (a filter, highway or LSTM
    layer), if it is in one: an unexpected member means the options describe a smaller model."""
    return next((option for pattern, option in _COUNTED if pattern.match(name)), None)


class WeightsLayout(NamedTuple):
    """What a weight file must hold: ``name -> (shape, the options that size it)``, the
    options' source (for the messages) and, for a dataset the layout lacks, the option
    that counts its family (a filter, highway or LSTM layer), if any."""

    shapes: Dict[str, Tuple[Shape, str]]
    source: str
    family_option: Callable[[str], Optional[str]]


def weights_layout(options: ElmoOptions) -> WeightsLayout:
    """What a weight file for ``options`` must hold, for the file's reader."""
    return WeightsLayout(expected_shapes(options), options.source, larger_model_option)


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


def lstm_tf_arrays(stacks: Sequence[Sequence[Any]]) -> Dict[str, numpy.ndarray]:
    """The biLSTM's layers (``ProjectedLstm``, per direction) as bilm-tf's datasets."""
    arrays: Dict[str, numpy.ndarray] = {}
    for direction, layers in enumerate(stacks):
        for k, layer in enumerate(layers):
            prefix = lstm_prefix(direction, k)
            arrays[f"{prefix}/W_0"], arrays[f"{prefix}/B"], arrays[f"{prefix}/W_P_0"] = layer.tf_arrays()
    return arrays


def load_lstm_tf_arrays(stacks: Sequence[Sequence[Any]], arrays: Dict[str, numpy.ndarray]) -> None:
    """``lstm_tf_arrays``'s inverse: bilm-tf's datasets (shape-checked by the reader) into the layers."""
    for direction, layers in enumerate(stacks):
        for k, layer in enumerate(layers):
            prefix = lstm_prefix(direction, k)
            layer.load_tf_arrays(arrays[f"{prefix}/W_0"], arrays[f"{prefix}/B"], arrays[f"{prefix}/W_P_0"])
