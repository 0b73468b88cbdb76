"""The private torch functions the fast paths call, probed once, in one place.

torch promises nothing of its private functions across releases: the packed fp32 and
bf16 matmuls (``torch.ops.mkldnn._linear_pointwise``, ``torch.ops.mkl._mkl_linear``), the
int8 GEMM (``torch.ops.quantized.linear_dynamic``), the CPU probes
(``torch.cpu._is_vnni_supported`` and its kin) and the one-pass activation gradients of
training's hand-written BPTT (``torch.ops.aten.sigmoid_backward``/``tanh_backward``) each run
only where ``available()`` found them. Without them the biLM runs public calls
(``torch.addmm``, ``torch.mm``, ``torch.mul``) with the same results to 1e-6, bf16 runs emulated (forced only), and int8, which torch has no
public GEMM for, is refused where it is chosen (``precision.check_precision``).
"""

import functools
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PrivateTorch:
    """Which of the private functions the fast paths call this torch has."""

    onednn_linear: bool  # oneDNN's packed fp32/bf16 matmul
    mkl_linear: bool  # MKL's packed fp32 matmul
    int8_linear: bool  # the quantized engine's dynamic int8 matmul
    cpu_probes: bool  # the CPU feature probes (AVX512-BF16, AMX, VNNI)
    aten_backward: bool  # aten's sigmoid_backward/tanh_backward with their out= overloads


NONE = PrivateTorch(onednn_linear=False, mkl_linear=False, int8_linear=False, cpu_probes=False, aten_backward=False)


@functools.cache
def available() -> PrivateTorch:
    """The one capability check, made once per process (tests replace this function to run
    the public fallbacks)."""
    ops = torch.ops
    probes = ("_is_vnni_supported", "_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return PrivateTorch(
        onednn_linear=torch.backends.mkldnn.is_available()
        and all(hasattr(ops.mkldnn, name) for name in ("_linear_pointwise", "_reorder_linear_weight")),
        mkl_linear=torch.backends.mkl.is_available()
        and all(hasattr(ops.mkl, name) for name in ("_mkl_linear", "_mkl_reorder_linear_weight")),
        int8_linear=all(hasattr(ops.quantized, name) for name in ("linear_dynamic", "linear_prepack")),
        cpu_probes=all(hasattr(torch.cpu, name) for name in probes),
        aten_backward=all(
            _has_overloads(ops.aten, name, ("default", "grad_input")) for name in ("sigmoid_backward", "tanh_backward")
        ),
    )


def _has_overloads(namespace, name: str, overloads) -> bool:
    try:  # torch.ops raises AttributeError or RuntimeError for an op it does not have, by release
        packet = getattr(namespace, name)
        return all(hasattr(packet, overload) for overload in overloads)
    except (AttributeError, RuntimeError):
        return False
