"""The pretraining config: spaCy-style (confection) sections, validated up front.

Every setting has a default (``DEFAULT_CONFIG``); a config file overrides
some, and the command line overrides those (``--training.max_steps 60``).
The learning-rate schedule never depends on ``max_steps``, so a run extended
with a larger ``max_steps`` continues exactly as a longer run would have; the
one exception is the cooldown (``training.cooldown_steps``), which by design
ends at ``max_steps`` and is set for a run's last stretch.
"""

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import srsly
from confection import Config

from ..bilm import ElmoOptions, preset
from ..bilm.lm_head import SOFTMAX_KINDS
from ..errors import PretrainConfigError

_DEFAULT_CONFIG_TEMPLATE = """
[paths]
train = null
dev = null
# Fine-tune from published files (a fresh softmax is trained for the new vocabulary).
init_options = null
init_weights = null
# Warm start from a biLM directory (options.json + weights.hdf5, and the
# vocab.txt + softmax.hdf5 that pretrain writes, if there): see warm_start.py.
init_dir = null
# Continuous outputs (training.softmax = "vmf"): the word vectors to predict,
# a spaCy pipeline directory or its vocab/ directory (e.g. en_core_web_md).
output_vectors = null
# An existing vocabulary (one token per line) instead of one built from train.
vocab = null

[system]
seed = 0
# torch threads; 0: OMP_NUM_THREADS if set, else the cores not busy (by the load average), at least 1.
threads = 0

[corpus]
# "lines": one whitespace-tokenised sentence per line; "paragraphs": raw text,
# split into sentences and tokenised with spaCy; "auto": .spacy files are
# DocBins, other files "lines".
text_format = "auto"
lang = "en"
# Longer sentences are cut into pieces of at most this many tokens.
max_sentence_length = 100
# Dev sentences used for perplexity (0: all).
max_dev_sentences = 2000

[vocab]
min_count = 1
max_size = 50000

{model_section}
[warm_start]
# With paths.init_dir (or init_options/init_weights): widen the starting biLM's
# projection to this size (the ELMo vectors are twice as wide) and keep what it
# computes: old units ignore the new dimensions until training makes them
# useful. null keeps the starting biLM's size.
projection_dim = null

[training]
max_steps = 10000
# Tokens per batch per process (boundaries not counted).
batch_size = 2048
optimizer = "adam"
learn_rate = 0.001
warmup_steps = 200
# The last cooldown_steps steps before max_steps decay the learning rate linearly
# towards 0 (0: constant after the warm-up). Set it for a run's last stretch: the
# learning rate stays constant until then, so stretches can be added freely before.
cooldown_steps = 0
weight_decay = 0.0
dropout = 0.1
grad_clip = 10.0
softmax = "adaptive"
n_samples = 8192
adaptive_cutoffs = [2000, 10000]
adaptive_div_value = 4.0
# The vmf head's penalty on the predicted vector's norm (Kumar & Tsvetkov 2019).
vmf_l1 = 0.02
# "auto": bf16 where the device computes it natively (AVX512-BF16/AMX CPUs, bf16 GPUs), else fp32.
precision = "fp32"
# "all" trains the biLM and its LM head; "head" keeps the biLM (char CNN and
# LSTMs) fixed and trains the head alone (e.g. to fit a head to a headless biLM,
# so that its perplexity can be measured).
train_only = "all"
log_every_steps = 10
eval_every_steps = 500
checkpoint_every_steps = 500
checkpoint_every_minutes = 10.0
"""

OPTIMIZERS = ("adam", "adagrad", "sgd")
TRAINING_PRECISIONS = ("fp32", "bf16", "auto")
TRAIN_ONLY = ("all", "head")
TEXT_FORMATS = ("auto", "lines", "paragraphs")
# Settings a resumed run may change: everything else must match the checkpoint.
RESUMABLE_CHANGES = (
    "training.max_steps",
    "training.log_every_steps",
    "training.eval_every_steps",
    "training.checkpoint_every_steps",
    "training.checkpoint_every_minutes",
    "system.threads",
    # Weights and optimizer state are fp32 in either: a long run's stretches may use
    # bf16 where the CPU has it and fp32 elsewhere (each metrics record names its own).
    "training.precision",
    # The cooldown may be set or moved while it has not begun (checked against the
    # checkpoint's step by schedule_change_error).
    "training.cooldown_steps",
    "corpus.max_dev_sentences",
    "paths.dev",
)


def load_config(path: Optional[Union[str, Path]], overrides: Optional[Dict[str, Any]] = None) -> Config:
    """The defaults, then the file (if any), then the overrides; validated."""
    config = Config().from_str(DEFAULT_CONFIG)
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise PretrainConfigError(f"config file not found: {path}")
        try:
            user = Config().from_disk(path, interpolate=False)
        except Exception as err:  # confection raises several kinds for bad syntax
            raise PretrainConfigError(f"{path}: cannot parse the config: {err}") from err
        unknown = [f"[{s}]" for s in user if s not in config]
        unknown += [f"{s}.{k}" for s in user if s in config for k in user[s] if k not in config[s]]
        if unknown:
            raise PretrainConfigError(f"{path}: unknown setting(s) {', '.join(unknown)}")
        config = config.merge(user)
    for key, value in (overrides or {}).items():
        section, _, name = key.partition(".")
        if section not in config or name not in config[section]:
            raise PretrainConfigError(f"unknown setting in override --{key}")
        config[section][name] = value
    config = config.interpolate()
    validate(config)
    return config


def _check(condition: bool, key: str, message: str) -> None:
    if not condition:
        raise PretrainConfigError(f"config setting {key} {message}")


def validate(config: Config) -> None:
    _validate_training(config["training"])
    _validate_corpus(config["corpus"], config["vocab"])
    _validate_paths(config)
    model_options(config)  # the [model] sizes, checked by ElmoOptions


def _validate_training(t: Dict[str, Any]) -> None:
    for key in ("max_steps", "batch_size", "log_every_steps", "eval_every_steps", "checkpoint_every_steps"):
        _check(
            isinstance(t[key], int) and not isinstance(t[key], bool) and t[key] >= 1,
            f"training.{key}",
            f"must be a positive integer, got {t[key]!r}",
        )
    for key in ("learn_rate", "dropout", "grad_clip", "checkpoint_every_minutes", "weight_decay", "vmf_l1"):
        _check(
            isinstance(t[key], (int, float)) and t[key] >= 0,
            f"training.{key}",
            f"must be a number >= 0, got {t[key]!r}",
        )
    _check(t["learn_rate"] > 0, "training.learn_rate", "must be > 0")
    _check(t["dropout"] < 1, "training.dropout", f"must be below 1, got {t['dropout']!r}")
    _check(
        isinstance(t["warmup_steps"], int) and t["warmup_steps"] >= 0,
        "training.warmup_steps",
        "must be an integer >= 0",
    )
    cooldown = t["cooldown_steps"]
    _check(
        isinstance(cooldown, int) and not isinstance(cooldown, bool) and 0 <= cooldown <= t["max_steps"],
        "training.cooldown_steps",
        f"must be an integer from 0 to training.max_steps ({t['max_steps']!r}), got {cooldown!r}",
    )
    _check(t["optimizer"] in OPTIMIZERS, "training.optimizer", f"must be one of {OPTIMIZERS}, got {t['optimizer']!r}")
    _check(t["softmax"] in SOFTMAX_KINDS, "training.softmax", f"must be one of {SOFTMAX_KINDS}, got {t['softmax']!r}")
    _check(
        t["train_only"] in TRAIN_ONLY, "training.train_only", f"must be one of {TRAIN_ONLY}, got {t['train_only']!r}"
    )
    _check(
        t["precision"] in TRAINING_PRECISIONS,
        "training.precision",
        f"must be one of {TRAINING_PRECISIONS}, got {t['precision']!r}",
    )
    _check(isinstance(t["n_samples"], int) and t["n_samples"] >= 1, "training.n_samples", "must be a positive integer")
    cutoffs = t["adaptive_cutoffs"]
    _check(
        isinstance(cutoffs, (list, tuple)) and all(isinstance(x, int) and x > 0 for x in cutoffs),
        "training.adaptive_cutoffs",
        f"must be a list of positive integers, got {cutoffs!r}",
    )
    _check(
        list(cutoffs) == sorted(set(cutoffs)), "training.adaptive_cutoffs", f"must increase strictly, got {cutoffs!r}"
    )


def _validate_corpus(c: Dict[str, Any], v: Dict[str, Any]) -> None:
    _check(
        c["text_format"] in TEXT_FORMATS,
        "corpus.text_format",
        f"must be one of {TEXT_FORMATS}, got {c['text_format']!r}",
    )
    _check(
        isinstance(c["max_sentence_length"], int) and c["max_sentence_length"] >= 1,
        "corpus.max_sentence_length",
        "must be a positive integer",
    )
    _check(
        isinstance(c["max_dev_sentences"], int) and c["max_dev_sentences"] >= 0,
        "corpus.max_dev_sentences",
        "must be an integer >= 0",
    )
    _check(isinstance(v["min_count"], int) and v["min_count"] >= 1, "vocab.min_count", "must be a positive integer")
    _check(isinstance(v["max_size"], int) and v["max_size"] >= 4, "vocab.max_size", "must be an integer >= 4")


def _validate_paths(config: Config) -> None:
    t, paths = config["training"], config["paths"]
    _check(bool(paths["train"]), "paths.train", "is required (a text file, a .spacy file or a directory of them)")
    _check(
        (paths["init_options"] is None) == (paths["init_weights"] is None),
        "paths.init_options/init_weights",
        "must be given together (options.json and weights.hdf5 to fine-tune from)",
    )
    _check(
        not (paths["init_dir"] and paths["init_options"]),
        "paths.init_dir",
        "and paths.init_options/init_weights both name a biLM to start from: give one",
    )
    _check(
        (t["softmax"] == "vmf") == bool(paths["output_vectors"]),
        "paths.output_vectors",
        'is needed by training.softmax = "vmf" (the word vectors to predict) and only by it',
    )
    widen_to = config["warm_start"]["projection_dim"]
    _check(
        widen_to is None or (isinstance(widen_to, int) and not isinstance(widen_to, bool) and widen_to >= 1),
        "warm_start.projection_dim",
        f"must be null or a positive integer, got {widen_to!r}",
    )
    _check(
        widen_to is None or bool(paths["init_dir"] or paths["init_options"]),
        "warm_start.projection_dim",
        "widens a starting biLM: give paths.init_dir (or init_options/init_weights) too",
    )


# [model] settings: the ElmoOptions fields that shape the network, by the same names.
MODEL_KEYS = tuple(ElmoOptions.architecture_names())


def model_options(config: Config) -> ElmoOptions:
    m = config["model"]
    try:
        settings = {key: m[key] for key in MODEL_KEYS}
        settings["filters"] = [tuple(f) for f in settings["filters"]]
        return ElmoOptions(**settings, source="[model]")
    except (TypeError, ValueError) as err:
        raise PretrainConfigError(f"config section [model]: {err}") from err


def widen_model(config: Config, start: Union[str, Path]) -> None:
    """Set [model] to the width ``warm_start.projection_dim`` asks for; a warm start only widens.

    ``start`` names what [model] describes (the starting biLM), for the error.
    """
    widen_to = config["warm_start"]["projection_dim"]
    if widen_to is None:
        return
    width = config["model"]["projection_dim"]
    if widen_to < width:
        raise PretrainConfigError(
            f"warm_start.projection_dim = {widen_to} is narrower than the starting "
            f"biLM's projection_dim {width} ({start}): a warm start only widens"
        )
    config["model"]["projection_dim"] = widen_to


def model_section(options: ElmoOptions) -> Dict[str, Any]:
    """The [model] settings that describe ``options`` (the inverse of ``model_options``)."""
    section = {key: getattr(options, key) for key in MODEL_KEYS}
    section["filters"] = [list(f) for f in options.filters]
    return section


def config_differences(
    saved: Config, current: Config, allowed: Sequence[str] = RESUMABLE_CHANGES
) -> List[Tuple[str, Any, Any]]:
    """Settings that differ between two configs, except those a resume may change."""
    found = []
    # A setting added after the checkpoint was written counts as its default there.
    defaults = Config().from_str(DEFAULT_CONFIG)
    for section in sorted(set(saved) | set(current)):
        keys = set(saved.get(section, {})) | set(current.get(section, {}))
        for key in sorted(keys):
            name = f"{section}.{key}"
            in_saved = saved.get(section, {})
            a = in_saved[key] if key in in_saved else defaults.get(section, {}).get(key)
            b = current.get(section, {}).get(key)
            if name not in allowed and not _same_setting(section, a, b):
                found.append((name, a, b))
    return found


def _same_setting(section: str, a: Any, b: Any) -> bool:
    """Equal values; for [paths], the same file however it is spelled (relative or absolute)."""
    if section == "paths" and isinstance(a, str) and isinstance(b, str) and a and b:
        return Path(a).resolve() == Path(b).resolve()
    return a == b


@dataclass
class Schedule:
    """Linear warm-up, constant, then (with cooldown_steps) a linear decay towards 0
    over the last cooldown_steps steps before max_steps: warmup-stable-decay.

    Ours, not ``torch.optim.lr_scheduler.LambdaLR`` (which would compute the same
    ``learn_rate * factor``): here the rate is a pure function of the run's step, so a resume
    restores it from the checkpoint's step alone and ``schedule_change_error`` reasons about
    the same object, where LambdaLR keeps a step counter of its own to save and keep equal."""

    learn_rate: float
    warmup_steps: int
    max_steps: int
    cooldown_steps: int

    @classmethod
    def of(cls, training: Dict[str, Any]) -> "Schedule":
        """The schedule of a [training] section (one written before the cooldown existed has none)."""
        return cls(
            training["learn_rate"], training["warmup_steps"], training["max_steps"], training.get("cooldown_steps", 0)
        )

    @property
    def decay_start(self) -> float:
        """The first step whose learning rate is decayed (infinity: none is)."""
        return self.max_steps - self.cooldown_steps if self.cooldown_steps else math.inf

    def __call__(self, step: int) -> float:
        factor = 1.0
        if self.warmup_steps and step < self.warmup_steps:
            factor = (step + 1) / self.warmup_steps
        if step >= self.decay_start:
            factor = min(factor, (self.max_steps - step) / self.cooldown_steps)
        return self.learn_rate * factor


def schedule_change_error(saved: Schedule, current: Schedule, step: int) -> Optional[str]:
    """Why ``current`` cannot continue a run trained to ``step`` under ``saved`` (None: it can).

    The steps already trained must keep their learning rates: the cooldown may be set,
    moved or removed only while neither schedule has begun to decay."""
    same = (saved.max_steps, saved.cooldown_steps) == (current.max_steps, current.cooldown_steps)
    if same or min(saved.decay_start, current.decay_start) >= step:
        return None
    if saved.decay_start < step:
        return (
            f"the checkpoint (step {step}) is in its cooldown since step {saved.decay_start}: "
            f"resume with training.max_steps = {saved.max_steps} and training.cooldown_steps = {saved.cooldown_steps}"
        )
    return (
        f"training.cooldown_steps = {current.cooldown_steps} would decay the learning rate from step "
        f"{current.decay_start} (max_steps {current.max_steps} - cooldown_steps), before the checkpoint's step "
        f"{step}: the cooldown must start at or after it (max_steps - cooldown_steps >= {step})"
    )


def _model_section_text(options: ElmoOptions) -> str:
    lines = [f"{key} = {srsly.json_dumps(value)}" for key, value in model_section(options).items()]
    return "[model]\n" + "\n".join(lines) + "\n"


# The defaults of every setting; [model]: the published small biLM (2x1024_128_2048cnn_1xhighway).
DEFAULT_CONFIG = _DEFAULT_CONFIG_TEMPLATE.replace("{model_section}", _model_section_text(preset("small")))
