"""The torch device a command runs on, checked before any weights are loaded."""

import os

import torch

from ..errors import ElmoError
from .precision import check_precision


def resolve_device(device: str, precision: str = "fp32") -> torch.device:
    """``--device`` as a torch device: an unknown string, CUDA where torch has none, a
    GPU with ``--precision int8`` (a CPU path) or ``--precision bf16`` where the device
    has no native bf16 (unless forced) is a one-line error naming the option
    (the code is device-agnostic; nothing needs a GPU). Under torchrun a CUDA device
    (``cuda``, ``cuda:0``...) means this process's GPU, cuda:LOCAL_RANK."""
    try:
        resolved = torch.device(device)
    except (RuntimeError, ValueError) as err:
        raise ElmoError(f"--device {device!r}: not a torch device (e.g. cpu, cuda, cuda:0)") from err
    cuda = resolved.type == "cuda"
    if cuda and torch.cuda.is_available():
        resolved = process_gpu(resolved, device)
    # The precision is decided here, for the GPU this process runs on (int8 on a GPU is
    # named as such, whether or not torch sees CUDA).
    check_precision(precision, "--precision", device=resolved)
    if cuda and not torch.cuda.is_available():
        raise ElmoError(f"--device {device}: CUDA is not available to torch here")
    return resolved


def process_gpu(resolved: torch.device, device: str) -> torch.device:
    """The GPU this process runs on: cuda:LOCAL_RANK under torchrun (one GPU per
    process, whatever index ``--device`` named), else the device given; an index
    beyond the GPUs torch sees is an error."""
    local_rank = os.environ.get("LOCAL_RANK")
    if local_rank is not None:
        try:
            resolved = torch.device("cuda", int(local_rank))
        except (RuntimeError, ValueError) as err:
            raise ElmoError(f"LOCAL_RANK {local_rank!r} (set by torchrun) must be an integer >= 0") from err
    count = torch.cuda.device_count()
    if resolved.index is not None and resolved.index >= count:
        source = f"LOCAL_RANK {local_rank}" if local_rank is not None else f"--device {device}"
        raise ElmoError(f"{source}: torch sees {count} GPU(s) here (cuda:0 to cuda:{count - 1})")
    return resolved
