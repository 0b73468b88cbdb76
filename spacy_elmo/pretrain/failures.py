"""What a pretraining run says when it cannot go on: one line naming the file and
what to do, for a diverged loss, a full disk, a file it may not read or write, a
second run on the same output directory, and Ctrl-C (which also says where the
last checkpoint is and what re-running does)."""

import errno
import math
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import ContextManager, Dict, Iterator, Optional

import torch

from ..bilm.lm_head import NORMALISED_KINDS
from ..errors import PretrainDataError, PretrainDivergedError
from ..files.disk_space import is_disk_full
from ..files.locks import exclusive_lock
from .outputs import CHECKPOINT_NAME
from .run import Run, say

LOCK_NAME = ".pretrain.lock"
# h5py's errors name the file inside their message only ("... name = 'PATH', errno = 13 ...").
_NAME_IN_MESSAGE = re.compile(r"name = '([^']+)'")


@dataclass
class Sitting:
    """One call of ``pretrain``: its output directory, and its run once started."""

    output_dir: Path
    run: Optional[Run] = None

    @property
    def checkpoint(self) -> Path:
        return self.output_dir / CHECKPOINT_NAME

    @property
    def checkpoint_step(self) -> Optional[int]:
        return self.run.checkpoint_step if self.run is not None else None

    def kept(self) -> str:
        """What is safe on disk and what to do, for a line saying why the run stopped."""
        if self.checkpoint_step is not None:
            kept = f"the last checkpoint, {self.checkpoint} (step {self.checkpoint_step}), is intact"
        elif self.run is None and self.checkpoint.is_file():  # stopped before reading it
            kept = f"the checkpoint {self.checkpoint} is intact"
        else:
            return "no checkpoint was written yet: free some space and rerun the same command"
        return f"{kept}: free some space and rerun the same command to resume from it"


def prepare_output_dir(output_dir: Path) -> None:
    """The output directory, created if needed; one that is a file, or cannot be created, is an error."""
    if output_dir.exists() and not output_dir.is_dir():
        raise PretrainDataError(
            f"pretrain output {output_dir} is a file, not a directory: give a directory "
            "(a new one, or an earlier pretrain output to resume)"
        )
    output_dir.mkdir(parents=True, exist_ok=True)  # a read-only or forbidden place: said by said_in_one_line


def output_lock(output_dir: Path) -> ContextManager[None]:
    """Held for the whole run by its main process: a second ``pretrain`` on the same
    directory stops at once instead of interleaving its checkpoints and metrics."""
    return exclusive_lock(output_dir, "pretrain output", lock=output_dir / LOCK_NAME)


def check_finite_loss(run: Run, loss: float, learn_rate: float) -> None:
    """Stop at the first non-finite training loss (in any process), before anything is written."""
    if run.dist.sum(float(not math.isfinite(loss)))[0] == 0:
        return
    whose = (
        f"the training loss is {loss}" if not math.isfinite(loss) else "another process's training loss is not finite"
    )
    raise PretrainDivergedError(
        f"pretraining diverged at step {run.progress.step + 1}: {whose} (learning rate {learn_rate:.3g}); "
        f"{diverged_advice(run)}"
    )


def check_finite_dev(run: Run, figures: Optional[Dict[str, float]], learn_rate: float) -> None:
    """Stop at dev figures that are not finite (the main process's, from ``evaluate``; None on
    the others, which take part in the sum): a mean dev loss of 710 nats or more makes the
    perplexity inf, though the training loss may still be finite."""
    bad = ", ".join(f"{name} {value}" for name, value in (figures or {}).items() if not math.isfinite(value))
    if run.dist.sum(float(bool(bad)))[0] == 0:
        return
    what = "perplexity" if run.lm.head.kind in NORMALISED_KINDS else "loss"
    raise PretrainDivergedError(
        f"pretraining diverged at step {run.progress.step}: the dev {what} is not finite "
        f"({bad or 'in the main process'}; learning rate {learn_rate:.3g}); {diverged_advice(run)}"
    )


def check_finite_weights(run: Run) -> None:
    """Never checkpoint non-finite weights (an update can overflow though its loss was finite)."""
    if all(torch.isfinite(t).all() for t in run.lm.state_dict().values() if t.is_floating_point()):
        return
    raise PretrainDivergedError(
        f"pretraining diverged at step {run.progress.step}: the weights are no longer finite; {diverged_advice(run)}"
    )


def diverged_advice(run: Run) -> str:
    kept = (
        f"the last good checkpoint, {run.output_dir / CHECKPOINT_NAME} (step {run.checkpoint_step}), is kept, "
        f"with its biLM in {run.output_dir}"
        if run.checkpoint_step is not None
        else "no checkpoint was written yet"
    )
    return (
        f"stopped without writing the diverged weights; {kept}. Train with a lower training.learn_rate "
        "(or a longer training.warmup_steps, or training.grad_clip) in a fresh output directory"
    )


@contextmanager
def said_in_one_line(sitting: Sitting) -> Iterator[None]:
    """Ctrl-C, a full disk, a file that may not be read or written: one line each."""
    try:
        yield
    except KeyboardInterrupt:
        if sitting.run is None or sitting.run.dist.is_main:
            say(interrupted(sitting))
        raise
    except OSError as err:
        if is_disk_full(err):
            raise PretrainDataError(disk_full(sitting, err)) from err
        if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise PretrainDataError(not_permitted(sitting.output_dir, err)) from err
        raise


def disk_full(sitting: Sitting, err: OSError) -> str:
    detail = getattr(err, "detail", "")  # an ElmoDiskFullError's: how much is free and needed
    where = f"{err.filename or sitting.output_dir}{f' ({detail})' if detail else ''}"
    return f"no space left on device writing {where}; {sitting.kept()}"


def not_permitted(output_dir: Path, err: OSError) -> str:
    """A file pretrain may not read, or an output it may not write."""
    found = err.filename or _NAME_IN_MESSAGE.search(str(err))
    path = Path(found if isinstance(found, str) else found.group(1) if found else output_dir)
    reason = "a read-only file system" if err.errno == errno.EROFS else "permission denied"
    if err.errno == errno.EROFS or _on_the_way_to(path, output_dir):
        return (
            f"cannot write {path} ({reason}): pretrain needs an output directory it may write; "
            "give another OUTPUT_DIR, or make this one writable for the user running pretrain"
        )
    return (
        f"cannot read {path} ({reason}): make it readable for the user running pretrain (chmod, chown), "
        "or give a readable copy"
    )


def _on_the_way_to(path: Path, directory: Path) -> bool:
    """Whether ``path`` is ``directory``, inside it, or one of the folders made for it."""
    path, directory = path.absolute(), directory.absolute()
    return path == directory or directory in path.parents or path in directory.parents


def interrupted(sitting: Sitting) -> str:
    """Ctrl-C: where the run was, what is kept, and what re-running the same command does."""
    run = sitting.run
    if run is None:
        then = (
            f"resumes from the checkpoint {sitting.checkpoint}"
            if sitting.checkpoint.is_file()
            else "starts the run afresh"
        )
        return f"interrupted before training began; re-running the same command {then}"
    step, saved = run.progress.step, run.checkpoint_step
    if saved is None:
        return (
            f"interrupted at step {step}, before the first checkpoint: re-running the same command starts "
            f"afresh (the {step} step(s) taken are lost)"
        )
    lost = f"the {step - saved} step(s) since it are lost" if step > saved else "no steps are lost"
    return (
        f"interrupted at step {step}: the last checkpoint, {sitting.checkpoint} (step {saved}), is intact; "
        f"re-running the same command resumes from it ({lost})"
    )
