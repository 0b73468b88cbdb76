"""The biLM's matmuls, packed once per weights generation (generation.py) for the CPU's fastest kernel.

``PackedLinear(weight, bias)`` computes ``x @ weight + bias (+ add)`` for a
``(in, out)`` weight, in one of these ways:

* fp32, oneDNN-packed (``mkldnn._linear_pointwise``): the weight is reordered
  once into oneDNN's blocked layout; small-batch products (the LSTM's
  recurrent step) then run ~1.8x faster than MKL's packed GEMM on AVX2, and
  the ``+ add`` is fused into the GEMM's output pass. Exact up to fp32
  summation order;
* fp32, MKL-packed (``mkl._mkl_linear``), where oneDNN is missing;
* plain ``torch.addmm`` (GPU, half precision, neither library, or ``packed=False``);
* int8 (``precision="int8"``): the weight quantized per output channel,
  activations quantized dynamically per call (fbgemm/oneDNN through
  ``quantized.linear_dynamic``; 8 bits with AVX-512 VNNI, else 7), fp32 in and out;
* bf16 (``precision="bf16"``): a bfloat16 copy of the weight (oneDNN-packed where
  the CPU has native bf16), the activations rounded to bf16 per call, products
  summed in fp32 by the GEMM, the result rounded to bf16 once and returned as
  fp32 with the bias (and ``add``) added in fp32.

Packed copies are opaque tensors: they are rebuilt (never pickled or copied)
and only used without autograd.
"""

import warnings
from contextlib import contextmanager
from typing import Iterator, Optional

import torch
from torch import Tensor

from ..errors import ElmoError
from . import precision as policy
from .precision import check_precision

# The batch size a packed layout is tuned for; any batch size works with it.
PACK_BATCH_HINT = 64
# False inside ``unpacked()``.
_packing = True


@contextmanager
def unpacked() -> Iterator[None]:
    """fp32 kernels built inside run as plain aten matmuls: what torch's FlopCounterMode
    can count (it knows nothing of the packed oneDNN/MKL ops)."""
    global _packing
    before, _packing = _packing, False
    try:
        yield
    finally:
        _packing = before


def _onednn_available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def _mkl_available() -> bool:
    return torch.backends.mkl.is_available() and hasattr(torch.ops.mkl, "_mkl_linear")


class PackedLinear:
    """``x (B, in) -> x @ weight + bias (+ add)``, fp32, int8 or bf16, packed at construction."""

    def __init__(self, weight: Tensor, bias: Optional[Tensor] = None, precision: str = "fp32", packed: bool = True):
        check_precision(precision)  # the name only: where it may run, its caller decided
        weight = weight.detach()
        self.bias = bias.detach().contiguous() if bias is not None else None
        self.precision = precision
        transposed = weight.t().contiguous()  # (out, in), as linear() wants
        on_cpu_fp32 = weight.device.type == "cpu" and weight.dtype == torch.float32
        if precision == "int8":
            assert on_cpu_fp32, "int8 runs fp32 weights on the CPU (precision.check_precision)"
            self.kind, self.packed = "int8", _quantize_per_channel(transposed, self.bias)
        elif precision == "bf16":
            self._init_bf16(transposed.to(torch.bfloat16), packed and _packing)
        elif packed and _packing and on_cpu_fp32 and _onednn_available():
            self.kind, self.packed = "onednn", torch.ops.mkldnn._reorder_linear_weight(transposed, PACK_BATCH_HINT)
        elif packed and _packing and on_cpu_fp32 and _mkl_available():
            self.kind, self.transposed = "mkl", transposed
            self.packed = torch.ops.mkl._mkl_reorder_linear_weight(transposed, PACK_BATCH_HINT)
        else:
            self.kind, self.weight = "plain", weight

    def __call__(self, inputs: Tensor, add: Optional[Tensor] = None) -> Tensor:
        if self.kind == "onednn":
            if add is not None:
                return torch.ops.mkldnn._linear_pointwise.binary(inputs, add, self.packed, self.bias, "add")
            return torch.ops.mkldnn._linear_pointwise(inputs, self.packed, self.bias, "none", [], "")
        if self.kind == "mkl":
            # The last argument must equal the batch size, or the op silently
            # falls back to an unpacked linear().
            out = torch.ops.mkl._mkl_linear(inputs, self.packed, self.transposed, self.bias, inputs.shape[0])
        elif self.kind == "int8":
            out = torch.ops.quantized.linear_dynamic(inputs, self.packed, policy.int8_reduce_range())
        elif self.kind.startswith("bf16"):
            return self._bf16_call(inputs, add)
        else:
            out = torch.addmm(self.bias, inputs, self.weight) if self.bias is not None else inputs @ self.weight
        return out.add_(add) if add is not None else out

    def _init_bf16(self, transposed: Tensor, packed: bool) -> None:
        """oneDNN's packed bf16 layout where the CPU has native bf16 (the only place its
        bf16 kernels run), else a plain bf16 matrix for torch.mm (emulated on such CPUs)."""
        if packed and transposed.device.type == "cpu" and policy.native_cpu_bf16() and _onednn_available():
            try:
                self.kind = "bf16-onednn"
                self.packed = torch.ops.mkldnn._reorder_linear_weight(transposed, PACK_BATCH_HINT)
                return
            except RuntimeError:  # a oneDNN build without bf16 kernels for this CPU
                pass
        self.kind, self.weight = "bf16", transposed.t()

    def bf16_product(self, inputs: Tensor) -> Tensor:
        """``inputs @ weight`` as a bf16 kernel's GEMM returns it: bf16, without the bias.
        For callers that widen it into a buffer of their own instead of a fresh tensor."""
        if not self.kind.startswith("bf16"):
            raise ElmoError(f"bf16_product needs a bf16 kernel, this one is {self.kind!r}")
        return self._bf16_product(inputs.to(torch.bfloat16))

    def _bf16_call(self, inputs: Tensor, add: Optional[Tensor]) -> Tensor:
        """fp32 out: the first fp32 addend promotes the bf16 product in the same pass."""
        product = self._bf16_product(inputs.to(torch.bfloat16))
        if self.bias is not None and add is not None:
            return torch.add(add, product).add_(self.bias)
        addend = add if add is not None else self.bias
        return torch.add(addend, product) if addend is not None else product.float()

    def _bf16_product(self, inputs: Tensor) -> Tensor:
        """``inputs @ weight`` in bf16 (the GEMM sums in fp32), without the bias."""
        if self.kind == "bf16-onednn":
            return torch.ops.mkldnn._linear_pointwise(inputs, self.packed, None, "none", [], "")
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
