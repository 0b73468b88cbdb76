"""The torch device a command runs on, checked before any weights are loaded."""

import torch

from ..errors import ElmoError
from .kernels import check_precision


def resolve_device(device: str, precision: str = "fp32") -> torch.device:
    """``--device`` as a torch device: an unknown string, CUDA where torch has none, a
    GPU with ``--precision int8`` (a CPU path) or ``--precision bf16`` where the device
    has no native bf16 (unless forced) is a one-line error naming the option
    (the code is device-agnostic; nothing needs a GPU)."""
    try:
        resolved = torch.device(device)
    except (RuntimeError, ValueError):
        raise ElmoError(f"--device {device!r}: not a torch device (e.g. cpu, cuda, cuda:0)") from None
    if precision == "int8" and resolved.type != "cpu":
        raise ElmoError(f"--precision int8 runs on the CPU only, not --device {device}")
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ElmoError(f"--device {device}: CUDA is not available to torch here")
    check_precision(precision, "--precision", device=resolved)
    return resolved
