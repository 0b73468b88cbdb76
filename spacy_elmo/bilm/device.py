"""The torch device a command runs on, checked before any weights are loaded."""
import torch

from ..errors import ElmoError


def resolve_device(device: str, precision: str = "fp32") -> torch.device:
    """``--device`` as a torch device: an unknown string, CUDA where torch has none, or a
    GPU with ``--precision int8`` (a CPU path) is a one-line error naming the option
    (the code is device-agnostic; nothing needs a GPU)."""
    try:
        resolved = torch.device(device)
    except (RuntimeError, ValueError):
        raise ElmoError(f"--device {device!r}: not a torch device (e.g. cpu, cuda, cuda:0)") from None
    if precision == "int8" and resolved.type != "cpu":
        raise ElmoError(f"--precision int8 runs on the CPU only, not --device {device}")
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ElmoError(f"--device {device}: CUDA is not available to torch here")
    return resolved
