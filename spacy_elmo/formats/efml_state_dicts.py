"""ELMoForManyLangs' ``.pkl`` state dicts: unpickled with ``weights_only=True`` once their
zip members pass ``torch_zip.py``'s checks, so no code in them ever runs; each must be a
plain dict of dense CPU tensors, and fit the entries and shapes its network config implies
(``bilm/efml_network.py``), floats and finite."""

from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..bilm.efml_network import Shape
from ..errors import ElmoWeightsError
from ..files.paths import require_file
from .efml_names import EFML_DIR_HINT
from .torch_zip import check_zip_members


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
