"""The biLSTM: TF ``LSTMCell`` with projection and clipping, stacked both ways.

Per step (bilm-tf, gates i, j, f, o in the file, forget bias 1.0 at run time)::

    z = [x, h] W_0 + B
    c = sigmoid(f + 1) * c + sigmoid(i) * tanh(j);   c = clip(c, cell_clip)
    h = (sigmoid(o) * tanh(c)) W_P_0;                 h = clip(h, proj_clip)

Internally W_0 is split into an input part (applied to all time steps at once,
outside the recurrent loop) and a state part, and the gate blocks are stored
as (i, f, o, j) so the three sigmoids are one call.
"""
from typing import List, Optional, Sequence, Tuple

import numpy
import torch
from torch import Tensor, nn

from .options import ElmoOptions

State = Tuple[Tensor, Tensor]  # (h (B, P), c (B, C))
# MKL packs a weight into its GEMM panel layout once; small-batch products
# against it (the recurrent step) then skip the per-call packing and run
# about twice as fast on CPU, with bit-identical results. The hint is the
# batch size the layout is tuned for; any batch size works with it.
_PACK_BATCH_HINT = 128
# file gate blocks (i, j, f, o) -> internal (i, f, o, j)
_FILE_TO_INTERNAL = (0, 2, 3, 1)
_INTERNAL_TO_FILE = (0, 3, 1, 2)
FORGET_BIAS = 1.0


def _permute_gate_blocks(array: numpy.ndarray, order: Sequence[int]) -> numpy.ndarray:
    blocks = numpy.split(array, 4, axis=-1)
    return numpy.concatenate([blocks[k] for k in order], axis=-1)


def _mkl_packing_available() -> bool:
    return torch.backends.mkl.is_available() and hasattr(torch.ops.mkl, "_mkl_linear")


def _packed_linear(inputs: Tensor, transposed: Tensor, packed: Tensor) -> Tensor:
    # The last argument must equal the batch size, or the op silently falls
    # back to an unpacked linear(); a packed B layout does not depend on it.
    return torch.ops.mkl._mkl_linear(inputs, packed, transposed, None, inputs.shape[0])


class ProjectedLstm(nn.Module):
    """One LSTM layer running in one direction over a time-major batch."""

    # Inference on CPU uses MKL-packed copies of the recurrent weights (more
    # memory, ~2x faster steps); set False to save the memory.
    use_packed_weights = True

    def __init__(self, input_dim: int, cell_dim: int, proj_dim: int, cell_clip: float, proj_clip: float):
        super().__init__()
        self.input_dim, self.cell_dim, self.proj_dim = input_dim, cell_dim, proj_dim
        self.cell_clip = float(cell_clip)
        self.proj_clip = float(proj_clip)
        self.input_weight = nn.Parameter(torch.empty(input_dim, 4 * cell_dim))
        self.state_weight = nn.Parameter(torch.empty(proj_dim, 4 * cell_dim))
        self.bias = nn.Parameter(torch.empty(4 * cell_dim))
        self.proj_weight = nn.Parameter(torch.empty(cell_dim, proj_dim))
        offset = torch.zeros(4 * cell_dim)
        offset[cell_dim : 2 * cell_dim] = FORGET_BIAS
        self.register_buffer("forget_offset", offset, persistent=False)
        self._packed: Optional[Tuple[tuple, Tuple[Tensor, Tensor, Tensor, Tensor]]] = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot-uniform like TF's default initializer for LSTMCell kernels."""
        with torch.no_grad():
            fan_in = self.input_dim + self.proj_dim
            bound = (6.0 / (fan_in + 4 * self.cell_dim)) ** 0.5
            nn.init.uniform_(self.input_weight, -bound, bound)
            nn.init.uniform_(self.state_weight, -bound, bound)
            self.bias.zero_()
            bound = (6.0 / (self.cell_dim + self.proj_dim)) ** 0.5
            nn.init.uniform_(self.proj_weight, -bound, bound)

    def __getstate__(self):
        # The packed copies are a derived cache (and opaque MKL tensors that
        # cannot be copied or pickled): copies rebuild them on first use.
        state = self.__dict__.copy()
        state["_packed"] = None
        return state

    def zero_state(self, batch_size: int, like: Tensor) -> State:
        return (
            like.new_zeros(batch_size, self.proj_dim),
            like.new_zeros(batch_size, self.cell_dim),
        )

    def forward(
        self, inputs: Tensor, state: Optional[State] = None, lengths: Optional[Tensor] = None
    ) -> Tuple[Tensor, Optional[State]]:
        """``inputs (T, B, input_dim)`` -> ``(outputs (T, B, P), final state)``.

        The final state is each row's state after its own last real step
        (``lengths``); it is only computed when ``lengths`` is given. Steps past
        a row's length are computed but meaningless: callers ignore them.
        """
        n_steps, batch_size, _ = inputs.shape
        if state is None:
            state = self.zero_state(batch_size, inputs)
        # The input-to-gate matmul for all steps at once, outside the loop.
        input_gates = torch.addmm(
            self.bias + self.forget_offset, inputs.reshape(n_steps * batch_size, -1), self.input_weight
        ).view(n_steps, batch_size, -1)
        if torch.is_grad_enabled() and (input_gates.requires_grad or self.state_weight.requires_grad):
            return self._run_autograd(input_gates, state, lengths)
        return self._run_inplace(input_gates, state, lengths)

    def _packed_weights(self) -> Optional[Tuple[Tensor, Tensor, Tensor, Tensor]]:
        """MKL-packed state and projection weights, rebuilt when the weights change."""
        weights = (self.state_weight, self.proj_weight)
        if not (
            self.use_packed_weights
            and _mkl_packing_available()
            and all(w.device.type == "cpu" and w.dtype == torch.float32 for w in weights)
        ):
            return None
        key = tuple((w.data_ptr(), w._version) for w in weights)
        if self._packed is None or self._packed[0] != key:
            packed = []
            for weight in weights:
                transposed = weight.detach().t().contiguous()  # (out, in), as linear() wants
                packed += [transposed, torch.ops.mkl._mkl_reorder_linear_weight(transposed, _PACK_BATCH_HINT)]
            self._packed = (key, tuple(packed))  # type: ignore[assignment]
        return self._packed[1]  # type: ignore[index]

    def _run_inplace(self, input_gates: Tensor, state: State, lengths: Optional[Tensor]):
        """Inference: every step writes into buffers allocated once (``input_gates`` is consumed)."""
        n_steps, batch_size, _ = input_gates.shape
        C = self.cell_dim
        h, c = state[0], state[1].clone()
        outputs = input_gates.new_empty(n_steps, batch_size, self.proj_dim)
        hidden = input_gates.new_empty(batch_size, C)
        ends = _rows_ending_at(lengths, n_steps)
        final_c = c.clone() if ends else None
        packed = self._packed_weights()
        for t in range(n_steps):
            # The gates are computed in place over this step's input part.
            if packed is not None:
                gates = input_gates[t].add_(_packed_linear(h, packed[0], packed[1]))
            else:
                gates = input_gates[t].addmm_(h, self.state_weight)
            gates[:, : 3 * C].sigmoid_()
            gates[:, 3 * C :].tanh_()
            c.mul_(gates[:, C : 2 * C]).addcmul_(gates[:, :C], gates[:, 3 * C :])
            if self.cell_clip:
                c.clamp_(-self.cell_clip, self.cell_clip)
            torch.tanh(c, out=hidden).mul_(gates[:, 2 * C : 3 * C])
            h = outputs[t]
            if packed is not None:
                h.copy_(_packed_linear(hidden, packed[2], packed[3]))
            else:
                torch.mm(hidden, self.proj_weight, out=h)
            if self.proj_clip:
                h.clamp_(-self.proj_clip, self.proj_clip)
            if ends and t in ends:
                final_c[ends[t]] = c[ends[t]]
        return outputs, self._final_state(outputs, final_c, lengths)

    def _run_autograd(self, input_gates: Tensor, state: State, lengths: Optional[Tensor]):
        n_steps = input_gates.shape[0]
        C = self.cell_dim
        h, c = state
        outputs: List[Tensor] = []
        cells: List[Tensor] = []
        for t in range(n_steps):
            gates = torch.addmm(input_gates[t], h, self.state_weight)
            sig = torch.sigmoid(gates[:, : 3 * C])
            candidate = torch.tanh(gates[:, 3 * C :])
            c = torch.addcmul(sig[:, C : 2 * C] * c, sig[:, :C], candidate)
            if self.cell_clip:
                c = c.clamp(-self.cell_clip, self.cell_clip)
            h = torch.mm(sig[:, 2 * C :] * torch.tanh(c), self.proj_weight)
            if self.proj_clip:
                h = h.clamp(-self.proj_clip, self.proj_clip)
            outputs.append(h)
            if lengths is not None:
                cells.append(c)
        stacked = torch.stack(outputs)
        final_c = torch.stack(cells) if lengths is not None else None
        return stacked, self._final_state(stacked, final_c, lengths, per_step_cells=True)

    @staticmethod
    def _final_state(outputs: Tensor, cells: Optional[Tensor], lengths: Optional[Tensor], per_step_cells: bool = False):
        if lengths is None:
            return None
        rows = torch.arange(outputs.shape[1], device=outputs.device)
        last = (lengths - 1).clamp(min=0).to(outputs.device)
        h = outputs[last, rows]
        c = cells[last, rows] if per_step_cells else cells
        return h, c

    # -- bilm-tf weight layout ------------------------------------------
    def load_tf_arrays(self, kernel: numpy.ndarray, bias: numpy.ndarray, projection: numpy.ndarray) -> None:
        """``W_0 (input + P, 4C)``, ``B (4C,)``, ``W_P_0 (C, P)`` from the file."""
        kernel = _permute_gate_blocks(kernel, _FILE_TO_INTERNAL)
        with torch.no_grad():
            self.input_weight.copy_(torch.from_numpy(kernel[: self.input_dim]))
            self.state_weight.copy_(torch.from_numpy(kernel[self.input_dim :]))
            self.bias.copy_(torch.from_numpy(_permute_gate_blocks(bias, _FILE_TO_INTERNAL)))
            self.proj_weight.copy_(torch.from_numpy(projection))

    def tf_arrays(self) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
        def arr(t: Tensor) -> numpy.ndarray:
            return t.detach().float().cpu().numpy()

        kernel = numpy.concatenate([arr(self.input_weight), arr(self.state_weight)], axis=0)
        return (
            _permute_gate_blocks(kernel, _INTERNAL_TO_FILE),
            _permute_gate_blocks(arr(self.bias), _INTERNAL_TO_FILE),
            arr(self.proj_weight).copy(),
        )


def _rows_ending_at(lengths: Optional[Tensor], n_steps: int):
    """{step: rows whose last real position is that step}, for rows ending early."""
    if lengths is None:
        return {}
    ends = {}
    for row, length in enumerate(lengths.tolist()):
        ends.setdefault(max(length - 1, 0), []).append(row)
    return ends


def reverse_padded(sequences: Tensor, lengths: Tensor) -> Tensor:
    """Reverse each row of a time-major ``(T, B, D)`` batch within its own length.

    Padding stays at the end, so the backward LSTM starts at each row's last
    real position. Applying it twice gives the input back.
    """
    n_steps, batch_size = sequences.shape[:2]
    if bool((lengths == n_steps).all()):
        return sequences.flip(0)
    steps = torch.arange(n_steps, device=sequences.device).unsqueeze(1)  # (T, 1)
    lens = lengths.to(sequences.device).unsqueeze(0)  # (1, B)
    index = torch.where(steps < lens, lens - 1 - steps, steps)
    return sequences.gather(0, index.unsqueeze(-1).expand_as(sequences))


class BiLstm(nn.Module):
    """Forward and backward stacks of ``ProjectedLstm`` with optional residuals."""

    def __init__(self, options: ElmoOptions):
        super().__init__()
        P, C = options.projection_dim, options.lstm_dim

        def stack() -> nn.ModuleList:
            return nn.ModuleList(
                [ProjectedLstm(P, C, P, options.cell_clip, options.proj_clip) for _ in range(options.n_layers)]
            )

        self.forward_layers = stack()
        self.backward_layers = stack()
        self.use_skip_connections = options.use_skip_connections

    def forward(
        self,
        inputs: Tensor,
        lengths: Tensor,
        initial_states: Optional[Sequence[Sequence[State]]] = None,
        return_states: bool = False,
    ) -> Tuple[List[Tensor], Optional[List[List[State]]]]:
        """``inputs (T, B, P)`` -> one ``(T, B, 2P)`` output per layer.

        ``initial_states``/returned states: ``[forward states, backward states]``,
        one ``(h, c)`` per layer.
        """
        reversed_inputs = reverse_padded(inputs, lengths)
        per_direction = []
        finals: List[List[State]] = []
        for d, (layers, layer_input) in enumerate(
            ((self.forward_layers, inputs), (self.backward_layers, reversed_inputs))
        ):
            outputs: List[Tensor] = []
            states: List[State] = []
            for k, layer in enumerate(layers):
                start = initial_states[d][k] if initial_states is not None else None
                output, final = layer(layer_input, start, lengths if return_states else None)
                if self.use_skip_connections and k > 0:
                    output = output + layer_input
                outputs.append(output)
                states.append(final)
                layer_input = output
            per_direction.append(outputs)
            finals.append(states)
        layers_out = [
            torch.cat([fwd, reverse_padded(bwd, lengths)], dim=-1)
            for fwd, bwd in zip(per_direction[0], per_direction[1])
        ]
        return layers_out, (finals if return_states else None)
