"""Several GPUs without a GPU: pretraining's process group and the per-process device,
with CUDA, torchrun's variables and torch.distributed replaced by recorders."""

import os
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist

from spacy_elmo.bilm.device import resolve_device
from spacy_elmo.cli import embed as embed_module
from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain.distributed import Distributed, choose_device, setup_distributed

TORCHRUN_VARIABLES = (
    "LOCAL_RANK",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
)


@pytest.fixture
def calls(monkeypatch):
    """Four GPUs and a process group that record what is asked of them: ``calls`` lists
    ``(what, argument)`` in order; collectives run on CPU copies of their tensors."""
    seen = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: seen.append(("set_device", torch.device(device))))
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda backend, **kw: seen.append(("init", backend)))
    monkeypatch.setattr(dist, "get_rank", lambda: int(os.environ["RANK"]))
    monkeypatch.setattr(dist, "get_world_size", lambda: int(os.environ["WORLD_SIZE"]))
    monkeypatch.setattr(dist, "all_reduce", lambda tensor: seen.append(("all_reduce", tensor.device)))
    real_tensor = torch.tensor

    def tensor_on_cpu(data, *args, device=None, **kwargs):
        """The tensor a collective gets, made on the CPU: its device is recorded."""
        seen.append(("tensor", torch.device(device) if device is not None else torch.device("cpu")))
        return real_tensor(data, *args, **kwargs)

    monkeypatch.setattr(torch, "tensor", tensor_on_cpu)
    for name in TORCHRUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return seen


def launched(monkeypatch, local_rank: int, world_size: int) -> None:
    """The variables torchrun sets for one process on one node."""
    for name, value in (
        ("LOCAL_RANK", local_rank),
        ("RANK", local_rank),
        ("WORLD_SIZE", world_size),
        ("LOCAL_WORLD_SIZE", world_size),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", 29500),
        ("TORCHELASTIC_RUN_ID", "test"),
    ):
        monkeypatch.setenv(name, str(value))


def test_nccl_sums_a_tensor_on_the_process_gpu_gloo_a_cpu_one(calls, monkeypatch):
    """NCCL reduces GPU tensors only: a CPU tensor fails at the first logged step."""
    launched(monkeypatch, local_rank=1, world_size=2)
    group = setup_distributed(choose_device("cuda"))
    assert ("init", "nccl") in calls
    calls.clear()
    assert group.sum(2.0, 3.0) == [2.0, 3.0]  # the recorder reduces nothing
    assert calls == [("tensor", torch.device("cuda", 1)), ("all_reduce", torch.device("cpu"))]
    calls.clear()  # gloo: CPU tensors, no GPU made current
    group = setup_distributed(choose_device("cpu"))
    assert ("init", "gloo") in calls and not any(what == "set_device" for what, _ in calls)
    calls.clear()
    group.sum(1.0)
    assert calls[0] == ("tensor", torch.device("cpu"))


def test_each_process_makes_its_gpu_current_before_joining_the_group(calls, monkeypatch):
    """all_gather_object and barrier run on the current device: cuda:0 in every
    process unless each sets its own, first."""
    launched(monkeypatch, local_rank=3, world_size=4)
    setup_distributed(choose_device("cuda"))
    assert calls[:2] == [("set_device", torch.device("cuda", 3)), ("init", "nccl")]


@pytest.mark.parametrize("given", ["cuda", "cuda:0", "cuda:2"])
def test_under_torchrun_a_cuda_device_is_the_process_gpu(calls, monkeypatch, given):
    """``--device cuda:0`` would pin every process to GPU 0."""
    launched(monkeypatch, local_rank=1, world_size=2)
    assert choose_device(given) == torch.device("cuda", 1)
    assert resolve_device(given) == torch.device("cuda", 1)


def test_outside_torchrun_the_cuda_device_given_is_kept_if_torch_sees_it(calls, monkeypatch):
    assert choose_device("cuda:2") == torch.device("cuda", 2)
    assert choose_device("cuda") == torch.device("cuda")
    assert choose_device("cpu") == torch.device("cpu")
    with pytest.raises(ElmoError, match=r"--device cuda:4: torch sees 4 GPU\(s\) here \(cuda:0 to cuda:3\)"):
        choose_device("cuda:4")
    launched(monkeypatch, local_rank=5, world_size=6)
    with pytest.raises(ElmoError, match=r"LOCAL_RANK 5: torch sees 4 GPU"):
        choose_device("cuda")
    monkeypatch.setenv("LOCAL_RANK", "one")
    with pytest.raises(ElmoError, match="LOCAL_RANK 'one' .* must be an integer"):
        choose_device("cuda")


def test_one_process_under_torchrun_still_joins_the_group(calls, monkeypatch):
    """``torchrun --nproc_per_node 1`` runs the NCCL path a single GPU can check."""
    launched(monkeypatch, local_rank=0, world_size=1)
    group = setup_distributed(choose_device("cuda"))
    assert ("init", "nccl") in calls
    assert group.grouped and group.world_size == 1 and group.device == torch.device("cuda", 0)
    calls.clear()
    group.sum(4.0)
    assert [what for what, _ in calls] == ["tensor", "all_reduce"]


def test_a_plain_process_joins_no_group(calls):
    group = setup_distributed(choose_device("cpu"))
    assert group == Distributed() and not group.grouped
    assert group.sum(1.0, 2.0) == [1.0, 2.0] and group.gather("x") == ["x"]
    assert calls == []


def test_embed_under_torchrun_runs_on_the_process_gpu(calls, monkeypatch, tmp_path):
    """Every embed process on cuda:0 shares one GPU and leaves the others idle."""
    launched(monkeypatch, local_rank=1, world_size=2)
    text = tmp_path / "in.txt"
    text.write_text("a b\n", encoding="utf8")
    device, share = embed_module.check_command(text, tmp_path / "out.hdf5", "all", 4, 0, "fp32", "cuda", False, False)
    assert device == torch.device("cuda", 1) and share == (1, 2)
    moved = []
    fake = SimpleNamespace(to=lambda d: moved.append(d) or fake, set_precision=lambda p: None)
    monkeypatch.setattr(embed_module, "load_bilm", lambda **source: fake)
    embed_module.loaded_bilm({}, device, "fp32")
    assert moved == [torch.device("cuda", 1)] and ("set_device", torch.device("cuda", 1)) in calls
