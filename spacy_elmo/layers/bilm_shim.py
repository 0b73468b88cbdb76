"""The torch biLM inside thinc: ``PyTorchWrapper_v3``'s model with a shim that knows the biLM.

thinc's ``PyTorchShim`` updates parameters in place through ``.data`` (the storage and
its version counter stay the same), so the biLM cannot see that its weights changed:
this shim says so after every update (``finish_update``), which keys the packed
kernels, the type cache and the component's layer cache on the new weights
(``bilm/generation.py``). It also leaves the module in eval mode after a prediction
(thinc's puts it back in train mode, which would turn the type cache off for every
later ``embed_batch`` on the same module).
"""

from typing import Any, Callable

import torch
from thinc.api import Model, Optimizer
from thinc.layers.pytorchwrapper import forward as pytorch_forward
from thinc.shims import PyTorchShim

from ..bilm.generation import mark_weights_changed


class BilmShim(PyTorchShim):
    def predict(self, inputs) -> Any:
        self._model.eval()
        with torch.no_grad():
            return self._model(*inputs.args, **inputs.kwargs)

    def finish_update(self, optimizer: Optimizer) -> None:
        super().finish_update(optimizer)
        mark_weights_changed(self._model)


def bilm_wrapper(
    module: torch.nn.Module,
    convert_inputs: Callable,
    convert_outputs: Callable,
    serialize_model: Callable[[Any], bytes],
    deserialize_model: Callable[[Any, bytes, torch.device], Any],
) -> Model:
    """What ``PyTorchWrapper_v3`` builds (same name, forward and serialized form), with ``BilmShim``."""
    shim = BilmShim(module, serialize_model=serialize_model, deserialize_model=deserialize_model)
    return Model(
        "pytorch",
        pytorch_forward,
        attrs={"convert_inputs": convert_inputs, "convert_outputs": convert_outputs},
        shims=[shim],
        dims={"nI": None, "nO": None},
    )
