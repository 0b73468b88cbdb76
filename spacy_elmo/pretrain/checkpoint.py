"""A pretraining run's checkpoint: the config a run in OUTPUT_DIR resumes, saving
(checkpoint.pt, and the biLM, softmax and curve as they are then) and restoring
(weights, optimizer, every process's RNG, progress)."""

import time
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import torch
from confection import Config

from ..bilm import ElmoOptions
from ..files.json_files import read_jsonl
from ..formats.bilm_dir import OPTIONS_NAME
from .config import (
    RESUMABLE_CHANGES,
    PretrainConfigError,
    Schedule,
    config_differences,
    model_section,
    schedule_change_error,
    widen_model,
)
from .failures import check_finite_weights
from .optim import with_step_implementation
from .outputs import (
    CHECKPOINT_KEYS,
    CHECKPOINT_NAME,
    CONFIG_NAME,
    CURVE_NAME,
    METRICS_NAME,
    SOFTMAX_NAME,
    export_bilm,
    export_softmax,
    load_checkpoint,
    plot_curve,
    read_saved_config,
    save_checkpoint,
    truncate_metrics,
    write_config,
)
from .run import Progress, Run, say


def resolve_config(config: Config, output_dir: Path) -> Tuple[Config, Optional[Config]]:
    """The config to run, and the config of the checkpoint in ``output_dir`` it resumes (None: a fresh run)."""
    init_options = config["paths"]["init_options"] or (
        Path(config["paths"]["init_dir"]) / OPTIONS_NAME if config["paths"]["init_dir"] else None
    )
    if init_options:
        # Fine-tuning or a warm start: the architecture is the starting biLM's, maybe widened.
        config["model"].update(model_section(ElmoOptions.from_file(init_options)))
        widen_model(config, init_options)
    if not (output_dir / CHECKPOINT_NAME).is_file():
        return config, None
    saved = read_saved_config(output_dir / CONFIG_NAME, output_dir / CHECKPOINT_NAME)
    differences = config_differences(saved, config)
    if differences:
        listed = "; ".join(f"{k}: {a!r} in the checkpoint, {b!r} now" for k, a, b in differences)
        raise PretrainConfigError(
            f"{output_dir} holds a checkpoint of a run with other settings ({listed}). "
            f"Resume with the same settings (only {', '.join(RESUMABLE_CHANGES)} may change) "
            "or use a fresh output directory."
        )
    return config, saved


def remove_stale_temporaries(output_dir: Path) -> None:
    """Temporary files of writes a kill interrupted (``.NAME.tmpPID``): never complete, never read."""
    for stale in output_dir.glob(".*.tmp[0-9]*"):
        stale.unlink()
        say(f"removed {stale.name}, left by an interrupted write")


def _rng_state(device: torch.device) -> Dict[str, Any]:
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: Dict[str, Any], device: torch.device) -> None:
    torch.set_rng_state(state["cpu"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def restore(run: Run, saved: Config) -> None:
    """Continue from the checkpoint (``saved``: the config it was trained with): weights,
    optimizer, this process's RNG, progress."""
    path = run.output_dir / CHECKPOINT_NAME
    state = load_checkpoint(path, CHECKPOINT_KEYS)
    if state["world_size"] != run.dist.world_size:
        raise PretrainConfigError(
            f"{path} was written by {state['world_size']} process(es); "
            f"resume it with the same number, not {run.dist.world_size}"
        )
    if state["train_sha256"] != run.train_sha256:
        raise PretrainConfigError(
            f"{run.output_dir} holds a checkpoint trained on other text: {run.config['paths']['train']} changed "
            "since; use a fresh output directory (or restore the text to resume)"
        )
    problem = schedule_change_error(Schedule.of(saved["training"]), Schedule.of(run.training), state["step"])
    if problem:
        raise PretrainConfigError(f"{run.output_dir}: {problem}")
    run.lm.load_state_dict(state["model"])
    run.optimizer.load_state_dict(with_step_implementation(state["optimizer"], run.optimizer))
    _set_rng_state(state["rng"][run.dist.rank], run.device)
    run.progress = Progress(state["step"], state["epoch"], state["position"], state["elapsed"], state["tokens_seen"])
    run.checkpoint_step = run.progress.step
    if run.dist.is_main:
        remove_stale_temporaries(run.output_dir)
        truncate_metrics(run.output_dir / METRICS_NAME, run.progress.step)
        write_config(run.output_dir / CONFIG_NAME, run.config)  # differs at most in resumable settings
        step, max_steps = run.progress.step, run.training["max_steps"]
        say(
            f"{run.output_dir}: already trained to step {step} = training.max_steps; nothing to do "
            "(give a larger --training.max_steps to train on)"
            if step >= max_steps
            else f"{run.output_dir}: resuming from step {step} (of {max_steps}), {run.progress.tokens_seen:,} tokens seen"
        )


def save(run: Run) -> None:
    """Checkpoint, and the biLM, softmax and curve as they are now (finite weights only)."""
    check_finite_weights(run)  # in every process: they hold the same weights, and stop together
    rng = run.dist.gather(_rng_state(run.device))
    # Tokens of steps not yet logged count too: a resumed run starts a fresh log window.
    pending = int(run.dist.sum(run.window.tokens)[0])
    run.last_checkpoint = time.perf_counter()
    if not run.dist.is_main:
        return
    p, t = run.progress, run.training
    save_checkpoint(
        run.output_dir / CHECKPOINT_NAME,
        {
            "model": run.lm.state_dict(),
            "optimizer": run.optimizer.state_dict(),
            "step": p.step,
            "epoch": p.epoch,
            "position": p.position,
            "elapsed": run.seconds(),
            "rng": rng,
            "world_size": run.dist.world_size,
            "train_sha256": run.train_sha256,
            "tokens_seen": p.tokens_seen + pending,
        },
    )
    run.checkpoint_step = p.step
    export_bilm(
        run.lm.bilm,
        run.output_dir,
        {
            "bidirectional": True,
            "n_tokens_vocab": len(run.data.vocab),
            "dropout": t["dropout"],
            "n_train_tokens": int(sum(run.train_lengths)),
            "batch_size_tokens": t["batch_size"],
        },
    )
    export_softmax(run.lm.head, run.output_dir / SOFTMAX_NAME)
    plot_curve(read_jsonl(run.output_dir / METRICS_NAME), run.output_dir / CURVE_NAME)
