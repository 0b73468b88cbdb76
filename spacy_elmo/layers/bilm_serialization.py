"""The biLM's serialization format inside a saved pipeline (thinc's PyTorchWrapper hooks).

A saved biLM is msgpack: its options and its weights as plain named arrays
(loading never unpickles), with their sha256; float16 when that loses
nothing. Loading checks every array as a weight file's datasets are checked,
and still reads the torch.save zip that spacy-elmo 0.1 wrote.
"""

from io import BytesIO
from typing import Any, Dict

import numpy
import srsly
import torch

from ..bilm import ElmoBiLM, ElmoOptions
from ..errors import ElmoWeightsError
from ..files.hashing import arrays_sha256
from ..formats.bilm_tf import checked_array


def serialize_bilm(bilm: Any) -> bytes:
    """Options and weights as plain msgpack arrays (loading never unpickles), with their
    sha256. float16 when that loses nothing (weights that came from a float16 file and
    were not fine-tuned)."""
    if not isinstance(bilm, ElmoBiLM):
        return srsly.msgpack_dumps({"options": None, "arrays": {}})
    state = {name: value.detach().float().cpu() for name, value in bilm.state_dict().items()}
    lossless = all(torch.equal(value.half().float(), value) for value in state.values())
    dtype = torch.float16 if lossless else torch.float32
    arrays = {name: value.to(dtype).numpy() for name, value in state.items()}
    msg: Dict[str, Any] = {"options": bilm.options.to_dict(), "arrays": arrays}
    spec = bilm.char_encoder.spec()
    if spec is not None:  # an ELMoForManyLangs biLM's network config and vocabularies travel with it
        msg["efml"] = spec
    msg["sha256"] = arrays_sha256(arrays, _checked_header(msg))
    return srsly.msgpack_dumps(msg)


def _checked_header(msg: Dict[str, Any]) -> Any:
    """What the sha256 covers beside the arrays: the options (and an EFML biLM's settings)."""
    return [msg["options"], msg["efml"]] if "efml" in msg else msg["options"]


def deserialize_bilm(current: Any, data: bytes, device: "torch.device") -> Any:
    try:
        msg = srsly.msgpack_loads(data)
    except ValueError as err:
        raise ElmoWeightsError(f"the saved biLM is damaged (not readable msgpack: {err})") from err
    if not isinstance(msg, dict) or "options" not in msg:
        raise ElmoWeightsError("the saved biLM is damaged (no options in it)")
    if msg["options"] is None:
        return current
    if "efml" in msg:
        bilm = ElmoBiLM.from_efml_spec(msg["efml"], "the saved biLM")
    else:
        options = ElmoOptions.from_dict(msg["options"], source="the saved biLM")
        bilm = current if isinstance(current, ElmoBiLM) and current.options == options else ElmoBiLM(options)
    if "arrays" in msg:
        arrays = msg["arrays"]
        _verify_sha256(msg)
    else:
        arrays = {name: tensor.numpy() for name, tensor in _legacy_state(msg).items()}
    bilm.load_state_dict(_checked_state(arrays, bilm))
    if "efml" in msg:
        bilm.restore_legacy_bias(msg["efml"])
    return bilm.to(device).eval()


def _verify_sha256(msg: Dict[str, Any]) -> None:
    """Pipelines saved before the checksum have none; any other must match it."""
    arrays = msg["arrays"]
    if "sha256" not in msg or not isinstance(arrays, dict):
        return
    if not all(isinstance(array, numpy.ndarray) for array in arrays.values()):
        return  # not arrays: _checked_state names the culprit
    if arrays_sha256(arrays, _checked_header(msg)) != msg["sha256"]:
        raise ElmoWeightsError("the saved biLM fails its sha256 check (its bytes changed after it was saved)")


def _checked_state(arrays: Any, bilm: ElmoBiLM) -> Dict[str, torch.Tensor]:
    """The saved arrays as the biLM's state, each checked as a weight file's datasets are."""
    expected = {name: tuple(value.shape) for name, value in bilm.state_dict().items()}
    if not isinstance(arrays, dict):
        raise ElmoWeightsError(f"the saved biLM's arrays are a {type(arrays).__name__}, not a map of named arrays")
    missing, unexpected = sorted(set(expected) - set(arrays)), sorted(set(arrays) - set(expected))
    if missing or unexpected:
        raise ElmoWeightsError(
            f"the saved biLM's arrays do not fit its options (missing: {missing[:3]}, unexpected: {unexpected[:3]})"
        )
    return {
        name: torch.tensor(checked_array(arrays[name], f"the saved biLM's array '{name}'", shape, "its options need"))
        for name, shape in expected.items()
    }


def _legacy_state(msg: Dict[str, Any]) -> Dict[str, Any]:
    """Pipelines saved by spacy-elmo 0.1 hold a torch.save zip; weights_only: tensors, never code."""
    try:
        state = torch.load(BytesIO(msg["state"]), map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many kinds for a damaged zip
        raise ElmoWeightsError(f"the saved biLM is damaged ({type(err).__name__})") from err
    if not isinstance(state, dict) or not all(isinstance(value, torch.Tensor) for value in state.values()):
        raise ElmoWeightsError("the saved biLM is damaged (its state is not a dict of tensors)")
    return {name: value.detach().cpu() for name, value in state.items()}
