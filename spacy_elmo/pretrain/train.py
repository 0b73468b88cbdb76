"""The pretraining loop: data, model, optimizer, logging, checkpoints, resume, DDP.

One process, or one per device under ``torchrun`` (PyTorch
DistributedDataParallel: gloo on CPU, nccl on CUDA). Process r of N trains on
batches r, r+N, r+2N, ... of each epoch; gradients are averaged.

Resuming: when OUTPUT_DIR holds a checkpoint, the same command continues
from it (model, softmax, optimizer, every process's RNG, step and data
position), provided the config differs only in settings a resume may change
(``max_steps``, logging and checkpoint intervals, ...).
"""

import math
import os
import sys
import time
import warnings
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy
import torch
from confection import Config
from torch.autograd.graph import increment_version
from tqdm import tqdm

from ..bilm import ElmoBiLM, ElmoOptions
from ..bilm.device import resolve_device
from ..bilm.kernels import native_cpu_bf16
from ..bilm.language_model import BidirectionalLM
from ..bilm.lm_head import NORMALISED_KINDS, build_lm_head
from ..bilm.model import OPTIONS_NAME
from ..errors import PretrainDataError
from ..io import append_jsonl, is_disk_full, read_jsonl
from .batches import epoch_batches
from .config import (
    PretrainConfigError,
    Schedule,
    config_differences,
    model_options,
    model_section,
    schedule_change_error,
    widen_model,
)
from .corpus import inputs_sha256
from .data import TrainingData, read_data
from .evaluation import dev_nll, dev_record, held_out_figures, unknown_rate_warning
from .outputs import (
    CHECKPOINT_KEYS,
    CHECKPOINT_NAME,
    CONFIG_NAME,
    CURVE_NAME,
    METRICS_NAME,
    SOFTMAX_NAME,
    VOCAB_NAME,
    export_bilm,
    export_softmax,
    load_checkpoint,
    plot_curve,
    read_saved_config,
    save_checkpoint,
    truncate_metrics,
    write_config,
)
from .target_vectors import target_vectors
from .vocab import Vocabulary
from .warm_start import WarmStart, read_init_dir, transfer_head, warm_start_summary, widened_bilm

# Devices with torch's fused Adam(W) kernel (elsewhere the per-op loop).
FUSED_ADAM_DEVICES = ("cpu", "cuda")


def say(message: str) -> None:
    """A line for the person running the job, on stderr (with or without the progress bar)."""
    print(message, file=sys.stderr, flush=True)


def remove_stale_temporaries(output_dir: Path) -> None:
    """Temporary files of writes a kill interrupted (``.NAME.tmpPID``): never complete, never read."""
    for stale in output_dir.glob(".*.tmp[0-9]*"):
        stale.unlink()
        say(f"removed {stale.name}, left by an interrupted write")


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


def build_language_model(
    config: Config, options: ElmoOptions, vocab: Vocabulary, warm: Optional[WarmStart] = None
) -> BidirectionalLM:
    """The biLM (fresh, fine-tuned from published files, or warm-started) and its LM head."""
    t = config["training"]
    paths = config["paths"]
    start = (
        (warm.options_file, warm.weight_file)
        if warm is not None
        else (paths["init_options"], paths["init_weights"])
        if paths["init_options"]
        else None
    )
    bilm = widened_bilm(ElmoBiLM.from_files(*start), options) if start else ElmoBiLM(options)
    vectors = None
    if t["softmax"] == "vmf":
        vectors, coverage = target_vectors(paths["output_vectors"], vocab)
        say(
            f"vmf targets: {coverage:.1%} of the {len(vocab)} vocabulary words have a vector in {paths['output_vectors']}"
        )
    head = build_lm_head(
        t["softmax"],
        options.projection_dim,
        len(vocab),
        n_samples=t["n_samples"],
        cutoffs=t["adaptive_cutoffs"],
        div_value=t["adaptive_div_value"],
        target_vectors=vectors,
        l1=t["vmf_l1"],
    )
    if warm is not None:
        kept = transfer_head(head, warm, vocab)
        say(warm_start_summary(warm, head.kind, kept, len(vocab)))
    if t["train_only"] == "head":
        bilm.requires_grad_(False)  # make_optimizer then updates the head alone
    return BidirectionalLM(bilm, head).train()


def make_optimizer(config: Config, model: torch.nn.Module) -> torch.optim.Optimizer:
    t = config["training"]
    params = [p for p in model.parameters() if p.requires_grad]
    if t["optimizer"] == "adam":
        # The fused kernel does the whole update in one pass per tensor (~7x faster on CPU
        # than the per-op loop); the same maths.
        fused = all(p.device.type in FUSED_ADAM_DEVICES and p.dtype in (torch.float32, torch.bfloat16) for p in params)
        optimizer = torch.optim.AdamW(params, lr=t["learn_rate"], weight_decay=t["weight_decay"], fused=fused or None)
        if fused:
            optimizer.register_step_post_hook(_bump_weight_versions)
        return optimizer
    if t["optimizer"] == "adagrad":
        # bilm-tf's choice (lr 0.2, initial accumulator 1.0).
        return torch.optim.Adagrad(
            params, lr=t["learn_rate"], initial_accumulator_value=1.0, weight_decay=t["weight_decay"]
        )
    return torch.optim.SGD(params, lr=t["learn_rate"], weight_decay=t["weight_decay"])


def _bump_weight_versions(optimizer: torch.optim.Optimizer, args, kwargs) -> None:
    """After a fused step: that kernel updates the weights in place without bumping their
    version counters, which the biLM's packed inference kernels are keyed on (evaluation
    would run stale copies)."""
    increment_version([p for group in optimizer.param_groups for p in group["params"]])


def with_step_implementation(saved: Dict[str, Any], optimizer: torch.optim.Optimizer) -> Dict[str, Any]:
    """A checkpoint's optimizer state with this build's choice of update kernel (fused,
    foreach) instead of the one that wrote it: load_state_dict would otherwise bring back
    the old choice, and it must know the new one to place the state where that kernel wants it."""
    groups = [
        dict(saved_group, **{key: group[key] for key in ("fused", "foreach") if key in group})
        for saved_group, group in zip(saved["param_groups"], optimizer.param_groups)
    ]
    return dict(saved, param_groups=groups)


def train_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch,
    dropout: float,
    grad_clip: float,
    autocast=nullcontext(),
) -> Tuple[float, float, int]:
    """One update on the mean loss of both directions; returns the summed NLLs and the predictions per direction."""
    with autocast:
        forward_nll, backward_nll, n = model(*batch, dropout=dropout)
    loss = (forward_nll + backward_nll) / (2 * max(n, 1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return float(forward_nll.detach()), float(backward_nll.detach()), n


def resolve_precision(precision: str, device: torch.device) -> str:
    """``auto``: bf16 where the device has it natively, else fp32."""
    if precision != "auto":
        return precision
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if device.type == "cpu" and native_cpu_bf16() else "fp32"


def _rng_state(device: torch.device) -> Dict[str, Any]:
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: Dict[str, Any], device: torch.device) -> None:
    torch.set_rng_state(state["cpu"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


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
            "Resume with the same settings (only max_steps, the cooldown, intervals, threads, precision and the dev data "
            "may change) or use a fresh output directory."
        )
    return config, saved


def make_autocast(setting: str, device: torch.device, dist: Distributed):
    """The context each training step runs in: bf16 autocast or nothing."""
    precision = resolve_precision(setting, device)
    if setting == "auto" and dist.is_main:
        say(f"training.precision = auto: {precision} on {device}")
    if precision == "bf16" and device.type == "cpu" and not native_cpu_bf16():
        warnings.warn(
            "training.precision = bf16 on a CPU without native bf16 (AVX512-BF16/AMX): torch emulates "
            "it and training is many times slower than fp32; use fp32 here",
            stacklevel=3,
        )
    return torch.autocast(device.type, dtype=torch.bfloat16) if precision == "bf16" else nullcontext()


# -- the run: state, steps, logging, evaluation, checkpoints -----------------
@dataclass
class Progress:
    """Where a run stands: what a checkpoint saves beside the weights."""

    step: int = 0
    epoch: int = 0
    position: int = 0  # batches of the epoch this process has taken
    elapsed: float = 0.0  # training seconds of earlier sittings
    tokens_seen: int = 0


@dataclass
class LogWindow:
    """What is summed between two metrics records."""

    start: float
    forward: float = 0.0
    backward: float = 0.0
    predictions: float = 0.0
    tokens: float = 0.0


@dataclass
class Run:
    """One process's pretraining run: what the loop's steps share."""

    config: Config
    output_dir: Path
    device: torch.device
    dist: Distributed
    data: TrainingData
    lm: BidirectionalLM
    optimizer: torch.optim.Optimizer
    train_sha256: str
    model: torch.nn.Module = field(init=False)  # the lm, or its DistributedDataParallel wrapper (start_run)
    progress: Progress = field(default_factory=Progress)
    started: float = field(default_factory=time.perf_counter)  # of this sitting's training
    last_checkpoint: float = 0.0
    window: LogWindow = field(init=False)  # set when training starts
    batches: List[numpy.ndarray] = field(default_factory=list)  # the current epoch's
    per_process: int = 0
    train_lengths: List[int] = field(default_factory=list)  # tokens per training sentence, computed once
    checkpoint_step: Optional[int] = None  # the step of the checkpoint on disk (None: none yet)
    precision: str = "fp32"  # this sitting's (training.precision resolved), in every metrics record

    @property
    def training(self) -> Dict[str, Any]:
        return self.config["training"]

    def seconds(self) -> float:
        """Training seconds of every sitting so far."""
        return self.progress.elapsed + (time.perf_counter() - self.started)


def start_run(config: Config, output_dir: Path, device: str) -> Tuple[Run, Optional[WarmStart]]:
    """Read the data, build the model and optimizer, and resume the checkpoint if there is one."""
    torch_device = choose_device(device)
    dist = setup_distributed(torch_device)
    if config["system"]["threads"]:
        torch.set_num_threads(config["system"]["threads"])
    config, saved = resolve_config(config, output_dir)
    resuming = saved is not None
    options = model_options(config)
    warm = read_init_dir(config["paths"]["init_dir"]) if config["paths"]["init_dir"] and not resuming else None
    data = read_data(config, output_dir, resuming, options.max_characters_per_token, warm)
    seed = config["system"]["seed"]
    torch.manual_seed(seed)  # the same initial weights in every process
    lm = build_language_model(config, options, data.vocab, warm).to(torch_device)
    run = Run(
        config,
        output_dir,
        torch_device,
        dist,
        data,
        lm,
        make_optimizer(config, lm),
        inputs_sha256(config["paths"]["train"]),
    )
    # Dropout and negative samples differ between processes.
    torch.manual_seed(seed * 1_000_003 + dist.rank + 1)
    restore(run, saved) if saved is not None else start_outputs(run)
    run.model = lm
    if dist.world_size > 1:
        from torch.nn.parallel import DistributedDataParallel

        run.model = DistributedDataParallel(
            lm, device_ids=[torch_device.index] if torch_device.type == "cuda" else None
        )
    run.train_lengths = [len(s) for s in data.train]
    run.batches, run.per_process = epoch_plan(run, run.progress.epoch)
    return run, warm


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


def start_outputs(run: Run) -> None:
    """A fresh run's output directory: its config and vocabulary, no stale log."""
    if not run.dist.is_main:
        return
    run.output_dir.mkdir(parents=True, exist_ok=True)
    for name in (METRICS_NAME, CURVE_NAME):
        (run.output_dir / name).unlink(missing_ok=True)
    write_config(run.output_dir / CONFIG_NAME, run.config)
    run.data.vocab.to_file(run.output_dir / VOCAB_NAME)


def epoch_plan(run: Run, epoch: int) -> Tuple[List[numpy.ndarray], int]:
    """The epoch's batches and how many each process takes: the count differs
    between epochs, since each epoch shuffles before batching."""
    batches = epoch_batches(run.train_lengths, run.training["batch_size"], run.config["system"]["seed"], epoch)
    per_process = len(batches) // run.dist.world_size
    if per_process == 0:
        raise PretrainDataError(
            f"{run.config['paths']['train']}: {len(batches)} batch(es) per epoch cannot feed "
            f"{run.dist.world_size} processes"
        )
    return batches, per_process


def next_sentences(run: Run) -> List[numpy.ndarray]:
    """This process's next batch (batches r, r+N, ... of each epoch), starting a new epoch when due."""
    progress = run.progress
    if progress.position >= run.per_process:
        progress.epoch, progress.position = progress.epoch + 1, 0
        run.batches, run.per_process = epoch_plan(run, progress.epoch)
    batch = run.batches[progress.position * run.dist.world_size + run.dist.rank]
    progress.position += 1
    return [run.data.train[i] for i in batch]


def train_one_step(run: Run, schedule: Schedule, autocast) -> float:
    """One update; returns its learning rate."""
    t = run.training
    sentences = next_sentences(run)
    learn_rate = schedule(run.progress.step)
    for group in run.optimizer.param_groups:
        group["lr"] = learn_rate
    forward, backward, n = train_step(
        run.model, run.optimizer, run.data.batch(sentences), t["dropout"], t["grad_clip"], autocast
    )
    run.progress.step += 1
    window = run.window
    window.forward += forward
    window.backward += backward
    window.predictions += n
    window.tokens += sum(len(s) for s in sentences)
    return learn_rate


def log_metrics(run: Run, learn_rate: float) -> Dict[str, Any]:
    """The window's record (summed over processes), appended to metrics.jsonl; opens a new window."""
    w = run.window
    forward, backward, predictions, tokens = run.dist.sum(w.forward, w.backward, w.predictions, w.tokens)
    now = time.perf_counter()
    run.progress.tokens_seen += int(tokens)
    predictions = max(predictions, 1)
    mean_loss = (forward + backward) / (2 * predictions)
    record = {
        "step": run.progress.step,
        "epoch": run.progress.epoch,
        "loss": mean_loss,
        "forward_loss": forward / predictions,
        "backward_loss": backward / predictions,
        "perplexity": math.exp(mean_loss) if run.lm.head.kind in NORMALISED_KINDS else None,
        "tokens_per_sec": tokens / max(now - w.start, 1e-9),
        "tokens": run.progress.tokens_seen,
        "learn_rate": learn_rate,
        "elapsed": run.progress.elapsed + (now - run.started),
        "precision": run.precision,
    }
    if run.dist.is_main:
        append_jsonl(run.output_dir / METRICS_NAME, [record])
    run.window = LogWindow(now)
    return record


def evaluate(run: Run) -> Optional[Dict[str, float]]:
    """Dev figures now (main process, with dev text), also appended to metrics.jsonl."""
    if not (run.dist.is_main and run.data.dev):
        return None
    kind = run.lm.head.kind
    figures = dev_nll(run.lm, run.data)
    append_jsonl(run.output_dir / METRICS_NAME, [dev_record(kind, run.progress.step, figures)])
    return held_out_figures(kind, figures)


def checkpoint_due(run: Run) -> bool:
    t = run.training
    due = run.progress.step % t["checkpoint_every_steps"] == 0
    overdue = time.perf_counter() - run.last_checkpoint >= 60 * t["checkpoint_every_minutes"]
    # Every process must agree (and so take part in the sum), since saving gathers their RNG states.
    return run.dist.sum(float(overdue))[0] > 0 or due


def save(run: Run) -> None:
    """Checkpoint, and the biLM, softmax and curve as they are now."""
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


def before_training(run: Run, warm: Optional[WarmStart]) -> Optional[Dict[str, float]]:
    """The dev text's unknown-word warning; a warm start's starting dev figure."""
    data = run.data
    if run.dist.is_main and data.dev and run.lm.head.kind in NORMALISED_KINDS:
        warning = unknown_rate_warning(data.unknown_rate(data.dev), f"the dev text {run.config['paths']['dev']}")
        if warning:
            say(f"warning: {warning}")
    if warm is not None and run.progress.step == 0:
        # Where the warm start begins: with the same vocabulary, the exported biLM's own dev figure.
        return evaluate(run)
    return None


@contextmanager
def disk_full_is_an_error(run: Run) -> Iterator[None]:
    """A full disk while the run writes: one line saying so, where, and what is safe."""
    try:
        yield
    except OSError as err:
        if not is_disk_full(err):
            raise
        checkpoint = run.output_dir / CHECKPOINT_NAME
        kept = (
            f"the last checkpoint, {checkpoint} (step {run.checkpoint_step}), is intact: free some space and "
            "rerun the same command to resume from it"
            if run.checkpoint_step is not None
            else "no checkpoint was written yet: free some space and rerun the same command"
        )
        raise PretrainDataError(f"no space left on device writing {err.filename or run.output_dir}; {kept}") from None


def pretrain(config: Config, output_dir: Path, device: str = "cpu", progress: bool = True) -> Dict[str, Any]:
    """Train (or resume training) a biLM; returns a summary of the run."""
    run, warm = start_run(config, Path(output_dir), device)
    with disk_full_is_an_error(run):
        return train_loop(run, warm, progress)


def train_loop(run: Run, warm: Optional[WarmStart], progress: bool) -> Dict[str, Any]:
    """The training loop of a started run, to ``training.max_steps``."""
    t = run.training
    schedule = Schedule.of(t)
    autocast = make_autocast(t["precision"], run.device, run.dist)
    run.precision = resolve_precision(t["precision"], run.device)
    run.started = run.last_checkpoint = time.perf_counter()
    run.window = LogWindow(run.started)
    bar = tqdm(
        total=t["max_steps"],
        initial=run.progress.step,
        unit="step",
        dynamic_ncols=True,
        desc="pretrain",
        disable=not (progress and run.dist.is_main),
    )
    run.lm.train()
    start_step = run.progress.step
    last_dev = before_training(run, warm)
    while run.progress.step < t["max_steps"]:
        learn_rate = train_one_step(run, schedule, autocast)
        bar.update(1)
        step = run.progress.step
        if step % t["log_every_steps"] == 0 or step == t["max_steps"]:
            record = log_metrics(run, learn_rate)
            bar.set_postfix(loss=f"{record['loss']:.3f}", tok_s=f"{record['tokens_per_sec']:.0f}")
        if step % t["eval_every_steps"] == 0 and step < t["max_steps"]:
            last_dev = evaluate(run) or last_dev
        if checkpoint_due(run) and step < t["max_steps"]:
            save(run)
    bar.close()
    if run.progress.step > start_step:  # else a finished run was re-run: nothing new to record
        last_dev = evaluate(run) or last_dev
        save(run)
    if run.dist.world_size > 1:
        import torch.distributed as dist

        dist.barrier()
    return {
        "steps": run.progress.step,
        "epochs_completed": run.progress.epoch,
        "vocab_size": len(run.data.vocab),
        "train_sentences": len(run.data.train),
        "dev_perplexity": last_dev,
        "output_dir": str(run.output_dir),
        "seconds": run.seconds(),
        "rank": run.dist.rank,
    }
