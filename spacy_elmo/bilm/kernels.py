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

import os
import warnings
from contextlib import contextmanager
from typing import Iterator, Optional, Union

import torch
from torch import Tensor

from ..errors import ElmoError

PRECISIONS = ("fp32", "int8", "bf16")
# Set to 1 to run precision "bf16" where the device has no native bf16 (torch
# emulates it, slower than fp32: for tests and trying it out).
FORCE_BF16_ENV = "SPACY_ELMO_FORCE_BF16"
# The batch size a packed layout is tuned for; any batch size works with it.
PACK_BATCH_HINT = 64
# False inside ``unpacked()``.
_packing = True
# int8 activations use 7 bits where the GEMM sums pairs of u8*s8 products in 16 bits
# (AVX2's vpmaddubsw saturates at 2 * 255 * 127); with AVX-512 VNNI (vpdpbusd sums
# into 32 bits) all 8 bits are safe and halve the activations' rounding error.
INT8_REDUCE_RANGE = not (hasattr(torch.cpu, "_is_vnni_supported") and torch.cpu._is_vnni_supported())


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


def int8_available() -> bool:
    """Whether this torch build has a CPU int8 GEMM engine (fbgemm, x86 or onednn)."""
    engines = torch.backends.quantized.supported_engines
    return hasattr(torch.ops.quantized, "linear_dynamic") and any(e in engines for e in ("x86", "fbgemm", "onednn"))


def native_cpu_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX): where bf16 pays."""
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


# The first CUDA compute capability with bf16 tensor cores (Ampere): older GPUs (V100, T4)
# run bf16 emulated, slower than fp32, though torch.cuda.is_bf16_supported() counts them.
NATIVE_BF16_CUDA_CAPABILITY = (8, 0)


def native_bf16(device: Union[str, torch.device]) -> bool:
    """Whether ``device`` itself (not the current CUDA device) computes bf16 natively."""
    device = torch.device(device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            return False
        index = device.index if device.index is not None else torch.cuda.current_device()
        return tuple(torch.cuda.get_device_capability(index)) >= NATIVE_BF16_CUDA_CAPABILITY
    return device.type == "cpu" and native_cpu_bf16()


def bf16_forced() -> bool:
    return os.environ.get(FORCE_BF16_ENV, "").strip() not in ("", "0")


def check_precision(precision: str, what: str = "precision", device: Optional[Union[str, torch.device]] = None) -> None:
    """``what`` names the setting in the message (``--precision``, ``elmo precision``).
    With a ``device``: also refuse "int8" off the CPU and "bf16" where it is not native
    (unless forced), before anything is loaded."""
    if precision not in PRECISIONS:
        raise ElmoError(f"{what} must be one of {PRECISIONS}, got {precision!r}")
    if device is not None and precision == "int8" and torch.device(device).type != "cpu":
        raise ElmoError(f"{what} 'int8' runs on the CPU only (its kernels are fbgemm/oneDNN), not on {device}")
    if device is not None and precision == "bf16" and not native_bf16(device) and not bf16_forced():
        on_cpu = torch.device(device).type == "cpu"
        where = "this CPU has neither AVX512-BF16 nor AMX" if on_cpu else f"{device} has no bf16 support"
        raise ElmoError(
            f"{what} 'bf16' needs native bf16 and {where} (torch would emulate it, slower than "
            f"fp32): use 'fp32' or 'int8', or set {FORCE_BF16_ENV}=1 to run it emulated anyway"
        )


class PackedLinear:
    """``x (B, in) -> x @ weight + bias (+ add)``, fp32, int8 or bf16, packed at construction."""

    def __init__(self, weight: Tensor, bias: Optional[Tensor] = None, precision: str = "fp32", packed: bool = True):
        check_precision(precision)
        weight = weight.detach()
        self.bias = bias.detach().contiguous() if bias is not None else None
        self.precision = precision
        transposed = weight.t().contiguous()  # (out, in), as linear() wants
        on_cpu_fp32 = weight.device.type == "cpu" and weight.dtype == torch.float32
        if precision == "int8":
            if not on_cpu_fp32 or not int8_available():
                raise ElmoError("precision 'int8' needs fp32 weights on the CPU and a torch build with fbgemm/onednn")
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
            out = torch.ops.quantized.linear_dynamic(inputs, self.packed, INT8_REDUCE_RANGE)
        elif self.kind.startswith("bf16"):
            return self._bf16_call(inputs, add)
        else:
            out = torch.addmm(self.bias, inputs, self.weight) if self.bias is not None else inputs @ self.weight
        return out.add_(add) if add is not None else out

    def _init_bf16(self, transposed: Tensor, packed: bool) -> None:
        """oneDNN's packed bf16 layout where the CPU has native bf16 (the only place its
        bf16 kernels run), else a plain bf16 matrix for torch.mm (emulated on such CPUs)."""
        if packed and transposed.device.type == "cpu" and native_cpu_bf16() and _onednn_available():
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
