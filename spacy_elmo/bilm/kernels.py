"""The biLM's matmuls, packed once per weights generation (generation.py) for the CPU's fastest kernel.

``packed_linear(weight, bias, precision)`` picks the kernel kind once and returns a
``LinearKernel`` computing ``x @ weight + bias (+ add)`` for a ``(in, out)`` weight:

* ``OnednnLinear`` (fp32, ``mkldnn._linear_pointwise``): the weight is reordered
  once into oneDNN's blocked layout; small-batch products (the LSTM's
  recurrent step) then run ~1.8x faster than MKL's packed GEMM on AVX2, and
  the ``+ add`` is fused into the GEMM's output pass. Exact up to fp32
  summation order;
* ``MklLinear`` (fp32, ``mkl._mkl_linear``), where oneDNN is missing;
* ``PlainLinear``: ``torch.addmm`` (GPU, half precision, neither library, a torch without
  the private packed ops (``private_torch.py``), or ``packed=False``);
* ``Int8Linear`` (``precision="int8"``): the weight quantized per output channel,
  activations quantized dynamically per call (fbgemm/oneDNN through
  ``quantized.linear_dynamic``; 8 bits with AVX-512 VNNI, else 7), fp32 in and out;
* ``Bf16OnednnLinear`` / ``Bf16Linear`` (``precision="bf16"``): a bfloat16 copy of the
  weight (oneDNN-packed where the CPU has native bf16, else a plain matrix), the
  activations rounded to bf16 per call, products summed in fp32 by the GEMM, the
  result rounded to bf16 once and returned as fp32 with the bias (and ``add``) added in fp32.

Where a precision may run is decided before (precision.py): the kernels take the
``Precision`` then resolved and trust it; which private torch functions exist is
probed once (private_torch.py).
Packed copies are opaque tensors: they are rebuilt (never pickled or copied)
and only used without autograd.
"""

import warnings
from typing import Optional, Union

import torch
from torch import Tensor

from ..errors import ElmoError
from . import precision as policy
from . import private_torch
from .precision import Precision

# The batch size a packed layout is tuned for; any batch size works with it.
PACK_BATCH_HINT = 64
# False: fp32 kernels built from then on run as plain aten matmuls, what torch's
# FlopCounterMode can count (it knows nothing of the packed oneDNN/MKL ops); the
# FLOP-counting benchmark sets it.
PACKING = True


def _onednn_available() -> bool:
    return private_torch.available().onednn_linear


def _mkl_available() -> bool:
    return private_torch.available().mkl_linear


def packed_linear(
    weight: Tensor,
    bias: Optional[Tensor] = None,
    precision: Union[Precision, str] = Precision.FP32,
    packed: bool = True,
) -> "LinearKernel":
    """``x (B, in) -> x @ weight + bias (+ add)`` in ``precision``, in the fastest kernel
    this device has for it (``packed=False``: a plain matmul for fp32, an unpacked bf16 one).
    The modules pass a ``Precision`` resolved when it was chosen, taken as it is; a name
    (a direct caller's choice) is checked here, once, as any choice is."""
    if not isinstance(precision, Precision):
        precision = policy.check_precision(precision)
    weight = weight.detach()
    bias = bias.detach().contiguous() if bias is not None else None
    packed = packed and PACKING
    on_cpu_fp32 = weight.device.type == "cpu" and weight.dtype == torch.float32
    if precision is Precision.INT8:
        assert on_cpu_fp32, "int8 runs fp32 weights on the CPU (precision.check_precision)"
        return Int8Linear(weight.t().contiguous(), bias)
    if precision is Precision.BF16:
        return _bf16_linear(weight.t().contiguous().to(torch.bfloat16), bias, packed)
    if packed and on_cpu_fp32 and _onednn_available():
        return OnednnLinear(weight.t().contiguous(), bias)
    if packed and on_cpu_fp32 and _mkl_available():
        return MklLinear(weight.t().contiguous(), bias)
    return PlainLinear(weight, bias)


def _bf16_linear(transposed: Tensor, bias: Optional[Tensor], packed: bool) -> "Bf16Kernel":
    """oneDNN's packed bf16 layout where the CPU has native bf16 (the only place its
    bf16 kernels run), else a plain bf16 matrix for torch.mm (emulated on such CPUs)."""
    if packed and transposed.device.type == "cpu" and policy.native_cpu_bf16() and _onednn_available():
        try:
            return Bf16OnednnLinear(transposed, bias)
        except RuntimeError:  # a oneDNN build without bf16 kernels for this CPU
            pass
    return Bf16Linear(transposed.t(), bias)


class LinearKernel:
    """``x (B, in) -> x @ weight + bias (+ add)``, fp32 out; one subclass per kernel kind."""

    kind: str

    def __init__(self, bias: Optional[Tensor]):
        self.bias = bias

    def __call__(self, inputs: Tensor, add: Optional[Tensor] = None) -> Tensor:
        raise NotImplementedError

    def bf16_product(self, inputs: Tensor) -> Tensor:
        """``inputs @ weight`` as a bf16 kernel's GEMM returns it: bf16, without the bias.
        For callers that widen it into a buffer of their own instead of a fresh tensor."""
        raise ElmoError(f"bf16_product needs a bf16 kernel, this one is {self.kind!r}")


class OnednnLinear(LinearKernel):
    kind = "onednn"

    def __init__(self, transposed: Tensor, bias: Optional[Tensor]):
        super().__init__(bias)
        self.packed = torch.ops.mkldnn._reorder_linear_weight(transposed, PACK_BATCH_HINT)

    def __call__(self, inputs: Tensor, add: Optional[Tensor] = None) -> Tensor:
        if add is not None:
            return torch.ops.mkldnn._linear_pointwise.binary(inputs, add, self.packed, self.bias, "add")
        return torch.ops.mkldnn._linear_pointwise(inputs, self.packed, self.bias, "none", [], "")


class MklLinear(LinearKernel):
    kind = "mkl"

    def __init__(self, transposed: Tensor, bias: Optional[Tensor]):
        super().__init__(bias)
        self.transposed = transposed
        self.packed = torch.ops.mkl._mkl_reorder_linear_weight(transposed, PACK_BATCH_HINT)

    def __call__(self, inputs: Tensor, add: Optional[Tensor] = None) -> Tensor:
        # The last argument must equal the batch size, or the op silently
        # falls back to an unpacked linear().
        out = torch.ops.mkl._mkl_linear(inputs, self.packed, self.transposed, self.bias, inputs.shape[0])
        return out.add_(add) if add is not None else out


class PlainLinear(LinearKernel):
    kind = "plain"

    def __init__(self, weight: Tensor, bias: Optional[Tensor]):
        super().__init__(bias)
        self.weight = weight

    def __call__(self, inputs: Tensor, add: Optional[Tensor] = None) -> Tensor:
        out = torch.addmm(self.bias, inputs, self.weight) if self.bias is not None else inputs @ self.weight
        return out.add_(add) if add is not None else out


class Int8Linear(LinearKernel):
    kind = "int8"

    def __init__(self, transposed: Tensor, bias: Optional[Tensor]):
        super().__init__(bias)
        self.packed = _quantize_per_channel(transposed, bias)
        self.reduce_range = policy.int8_reduce_range()

    def __call__(self, inputs: Tensor, add: Optional[Tensor] = None) -> Tensor:
        out = torch.ops.quantized.linear_dynamic(inputs, self.packed, self.reduce_range)
        return out.add_(add) if add is not None else out


class Bf16Kernel(LinearKernel):
    """bf16 operands, fp32 sums, the product rounded to bf16 once and widened with the fp32 bias."""

    def __call__(self, inputs: Tensor, add: Optional[Tensor] = None) -> Tensor:
        """fp32 out: the first fp32 addend promotes the bf16 product in the same pass."""
        product = self._product(inputs.to(torch.bfloat16))
        if self.bias is not None and add is not None:
            return torch.add(add, product).add_(self.bias)
        addend = add if add is not None else self.bias
        return torch.add(addend, product) if addend is not None else product.float()

    def bf16_product(self, inputs: Tensor) -> Tensor:
        return self._product(inputs.to(torch.bfloat16))

    def _product(self, inputs: Tensor) -> Tensor:
        """``inputs @ weight`` in bf16 (the GEMM sums in fp32), without the bias."""
        raise NotImplementedError


class Bf16OnednnLinear(Bf16Kernel):
    kind = "bf16-onednn"

    def __init__(self, transposed: Tensor, bias: Optional[Tensor]):
        super().__init__(bias)
        self.packed = torch.ops.mkldnn._reorder_linear_weight(transposed, PACK_BATCH_HINT)

    def _product(self, inputs: Tensor) -> Tensor:
        return torch.ops.mkldnn._linear_pointwise(inputs, self.packed, None, "none", [], "")


class Bf16Linear(Bf16Kernel):
    kind = "bf16"

    def __init__(self, weight: Tensor, bias: Optional[Tensor]):
        super().__init__(bias)
        self.weight = weight

    def _product(self, inputs: Tensor) -> Tensor:
        return torch.mm(inputs, self.weight)


def _quantize_per_channel(transposed: Tensor, bias: Optional[Tensor]):
    """Symmetric int8 per output channel (a row of ``(out, in)``), prepacked with the fp32
    bias for fbgemm/onednn."""
    scales = (transposed.abs().amax(dim=1) / 127.0).clamp(min=1e-12).double()
    zero_points = torch.zeros(transposed.shape[0], dtype=torch.long)
    with warnings.catch_warnings():
        # torch marks its quantized tensor types as deprecated; the fbgemm kernels are what int8 runs on.
        warnings.simplefilter("ignore", UserWarning)
        quantized = torch.quantize_per_channel(transposed, scales, zero_points, 0, torch.qint8)
        return torch.ops.quantized.linear_prepack(quantized, bias)
