"""The torch biLM inside thinc: ``PyTorchWrapper_v3``'s model with a shim that knows the biLM.

The shim holds one ``BilmSlot`` for the model's whole life; the biLM is the slot's
submodule, set when the weights arrive (a config with null sizes builds no biLM) and
replaced by loading: torch's own submodule assignment, never a write into thinc's shim.

thinc's ``PyTorchShim`` updates parameters in place through ``.data`` (the storage and
its version counter stay the same), so the biLM cannot see that its weights changed:
this shim says so after every update that stepped them (``finish_update``), which keys the packed
kernels, the type cache and the component's layer cache on the new weights
(``bilm/generation.py``). It also leaves the module in eval mode after a prediction
(thinc's puts it back in train mode, which would turn the type cache off for every
later ``embed_batch`` on the same module).
"""

from functools import partial
from typing import Any, Callable, Optional

import torch
from thinc.api import Model, Optimizer
from thinc.layers.pytorchwrapper import forward as pytorch_forward
from thinc.shims import PyTorchShim

from ..bilm.generation import mark_weights_changed
from ..errors import ElmoNoWeightsError


class BilmSlot(torch.nn.Module):
    """The module thinc's shim holds: the biLM (``self.bilm``) once there is one."""

    bilm: Optional[torch.nn.Module]

    def __init__(self, bilm: Optional[torch.nn.Module] = None) -> None:
        super().__init__()
        self.register_module("bilm", bilm)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self.bilm is None:
            raise ElmoNoWeightsError("the ELMo biLM has no weights yet: it cannot run")
        return self.bilm(*args, **kwargs)


class BilmShim(PyTorchShim):
    def predict(self, inputs) -> Any:
        self._model.eval()
        with torch.no_grad():
            return self._model(*inputs.args, **inputs.kwargs)

    def finish_update(self, optimizer: Optimizer) -> None:
        # thinc's shim steps exactly the parameters that have a gradient (once made, a
        # zeroed one stays): a frozen biLM has none, so its caches must survive the step.
        stepped = any(param.grad is not None for param in self._model.parameters())
        super().finish_update(optimizer)
        if stepped:
            mark_weights_changed(self._model)


def bilm_wrapper(
    bilm: Optional[torch.nn.Module],
    convert_inputs: Callable,
    convert_outputs: Callable,
    serialize_bilm: Callable[[Any], bytes],
    deserialize_bilm: Callable[[Any, bytes, torch.device], Any],
    on_loaded: Callable[[torch.nn.Module], None],
) -> Model:
    """What ``PyTorchWrapper_v3`` builds (same name, forward and serialized form), with
    ``BilmShim`` holding ``BilmSlot(bilm)``; the (de)serializers see the biLM, not the
    slot, and ``on_loaded`` is given each biLM a load puts in the slot.

    Built here rather than by ``PyTorchWrapper_v3``, which takes no shim class: ours marks
    the weights changed after a step and keeps the biLM in eval mode. thinc's default
    (de)serializers torch.save/torch.load the module (a pickle), where a saved biLM is
    plain arrays (``bilm_serialization.py``). The hooks are module-level functions bound
    with ``functools.partial``, not closures, so the model pickles (``n_process`` under spawn)."""
    shim = BilmShim(
        BilmSlot(bilm),
        serialize_model=partial(_serialize_slot, serialize_bilm),
        deserialize_model=partial(_deserialize_slot, deserialize_bilm, on_loaded),
    )
    return Model(
        "pytorch",
        pytorch_forward,
        attrs={"convert_inputs": convert_inputs, "convert_outputs": convert_outputs},
        shims=[shim],
        dims={"nI": None, "nO": None},
    )


def _serialize_slot(serialize_bilm: Callable[[Any], bytes], slot: BilmSlot) -> bytes:
    return serialize_bilm(slot.bilm)


def _deserialize_slot(
    deserialize_bilm: Callable[[Any, bytes, torch.device], Any],
    on_loaded: Callable[[torch.nn.Module], None],
    slot: BilmSlot,
    data: bytes,
    device: torch.device,
) -> BilmSlot:
    slot.bilm = deserialize_bilm(slot.bilm, data, device)
    if slot.bilm is not None:
        on_loaded(slot.bilm)
    return slot


def bilm_slot(wrapper: Model) -> BilmSlot:
    """The slot ``bilm_wrapper`` gave its shim (thinc keeps a shim's module in ``_model``)."""
    return wrapper.shims[0]._model
