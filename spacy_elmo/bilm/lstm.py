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
            if lengths is None and not torch.is_autocast_enabled(input_gates.device.type):
                # Training: the whole sequence in one autograd node (hand-written BPTT).
                outputs = _FusedLstmSequence.apply(
                    input_gates, state[0], state[1], self.state_weight, self.proj_weight, self.cell_clip, self.proj_clip
                )
                return outputs, None
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


class _FusedLstmSequence(torch.autograd.Function):
    """All steps of one ``ProjectedLstm`` as a single autograd node.

    Autograd over the step loop records ~15 nodes per step and runs their
    backward one small op at a time; here the backward is written out
    (BPTT), the weight gradients are two GEMMs over all steps, and each step's
    activations are kept in preallocated buffers. Same maths as
    ``ProjectedLstm._run_autograd`` (the tests compare the two).
    """

    @staticmethod
    def forward(ctx, input_gates, h0, c0, state_weight, proj_weight, cell_clip, proj_clip):
        n_steps, batch_size, four_c = input_gates.shape
        C = four_c // 4
        P = proj_weight.shape[1]
        acts = input_gates.new_empty(n_steps, batch_size, four_c)  # sigmoid(i, f, o), tanh(j)
        cells = input_gates.new_empty(n_steps + 1, batch_size, C)  # c_{t-1} for t = 0..T
        hiddens = input_gates.new_empty(n_steps + 1, batch_size, P)  # h_{t-1} for t = 0..T
        mixed = input_gates.new_empty(n_steps, batch_size, C)  # o * tanh(c), before the projection
        tanh_cells = input_gates.new_empty(n_steps, batch_size, C)
        cells[0] = c0
        hiddens[0] = h0
        state_mm = _step_matmul(state_weight)
        proj_mm = _step_matmul(proj_weight)
        for t in range(n_steps):
            gates = torch.add(input_gates[t], state_mm(hiddens[t]), out=acts[t])
            gates[:, : 3 * C].sigmoid_()
            gates[:, 3 * C :].tanh_()
            c = torch.mul(gates[:, C : 2 * C], cells[t], out=cells[t + 1])
            c.addcmul_(gates[:, :C], gates[:, 3 * C :])
            if cell_clip:
                c.clamp_(-cell_clip, cell_clip)
            torch.mul(torch.tanh(c, out=tanh_cells[t]), gates[:, 2 * C : 3 * C], out=mixed[t])
            h = hiddens[t + 1]
            h.copy_(proj_mm(mixed[t]))
            if proj_clip:
                h.clamp_(-proj_clip, proj_clip)
        # Where a clip bound was reached the gradient stops. (Read off the clipped
        # values: a value exactly at the bound before clipping, which torch.clamp
        # would let through, is vanishingly rare.)
        cell_kept = cells[1:].abs() < cell_clip if cell_clip else None
        proj_kept = hiddens[1:].abs() < proj_clip if proj_clip else None
        ctx.save_for_backward(acts, cells, tanh_cells, hiddens, mixed, cell_kept, proj_kept, state_weight, proj_weight)
        return hiddens[1:].clone()

    @staticmethod
    def backward(ctx, grad_outputs):
        acts, cells, tanh_cells, hiddens, mixed, cell_kept, proj_kept, state_weight, proj_weight = ctx.saved_tensors
        n_steps, batch_size, four_c = acts.shape
        C = four_c // 4
        grad_gates = acts.new_empty(n_steps, batch_size, four_c)
        grad_proj_in = grad_outputs.new_empty(n_steps, batch_size, hiddens.shape[-1])
        grad_h = grad_outputs.new_zeros(batch_size, hiddens.shape[-1])
        grad_c = acts.new_zeros(batch_size, C)
        proj_t_mm, state_t_mm = _step_matmul(proj_weight.t()), _step_matmul(state_weight.t())
        for t in range(n_steps - 1, -1, -1):
            i, f, o, j = acts[t, :, :C], acts[t, :, C : 2 * C], acts[t, :, 2 * C : 3 * C], acts[t, :, 3 * C :]
            dh = torch.add(grad_outputs[t], grad_h, out=grad_proj_in[t])
            if proj_kept is not None:
                dh.mul_(proj_kept[t])
            d_mixed = proj_t_mm(dh)
            tanh_c = tanh_cells[t]
            g = grad_gates[t]
            # o: d_mixed * tanh(c) * o (1 - o)
            torch.mul(d_mixed, tanh_c, out=g[:, 2 * C : 3 * C]).mul_(o * (1 - o))
            # c: from the output and from the next step
            dc = d_mixed.mul_(o).mul_(1 - tanh_c * tanh_c).add_(grad_c)
            if cell_kept is not None:
                dc.mul_(cell_kept[t])
            torch.mul(dc, j, out=g[:, :C]).mul_(i * (1 - i))
            torch.mul(dc, cells[t], out=g[:, C : 2 * C]).mul_(f * (1 - f))
            torch.mul(dc, i, out=g[:, 3 * C :]).mul_(1 - j * j)
            grad_c = dc.mul_(f)
            grad_h = state_t_mm(g)
        flat_gates = grad_gates.view(n_steps * batch_size, four_c)
        grad_state_weight = torch.mm(hiddens[:-1].reshape(n_steps * batch_size, -1).t(), flat_gates)
        grad_proj_weight = torch.mm(mixed.view(n_steps * batch_size, C).t(), grad_proj_in.view(n_steps * batch_size, -1))
        return grad_gates, grad_h, grad_c, grad_state_weight, grad_proj_weight, None, None


def _step_matmul(weight: Tensor):
    """``x -> x @ weight`` for the many small products of a recurrent loop:
    MKL-packed once when available (about 2x faster per step on CPU)."""
    if weight.device.type == "cpu" and weight.dtype == torch.float32 and _mkl_packing_available():
        transposed = weight.t().contiguous()
        packed = torch.ops.mkl._mkl_reorder_linear_weight(transposed, _PACK_BATCH_HINT)
        return lambda x: _packed_linear(x, transposed, packed)
    return lambda x: torch.mm(x, weight)


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
        dropout: float = 0.0,
    ) -> Tuple[List[Tensor], Optional[List[List[State]]]]:
        """``inputs (T, B, P)`` -> one ``(T, B, 2P)`` output per layer.

        ``initial_states``/returned states: ``[forward states, backward states]``,
        one ``(h, c)`` per layer. ``dropout`` (training) drops each layer's LSTM
        input, as bilm-tf's input dropout; the residual adds the undropped input.
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
                lstm_input = nn.functional.dropout(layer_input, dropout) if dropout else layer_input
                output, final = layer(lstm_input, start, lengths if return_states else None)
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
