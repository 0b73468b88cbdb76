"""How a killed ``spacy train`` of one seed resumes from its last evaluation.

``experiment``/``investigate`` train each seed in one or more *stretches*. A
stretch is one ``spacy train`` process; when it is killed (a work session's
end), the next call starts a new stretch from the seed's last evaluation: every
pipeline component is sourced from the ``model-last`` spaCy saved at that
evaluation (spaCy resumes sourced components with ``nlp.resume_training``, it
does not re-initialize them), the step and epoch caps are cut by what the
earlier stretches used, and the log (``spacy-elmo.TrainingLog.v2``) appends to
``log.jsonl`` with the steps, epochs, seconds and words offset, so the log is
one global curve, and has spaCy count patience from the best evaluation so far.
``resume.json`` in the seed's directory records each stretch's first and last
logged step and whether training finished (then a later call only scores the
model).

Every stretch, the first included, trains a config written beside the seed
(``first.cfg``, then ``resume.cfg``) whose optimizer is wrapped in
``spacy-elmo.StatefulOptimizer.v1`` and whose log (``spacy-elmo.TrainingLog.v2``)
saves the optimizer's state after each evaluation (``optimizer-state.msgpack``):
a resumed stretch continues Adam's moments, bias correction and parameter
averages from the resume point's evaluation (or says why not and starts them
afresh). The file is removed once the seed's training is over.

What differs from an uninterrupted run:
- The learning-rate schedule's position restarts (our configs use a constant rate).
  The batch size does not: spaCy draws one size per batch from a generator that
  lives as long as the ``spacy train`` process, so a resumed stretch would begin
  again at the smallest batches (100 words instead of 1,000 in our configs, which
  cost 1-2 dev F1 on CoNLL); a ``compounding.v1`` size is started where the
  uninterrupted run would be (any other schedule restarts, and the stretch says so).
- The data order restarts at an epoch boundary: the resumed stretch begins a
  new epoch (counted as one more epoch) in the order the seed gives a first
  epoch; updates after the last evaluation of the killed stretch are lost.
- The evaluations: a stretch evaluates at its own step 0, one step after the
  resume point S, so they fall at S + 1, S + 1 + eval_frequency, ... The
  stopping rule is the uninterrupted one: the log
  (``spacy-elmo.TrainingLog.v2``) gives spaCy's loop the earlier stretches' best
  score and step b, so patience counts from the global best (b, or a later
  evaluation that ties or beats it), and runs out at the stretch's first
  evaluation at or after ``b + patience`` (the log moves b onto the stretch's
  grid: ``spacy_elmo.training.log``); with ``S + 1 - b >= patience`` there is no
  patience left and training is over.
- ``model-best`` is the best over all stretches: the earlier stretches' best is
  kept aside and put back unless the last stretch beat its score (ties go to
  the later step, as spaCy's own model-best does).
- ``seconds`` in the log counts training time of the logged evaluations only;
  the time between a killed stretch's last evaluation and the kill is lost.

The resume point is ``model-evaluated`` (the log's copy of the last evaluation's
``model-last``, kept when a stretch ends: an interrupted ``spacy train`` saves
``model-last`` once more, with later weights under the same ``meta.json``), else
``model-last``, else ``resume-point`` (a stretch killed before its first
evaluation leaves the point it started from there). It is trusted only if its
``meta.json`` holds the losses and scores of the log's last evaluation and it
loads; otherwise (missing, torn by the kill, saved after a later evaluation the
log never got) the seed's directory is moved
to ``superseded/<time>/seedN`` beside it with a one-line message and the seed
starts afresh (an earlier move is never replaced: nothing is deleted).

``resume.json`` also records the config and the sha256 of the files the run's
``--paths.*`` overrides name (``inputs``; in the project, the biLM's
``options.json`` and ``weights.hdf5``). A seed begun with another config or on
other files (a biLM pretrained again) does not resume: its directory is moved to
``superseded/<time>/seedN`` beside it and the seed starts afresh, since a
resumed stretch would keep the old model or the old biLM's weights.
"""

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

import typer
from project_errors import ProjectDataError

from spacy_elmo.files.atomic import move_dir
from spacy_elmo.files.json_files import read_json, read_jsonl, write_json_atomic, write_jsonl_atomic

STATE_FILE = "resume.json"
LOG_FILE = "log.jsonl"
RESUME_CONFIG = "resume.cfg"
FIRST_CONFIG = "first.cfg"
OPTIMIZER_STATE = "optimizer-state.msgpack"
# spaCy deletes model-last and model-best when a stretch starts: the resume point
# and the earlier best are moved out of its way first.
RESUME_POINT = "resume-point"
EARLIER_BEST = "model-best-earlier"
# model-last as spaCy saved it at a stretch's last evaluation, moved aside by the log when
# training ends (spaCy then saves model-last once more, with later weights).
EVALUATED = "model-evaluated"
LOGGER = "spacy-elmo.TrainingLog.v2"
STATEFUL_OPTIMIZER = "spacy-elmo.StatefulOptimizer.v1"


@dataclass
class Stretch:
    """One ``spacy train`` call: its config and its command-line overrides."""

    config: Path
    overrides: List[str]


def read_state(out_dir: Path) -> Dict[str, Any]:
    path = out_dir / STATE_FILE
    if not path.is_file():
        return {"stretches": [], "finished": False}
    return read_json(path, ProjectDataError)


def write_state(out_dir: Path, state: Dict[str, Any]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out_dir / STATE_FILE, state, indent=2)


def best_record(records: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The evaluation spaCy's model-best holds: the latest of equal best scores
    (spaCy saves model-best at every evaluation that ties the best)."""
    return max(reversed(records), key=lambda r: r["score"])


def patience_start(records: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The evaluation spaCy's patience counts from: the earliest of equal best scores."""
    return max(records, key=lambda r: r["score"])


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def saved_at(model_dir: Path, record: Dict[str, Any]) -> bool:
    """Whether the pipeline in model_dir was saved at the evaluation ``record``
    logs: spaCy writes that evaluation's losses and scores into its meta.json."""
    try:
        performance = json.loads((model_dir / "meta.json").read_text(encoding="utf8"))["performance"]
    except (OSError, ValueError, KeyError):
        return False
    logged = {**{f"{name}_loss": v for name, v in record["losses"].items()}, **record["scores"]}
    shared = [key for key in logged if key in performance]
    return bool(shared) and all(_same(float(performance[key]), float(logged[key])) for key in shared)


def loads(model_dir: Path) -> bool:
    import spacy

    try:
        spacy.load(model_dir)
    except Exception:  # any failure means a damaged pipeline; the caller says so
        return False
    return True


def find_resume_point(out_dir: Path, last: Dict[str, Any]) -> Optional[Path]:
    """The pipeline saved at the last logged evaluation: the log's copy of it first (a stretch
    that was interrupted had spaCy save model-last once more, with later weights)."""
    for candidate in (out_dir / EVALUATED, out_dir / "model-last", out_dir / RESUME_POINT):
        if candidate.is_dir() and saved_at(candidate, last) and loads(candidate):
            return candidate
    return None


def replace_dir(source: Path, target: Path, move: bool) -> None:
    """target becomes source (moved, or copied through a temporary directory)."""
    if source == target:
        return
    if move:
        move_dir(source, target)
        return
    tmp = target.with_name(f".{target.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(source, tmp)
    if target.exists():
        shutil.rmtree(target)
    tmp.rename(target)


def start_afresh(
    config: Path, out_dir: Path, overrides: List[str], inputs: Dict[str, str], why: Optional[str]
) -> Stretch:
    """The seed's first stretch; a directory it cannot resume from (``why``) is moved aside first."""
    if why is not None:
        set_aside([out_dir], f"cannot resume ({why}), starting afresh")
    first = {"first_step": 0, "last_step": None}
    write_state(out_dir, {"stretches": [first], "finished": False, "config": str(config), "inputs": inputs})
    return Stretch(first_config(config, out_dir, overrides), [])


def changed_inputs(recorded: Dict[str, str], current: Dict[str, str]) -> List[str]:
    """The overrides whose file differs (or that one side lacks), e.g. ["paths.elmo_weights"]."""
    return sorted(key for key in {*recorded, *current} if recorded.get(key) != current.get(key))


def what_changed(record: Dict[str, Any], config: Path, inputs: Dict[str, str]) -> List[str]:
    """What differs between a seed's record (its metrics file or resume.json) and this call:
    "config" if the record names another config file (a run re-pointed, e.g. at a new
    dev-search choice), then the overrides whose file differs. A record from before
    configs or inputs were recorded is taken to have had these."""
    changed = changed_inputs(record.get("inputs", inputs), inputs)
    recorded_config = record.get("config")
    if recorded_config is not None and os.path.normpath(recorded_config) != os.path.normpath(config):
        changed.insert(0, "config")
    return changed


def set_aside(paths: List[Path], why: str) -> None:
    """Move each existing path to ``superseded/<time>/`` beside it: kept, but no longer the run's."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for path in paths:
        if path.exists():
            target = path.parent / "superseded" / stamp / path.name
            while target.exists():  # never replace what an earlier move kept
                target = target.parent.with_name(target.parent.name + "+") / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
            typer.echo(f"{path}: {why}; moved to {target}")


def next_stretch(config: Path, out_dir: Path, overrides: List[str], inputs: Dict[str, str]) -> Optional[Stretch]:
    """The next ``spacy train`` call for this seed, or None if training finished.
    inputs: the sha256 of the files the overrides name (``input_fingerprint``)."""
    state = read_state(out_dir)
    changed = what_changed(state, config, inputs)
    if changed:
        set_aside([out_dir], f"begun with another config or other files ({', '.join(changed)})")
        state = read_state(out_dir)
    if state["finished"]:
        return None
    records = read_jsonl(out_dir / LOG_FILE)
    if not records:
        started = out_dir.is_dir() and any(out_dir.iterdir())
        return start_afresh(config, out_dir, overrides, inputs, "no evaluation was logged" if started else None)
    last, best = records[-1], best_record(records)
    point = find_resume_point(out_dir, last)
    if point is None:
        return start_afresh(
            config,
            out_dir,
            overrides,
            inputs,
            f"no model-last saved at the last logged evaluation, step {last['step']}",
        )
    stretches = [s for s in state["stretches"] if s["first_step"] <= last["step"]] or [{"first_step": 0}]
    # The global best is in the last stretch that logged (spaCy's model-best, or the
    # resume point itself), or in an earlier one (kept aside when a later stretch began;
    # a stretch killed before its first evaluation had spaCy delete model-best).
    killed_before_logging = len(stretches) < len(state["stretches"])
    if killed_before_logging or best["step"] < stretches[-1]["first_step"]:
        best_dir = out_dir / EARLIER_BEST
    else:
        best_dir = point if best is last else out_dir / "model-best"
    if not best_dir.is_dir():
        return start_afresh(
            config, out_dir, overrides, inputs, f"{best_dir} (the best evaluation, step {best['step']}) is missing"
        )
    replace_dir(best_dir, out_dir / EARLIER_BEST, move=False)
    stretches[-1]["last_step"] = last["step"]
    state["stretches"] = stretches
    state["config"], state["inputs"] = str(config), inputs
    resumed = resume_config(config, out_dir, overrides, last, patience_start(records))
    if resumed is None:  # the killed stretch had used up its budget: only the records are left to finish
        replace_dir(point, out_dir / "model-last", move=True)
        finish(out_dir, state, records, earlier_is_best=True)
        return None
    replace_dir(point, out_dir / RESUME_POINT, move=True)
    if (out_dir / EVALUATED).exists():  # another stretch's, not the resume point
        shutil.rmtree(out_dir / EVALUATED)
    # A cut last line would glue onto the first appended record: rewrite the whole lines.
    write_jsonl_atomic(out_dir / LOG_FILE, records)
    state["stretches"].append({"first_step": last["step"] + 1, "last_step": None})
    write_state(out_dir, state)
    typer.echo(f"{out_dir}: resuming at step {last['step'] + 1} (stretch {len(state['stretches'])})")
    return Stretch(resumed, [])


def resume_config(
    config: Path, out_dir: Path, overrides: List[str], last: Dict[str, Any], patience_from: Dict[str, Any]
) -> Optional[Path]:
    """The config of the next stretch (overrides applied, every component sourced
    from the resume point, what is left of the budgets), or None if none is left."""
    cfg = config_with_overrides(config, overrides)
    training = cfg["training"]
    first_step = last["step"] + 1
    left = {
        "max_steps": training["max_steps"] - first_step,
        "patience": training["patience"] - (first_step - patience_from["step"]),
        "max_epochs": training["max_epochs"] - (last["epoch"] + 1),
    }
    for key, value in left.items():
        if training[key] > 0 and value < 1:  # 0 (and -1 for epochs) mean no limit
            return None
    # Patience stays whole: the log hands spaCy the earlier best to count it from.
    for key in ("max_steps", "max_epochs"):
        if training[key] > 0:
            training[key] = left[key]
    restarts = continue_batch_sizes(training["batcher"], first_step)
    if restarts:
        typer.echo(f"{out_dir}: {restarts}")
    point = str((out_dir / RESUME_POINT).resolve())
    for name in cfg["nlp"]["pipeline"]:
        cfg["components"][name] = {"source": point}
    # Pretrained tok2vec weights would overwrite the resumed ones at initialization.
    cfg["initialize"]["init_tok2vec"] = None
    offsets = {"epoch": last["epoch"] + 1, "step": first_step, "seconds": last["seconds"], "words": last["words"]}
    return write_stretch_config(cfg, out_dir / RESUME_CONFIG, offsets, patience_from)


def continue_batch_sizes(batcher: Dict[str, Any], first_step: int) -> Optional[str]:
    """Start the batcher's ``compounding.v1`` size at the value an uninterrupted run draws for
    step ``first_step`` (one size per step, the first at step 0); a fixed size needs nothing.
    Returns what restarts instead, for any other schedule."""
    size = batcher.get("size")
    if not isinstance(size, dict):
        return None
    if size.get("@schedules") != "compounding.v1" or not all(
        isinstance(size.get(key), (int, float)) for key in ("start", "stop", "compound")
    ):
        return f"the batch-size schedule ({size.get('@schedules')}) restarts from its first value"
    start, stop = size["start"], size["stop"]
    grown = start * size["compound"] ** first_step
    size["start"] = min(grown, stop) if start <= stop else max(grown, stop)  # thinc's clip
    return None


def config_with_overrides(config: Path, overrides: List[str]) -> Any:
    """``config`` with the ``spacy train`` overrides applied, not interpolated."""
    from spacy.cli._util import parse_config_overrides
    from spacy.util import load_config

    # parse_config_overrides empties the list it is given.
    return load_config(config, overrides=parse_config_overrides(list(overrides)), interpolate=False)


def first_config(config: Path, out_dir: Path, overrides: List[str]) -> Path:
    """The config of a seed's first stretch: ``config`` with the overrides applied,
    logging and keeping the optimizer's state as every stretch does."""
    cfg = config_with_overrides(config, overrides)
    return write_stretch_config(cfg, out_dir / FIRST_CONFIG, None)


def write_stretch_config(
    cfg: Any, path: Path, offsets: Optional[Dict[str, Any]], earlier_best: Optional[Dict[str, Any]] = None
) -> Path:
    """Write a stretch's config: its log (appended to, with ``offsets`` and the earlier
    stretches' best evaluation, when resuming) and its optimizer's state file, which
    the log saves after each evaluation and a resumed stretch starts from."""
    training = cfg["training"]
    state_file = str((path.parent / OPTIMIZER_STATE).resolve())
    training["optimizer"] = {
        "@optimizers": STATEFUL_OPTIMIZER,
        "optimizer": training["optimizer"],
        "state_file": state_file,
    }
    training["logger"] = {
        "@loggers": LOGGER,
        "output_file": str(path.parent / LOG_FILE),
        "progress_bar": training["logger"].get("progress_bar"),
        "append": offsets is not None,
        **{f"{key}_offset": value for key, value in (offsets or {}).items()},
        "optimizer_state": state_file,
        "best_score": None if earlier_best is None else earlier_best["score"],
        "best_step": None if earlier_best is None else earlier_best["step"],
        "keep_evaluated": str(path.parent / EVALUATED),
    }
    cfg.to_disk(path)
    return path


def finish(out_dir: Path, state: Dict[str, Any], records: List[Dict[str, Any]], earlier_is_best: bool) -> None:
    """After the last stretch: model-best is the best of all stretches."""
    earlier = out_dir / EARLIER_BEST
    if earlier_is_best:
        replace_dir(earlier, out_dir / "model-best", move=True)
    for leftover in (earlier, out_dir / RESUME_POINT, out_dir / EVALUATED):
        if leftover.exists():
            shutil.rmtree(leftover)
    (out_dir / OPTIMIZER_STATE).unlink(missing_ok=True)  # only a resumed stretch needs it
    state["stretches"][-1]["last_step"] = records[-1]["step"]
    state["finished"] = True
    write_state(out_dir, state)


def end_stretch(out_dir: Path) -> None:
    """Call when ``spacy train`` returned: training is over for this seed."""
    state, records = read_state(out_dir), read_jsonl(out_dir / LOG_FILE)
    if not state["stretches"]:
        state["stretches"] = [{"first_step": 0, "last_step": None}]
    earlier_is_best = best_record(records)["step"] < state["stretches"][-1]["first_step"]
    finish(out_dir, state, records, earlier_is_best)
