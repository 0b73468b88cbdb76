"""Pretraining's processes: one, or one per device under ``torchrun`` (PyTorch
DistributedDataParallel: gloo on CPU, nccl on CUDA).

Which device this process trains on, the process group it joins, and what the
processes share: sums, gathers, the gradient-averaging wrapper and a barrier.
Under torchrun the group is joined even by a single process (``--nproc_per_node
1``), so that one GPU runs the same NCCL path as many.
"""

import os
from dataclasses import dataclass, field
from typing import Any, List

import torch

from ..bilm.device import resolve_device


@dataclass
class Distributed:
    rank: int = 0
    world_size: int = 1
    # Whether this process joined a process group (always under torchrun).
    grouped: bool = False
    # Where the group's collectives put their tensors: NCCL reduces tensors on the
    # process's GPU only, gloo CPU ones.
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def sum(self, *values: float) -> List[float]:
        """Element-wise sums over all processes (the values themselves with one)."""
        if not self.grouped:
            return list(values)
        import torch.distributed as dist

        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor)
        return tensor.tolist()

    def gather(self, obj: Any) -> List[Any]:
        if not self.grouped:
            return [obj]
        import torch.distributed as dist

        out: List[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def wrap(self, model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        """What the training steps run: the model, or (in a group) its
        DistributedDataParallel wrapper, which averages the gradients."""
        if not self.grouped:
            return model
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)

    def barrier(self) -> None:
        """Wait until every process is here."""
        if self.grouped:
            import torch.distributed as dist

            dist.barrier()


def launched_by_torchrun() -> bool:
    """Whether torchrun (or another launcher of its kind) started this process."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 or "LOCAL_RANK" in os.environ


def setup_distributed(device: torch.device) -> Distributed:
    """Join the process group that ``torchrun`` describes in the environment.

    On CUDA the process's GPU is made current first: NCCL's object collectives
    (``all_gather_object``) and ``barrier`` run on the current device, which is
    otherwise cuda:0 in every process."""
    if not launched_by_torchrun():
        return Distributed()
    import torch.distributed as dist

    if device.type == "cuda":
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    collective_device = device if device.type == "cuda" else torch.device("cpu")
    return Distributed(dist.get_rank(), dist.get_world_size(), grouped=True, device=collective_device)


def choose_device(device: str) -> torch.device:
    """``--device``; under torchrun any CUDA device is this process's GPU, cuda:LOCAL_RANK
    (``resolve_device``)."""
    return resolve_device(device)
