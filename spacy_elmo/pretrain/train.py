"""The pretraining loop: data, model, steps, logging, evaluation.

One process, or one per device under ``torchrun`` (``distributed.py``).
Process r of N trains on batches r, r+N, r+2N, ... of each epoch; gradients
are averaged.

Resuming: when OUTPUT_DIR holds a checkpoint, the same command continues
from it (model, softmax, optimizer, every process's RNG, step and data
position; ``checkpoint.py``), provided the config differs only in settings a
resume may change (``max_steps``, logging and checkpoint intervals, ...).
"""

import sys
import time
import warnings
from contextlib import ExitStack, nullcontext
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy
import torch
from confection import Config
from tqdm import tqdm

from ..bilm import ElmoBiLM, ElmoOptions
from ..bilm.language_model import BidirectionalLM
from ..bilm.lm_head import NORMALISED_KINDS, build_lm_head
from ..bilm.precision import native_bf16, native_cpu_bf16
from ..errors import PretrainDataError
from ..files.json_files import append_jsonl
from .batches import epoch_batches
from .checkpoint import resolve_config, restore, save
from .config import Schedule, model_options
from .corpus import inputs_sha256
from .data import read_data
from .distributed import choose_device, choose_threads, setup_distributed
from .evaluation import dev_nll, dev_record, held_out_figures, perplexity_of, unknown_rate_warning
from .failures import Sitting, check_finite_dev, check_finite_loss, output_lock, prepare_output_dir, said_in_one_line
from .optim import make_optimizer
from .optim import with_step_implementation as with_step_implementation  # re-exported: tests import it from here
from .outputs import CONFIG_NAME, CURVE_NAME, METRICS_NAME, VOCAB_NAME, write_config
from .run import LogWindow, Run, say
from .target_vectors import target_vectors
from .vocab import Vocabulary
from .warm_start import WarmStart, read_init_dir, transfer_head, warm_start_summary, widened_bilm


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
    return "bf16" if native_bf16(device) else "fp32"


def make_autocast(run: Run):
    """The context each training step runs in: bf16 autocast or nothing (``run.precision``, resolved)."""
    setting, precision, device = run.training["precision"], run.precision, run.device
    if setting == "auto" and run.dist.is_main:
        say(f"training.precision = auto: {precision} on {device}")
    if precision == "bf16" and device.type == "cpu" and not native_cpu_bf16():
        warnings.warn(
            "training.precision = bf16 on a CPU without native bf16 (AVX512-BF16/AMX): torch emulates "
            "it and training is many times slower than fp32; use fp32 here",
            stacklevel=3,
        )
    return torch.autocast(device.type, dtype=torch.bfloat16) if precision == "bf16" else nullcontext()


def start_run(config: Config, output_dir: Path, device: str, held: ExitStack) -> Tuple[Run, Optional[WarmStart]]:
    """Read the data, build the model and optimizer, and resume the checkpoint if there is one
    (``held``: keeps the output directory's lock until the run ends)."""
    torch_device = choose_device(device)
    dist = setup_distributed(torch_device)
    if dist.is_main:
        prepare_output_dir(output_dir)
        held.enter_context(output_lock(output_dir))
    threads, why = choose_threads(config["system"]["threads"])
    if threads is not None:
        torch.set_num_threads(threads)
    if dist.is_main:
        say(f"{torch.get_num_threads()} torch thread(s) per process ({why})")
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
    run.model = dist.wrap(lm, torch_device)
    run.train_lengths = [len(s) for s in data.train]
    run.batches, run.per_process = epoch_plan(run, run.progress.epoch)
    return run, warm


def start_outputs(run: Run) -> None:
    """A fresh run's output directory: its config and vocabulary, no stale log."""
    if not run.dist.is_main:
        return
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
    check_finite_loss(run, forward + backward, learn_rate)
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
        "perplexity": perplexity_of(mean_loss) if run.lm.head.kind in NORMALISED_KINDS else None,
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


def finite_evaluation(run: Run, learn_rate: float) -> Optional[Dict[str, float]]:
    """``evaluate``, stopping the run (every process) where its figures are not finite."""
    figures = evaluate(run)
    check_finite_dev(run, figures, learn_rate)
    return figures


def checkpoint_due(run: Run) -> bool:
    t = run.training
    due = run.progress.step % t["checkpoint_every_steps"] == 0
    overdue = time.perf_counter() - run.last_checkpoint >= 60 * t["checkpoint_every_minutes"]
    # Every process must agree (and so take part in the sum), since saving gathers their RNG states.
    return run.dist.sum(float(overdue))[0] > 0 or due


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


def pretrain(config: Config, output_dir: Path, device: str = "cpu", progress: bool = True) -> Dict[str, Any]:
    """Train (or resume training) a biLM; returns a summary of the run."""
    sitting = Sitting(Path(output_dir))
    with ExitStack() as held, said_in_one_line(sitting):
        sitting.run, warm = start_run(config, sitting.output_dir, device, held)
        return train_loop(sitting.run, warm, progress)


def dev_scored(run: Run) -> Optional[str]:
    """Which dev sentences the dev figures are of (``corpus.max_dev_sentences`` may keep the first N)."""
    dev, path = run.data.dev, run.config["paths"]["dev"]
    if not dev:
        return None
    if run.data.dev_is_all:
        return f"all {len(dev):,} sentences of {path}"
    return f"the first {len(dev):,} sentences of {path} (corpus.max_dev_sentences; `perplexity` scores them all)"


def progress_bar(run: Run, shown: bool) -> tqdm:
    """tqdm's bar on a terminal. Written to a file (a log) its carriage-return updates make one
    line of hundreds of updates, so there it is off and ``show_progress`` writes a line per log step."""
    return tqdm(
        total=run.training["max_steps"],
        initial=run.progress.step,
        unit="step",
        dynamic_ncols=True,
        desc="pretrain",
        disable=not (shown and sys.stderr.isatty()),
    )


def show_progress(bar: tqdm, record: Dict[str, Any], max_steps: int, shown: bool) -> None:
    """A logged step's loss and speed: on the bar, or as a line of its own where no bar is drawn."""
    if not bar.disable:
        bar.set_postfix(loss=f"{record['loss']:.3f}", tok_s=f"{record['tokens_per_sec']:.0f}")
    elif shown:
        print(
            f"pretrain: step {record['step']:,}/{max_steps:,}, loss {record['loss']:.3f}, "
            f"{record['tokens_per_sec']:,.0f} tokens/s",
            file=sys.stderr,
            flush=True,
        )


def train_loop(run: Run, warm: Optional[WarmStart], progress: bool) -> Dict[str, Any]:
    """The training loop of a started run, to ``training.max_steps``."""
    t = run.training
    schedule = Schedule.of(t)
    run.precision = resolve_precision(t["precision"], run.device)
    autocast = make_autocast(run)
    run.started = run.last_checkpoint = time.perf_counter()
    run.window = LogWindow(run.started)
    shown = progress and run.dist.is_main
    bar = progress_bar(run, shown)
    run.lm.train()
    start_step = run.progress.step
    last_dev = before_training(run, warm)
    while run.progress.step < t["max_steps"]:
        learn_rate = train_one_step(run, schedule, autocast)
        bar.update(1)
        step = run.progress.step
        if step % t["log_every_steps"] == 0 or step == t["max_steps"]:
            record = log_metrics(run, learn_rate)
            show_progress(bar, record, t["max_steps"], shown)
        if step % t["eval_every_steps"] == 0 and step < t["max_steps"]:
            last_dev = finite_evaluation(run, learn_rate) or last_dev
        if checkpoint_due(run) and step < t["max_steps"]:
            save(run)
    bar.close()
    if run.progress.step > start_step:  # else a finished run was re-run: nothing new to record
        last_dev = finite_evaluation(run, learn_rate) or last_dev
        save(run)
    run.dist.barrier()
    return {
        "steps": run.progress.step,
        "epochs_completed": run.progress.epoch,
        "vocab_size": len(run.data.vocab),
        "train_sentences": len(run.data.train),
        "dev_perplexity": last_dev,
        "dev_scored": dev_scored(run),
        "output_dir": str(run.output_dir),
        "seconds": run.seconds(),
        "rank": run.dist.rank,
    }
