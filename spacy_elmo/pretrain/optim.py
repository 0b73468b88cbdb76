"""The pretraining optimizer: built from the [training] settings, and a checkpoint's
optimizer state fitted to this build's update kernel."""

from typing import Any, Dict

import torch
from confection import Config

from ..bilm.generation import mark_weights_changed

# Devices with torch's fused Adam(W) kernel (elsewhere the per-op loop).
FUSED_ADAM_DEVICES = ("cpu", "cuda")


def make_optimizer(config: Config, model: torch.nn.Module) -> torch.optim.Optimizer:
    optimizer = _build_optimizer(config, model)
    # Every step changes the weights in place: evaluation must not run the packed kernels
    # or cached token vectors of the weights before it.
    optimizer.register_step_post_hook(lambda *_: mark_weights_changed(model))
    return optimizer


def _build_optimizer(config: Config, model: torch.nn.Module) -> torch.optim.Optimizer:
    t = config["training"]
    params = [p for p in model.parameters() if p.requires_grad]
    if t["optimizer"] == "adam":
        # The fused kernel does the whole update in one pass per tensor (~7x faster on CPU
        # than the per-op loop); the same maths.
        fused = all(p.device.type in FUSED_ADAM_DEVICES and p.dtype in (torch.float32, torch.bfloat16) for p in params)
        return torch.optim.AdamW(params, lr=t["learn_rate"], weight_decay=t["weight_decay"], fused=fused or None)
    if t["optimizer"] == "adagrad":
        # bilm-tf's choice (lr 0.2, initial accumulator 1.0).
        return torch.optim.Adagrad(
            params, lr=t["learn_rate"], initial_accumulator_value=1.0, weight_decay=t["weight_decay"]
        )
    return torch.optim.SGD(params, lr=t["learn_rate"], weight_decay=t["weight_decay"])


def with_step_implementation(saved: Dict[str, Any], optimizer: torch.optim.Optimizer) -> Dict[str, Any]:
    """A checkpoint's optimizer state with this build's choice of update kernel (fused,
    foreach) instead of the one that wrote it: load_state_dict would otherwise bring back
    the old choice, and it must know the new one to place the state where that kernel wants it."""
    groups = [
        dict(saved_group, **{key: group[key] for key in ("fused", "foreach") if key in group})
        for saved_group, group in zip(saved["param_groups"], optimizer.param_groups)
    ]
    return dict(saved, param_groups=groups)
