"""The optimizer's state across the stretches of a resumed ``spacy train``.

spaCy saves the pipeline at each evaluation but not the optimizer, so a run
resumed from ``model-last`` restarted Adam's moments and bias correction: the
first updates after a resume took full-size steps from zero moments, and a
resumed run's dev score could fall for hundreds of steps.

``spacy-elmo.StatefulOptimizer.v1`` wraps a config's optimizer and names the
file its state is kept in; ``spacy-elmo.TrainingLog.v2`` (given the same file
as ``optimizer_state``) saves that state after each evaluation, once spaCy has
saved ``model-last``, and restores it when a stretch starts from the step the
file was saved at.

How the log gets the optimizer: ``OPTIMIZERS``, a hand-off keyed by state file.
spaCy 3.8 gives a logger no supported way to the optimizer it trains with:
``spacy.training.loop.train`` resolves ``[training]`` and passes the optimizer
to its update loop only; the logger's setup gets ``(nlp, stdout, stderr)`` and
each step's ``info`` holds no optimizer; ``nlp._optimizer`` is private and is
the optimizer ``init_nlp`` made when it resolved the same config before
(``spacy train`` resolves ``[training]`` twice, so there are two); a
``${training.optimizer}`` reference in the logger's arguments resolves to a
third optimizer of its own. So ``StatefulOptimizer.v1`` offers each optimizer
it makes under its file, a later one replacing an earlier (``train``'s
resolution comes after ``init_nlp``'s), and the logger's setup, which spaCy
calls after that resolution, takes it out. Thinc's ``Optimizer`` has
``__slots__`` without ``__weakref__``, so the hand-off cannot hold weak
references; it holds at most one optimizer per state file, and none once a
log has taken it (the run's log then keeps it as long as the run lasts).

Thinc keys an optimizer's state by (node id, parameter name), and node ids
differ from one process to the next: the file names each parameter by its
component, its node's position in the component model's ``walk()`` and its
name (a torch shim's parameters by the shim's position and torch's name).
Learning-rate schedules are not saved: they restart (our configs use a
constant rate)."""

from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import srsly
from spacy.util import registry
from thinc.api import Model, Optimizer, get_current_ops
from thinc.util import to_numpy

from ..errors import ElmoError
from ..files.atomic import atomic_path

ParamKey = Tuple[int, str]


class OptimizerHandoff:
    """The optimizer made for each state file, from the config's resolution until a
    log's setup takes it (see the module's docstring for why spaCy needs this)."""

    def __init__(self) -> None:
        self._waiting: Dict[str, Optimizer] = {}

    def offer(self, state_file: str, optimizer: Optimizer) -> None:
        self._waiting[_file_key(state_file)] = optimizer  # a later resolution replaces an earlier one

    def take(self, state_file: str) -> Optimizer:
        try:
            return self._waiting.pop(_file_key(state_file))
        except KeyError as err:
            raise ElmoError(
                f"optimizer_state = {state_file!r}, but no optimizer was made for that file: "
                'wrap [training.optimizer] in @optimizers = "spacy-elmo.StatefulOptimizer.v1" with the same state_file'
            ) from err


OPTIMIZERS = OptimizerHandoff()


@registry.optimizers("spacy-elmo.StatefulOptimizer.v1")
def stateful_optimizer(optimizer: Optimizer, state_file: str) -> Optimizer:
    """``spacy-elmo.StatefulOptimizer.v1``: ``optimizer`` itself, offered to the log under ``state_file``."""
    OPTIMIZERS.offer(state_file, optimizer)
    return optimizer


def _file_key(state_file: str) -> str:
    return str(Path(state_file).resolve())


def parameter_names(nlp: Any) -> Dict[ParamKey, Tuple[str, int]]:
    """Each trainable parameter's optimizer key -> (a name that is the same in every
    process, its size)."""
    names: Dict[ParamKey, Tuple[str, int]] = {}
    for component, proc in nlp.pipeline:
        model = getattr(proc, "model", None)
        if not isinstance(model, Model):
            continue
        for position, node in enumerate(model.walk()):
            for param in node.param_names:
                if node.has_param(param):
                    size = node.get_param(param).size
                    names.setdefault((node.id, param), (f"{component}/{position}/{param}", size))
            for shim_position, shim in enumerate(node.shims):
                torch_model = getattr(shim, "_model", None)
                for param, value in getattr(torch_model, "named_parameters", lambda: [])():
                    name = f"{component}/{position}/shim{shim_position}/{param}"
                    names.setdefault((shim.id, param), (name, value.numel()))
    return names


def save_state(nlp: Any, optimizer: Optimizer, path: Path, step: int) -> None:
    """Write the optimizer's per-parameter state after the evaluation at ``step``."""
    names = parameter_names(nlp)
    params: Dict[str, Dict[str, Any]] = {}
    for key, count in optimizer.nr_update.items():
        if key not in names:
            continue
        entry: Dict[str, Any] = {"nr_update": count}
        for slot, table in (("mom1", optimizer.mom1), ("mom2", optimizer.mom2), ("average", optimizer.averages)):
            if table is not None and key in table:
                entry[slot] = to_numpy(table[key])
        params[names[key][0]] = entry
    with atomic_path(path) as tmp:
        srsly.write_msgpack(tmp, {"step": step, "params": params})


def restore_state(nlp: Any, optimizer: Optimizer, path: Path, step: int) -> Optional[str]:
    """Put the state saved at ``step`` back into ``optimizer``; why not, if it was not."""
    if not path.is_file():
        return f"no optimizer state at {path}"
    saved = srsly.read_msgpack(path)
    if saved.get("step") != step:
        return f"{path} holds the optimizer state of step {saved.get('step')}, not of step {step}"
    keys = {name: (key, size) for key, (name, size) in parameter_names(nlp).items()}
    unknown = sorted(name for name in saved["params"] if name not in keys)
    if unknown:
        return f"{path} names {len(unknown)} parameters this pipeline lacks, e.g. {unknown[0]}"
    for name, entry in saved["params"].items():
        if "mom1" in entry and entry["mom1"].size != keys[name][1]:
            return f"{path}: {name} has {entry['mom1'].size} values there, {keys[name][1]} in this pipeline"
    ops = get_current_ops()
    for name, entry in saved["params"].items():
        key = keys[name][0]
        optimizer.nr_update[key] = entry["nr_update"]
        for slot, table in (("mom1", optimizer.mom1), ("mom2", optimizer.mom2), ("average", optimizer.averages)):
            if table is not None and slot in entry:
                table[key] = ops.asarray_f(entry[slot].copy())  # msgpack gives read-only arrays
    return None
