"""Which weights a derived copy was made from: an explicit generation, bumped on every change.

Inference keeps copies derived from the weights: packed or quantized kernels, the
LSTM's input bias with the forget offset folded in, the type cache's token vectors,
the component's cache of whole outputs. Each is keyed on the biLM's generation.
Reading the tensors cannot tell when they change: thinc's ``finish_update`` writes
the optimizer's result into the same storage and assigns it through ``.data``
(same ``data_ptr``, same ``_version``), and torch's fused optimizers update in place
without bumping ``_version``. So whatever changes the weights says so:

* loading (``load_state_dict``, ``load_tf_arrays``), moving (``.to()``) and
  re-initialising bump it here, in the modules that hold the parameters;
* an optimizer step calls ``mark_weights_changed(module)`` (the thinc shim's
  ``finish_update``, pretraining's optimizer hook);
* code that edits the weights in place itself calls ``bilm.mark_weights_changed()``;
  as a safety net, switching a biLM from train to eval mode bumps it too.

Numbers come from one counter per process and a copy (``deepcopy``, pickling) takes a
fresh one, so no two weight states in a process share a generation.
"""

import itertools
from typing import Any, Dict, Iterator

from torch import nn

_COUNTER: Iterator[int] = itertools.count(1)


class WeightsGeneration:
    """A number shared by the modules of one biLM; a new one whenever their weights change."""

    def __init__(self) -> None:
        self.value = next(_COUNTER)

    def bump(self) -> None:
        self.value = next(_COUNTER)

    def __getstate__(self) -> Dict:
        return {}

    def __setstate__(self, state: Dict) -> None:
        self.value = next(_COUNTER)  # a copy's weights change apart from the original's

    def __repr__(self) -> str:
        return f"WeightsGeneration({self.value})"


class TracksWeights(nn.Module):
    """A module whose derived copies (``self._kernels``) are keyed on ``self.generation``
    (shared with the rest of its biLM): loading or moving its parameters bumps it."""

    generation: WeightsGeneration
    _kernels: Any

    def __getstate__(self) -> Dict:
        # The packed copies are a derived cache (and opaque oneDNN/MKL tensors that
        # cannot be copied or pickled): copies rebuild them on first use.
        state = self.__dict__.copy()
        state["_kernels"] = None
        return state

    def _load_from_state_dict(self, *args, **kwargs) -> None:
        super()._load_from_state_dict(*args, **kwargs)
        self.generation.bump()

    def _apply(self, fn, recurse: bool = True):
        result = super()._apply(fn, recurse)
        self.generation.bump()
        return result


def mark_weights_changed(module: nn.Module) -> None:
    """Say that the weights of ``module`` (any module holding biLM parts) changed in place."""
    seen = set()
    for part in module.modules():
        generation = getattr(part, "generation", None)
        if isinstance(generation, WeightsGeneration) and id(generation) not in seen:
            seen.add(id(generation))
            generation.bump()
