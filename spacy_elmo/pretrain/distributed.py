"""Pretraining's processes: one, or one per device under ``torchrun`` (PyTorch
DistributedDataParallel: gloo on CPU, nccl on CUDA).

Which device this process trains on, the process group it joins, and what the
processes share: sums, gathers, the gradient-averaging wrapper and a barrier.
"""

import os
from dataclasses import dataclass
from typing import Any, List

import torch

from ..bilm.device import resolve_device


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


def setup_distributed(device: torch.device) -> Distributed:
    """Join the process group that ``torchrun`` describes in the environment."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
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
