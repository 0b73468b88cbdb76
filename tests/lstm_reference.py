"""The biLSTM's step loop in plain autograd: the reference the fused training node
(``spacy_elmo.bilm.lstm._FusedLstmSequence``) is checked against."""

from typing import List, Optional, Tuple

import torch
from torch import Tensor

from spacy_elmo.bilm.lstm import ProjectedLstm, State


def autograd_lstm(
    layer: ProjectedLstm, input_gates: Tensor, state: State, lengths: Optional[Tensor] = None
) -> Tuple[Tensor, Optional[State]]:
    """``input_gates (T, B, 4C)`` (the inputs' part of the gates, bias included) -> the
    outputs ``(T, B, P)`` and, with ``lengths``, each row's state after its last real step."""
    C = layer.cell_dim
    h, c = state
    outputs: List[Tensor] = []
    cells: List[Tensor] = []
    for t in range(input_gates.shape[0]):
        gates = torch.addmm(input_gates[t], h, layer.state_weight)
        sig = torch.sigmoid(gates[:, : 3 * C])
        candidate = torch.tanh(gates[:, 3 * C :])
        c = torch.addcmul(sig[:, C : 2 * C] * c, sig[:, :C], candidate)
        if layer.cell_clip:
            c = c.clamp(-layer.cell_clip, layer.cell_clip)
        h = torch.mm(sig[:, 2 * C :] * torch.tanh(c), layer.proj_weight)
        if layer.proj_clip:
            h = h.clamp(-layer.proj_clip, layer.proj_clip)
        outputs.append(h)
        cells.append(c)
    stacked = torch.stack(outputs)
    if lengths is None:
        return stacked, None
    rows = torch.arange(stacked.shape[1])
    last = (lengths - 1).clamp(min=0)
    return stacked, (stacked[last, rows], torch.stack(cells)[last, rows])
