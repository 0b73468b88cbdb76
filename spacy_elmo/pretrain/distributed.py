"""Pretraining's processes: one, or one per device under ``torchrun`` (PyTorch
DistributedDataParallel: gloo on CPU, nccl on CUDA).

Which device this process trains on, the process group it joins, and what the
processes share: sums, gathers, the gradient-averaging wrapper and a barrier.
"""

import os
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

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


def choose_threads(setting: int) -> Tuple[Optional[int], str]:
    """torch's threads for this process, and why: ``system.threads`` when set; else
    OMP_NUM_THREADS when set (torch follows it); else the cores this process may use less
    the ones busy (the 1-minute load average), at least 1. torch's default, a thread per
    core, ran the demo's pretraining 12x slower beside one other job on 2 cores."""
    if setting:
        return setting, f"system.threads = {setting}"
    if os.environ.get("OMP_NUM_THREADS"):
        return None, f"OMP_NUM_THREADS = {os.environ['OMP_NUM_THREADS']}"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    threads = max(1, min(cores, cores - round(load)))
    return threads, f"system.threads = 0: {threads} of {cores} core(s), with a load average of {load:.1f}"


def choose_device(device: str) -> torch.device:
    """``--device``; a bare "cuda" under torchrun is this process's GPU (LOCAL_RANK)."""
    resolved = resolve_device(device)
    if device == "cuda" and "LOCAL_RANK" in os.environ:
        return torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    return resolved
