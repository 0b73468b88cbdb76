"""Pretraining's processes: one, or one per device under ``torchrun`` (PyTorch
DistributedDataParallel: gloo on CPU, nccl on CUDA).

Which device this process trains on, the process group it joins, and what the
processes share: sums, gathers, the gradient-averaging wrapper and a barrier.
Under torchrun the group is joined even by a single process (``--nproc_per_node
1``), so that one GPU runs the same NCCL path as many.
"""

import os
from dataclasses import dataclass, field
from typing import Any, List, Mapping, Optional, Tuple

import torch

from ..bilm.device import resolve_device
from ..errors import ElmoError


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


def launched_by_torchrun(env: Mapping[str, str] = os.environ) -> bool:
    """Whether torchrun started this process: every variable it sets is there (so one
    process of ``--nproc_per_node 1`` counts too); RANK/WORLD_SIZE alone are refused."""
    _, world = torchrun_share(env)
    return world > 1 or all(name in env for name in TORCHRUN_VARIABLES)


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
    """``--device``; under torchrun any CUDA device is this process's GPU, cuda:LOCAL_RANK
    (``resolve_device``)."""
    return resolve_device(device)
