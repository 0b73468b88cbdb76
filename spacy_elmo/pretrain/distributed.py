"""Pretraining's processes: one, or one per device under ``torchrun`` (PyTorch
DistributedDataParallel: gloo on CPU, nccl on CUDA).

Which device this process trains on, the process group it joins, and what the
processes share: sums, gathers, the gradient-averaging wrapper and a barrier.
"""

import os
from dataclasses import dataclass
from typing import Any, List, Mapping, Tuple

import torch

from ..bilm.device import resolve_device
from ..errors import ElmoError


@dataclass
class Distributed:
    rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def sum(self, *values: float) -> List[float]:
        """Element-wise sums over all processes (the values themselves with one)."""
        if self.world_size == 1:
            return list(values)
        import torch.distributed as dist

        tensor = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(tensor)
        return tensor.tolist()

    def gather(self, obj: Any) -> List[Any]:
        if self.world_size == 1:
            return [obj]
        import torch.distributed as dist

        out: List[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def wrap(self, model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        """What the training steps run: the model, or (several processes) its
        DistributedDataParallel wrapper, which averages the gradients."""
        if self.world_size == 1:
            return model
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)

    def barrier(self) -> None:
        """Wait until every process is here."""
        if self.world_size > 1:
            import torch.distributed as dist

            dist.barrier()


# What torchrun sets beside RANK and WORLD_SIZE: all of them mean a torchrun process.
TORCHRUN_VARIABLES = ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID")


def torchrun_share(env: Mapping[str, str] = os.environ) -> Tuple[int, int]:
    """``(rank, world size)`` of a process that torchrun launched, else ``(0, 1)``.
    RANK and WORLD_SIZE alone (left over in a shell, set by another launcher) are not
    torchrun: joining a group there would wait forever for processes that never come."""
    try:
        rank, world = int(env.get("RANK", "0")), int(env.get("WORLD_SIZE", "1"))
    except ValueError as err:
        raise ElmoError("RANK and WORLD_SIZE (set by torchrun) must be integers") from err
    if world <= 1:
        return 0, 1
    missing = [name for name in TORCHRUN_VARIABLES if name not in env]
    if missing:
        raise ElmoError(
            f"WORLD_SIZE={world} and RANK={rank} are set, but not {', '.join(missing)} that torchrun sets "
            "beside them: this is not a torchrun process; unset WORLD_SIZE and RANK to run one process, "
            "or launch it with torchrun"
        )
    if not 0 <= rank < world:
        raise ElmoError(f"RANK {rank} / WORLD_SIZE {world} (set by torchrun) do not fit together")
    return rank, world


def setup_distributed(device: torch.device) -> Distributed:
    """Join the process group that ``torchrun`` describes in the environment."""
    _, world_size = torchrun_share()
    if world_size <= 1:
        return Distributed()
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return Distributed(dist.get_rank(), dist.get_world_size())


def choose_device(device: str) -> torch.device:
    """``--device``; a bare "cuda" under torchrun is this process's GPU (LOCAL_RANK)."""
    resolved = resolve_device(device)
    if device == "cuda" and "LOCAL_RANK" in os.environ:
        return torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    return resolved
