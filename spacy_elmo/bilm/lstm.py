"""The biLSTM: TF ``LSTMCell`` with projection and clipping, stacked both ways.

Per step (bilm-tf, gates i, j, f, o in the file, forget bias 1.0 at run time)::

    z = [x, h] W_0 + B
    c = sigmoid(f + 1) * c + sigmoid(i) * tanh(j);   c = clip(c, cell_clip)
    h = (sigmoid(o) * tanh(c)) W_P_0;                 h = clip(h, proj_clip)

Internally W_0 is split into an input part (applied to all time steps at once,
outside the recurrent loop) and a state part, and the gate blocks are stored
as (i, f, o, j) so the three sigmoids are one call.
"""

from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy
import torch
from torch import Tensor, nn

from . import private_torch
from .generation import TracksWeights, WeightsGeneration
from .kernels import LinearKernel, packed_linear
from .options import ElmoOptions
from .precision import Precision
from .tf_layout import host_array

State = Tuple[Tensor, Tensor]  # (h (B, P), c (B, C))
# Inference computes the input-to-gate products a chunk of steps at a time:
# big enough for an efficient GEMM (M = steps x batch), small enough (bytes)
# that the buffer is reused from the heap instead of page-faulted in afresh
# on every call (a fresh 60 MB buffer costs as much as a third of its GEMM).
INPUT_CHUNK_BYTES = 16 * 2**20
# file gate blocks (i, j, f, o) -> internal (i, f, o, j)
_FILE_TO_INTERNAL = (0, 2, 3, 1)
_INTERNAL_TO_FILE = (0, 3, 1, 2)
FORGET_BIAS = 1.0


def _public_sigmoid_backward_into(grad: Tensor, s: Tensor, grad_input: Tensor) -> Tensor:
    return torch.mul(grad, s * (1 - s), out=grad_input)


def _public_tanh_backward(grad: Tensor, t: Tensor) -> Tensor:
    return grad * (1 - t * t)


def _public_tanh_backward_into(grad: Tensor, t: Tensor, grad_input: Tensor) -> Tensor:
    return torch.mul(grad, 1 - t * t, out=grad_input)


def _activation_backwards() -> Tuple[Callable[..., Tensor], Callable[..., Tensor], Callable[..., Tensor]]:
    """grad * s (1 - s) into a tensor, grad * (1 - t^2), and the same into a tensor, given the
    outputs s, t: aten's one-pass kernels where this torch has them (``private_torch``), else
    public calls with the same results to 1e-6."""
    if private_torch.available().aten_backward:
        aten = torch.ops.aten
        return aten.sigmoid_backward.grad_input, aten.tanh_backward.default, aten.tanh_backward.grad_input
    return _public_sigmoid_backward_into, _public_tanh_backward, _public_tanh_backward_into


def _permute_gate_blocks(array: numpy.ndarray, order: Sequence[int]) -> numpy.ndarray:
    blocks = numpy.split(array, 4, axis=-1)
    return numpy.concatenate([blocks[k] for k in order], axis=-1)


class ProjectedLstm(TracksWeights):
    """One LSTM layer running in one direction over a time-major batch."""

    # Inference on CPU uses packed copies of the weights (oneDNN or MKL layout:
    # more memory, ~2x faster recurrent steps); set False to save the memory.
    use_packed_weights = True
    forget_offset: Tensor  # a buffer

    def __init__(
        self,
        input_dim: int,
        cell_dim: int,
        proj_dim: int,
        cell_clip: float,
        proj_clip: float,
        generation: Optional[WeightsGeneration] = None,
        forget_bias: float = FORGET_BIAS,
    ):
        super().__init__()
        # Shared with the biLM's other modules: the packed kernels are keyed on it.
        self.generation = generation or WeightsGeneration()
        self.input_dim, self.cell_dim, self.proj_dim = input_dim, cell_dim, proj_dim
        self.cell_clip = float(cell_clip)
        self.proj_clip = float(proj_clip)
        self.input_weight = nn.Parameter(torch.empty(input_dim, 4 * cell_dim))
        self.state_weight = nn.Parameter(torch.empty(proj_dim, 4 * cell_dim))
        self.bias = nn.Parameter(torch.empty(4 * cell_dim))
        self.proj_weight = nn.Parameter(torch.empty(cell_dim, proj_dim))
        offset = torch.zeros(4 * cell_dim)
        offset[cell_dim : 2 * cell_dim] = forget_bias
        self.register_buffer("forget_offset", offset, persistent=False)
        self.precision = Precision.FP32
        self._kernels: Optional[Tuple[tuple, Tuple[LinearKernel, LinearKernel, LinearKernel]]] = None
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
        self.generation.bump()

    def zero_state(self, batch_size: int, like: Tensor) -> State:
        return (
            like.new_zeros(batch_size, self.proj_dim),
            like.new_zeros(batch_size, self.cell_dim),
        )

    def forward(
        self,
        inputs: Tensor,
        state: Optional[State] = None,
        lengths: Optional[Tensor] = None,
        trains: Optional[bool] = None,
    ) -> Tuple[Tensor, Optional[State]]:
        """``inputs (T, B, input_dim)`` -> ``(outputs (T, B, P), final state)``.

        The final state is each row's state after its own last real step
        (``lengths``); it is only computed when ``lengths`` is given. Steps past
        a row's length are computed but meaningless: callers ignore them.
        ``trains``: the biLM's one training-or-inference decision for its whole forward
        (``ElmoBiLM.runs_training``); None, for a layer run on its own, decides it here.
        """
        n_steps, batch_size, _ = inputs.shape
        if state is None:
            state = self.zero_state(batch_size, inputs)
        if trains is None:
            trains = torch.is_grad_enabled() and (
                inputs.requires_grad or any(p.requires_grad for p in self.parameters())
            )
        if not trains:
            return self._run_inplace(inputs, state, lengths)
        return self._run_fused(inputs, state, lengths)

    def _run_fused(self, inputs: Tensor, state: State, lengths: Optional[Tensor]) -> Tuple[Tensor, Optional[State]]:
        """Training: the whole sequence in one autograd node (hand-written BPTT), fp32, or
        with bf16 GEMM operands under bf16 autocast (the gates, cell state and gradients
        stay fp32) instead of autocast casting ~15 small ops per step. Under another
        autocast dtype (fp16) it runs fp32. With ``lengths`` the node also returns each
        row's final state, without gradient (callers carry it detached)."""
        n_steps, batch_size, _ = inputs.shape
        device_type = inputs.device.type
        autocast_dtype = torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None
        precision = Precision.BF16 if autocast_dtype == torch.bfloat16 else Precision.FP32
        # The bias goes into each step's GEMM in the node: addmm would spend a pass over
        # all steps' gates broadcasting it.
        bias = self.bias + self.forget_offset
        last = (lengths - 1).clamp(min=0).to(inputs.device) if lengths is not None else None
        with torch.autocast(device_type, enabled=False):
            flat_inputs = inputs.reshape(n_steps * batch_size, -1)
            input_gates = _gemm(flat_inputs, self.input_weight, precision).view(n_steps, batch_size, -1)
            results = _FusedLstmSequence.apply(
                input_gates,
                state[0].float(),
                state[1].float(),
                bias,
                self.state_weight,
                self.proj_weight,
                self.cell_clip,
                self.proj_clip,
                precision,
                last,
            )
        outputs, final = (results[0], (results[1], results[2])) if last is not None else (results, None)
        # In autocast's dtype, as its matmuls return it: every layer after the LSTM (the
        # LM heads, torch's adaptive softmax among them) sees the dtypes it expects.
        return (outputs.to(autocast_dtype) if autocast_dtype is not None else outputs), final

    def set_precision(self, precision: Precision) -> None:
        """FP32 (exact), INT8 (quantized copies of the weights) or BF16 (bfloat16 copies; the
        cell state and outputs stay fp32), the last two inference only; resolved where it was
        chosen (``ElmoBiLM.set_precision``)."""
        self.precision = precision
        self._kernels = None

    def _inference_kernels(self) -> Tuple[LinearKernel, LinearKernel, LinearKernel]:
        """Packed input, recurrent and projection matmuls, rebuilt when the weights change."""
        key = (self.precision, self.use_packed_weights, self.generation.value)
        if self._kernels is None or self._kernels[0] != key:

            def pack(weight: Tensor, bias: Optional[Tensor] = None) -> LinearKernel:
                return packed_linear(weight, bias, self.precision, packed=self.use_packed_weights)

            kernels = (
                pack(self.input_weight, self.bias + self.forget_offset),
                pack(self.state_weight),
                pack(self.proj_weight),
            )
            self._kernels = (key, kernels)
        return self._kernels[1]

    def _run_inplace(self, inputs: Tensor, state: State, lengths: Optional[Tensor]):
        """Inference: no autograd, packed kernels, the input matmul a chunk of steps at a time."""
        n_steps, batch_size, _ = inputs.shape
        C = self.cell_dim
        input_mm, state_mm, proj_mm = self._inference_kernels()
        h, c = state[0], state[1].clone()
        outputs = inputs.new_empty(n_steps, batch_size, self.proj_dim)
        hidden = inputs.new_empty(batch_size, C)
        ends = _rows_ending_at(lengths, n_steps)
        final_c = c.clone() if ends else None
        flat_inputs = inputs.reshape(n_steps * batch_size, -1)
        chunk = max(1, INPUT_CHUNK_BYTES // (batch_size * 4 * C * inputs.element_size()))
        for first in range(0, n_steps, chunk):
            input_gates = input_mm(flat_inputs[first * batch_size : (first + chunk) * batch_size])
            for t in range(first, min(first + chunk, n_steps)):
                row = (t - first) * batch_size
                gates = state_mm(h, add=input_gates[row : row + batch_size])
                gates[:, : 3 * C].sigmoid_()
                gates[:, 3 * C :].tanh_()
                c.mul_(gates[:, C : 2 * C]).addcmul_(gates[:, :C], gates[:, 3 * C :])
                if self.cell_clip:
                    c.clamp_(-self.cell_clip, self.cell_clip)
                torch.tanh(c, out=hidden).mul_(gates[:, 2 * C : 3 * C])
                h = outputs[t]
                h.copy_(proj_mm(hidden))
                if self.proj_clip:
                    h.clamp_(-self.proj_clip, self.proj_clip)
                if final_c is not None and t in ends:
                    final_c[ends[t]] = c[ends[t]]
        return outputs, self._final_state(outputs, final_c, lengths)

    @staticmethod
    def _final_state(outputs: Tensor, final_c: Optional[Tensor], lengths: Optional[Tensor]) -> Optional[State]:
        if lengths is None:
            return None
        assert final_c is not None  # kept whenever lengths are given
        rows = torch.arange(outputs.shape[1], device=outputs.device)
        return outputs[(lengths - 1).clamp(min=0).to(outputs.device), rows], final_c

    # -- bilm-tf weight layout ------------------------------------------
    def load_tf_arrays(self, kernel: numpy.ndarray, bias: numpy.ndarray, projection: numpy.ndarray) -> None:
        """``W_0 (input + P, 4C)``, ``B (4C,)``, ``W_P_0 (C, P)`` from the file."""
        kernel = _permute_gate_blocks(kernel, _FILE_TO_INTERNAL)
        with torch.no_grad():
            self.input_weight.copy_(torch.from_numpy(kernel[: self.input_dim]))
            self.state_weight.copy_(torch.from_numpy(kernel[self.input_dim :]))
            self.bias.copy_(torch.from_numpy(_permute_gate_blocks(bias, _FILE_TO_INTERNAL)))
            self.proj_weight.copy_(torch.from_numpy(projection))
        self.generation.bump()

    def tf_arrays(self) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
        kernel = numpy.concatenate(
            [host_array(self.input_weight, copy=False), host_array(self.state_weight, copy=False)]
        )
        return (
            _permute_gate_blocks(kernel, _INTERNAL_TO_FILE),
            _permute_gate_blocks(host_array(self.bias, copy=False), _INTERNAL_TO_FILE),
            host_array(self.proj_weight),
        )


class _FusedLstmSequence(torch.autograd.Function):
    """All steps of one ``ProjectedLstm`` as a single autograd node.

    Autograd over the step loop records ~15 nodes per step and runs their
    backward one small op at a time; here the backward is written out
    (BPTT), the weight gradients are two GEMMs over all steps, and each step's
    activations are kept (the gates as the step's GEMM returned them, with the
    bias and the input part fused into it: no copy). Same maths as
    the plain autograd step loop (tests/lstm_reference.py: the tests compare the two).

    With bf16 GEMM operands every bf16 value is widened to fp32 once, into a
    buffer of the node's (a mixed-dtype op would allocate and fill a widened
    copy of its bf16 operand first), and the GEMMs' bf16 operands (o * tanh(c),
    the gate gradients) are rounded once, when they are made, and kept for the
    weight gradients: no whole-sequence cast forward or backward.
    """

    @staticmethod
    def forward(ctx, input_gates, h0, c0, bias, state_weight, proj_weight, cell_clip, proj_clip, precision, last):
        """``input_gates (T, B, 4C)``: the inputs' part of the gates, without ``bias (4C,)``, fp32
        (``precision`` "fp32") or as the bf16 GEMM returned it ("bf16": bf16 GEMM operands;
        the gates, cell state and outputs are fp32 either way). ``last (B,)`` (or None): each
        row's last real step, whose ``(h, c)`` are returned too, without gradient."""
        n_steps, batch_size, four_c = input_gates.shape
        C = four_c // 4
        P = proj_weight.shape[1]
        bf16 = precision is Precision.BF16
        state = dict(dtype=torch.float32, device=input_gates.device)  # fp32 under bf16 too
        cells = torch.empty(n_steps + 1, batch_size, C, **state)  # c_{t-1} for t = 0..T
        hiddens = torch.empty(n_steps + 1, batch_size, P, **state)  # h_{t-1} for t = 0..T
        # o * tanh(c), before the projection: the projection's operand, in the GEMMs' dtype
        # (bf16: rounded once, here)
        mixed = input_gates.new_empty(n_steps, batch_size, C)
        tanh_cells = torch.empty(n_steps, batch_size, C, **state)
        cells[0] = c0
        hiddens[0] = h0
        state_mm = packed_linear(state_weight, bias, precision)
        proj_mm = packed_linear(proj_weight, precision=precision)
        acts: Union[_Bf16Gates, _Fp32Gates]
        acts = _Bf16Gates(input_gates, bias, state_mm) if bf16 else _Fp32Gates(input_gates, state_mm)
        mixed_fp32 = torch.empty(batch_size, C, **state) if bf16 else None
        for t in range(n_steps):
            gates = acts.step(t, hiddens[t])
            gates[:, : 3 * C].sigmoid_()
            gates[:, 3 * C :].tanh_()
            c = torch.mul(gates[:, C : 2 * C], cells[t], out=cells[t + 1])
            c.addcmul_(gates[:, :C], gates[:, 3 * C :])
            if cell_clip:
                c.clamp_(-cell_clip, cell_clip)
            o_tanh_c = mixed_fp32 if mixed_fp32 is not None else mixed[t]
            torch.mul(torch.tanh(c, out=tanh_cells[t]), gates[:, 2 * C : 3 * C], out=o_tanh_c)
            h = hiddens[t + 1]
            if bf16:
                h.copy_(proj_mm.bf16_product(mixed[t].copy_(o_tanh_c)))
            else:
                h.copy_(proj_mm(o_tanh_c))
            if proj_clip:
                h.clamp_(-proj_clip, proj_clip)
        # Where a clip bound was reached the gradient stops. (Read off the clipped
        # values: a value exactly at the bound before clipping, which torch.clamp
        # would let through, is vanishingly rare.)
        cell_kept = cells[1:].abs() < cell_clip if cell_clip else None
        proj_kept = hiddens[1:].abs() < proj_clip if proj_clip else None
        # Intermediates may live on ctx; inputs and outputs must be saved.
        ctx.acts, ctx.precision = acts.kept, precision
        ctx.save_for_backward(cells, tanh_cells, hiddens, mixed, cell_kept, proj_kept, state_weight, proj_weight)
        if last is None:
            return hiddens[1:].clone()
        rows = torch.arange(batch_size, device=last.device)
        final_h, final_c = hiddens[last + 1, rows], cells[last + 1, rows]
        ctx.mark_non_differentiable(final_h, final_c)
        return hiddens[1:].clone(), final_h, final_c

    @staticmethod
    def backward(ctx, grad_outputs, *_final_state_grads):
        cells, tanh_cells, hiddens, mixed, cell_kept, proj_kept, state_weight, proj_weight = ctx.saved_tensors
        acts = ctx.acts
        n_steps, batch_size, C = len(acts), grad_outputs.shape[1], cells.shape[-1]
        precision = ctx.precision
        grad_gates = cells.new_empty(n_steps, batch_size, 4 * C)
        # bf16: each step's gate gradients rounded once, the operand of its GEMM and of the
        # weight gradient's, and the input gates' gradient (they are bf16 then: the GEMM's dtype)
        gemm_grad_gates = (
            torch.empty_like(grad_gates, dtype=torch.bfloat16) if precision is Precision.BF16 else grad_gates
        )
        grad_proj_in = grad_outputs.new_empty(n_steps, batch_size, hiddens.shape[-1])
        grad_h = grad_outputs.new_zeros(batch_size, hiddens.shape[-1])
        grad_c = cells.new_zeros(batch_size, C)
        proj_t_mm = packed_linear(proj_weight.t(), precision=precision)
        state_t_mm = packed_linear(state_weight.t(), precision=precision)
        sigmoid_backward_into, tanh_backward, tanh_backward_into = _activation_backwards()
        # Masks as floats once, not a bool-to-float promotion on every step.
        proj_kept = proj_kept.to(grad_outputs.dtype) if proj_kept is not None else None
        cell_kept = cell_kept.to(cells.dtype) if cell_kept is not None else None
        for t in range(n_steps - 1, -1, -1):
            gates = acts[t]
            i, f, o, j = gates[:, :C], gates[:, C : 2 * C], gates[:, 2 * C : 3 * C], gates[:, 3 * C :]
            dh = torch.add(grad_outputs[t], grad_h, out=grad_proj_in[t])
            if proj_kept is not None:
                dh.mul_(proj_kept[t])
            d_mixed = proj_t_mm(dh)
            tanh_c = tanh_cells[t]
            g = grad_gates[t]
            # Gradients w.r.t. the gates' outputs, then through sigmoid/tanh with
            # aten's one-pass *_backward kernels (fewer passes over (B, C) than
            # spelling out s (1 - s) and 1 - t^2).
            torch.mul(d_mixed, tanh_c, out=g[:, 2 * C : 3 * C])
            dc = tanh_backward(d_mixed.mul_(o), tanh_c).add_(grad_c)
            if cell_kept is not None:
                dc.mul_(cell_kept[t])
            torch.mul(dc, j, out=g[:, :C])
            torch.mul(dc, cells[t], out=g[:, C : 2 * C])
            sigmoid_backward_into(g[:, : 3 * C], gates[:, : 3 * C], grad_input=g[:, : 3 * C])
            torch.mul(dc, i, out=g[:, 3 * C :])
            tanh_backward_into(g[:, 3 * C :], j, grad_input=g[:, 3 * C :])
            grad_c = dc.mul_(f)
            grad_h = state_t_mm(gemm_grad_gates[t].copy_(g) if precision is Precision.BF16 else g)
        flat_gates = gemm_grad_gates.view(n_steps * batch_size, 4 * C)
        grad_state_weight = _matmul(hiddens[:-1].reshape(n_steps * batch_size, -1).t(), flat_gates, precision)
        grad_proj_weight = _matmul(
            mixed.view(n_steps * batch_size, C).t(), grad_proj_in.view(n_steps * batch_size, -1), precision
        )
        grad_bias = grad_gates.view(n_steps * batch_size, 4 * C).sum(0)
        return gemm_grad_gates, grad_h, grad_c, grad_bias, grad_state_weight, grad_proj_weight, None, None, None, None


class _Fp32Gates:
    """Each step's gates, fp32: the recurrent GEMM with the bias and the input part fused in."""

    def __init__(self, input_gates: Tensor, state_mm: LinearKernel):
        self.input_gates, self.state_mm = input_gates, state_mm
        self.kept: List[Tensor] = []

    def step(self, t: int, h: Tensor) -> Tensor:
        gates = self.state_mm(h, add=self.input_gates[t])
        self.kept.append(gates)
        return gates


class _Bf16Gates:
    """Each step's gates in fp32 from bf16 GEMM results: the input part and the recurrent
    product widened into buffers (one fp32 tensor for all steps, one reused), then the bias:
    (input + product) + bias, the sums a mixed-dtype add makes, without its copies."""

    def __init__(self, input_gates: Tensor, bias: Tensor, state_mm: LinearKernel):
        self.input_gates, self.bias, self.state_mm = input_gates, bias, state_mm
        self.kept = torch.empty(input_gates.shape, dtype=torch.float32, device=input_gates.device)
        self.widened = torch.empty(input_gates.shape[1:], dtype=torch.float32, device=input_gates.device)

    def step(self, t: int, h: Tensor) -> Tensor:
        gates = self.kept[t].copy_(self.input_gates[t])
        gates.add_(self.widened.copy_(self.state_mm.bf16_product(h)))
        return gates.add_(self.bias)


def _gemm(a: Tensor, b: Tensor, precision: Precision) -> Tensor:
    """``a @ b`` with fp32 or bf16 operands, in their dtype: bf16 as the bf16 GEMM returns it
    (the fused node widens its input gates a step at a time: no whole-sequence cast, nor its
    gradient's). Differentiable: casts are."""
    if precision is Precision.BF16:
        return torch.mm(a.to(torch.bfloat16), b.to(torch.bfloat16))
    return torch.mm(a.float(), b)


def _matmul(a: Tensor, b: Tensor, precision: Precision) -> Tensor:
    """``a @ b`` with fp32 or bf16 operands, an fp32 result."""
    return _gemm(a, b, precision).float()


def _rows_ending_at(lengths: Optional[Tensor], n_steps: int) -> Dict[int, List[int]]:
    """{step: rows whose last real position is that step}, for rows ending early."""
    if lengths is None:
        return {}
    ends: Dict[int, List[int]] = {}
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

    def __init__(
        self, options: ElmoOptions, generation: Optional[WeightsGeneration] = None, forget_bias: float = FORGET_BIAS
    ):
        """``forget_bias``: what each step adds to the forget gate (bilm-tf's 1.0; 0 for a
        network whose bias already holds it, as EFML's does: its bias then loads bit for bit)."""
        super().__init__()
        P, C = options.projection_dim, options.lstm_dim
        generation = generation or WeightsGeneration()

        def stack() -> nn.ModuleList:
            return nn.ModuleList(
                [
                    ProjectedLstm(P, C, P, options.cell_clip, options.proj_clip, generation, forget_bias)
                    for _ in range(options.n_layers)
                ]
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
        trains: Optional[bool] = None,
    ) -> Tuple[List[Tensor], Optional[List[List[State]]]]:
        """``inputs (T, B, P)`` -> one ``(T, B, 2P)`` output per layer.

        ``initial_states``/returned states: ``[forward states, backward states]``,
        one ``(h, c)`` per layer. ``dropout`` (training) drops each layer's LSTM
        input, as bilm-tf's input dropout; the residual adds the undropped input. ``trains``:
        the biLM's one training-or-inference decision, passed to every layer (None: each decides).
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
                output, final = layer(lstm_input, start, lengths if return_states else None, trains)
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
