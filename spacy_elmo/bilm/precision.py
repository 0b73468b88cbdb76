"""The precision and device policy: which precisions exist and where each may run.

Decided once, where a precision is chosen (``ElmoBiLM``'s constructors and
``set_precision``, ``device.resolve_device``, the component's ``set_precision``),
by ``check_precision``, which resolves a name to a ``Precision``: the modules and
kernels take that and never check it again (a name is a choice, a ``Precision`` is
one already made).

* "fp32": everywhere, exact.
* "int8": on the CPU only (fbgemm/x86/oneDNN kernels), where torch has one of them.
* "bf16": where the device computes bf16 natively (a CPU with AVX512-BF16 or AMX, a
  GPU of compute capability >= 8.0), or anywhere with ``SPACY_ELMO_FORCE_BF16=1``
  (torch then emulates it, slower than fp32).

The CPU probes run when first asked, not at import.
"""

import enum
import functools
import os
from typing import Optional, Union

import torch

from ..errors import ElmoError
from . import private_torch


class Precision(enum.Enum):
    """A precision already checked (``check_precision``): what the modules and kernels run."""

    FP32 = "fp32"
    INT8 = "int8"
    BF16 = "bf16"

    @property
    def trains(self) -> bool:
        """Whether a biLM at this precision can be trained: int8 and bf16 copies have no gradients."""
        return self is Precision.FP32


PRECISIONS = tuple(precision.value for precision in Precision)
# Set to 1 to run precision "bf16" where the device has no native bf16 (torch
# emulates it, slower than fp32: for tests and trying it out).
FORCE_BF16_ENV = "SPACY_ELMO_FORCE_BF16"
# The first CUDA compute capability with bf16 tensor cores (Ampere): older GPUs (V100, T4)
# run bf16 emulated, slower than fp32, though torch.cuda.is_bf16_supported() counts them.
NATIVE_BF16_CUDA_CAPABILITY = (8, 0)
Device = Union[str, torch.device]


def int8_available() -> bool:
    """Whether this torch build has a CPU int8 GEMM engine (fbgemm, x86 or onednn)."""
    engines = torch.backends.quantized.supported_engines
    return private_torch.available().int8_linear and any(e in engines for e in ("x86", "fbgemm", "onednn"))


@functools.cache
def int8_reduce_range() -> bool:
    """Whether int8 activations use 7 bits: where the GEMM sums pairs of u8*s8 products in
    16 bits (AVX2's vpmaddubsw saturates at 2 * 255 * 127); with AVX-512 VNNI (vpdpbusd
    sums into 32 bits) all 8 bits are safe and halve the activations' rounding error; 7 where
    torch cannot say."""
    return not (private_torch.available().cpu_probes and torch.cpu._is_vnni_supported())


def native_cpu_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX): where bf16 pays (no,
    where torch cannot say)."""
    if not private_torch.available().cpu_probes:
        return False
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def native_bf16(device: Device) -> bool:
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


def check_precision(precision: str, what: str = "precision", device: Optional[Device] = None) -> Precision:
    """The ``Precision`` named ``precision``, where a precision is chosen. ``what`` names the
    setting in the message (``--precision``, ``elmo precision``). With a ``device``: also refuse
    "int8" off the CPU or without an int8 engine, and "bf16" where it is not native (unless
    forced), before anything is loaded."""
    if precision not in PRECISIONS:
        raise ElmoError(f"{what} must be one of {PRECISIONS}, got {precision!r}")
    resolved = Precision(precision)
    if device is None:
        return resolved
    if precision == "int8":
        if torch.device(device).type != "cpu":
            raise ElmoError(f"{what} 'int8' runs on the CPU only (its kernels are fbgemm/oneDNN), not on {device}")
        if not int8_available():
            raise ElmoError(f"{what} 'int8' needs a torch build with the fbgemm/x86/onednn quantized engine")
    if precision == "bf16" and not native_bf16(device) and not bf16_forced():
        on_cpu = torch.device(device).type == "cpu"
        where = "this CPU has neither AVX512-BF16 nor AMX" if on_cpu else f"{device} has no bf16 support"
        raise ElmoError(
            f"{what} 'bf16' needs native bf16 and {where} (torch would emulate it, slower than "
            f"fp32): use 'fp32' or 'int8', or set {FORCE_BF16_ENV}=1 to run it emulated anyway"
        )
    return resolved
