"""Files of a pretraining output directory, each written atomically.

A file is written under a temporary name, flushed to disk and renamed over
the old one, so a kill at any moment leaves either the old or the new file,
never a torn one. Checkpoints load with ``weights_only=True``: no code runs.

    OUTPUT_DIR/config.cfg       the full config of the run
    OUTPUT_DIR/checkpoint.pt    model, softmax, optimizer, RNG, step, data position
    OUTPUT_DIR/options.json     }
    OUTPUT_DIR/weights.hdf5     } the biLM in the bilm-tf layout
    OUTPUT_DIR/vocab.txt        the softmax vocabulary (bilm-tf's format)
    OUTPUT_DIR/softmax.hdf5     the softmax weights (plain datasets), for further training
    OUTPUT_DIR/metrics.jsonl    one JSON object per logged step or evaluation
    OUTPUT_DIR/training_curve.png
"""

import functools
import json
import math
import warnings
from pathlib import Path
from typing import Any, Dict, List, Sequence

import h5py
import numpy
import torch
from confection import Config

from ..bilm import ElmoBiLM, ElmoOptions
from ..bilm.lm_head import LmHead, head_arrays, load_head_arrays
from ..errors import PretrainConfigError, PretrainDataError, one_line_reason
from ..files.atomic import atomic_path, write_text_atomic
from ..files.disk_space import require_free_space
from ..files.json_files import read_jsonl, write_jsonl_atomic
from ..formats.bilm_dir import OPTIONS_NAME, WEIGHTS_NAME
from ..formats.bilm_tf import write_weights

CONFIG_NAME = "config.cfg"
CHECKPOINT_NAME = "checkpoint.pt"
VOCAB_NAME = "vocab.txt"
SOFTMAX_NAME = "softmax.hdf5"
METRICS_NAME = "metrics.jsonl"
CURVE_NAME = "training_curve.png"


# What every checkpoint holds (checkpoint.save writes them; checkpoint.restore reads them).
CHECKPOINT_KEYS = (
    "model",
    "optimizer",
    "step",
    "epoch",
    "position",
    "elapsed",
    "rng",
    "world_size",
    "train_sha256",
    "tokens_seen",
)
# The [sections] every saved config.cfg has.
CONFIG_SECTIONS = ("paths", "system", "corpus", "vocab", "model", "training")


def save_checkpoint(path: Path, state: Dict[str, Any]) -> None:
    # Through a Python file object: a full disk is then an OSError with its errno
    # (torch's own file writer says only "enforce fail at inline_container.cc").
    require_free_space(path, tensor_bytes(state))
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        torch.save(state, f)


def tensor_bytes(value: Any) -> int:
    """The bytes of every tensor or array in a (nested) state: about what writing it takes."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, numpy.ndarray):
        return value.nbytes
    if isinstance(value, dict):
        return sum(tensor_bytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(tensor_bytes(v) for v in value)
    return 0


def load_checkpoint(path: Path, required: Sequence[str] = ()) -> Dict[str, Any]:
    """A checkpoint's state (``required``: the keys it must hold, e.g. ``CHECKPOINT_KEYS``)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        # torch's own text suggests weights_only=False, which would run code from the file: not shown.
        raise PretrainDataError(
            f"{path}: the checkpoint cannot be read (damaged, or not written by pretrain: {type(err).__name__}); "
            "delete it to start this output directory afresh"
        ) from err
    missing = [key for key in required if not isinstance(state, dict) or key not in state]
    if missing:
        raise PretrainDataError(
            f"{path}: the checkpoint lacks {', '.join(missing)} (damaged, or not written by "
            "pretrain); delete it to start this output directory afresh"
        )
    return state


def write_config(path: Path, config: Config) -> None:
    """The run's config.cfg, atomically, and only when its text changes (a resume with
    the same settings leaves the file alone)."""
    text = config.to_str()
    if path.is_file() and path.read_text(encoding="utf8") == text:
        return
    write_text_atomic(path, text)


def read_saved_config(path: Path, checkpoint: Path) -> Config:
    """The config.cfg beside a checkpoint; damaged (empty, unparsable, sections missing):
    an error naming it and what to do."""
    what_to_do = (
        f"restore it (the config this run started with) or use a fresh output directory "
        f"(or delete {checkpoint.name} to start this one afresh)"
    )
    if not path.is_file():
        raise PretrainConfigError(f"{path} is missing beside {checkpoint.name}: {what_to_do}")
    if path.stat().st_size == 0:
        raise PretrainConfigError(f"{path} is empty (damaged): {what_to_do}")
    try:
        config = Config().from_disk(path, interpolate=False)
    except Exception as err:  # confection raises several kinds for bad syntax
        raise PretrainConfigError(f"{path} cannot be parsed ({one_line_reason(err)}): {what_to_do}") from err
    missing = [f"[{section}]" for section in CONFIG_SECTIONS if section not in config]
    if missing:
        raise PretrainConfigError(f"{path} lacks {', '.join(missing)} (damaged): {what_to_do}")
    return config


def export_bilm(bilm: ElmoBiLM, output_dir: Path, extra_options: Dict[str, Any]) -> None:
    """options.json + weights.hdf5 in the bilm-tf layout (what ``ElmoBiLM.from_dir`` reads)."""
    options = ElmoOptions.from_dict(bilm.options.to_dict(), source=str(output_dir / OPTIONS_NAME))
    options.extra.update(extra_options)
    arrays = bilm.tf_arrays()
    require_free_space(output_dir / WEIGHTS_NAME, tensor_bytes(arrays))  # h5py may crash on a full disk
    write_weights(arrays, output_dir / WEIGHTS_NAME)  # atomic itself
    options.to_file(output_dir / OPTIONS_NAME)  # atomic too


def export_softmax(head: LmHead, path: Path) -> None:
    arrays = head_arrays(head)
    require_free_space(path, tensor_bytes(arrays))
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as f:
            f.attrs["kind"] = head.kind
            f.attrs["settings"] = json.dumps(head.settings())
            for name, array in arrays.items():
                f.create_dataset(name, data=array)


def read_softmax_settings(path: Path) -> Dict[str, Any]:
    try:
        with h5py.File(path, "r") as f:
            return {"kind": str(f.attrs["kind"]), **json.loads(str(f.attrs["settings"]))}
    except (OSError, KeyError, ValueError) as err:
        raise PretrainDataError(f"{path}: not a softmax file written by pretrain ({err})") from err


def read_softmax_arrays(path: Path) -> Dict[str, numpy.ndarray]:
    try:
        with h5py.File(path, "r") as f:
            return {name: numpy.asarray(f[name]) for name in f.keys()}
    except OSError as err:
        raise PretrainDataError(f"{path}: not a readable HDF5 softmax file ({err})") from err


def import_softmax(head: torch.nn.Module, path: Path) -> None:
    load_head_arrays(head, read_softmax_arrays(path), str(path))


def truncate_metrics(path: Path, last_step: int) -> None:
    """Drop records past the checkpoint a run resumes from: those steps run again."""
    write_jsonl_atomic(path, [r for r in read_jsonl(path) if r.get("step", 0) <= last_step])


@functools.lru_cache(maxsize=None)  # once per process: pretraining plots at every checkpoint
def warn_no_matplotlib() -> None:
    warnings.warn(
        f"matplotlib is not installed, so pretraining writes no {CURVE_NAME} (metrics.jsonl has the same "
        'figures); pip install "spacy-elmo[project]" adds it',
        stacklevel=3,
    )


def plot_curve(records: List[Dict[str, Any]], png_path: Path) -> None:
    """The training loss and dev perplexity (``metrics.jsonl`` records) against steps, as a PNG.
    matplotlib is an extra (``spacy-elmo[project]``): without it the PNG is skipped with one warning,
    since a run of hours should not stop for a picture of figures metrics.jsonl already holds."""
    try:
        import matplotlib
    except ImportError:
        warn_no_matplotlib()
        return

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = curve_figure(records)
    with atomic_path(png_path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)


def curve_figure(records: List[Dict[str, Any]]):
    """The curve's figure: one legend for both lines, every point inside the axes (steps from 0,
    perplexity's log axis padded and labelled in plain numbers). Only finite points are drawn
    (a diverged run's perplexity is inf); the title counts those left out."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    train = finite_points(records, "loss")
    dev = finite_points(records, "dev_perplexity")
    left_out = sum(1 for r in records for key in ("loss", "dev_perplexity") if key in r) - len(train) - len(dev)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    lines = ax.plot([r["step"] for r in train], [r["loss"] for r in train], label="train loss")
    ax.set_xlabel("step")
    ax.set_ylabel("train loss (nats, mean of both directions)")
    ax.set_xlim(left=0, right=max([r.get("step", 0) for r in records], default=0) * 1.03 or 1)
    if dev:
        ax2 = ax.twinx()
        perplexities = [r["dev_perplexity"] for r in dev]
        lines += ax2.plot([r["step"] for r in dev], perplexities, "o-", color="#c44", label="dev perplexity")
        low, high = min(perplexities), max(perplexities)
        if high / low < 4:  # a narrow range: a log axis would label one or two ticks
            ax2.set_ylabel("dev perplexity")
            ax2.set_ylim(low - (high - low) * 0.1 - 1, high + (high - low) * 0.1 + 1)
        else:
            ax2.set_ylabel("dev perplexity (log scale)")
            ax2.set_yscale("log")
            ax2.set_ylim(low / 1.15, high * 1.15)
            ax2.yaxis.set_major_locator(LogLocator(subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
            ax2.yaxis.set_major_formatter(ScalarFormatter())
            ax2.yaxis.set_minor_formatter(NullFormatter())
    ax.legend(lines, [str(line.get_label()) for line in lines], loc="upper right")
    ax.set_title("biLM pretraining" + (f" ({left_out} points not finite, not drawn)" if left_out else ""))
    fig.tight_layout()
    return fig


def finite_points(records: List[Dict[str, Any]], key: str) -> List[Dict[str, Any]]:
    """The records that have a finite ``key``."""
    return [r for r in records if key in r and isinstance(r[key], (int, float)) and math.isfinite(r[key])]
