"""The training log: two registrations, one job each.

``spacy-elmo.TrainingLog.v1`` (every config in ``configs/``): spaCy's console
table, plus a JSONL record of every evaluation with the elapsed seconds and
words seen (what a fair comparison reports: epochs, steps, wall time, best dev
score).

``spacy-elmo.TrainingLog.v2``: the log of one stretch of a resumed run (a
killed ``spacy train`` started again from its last evaluation). Its arguments
after v1's all default to a fresh run:

- ``append`` and the ``*_offset``s: it appends to the file instead of replacing
  it, and adds the offsets to each record's epoch, step, seconds and words, so
  the stretches of a resumed run make one global curve.
- ``optimizer_state``: the file the optimizer's state is saved to after each
  evaluation and restored from when a stretch starts (see
  ``optimizer_state``; the config's optimizer must be wrapped in
  ``spacy-elmo.StatefulOptimizer.v1`` with the same file).
- ``best_score`` and ``best_step``: the best evaluation of the earlier
  stretches (its global step). spaCy's patience counts from the best of the
  stretch's own evaluations, so a resumed stretch would take its first
  evaluation for the best so far. At that first evaluation the log adds the
  earlier best to ``info["checkpoints"]``, the list of ``(score, step)``
  results spaCy's loop keeps and reads for patience, at its step in the
  stretch's own count (``best_step - step_offset``, before the stretch began),
  moved later by less than one evaluation interval: the stretch evaluates at
  ``step_offset + k * eval_frequency``, off the uninterrupted run's grid (by one
  step after one resume), so patience then runs out at the stretch's first
  evaluation at or after ``best_step + patience``, where the uninterrupted run
  has its last one (without the move it ran out a step before that evaluation,
  and the stretch trained its last ``eval_frequency - 1`` steps unevaluated).
  ``eval_frequency`` and ``patience`` are read from ``nlp.config["training"]``,
  where spaCy's training loop reads them.
- ``keep_evaluated``: a directory the model spaCy saved as ``model-last`` at the
  stretch's last evaluation is moved to when training ends, normally, by an
  interrupt (Ctrl-C: SIGINT) or by an error. spaCy saves ``model-last`` once
  more right then, with the weights of that moment, up to ``eval_frequency - 1``
  updates later, and under the same ``meta.json``: a resumed stretch should
  start from the evaluation's weights, the ones the optimizer's saved state
  belongs to (``scripts/resume_training.py`` does), and has them even where that
  last save is cut short.

The table leaves out the loss column of an elmo component whose biLM no
listener fine-tunes: it is always 0.00, and users took it for a bug."""

import json
import sys
from pathlib import Path
from typing import IO, Any, Callable, Dict, Optional, Tuple

from spacy.training.loggers import console_logger_v3
from spacy.util import registry

from ..errors import ElmoError
from ..files.atomic import move_dir
from .optimizer_state import OPTIMIZERS, restore_state, save_state

RECORD_KEYS = ("epoch", "step", "score", "seconds", "words")
OFFSET_KEYS = ("epoch", "step", "seconds", "words")


@registry.loggers("spacy-elmo.TrainingLog.v1")
def training_log_v1(output_file: Optional[str] = None, progress_bar: Optional[str] = None) -> Callable:
    return training_log_v2(output_file, progress_bar)


@registry.loggers("spacy-elmo.TrainingLog.v2")
def training_log_v2(
    output_file: Optional[str] = None,
    progress_bar: Optional[str] = None,
    append: bool = False,
    epoch_offset: int = 0,
    step_offset: int = 0,
    seconds_offset: int = 0,
    words_offset: int = 0,
    optimizer_state: Optional[str] = None,
    best_score: Optional[float] = None,
    best_step: Optional[int] = None,
    keep_evaluated: Optional[str] = None,
) -> Callable:
    if (best_score is None) != (best_step is None):
        raise ElmoError("spacy-elmo.TrainingLog: give best_score and best_step together, or neither")
    console = console_logger_v3(progress_bar=progress_bar, console_output=True, output_file=None)
    offsets = {"epoch": epoch_offset, "step": step_offset, "seconds": seconds_offset, "words": words_offset}

    def setup(nlp: Any, stdout: IO = sys.stdout, stderr: IO = sys.stderr) -> Tuple[Callable, Callable]:
        log_console, finalize_console = console(_TableView(nlp), stdout, stderr)
        keep_state = None if optimizer_state is None else _OptimizerKeeper(nlp, Path(optimizer_state), stdout)
        if keep_state is not None and step_offset > 0:
            keep_state.restore(step_offset - 1)
        stream = None
        if output_file:
            Path(output_file).parent.mkdir(parents=True, exist_ok=True)
            stream = Path(output_file).open("a" if append else "w", encoding="utf8")

        earlier_best = None if best_step is None else (best_score, patience_anchor(nlp, best_step, step_offset))
        evaluated_model: Optional[Path] = None  # model-last as spaCy saved it at this stretch's last evaluation

        def log_step(info: Optional[Dict[str, Any]]) -> None:
            nonlocal earlier_best, evaluated_model
            log_console(info)
            if info is None:
                return
            if info.get("output_path"):
                evaluated_model = Path(info["output_path"])
            if earlier_best is not None:  # the stretch's first evaluation: see the module's docstring
                info["checkpoints"].append(earlier_best)
                earlier_best = None
            record = {key: info[key] for key in RECORD_KEYS}
            for key in OFFSET_KEYS:
                record[key] += offsets[key]
            record["losses"] = {k: float(v) for k, v in info["losses"].items()}
            record["scores"] = {k: v for k, v in info["other_scores"].items() if isinstance(v, (int, float))}
            if stream is not None:
                stream.write(json.dumps(record) + "\n")
                stream.flush()
            if keep_state is not None:  # after spaCy saved model-last at this evaluation
                keep_state.save(record["step"])

        def finalize() -> None:
            finalize_console()
            if stream is not None:
                stream.close()
            # spaCy saves model-last once more right after this, with the weights of that moment.
            if keep_evaluated is not None and evaluated_model is not None and evaluated_model.is_dir():
                move_dir(evaluated_model, Path(keep_evaluated))

        return log_step, finalize

    return setup


def patience_anchor(nlp: Any, best_step: int, step_offset: int) -> int:
    """The earlier best's step in the stretch's own count, moved onto the stretch's
    evaluation grid (see the module's docstring)."""
    training = nlp.config["training"]
    frequency, patience = int(training["eval_frequency"]), int(training["patience"])
    shift = (step_offset - best_step - patience) % frequency if patience else 0
    return best_step - step_offset + shift


class _OptimizerKeeper:
    """Saves and restores the training optimizer's state (``optimizer_state``)."""

    def __init__(self, nlp: Any, path: Path, stdout: IO) -> None:
        self.nlp, self.path, self.stdout = nlp, path, stdout
        self.optimizer = OPTIMIZERS.take(str(path))

    def restore(self, step: int) -> None:
        why_not = restore_state(self.nlp, self.optimizer, self.path, step)
        if why_not is None:
            self.stdout.write(f"Restored the optimizer's state of step {step} from {self.path}\n")
        else:
            self.stdout.write(f"The optimizer starts afresh: {why_not}\n")

    def save(self, step: int) -> None:
        save_state(self.nlp, self.optimizer, self.path, step)


class _TableView:
    """What spaCy's console logger reads of ``nlp`` (its pipeline and config), without
    the components whose loss is always zero (a frozen elmo)."""

    def __init__(self, nlp: Any) -> None:
        self.config = nlp.config
        self.pipeline = [(name, proc) for name, proc in nlp.pipeline if getattr(proc, "trains_bilm", True)]
