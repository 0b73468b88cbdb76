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
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy
import torch
from confection import Config
from tqdm import tqdm

from ..bilm import ElmoBiLM, ElmoOptions
from ..bilm.language_model import BidirectionalLM
from ..bilm.model import OPTIONS_NAME
from ..bilm.lm_head import NORMALISED_KINDS, build_lm_head
from .batches import epoch_batches, make_batch
from .outputs import (
    CHECKPOINT_NAME, CONFIG_NAME, CURVE_NAME, METRICS_NAME, SOFTMAX_NAME, VOCAB_NAME,
    append_metrics, export_bilm, export_softmax, load_checkpoint, plot_curve, read_metrics, save_checkpoint,
    truncate_metrics,
)
from .config import PretrainConfigError, Schedule, config_differences, model_options, model_section
from .corpus import Corpus, PretrainDataError, inputs_sha256
from .target_vectors import target_vectors
from .vocab import UNK_ID, Vocabulary
from .warm_start import WarmStart, extended_vocab, read_init_dir, transfer_head

# Sentences per batch when computing dev perplexity.
EVAL_BATCH_SENTENCES = 64


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


def native_cpu_bf16() -> bool:
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def choose_device(device: str) -> torch.device:
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise PretrainConfigError(f"--device {device}: CUDA is not available to torch here")
        if device == "cuda" and "LOCAL_RANK" in os.environ:
            return torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    return torch.device(device)


@dataclass
class TrainingData:
    corpus: Corpus
    train: List[numpy.ndarray]
    dev: List[numpy.ndarray]
    vocab: Vocabulary
    type_words: numpy.ndarray  # corpus type -> vocabulary id

    def batch(self, sentences: List[numpy.ndarray]):
        return make_batch(sentences, self.corpus.type_chars, self.type_words)

    def unknown_rate(self, sentences: List[numpy.ndarray]) -> float:
        """The share of the sentences' words outside the vocabulary (scored as <UNK>)."""
        words = sum(len(s) for s in sentences)
        unknown = sum(int((self.type_words[s] == UNK_ID).sum()) for s in sentences)
        return unknown / words if words else 0.0


# Above this share of <UNK> words, a perplexity says little about the text: say so.
UNKNOWN_RATE_WARNING = 0.10


def unknown_rate_warning(rate: float, what: str) -> Optional[str]:
    if rate <= UNKNOWN_RATE_WARNING:
        return None
    return (f"{rate:.1%} of the words of {what} are outside the biLM's vocabulary and scored as <UNK>: "
            "the perplexity mostly measures how well <UNK> is predicted, not the text")


def read_data(config: Config, output_dir: Path, resuming: bool, max_chars: int,
              warm: Optional[WarmStart] = None) -> TrainingData:
    paths, corpus_cfg, vocab_cfg = config["paths"], config["corpus"], config["vocab"]
    corpus = Corpus(max_chars)
    read = dict(text_format=corpus_cfg["text_format"], lang=corpus_cfg["lang"],
                max_sentence_length=corpus_cfg["max_sentence_length"])
    train = corpus.read(paths["train"], **read)
    dev = corpus.read(paths["dev"], max_sentences=corpus_cfg["max_dev_sentences"], role="dev", **read) if paths["dev"] else []
    if resuming:
        vocab = Vocabulary.from_file(output_dir / VOCAB_NAME)
    elif paths["vocab"]:
        vocab = Vocabulary.from_file(paths["vocab"])
    elif warm is not None and warm.vocab is not None:
        vocab = extended_vocab(warm.vocab, corpus.types, corpus.type_counts(train), vocab_cfg["min_count"],
                               max(vocab_cfg["max_size"], len(warm.vocab)))
    else:
        counts = corpus.type_counts(train)
        vocab = Vocabulary.build(corpus.types, counts, vocab_cfg["min_count"], vocab_cfg["max_size"])
    return TrainingData(corpus, train, dev, vocab, vocab.ids(corpus.types))


def build_language_model(config: Config, options: ElmoOptions, vocab: Vocabulary,
                         warm: Optional[WarmStart] = None) -> BidirectionalLM:
    """The biLM (fresh, fine-tuned from published files, or warm-started) and its LM head."""
    t = config["training"]
    paths = config["paths"]
    if warm is not None:
        bilm = ElmoBiLM.from_files(warm.options_file, warm.weight_file)
    elif paths["init_options"]:
        bilm = ElmoBiLM.from_files(paths["init_options"], paths["init_weights"])
    else:
        bilm = ElmoBiLM(options)
    vectors = None
    if t["softmax"] == "vmf":
        vectors, coverage = target_vectors(paths["output_vectors"], vocab)
        say(f"vmf targets: {coverage:.1%} of the {len(vocab)} vocabulary words have a vector in {paths['output_vectors']}")
    head = build_lm_head(t["softmax"], options.projection_dim, len(vocab), n_samples=t["n_samples"],
                         cutoffs=t["adaptive_cutoffs"], div_value=t["adaptive_div_value"],
                         target_vectors=vectors, l1=t["vmf_l1"])
    if warm is not None:
        kept = transfer_head(head, warm, vocab)
        say(f"warm start from {warm.directory}: biLM weights, and the LM head's rows of {kept:,} of "
              f"{len(vocab):,} words" + ("" if warm.softmax_kind == head.kind else
                                         f" (none: its head is {warm.softmax_kind or 'absent'}, this run trains {head.kind})"))
    return BidirectionalLM(bilm, head).train()


def make_optimizer(config: Config, model: torch.nn.Module) -> torch.optim.Optimizer:
    t = config["training"]
    params = [p for p in model.parameters() if p.requires_grad]
    if t["optimizer"] == "adam":
        return torch.optim.AdamW(params, lr=t["learn_rate"], weight_decay=t["weight_decay"])
    if t["optimizer"] == "adagrad":
        # bilm-tf's choice (lr 0.2, initial accumulator 1.0).
        return torch.optim.Adagrad(params, lr=t["learn_rate"], initial_accumulator_value=1.0,
                                   weight_decay=t["weight_decay"])
    return torch.optim.SGD(params, lr=t["learn_rate"], weight_decay=t["weight_decay"])


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch, dropout: float, grad_clip: float,
               autocast=nullcontext()) -> Tuple[float, float, int]:
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


def dev_nll(lm: BidirectionalLM, data: TrainingData) -> Tuple[float, float, int]:
    """Exact summed NLL of the dev sentences (full normalisation, no dropout)."""
    was_training = lm.training
    lm.eval()
    forward = backward = 0.0
    count = 0
    order = sorted(range(len(data.dev)), key=lambda i: len(data.dev[i]))
    for start in range(0, len(order), EVAL_BATCH_SENTENCES):
        batch = data.batch([data.dev[i] for i in order[start : start + EVAL_BATCH_SENTENCES]])
        f, b, n = lm.exact_nll(*batch)
        forward, backward, count = forward + f, backward + b, count + n
    lm.train(was_training)
    return forward, backward, count


def perplexities(forward: float, backward: float, count: int) -> Dict[str, float]:
    return {
        "forward": math.exp(forward / count),
        "backward": math.exp(backward / count),
        # exp of the mean loss: the geometric mean of the two.
        "mean": math.exp((forward + backward) / (2 * count)),
        "predictions_per_direction": count,
    }


def held_out_losses(forward: float, backward: float, count: int) -> Dict[str, float]:
    """A vmf head's figures: mean losses per prediction (it has no word probabilities, so no perplexity)."""
    return {
        "forward_loss": forward / count, "backward_loss": backward / count,
        "mean_loss": (forward + backward) / (2 * count), "predictions_per_direction": count,
    }


def dev_record(kind: str, step: int, figures: Tuple[float, float, int]) -> Dict[str, float]:
    """The metrics.jsonl record of one dev evaluation."""
    if kind not in NORMALISED_KINDS:
        losses = held_out_losses(*figures)
        return {"step": step, "dev_loss": losses["mean_loss"], "dev_forward_loss": losses["forward_loss"],
                "dev_backward_loss": losses["backward_loss"]}
    ppl = perplexities(*figures)
    return {"step": step, "dev_perplexity": ppl["mean"], "dev_forward_perplexity": ppl["forward"],
            "dev_backward_perplexity": ppl["backward"]}


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


def log_window(start: float) -> Dict[str, float]:
    """What is summed between two metrics records."""
    return {"forward": 0.0, "backward": 0.0, "predictions": 0.0, "tokens": 0.0, "start": start}


def resolve_config(config: Config, output_dir: Path) -> Tuple[Config, bool]:
    """The config to run and whether this resumes a checkpoint in ``output_dir``."""
    init_options = config["paths"]["init_options"] or (
        Path(config["paths"]["init_dir"]) / OPTIONS_NAME if config["paths"]["init_dir"] else None)
    if init_options:
        # Fine-tuning or a warm start: the architecture is the starting biLM's.
        config["model"].update(model_section(ElmoOptions.from_file(init_options)))
    if not (output_dir / CHECKPOINT_NAME).is_file():
        return config, False
    saved_path = output_dir / CONFIG_NAME
    if not saved_path.is_file():
        raise PretrainConfigError(f"{output_dir}: a checkpoint without its {CONFIG_NAME}; use a fresh output directory")
    saved = Config().from_disk(saved_path, interpolate=False)
    differences = config_differences(saved, config)
    if differences:
        listed = "; ".join(f"{k}: {a!r} in the checkpoint, {b!r} now" for k, a, b in differences)
        raise PretrainConfigError(
            f"{output_dir} holds a checkpoint of a run with other settings ({listed}). "
            "Resume with the same settings (only max_steps, intervals, threads and the dev data may change) "
            "or use a fresh output directory."
        )
    return config, True


def pretrain(config: Config, output_dir: Path, device: str = "cpu", progress: bool = True) -> Dict[str, Any]:
    """Train (or resume training) a biLM; returns a summary of the run."""
    torch_device = choose_device(device)
    dist_info = setup_distributed(torch_device)
    t = config["training"]
    if config["system"]["threads"]:
        torch.set_num_threads(config["system"]["threads"])
    output_dir = Path(output_dir)
    config, resuming = resolve_config(config, output_dir)
    options = model_options(config)
    warm = read_init_dir(config["paths"]["init_dir"]) if config["paths"]["init_dir"] and not resuming else None
    data = read_data(config, output_dir, resuming, options.max_characters_per_token, warm)
    train_sha256 = inputs_sha256(config["paths"]["train"])

    seed = config["system"]["seed"]
    torch.manual_seed(seed)  # the same initial weights in every process
    lm = build_language_model(config, options, data.vocab, warm).to(torch_device)
    optimizer = make_optimizer(config, lm)
    schedule = Schedule(t["learn_rate"], t["warmup_steps"])
    # Dropout and negative samples differ between processes.
    torch.manual_seed(seed * 1_000_003 + dist_info.rank + 1)

    step, epoch, position, elapsed, tokens_seen = 0, 0, 0, 0.0, 0
    if resuming:
        state = load_checkpoint(output_dir / CHECKPOINT_NAME)
        if state["world_size"] != dist_info.world_size:
            raise PretrainConfigError(
                f"{output_dir / CHECKPOINT_NAME} was written by {state['world_size']} process(es); "
                f"resume it with the same number, not {dist_info.world_size}"
            )
        if state["train_sha256"] != train_sha256:
            raise PretrainConfigError(
                f"{output_dir} holds a checkpoint trained on other text: {config['paths']['train']} changed "
                "since; use a fresh output directory (or restore the text to resume)"
            )
        lm.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        _set_rng_state(state["rng"][dist_info.rank], torch_device)
        step, epoch, position, elapsed = state["step"], state["epoch"], state["position"], state["elapsed"]
        tokens_seen = state["tokens_seen"]
        if dist_info.is_main:
            remove_stale_temporaries(output_dir)
            truncate_metrics(output_dir / METRICS_NAME, step)
            config.to_disk(output_dir / CONFIG_NAME)  # differs at most in resumable settings
            say(f"{output_dir}: already trained to step {step} = training.max_steps; nothing to do "
                "(give a larger --training.max_steps to train on)" if step >= t["max_steps"] else
                f"{output_dir}: resuming from step {step} (of {t['max_steps']}), {tokens_seen:,} tokens seen")
    elif dist_info.is_main:
        output_dir.mkdir(parents=True, exist_ok=True)
        for name in (METRICS_NAME, CURVE_NAME):
            if (output_dir / name).exists():
                (output_dir / name).unlink()
        config.to_disk(output_dir / CONFIG_NAME)
        data.vocab.to_file(output_dir / VOCAB_NAME)

    model: torch.nn.Module = lm
    if dist_info.world_size > 1:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(lm, device_ids=[torch_device.index] if torch_device.type == "cuda" else None)

    lengths = [len(s) for s in data.train]

    def batches_of_epoch(epoch: int) -> Tuple[List[numpy.ndarray], int]:
        """The epoch's batches and how many each process takes: the count
        differs between epochs, since each epoch shuffles before batching."""
        batches = epoch_batches(lengths, t["batch_size"], seed, epoch)
        per_process = len(batches) // dist_info.world_size
        if per_process == 0:
            raise PretrainDataError(
                f"{config['paths']['train']}: {len(batches)} batch(es) per epoch cannot feed "
                f"{dist_info.world_size} processes"
            )
        return batches, per_process

    batches, per_process = batches_of_epoch(epoch)
    precision = resolve_precision(t["precision"], torch_device)
    autocast = (torch.autocast(torch_device.type, dtype=torch.bfloat16) if precision == "bf16" else nullcontext())
    if t["precision"] == "auto" and dist_info.is_main:
        say(f"training.precision = auto: {precision} on {torch_device}")
    if precision == "bf16" and torch_device.type == "cpu" and not native_cpu_bf16():
        warnings.warn("training.precision = bf16 on a CPU without native bf16 (AVX512-BF16/AMX): torch emulates "
                      "it and training is many times slower than fp32; use fp32 here", stacklevel=2)
    extra_options = {"bidirectional": True, "n_tokens_vocab": len(data.vocab), "dropout": t["dropout"],
                     "n_train_tokens": int(sum(lengths)), "batch_size_tokens": t["batch_size"]}

    def save(step: int) -> None:
        rng = dist_info.gather(_rng_state(torch_device))
        # Tokens of steps not yet logged count too: a resumed run starts a fresh log window.
        pending = int(dist_info.sum(window["tokens"])[0])
        if not dist_info.is_main:
            return
        save_checkpoint(output_dir / CHECKPOINT_NAME, {
            "model": lm.state_dict(), "optimizer": optimizer.state_dict(), "step": step, "epoch": epoch,
            "position": position, "elapsed": elapsed + (time.perf_counter() - started), "rng": rng,
            "world_size": dist_info.world_size, "train_sha256": train_sha256, "tokens_seen": tokens_seen + pending,
        })
        export_bilm(lm.bilm, output_dir, extra_options)
        export_softmax(lm.head, output_dir / SOFTMAX_NAME)
        plot_curve(read_metrics(output_dir / METRICS_NAME), output_dir / CURVE_NAME)

    def evaluate(step: int) -> Optional[Dict[str, float]]:
        if not (dist_info.is_main and data.dev):
            return None
        figures = dev_nll(lm, data)
        append_metrics(output_dir / METRICS_NAME, [dev_record(lm.head.kind, step, figures)])
        return (perplexities if lm.head.kind in NORMALISED_KINDS else held_out_losses)(*figures)

    started = time.perf_counter()
    last_checkpoint = started
    window = log_window(started)
    bar = tqdm(total=t["max_steps"], initial=step, unit="step", disable=not (progress and dist_info.is_main),
               dynamic_ncols=True, desc="pretrain")
    last_dev: Optional[Dict[str, float]] = None
    lm.train()
    start_step = step
    if dist_info.is_main and data.dev and lm.head.kind in NORMALISED_KINDS:
        warning = unknown_rate_warning(data.unknown_rate(data.dev), f"the dev text {config['paths']['dev']}")
        if warning:
            say(f"warning: {warning}")
    if warm is not None and step == 0:
        # Where the warm start begins: with the same vocabulary, the exported biLM's own dev figure.
        last_dev = evaluate(0)
    while step < t["max_steps"]:
        if position >= per_process:
            epoch, position = epoch + 1, 0
            batches, per_process = batches_of_epoch(epoch)
        sentences = [data.train[i] for i in batches[position * dist_info.world_size + dist_info.rank]]
        position += 1
        learn_rate = schedule(step)
        for group in optimizer.param_groups:
            group["lr"] = learn_rate
        forward_nll, backward_nll, n = train_step(model, optimizer, data.batch(sentences), t["dropout"],
                                                  t["grad_clip"], autocast)
        step += 1
        window["forward"] += forward_nll
        window["backward"] += backward_nll
        window["predictions"] += n
        window["tokens"] += sum(len(s) for s in sentences)
        bar.update(1)

        if step % t["log_every_steps"] == 0 or step == t["max_steps"]:
            fwd, bwd, predictions, tokens = dist_info.sum(window["forward"], window["backward"],
                                                          window["predictions"], window["tokens"])
            now = time.perf_counter()
            tokens_seen += int(tokens)
            predictions = max(predictions, 1)
            mean_loss = (fwd + bwd) / (2 * predictions)
            record = {
                "step": step, "epoch": epoch, "loss": mean_loss, "forward_loss": fwd / predictions,
                "backward_loss": bwd / predictions,
                "perplexity": math.exp(mean_loss) if lm.head.kind in NORMALISED_KINDS else None,
                "tokens_per_sec": tokens / max(now - window["start"], 1e-9), "tokens": tokens_seen,
                "learn_rate": learn_rate,
                "elapsed": elapsed + (now - started),
            }
            if dist_info.is_main:
                append_metrics(output_dir / METRICS_NAME, [record])
                bar.set_postfix(loss=f"{mean_loss:.3f}", tok_s=f"{record['tokens_per_sec']:.0f}")
            window = log_window(now)
        if step % t["eval_every_steps"] == 0 and step < t["max_steps"]:
            last_dev = evaluate(step) or last_dev
        due = step % t["checkpoint_every_steps"] == 0
        overdue = time.perf_counter() - last_checkpoint >= 60 * t["checkpoint_every_minutes"]
        # Every process must agree, since saving gathers their RNG states.
        if (dist_info.sum(float(overdue))[0] > 0 or due) and step < t["max_steps"]:
            save(step)
            last_checkpoint = time.perf_counter()
    bar.close()
    if step > start_step:  # else a finished run was re-run: nothing new to record
        last_dev = evaluate(step) or last_dev
        save(step)
    if dist_info.world_size > 1:
        import torch.distributed as dist

        dist.barrier()
    return {
        "steps": step, "epochs_completed": epoch, "vocab_size": len(data.vocab),
        "train_sentences": len(data.train), "dev_perplexity": last_dev, "output_dir": str(output_dir),
        "seconds": elapsed + (time.perf_counter() - started), "rank": dist_info.rank,
    }
