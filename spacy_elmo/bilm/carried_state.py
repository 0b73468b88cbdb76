"""A stateful biLM's carried LSTM state: each batch row's final ``(h, c)``, per direction and
layer, handed to the same row of the next stateful batch (as bilm-tf and AllenNLP do), and
exported to and imported from plain arrays for checkpoints."""

from typing import Callable, Dict, List, Optional

import numpy
import torch

from ..errors import ElmoError
from .lstm import State

# Per direction, per layer: the (h, c) of as many rows as the largest batch seen.
States = List[List[State]]


class CarriedState:
    """The state between stateful batches (none until the first)."""

    def __init__(self) -> None:
        self.states: Optional[States] = None

    def reset(self) -> None:
        """Forget it: the next stateful batch starts from zero."""
        self.states = None

    def initial(self, batch_size: int, zero_states: Callable[[int], States]) -> States:
        """The state a batch of ``batch_size`` rows starts from (``zero_states`` for the first)."""
        if self.states is None:
            self.states = zero_states(batch_size)
        initial = []
        for direction in self.states:
            per_layer = []
            for k, (h, c) in enumerate(direction):
                if h.shape[0] < batch_size:  # rows never seen before start at zero
                    h = torch.cat([h, h.new_zeros(batch_size - h.shape[0], h.shape[1])])
                    c = torch.cat([c, c.new_zeros(batch_size - c.shape[0], c.shape[1])])
                    direction[k] = (h, c)
                per_layer.append((h[:batch_size], c[:batch_size]))
            initial.append(per_layer)
        return initial

    def update(self, finals: States) -> None:
        """A batch's final states carried on (``initial`` was called for it)."""
        assert self.states is not None
        for direction, new_direction in zip(self.states, finals):
            for k, ((h, c), (new_h, new_c)) in enumerate(zip(direction, new_direction)):
                rows = new_h.shape[0]
                # A smaller batch updates only its own rows; the others keep theirs.
                h = torch.cat([new_h.detach(), h[rows:]])
                c = torch.cat([new_c.detach(), c[rows:]])
                direction[k] = (h, c)

    def export(self) -> Dict[str, numpy.ndarray]:
        """The state as plain arrays (empty when there is none), for checkpoints."""
        arrays: Dict[str, numpy.ndarray] = {}
        for d, direction in enumerate(self.states or []):
            for k, (h, c) in enumerate(direction):
                arrays[f"{d}_{k}_h"] = h.float().cpu().numpy()
                arrays[f"{d}_{k}_c"] = c.float().cpu().numpy()
        return arrays

    def restore(
        self, arrays: Dict[str, numpy.ndarray], n_layers: int, widths: Dict[str, int], like: torch.Tensor
    ) -> None:
        """An ``export``'s arrays back (checked: every array, its ``widths`` (h, c), its rows),
        with ``like``'s dtype and device; empty arrays: no state."""
        if not arrays:
            self.states = None
            return
        rows = {numpy.shape(array)[0] if numpy.ndim(array) == 2 else -1 for array in arrays.values()}
        for d in range(2):
            for k in range(n_layers):
                for part, width in widths.items():
                    array = arrays.get(f"{d}_{k}_{part}")
                    if array is None or numpy.ndim(array) != 2 or numpy.shape(array)[1] != width or len(rows) != 1:
                        raise ElmoError(
                            f"the saved LSTM state's array {d}_{k}_{part} is missing or not (rows, {width})"
                        )
        self.states = [
            [
                (
                    torch.as_tensor(arrays[f"{d}_{k}_h"], dtype=like.dtype, device=like.device),
                    torch.as_tensor(arrays[f"{d}_{k}_c"], dtype=like.dtype, device=like.device),
                )
                for k in range(n_layers)
            ]
            for d in range(2)
        ]
