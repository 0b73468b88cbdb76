"""One process's pretraining run: the state that the loop, its logging and its
checkpoints share, and the run's lines to the person running it."""

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy
import torch
from confection import Config

from ..bilm.language_model import BidirectionalLM
from .data import TrainingData
from .distributed import Distributed


def say(message: str) -> None:
    """A line for the person running the job, on stderr (with or without the progress bar)."""
    print(message, file=sys.stderr, flush=True)


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
