"""``embed``'s output files: a resumable HDF5 writer and the merging of processes' parts.

Results go to ``OUTPUT.partial`` and a small progress file (with
``--stateful``, also the LSTM state of the last checkpoint); running the
same command again continues where it stopped, and the finished file is
renamed into place at the end.

Under ``torchrun`` each process writes its share of the batches into its own
resumable part (``OUTPUT.part-R-of-N``); process 0 then merges the parts
into OUTPUT, whose datasets equal a single process's byte for byte.
"""

import glob
import json
import os
import sys
import time
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Sequence

import h5py
import numpy
from tqdm import tqdm

from ..errors import HDF5_READ_ERRORS, ElmoDiskFullError, EmbedInputError, EmbedOutputLostError, one_line_reason
from ..files.atomic import atomic_path
from ..files.disk_space import full_disk_as, hdf5_bytes, require_free_space
from ..files.json_files import parse_json, write_json_atomic

# torch is imported where a command runs, not here: `--help` stays fast.
if TYPE_CHECKING:
    from ..bilm import ElmoBiLM

LAYER_CHOICES = ("all", "top", "average")
# Seconds between checkpoints of the partial output.
CHECKPOINT_SECONDS = 30.0
# Seconds between process 0's looks for the other processes' finished parts.
MERGE_POLL_SECONDS = 2.0
# Seconds process 0 waits for parts whose files do not change before it gives up
# (their processes were never started, or died).
MERGE_STALL_SECONDS = 600.0


@dataclass
class EmbedPlan:
    """What a run embeds and how. ``run_id`` identifies the run (input, settings, weights):
    a resumed run refuses to mix outputs of another."""

    sentences: Sequence[Sequence[str]]
    batches: List[List[int]]  # line indices per batch
    run_id: Dict
    layers: str  # one of LAYER_CHOICES
    stateful: bool
    max_length: int
    announce: str = ""  # printed once the run's files are checked, as embedding starts

    def share(self, rank: int, world: int) -> "EmbedPlan":
        """Process ``rank``'s batches of ``world``: every world-th, from the rank-th."""
        return replace(self, batches=self.batches[rank::world])


def select_layers(layers: numpy.ndarray, which: str) -> numpy.ndarray:
    if which == "top":
        return layers[-1]
    if which == "average":
        return layers.mean(axis=0)
    return layers


def part_path(output_file: Path, rank: int, world: int) -> Path:
    return output_file.with_name(f"{output_file.name}.part-{rank}-of-{world}")


def partial_path(output_file: Path) -> Path:
    """Where a run writes until it finishes (then renamed to ``output_file``)."""
    return output_file.with_name(output_file.name + ".partial")


def progress_path(output_file: Path) -> Path:
    return output_file.with_name(output_file.name + ".progress.json")


def resume_point(partial: Path, progress_file: Path, run_id: Dict) -> int:
    """How many batches an earlier run of the same settings finished (0: start afresh,
    removing the leftovers of a run that never checkpointed)."""
    if partial.exists() and progress_file.exists():
        saved = read_progress(progress_file, partial)
        if saved.get("run") != run_id:
            raise EmbedInputError(
                f"{partial} holds a run with other settings or another input; "
                f"delete it (and {progress_file.name}) or rerun with the same settings"
            )
        check_partial(partial, progress_file)
        return int(saved["done_batches"])
    for stale in (partial, progress_file):
        stale.unlink(missing_ok=True)
    return 0


def state_file_for(output_file: Path, done_batches: int) -> Path:
    """The LSTM state after ``done_batches`` batches (--stateful). One file per checkpoint:
    a kill after writing a new one but before the progress file leaves intact the one
    that the progress file names."""
    return output_file.with_name(f"{output_file.name}.state-{done_batches}.npz")


def remove_states(output_file: Path, keep: Optional[Path] = None) -> None:
    for state in output_file.parent.glob(glob.escape(output_file.name) + ".state-*.npz"):
        if state != keep:
            state.unlink()


def save_states(state_file: Path, states: Dict[str, numpy.ndarray]) -> None:
    with atomic_path(state_file) as tmp:
        with open(tmp, "wb") as f:  # a file object: numpy.savez would append ".npz" to a name
            # ignore: numpy's stub cannot tell that no key is savez's own allow_pickle
            numpy.savez(f, **states)  # type: ignore[arg-type]


def _start_afresh(*files: Path) -> str:
    return f"delete {', '.join(f.name for f in files)} (in {files[0].parent}) to start afresh"


def read_progress(progress_file: Path, partial: Path) -> Dict:
    """An unfinished run's progress file, or an error naming it if it is damaged."""
    try:
        saved = parse_json(progress_file.read_text(encoding="utf8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise EmbedInputError(f"{progress_file} is damaged ({err}): {_start_afresh(progress_file, partial)}") from err
    done = saved.get("done_batches") if isinstance(saved, dict) else None
    if not (isinstance(done, int) and not isinstance(done, bool) and done >= 0):
        raise EmbedInputError(
            f"{progress_file} is damaged (no count of done batches): {_start_afresh(progress_file, partial)}"
        )
    return saved


def check_partial(partial: Path, progress_file: Path) -> None:
    """The unfinished output opens as HDF5 (a damaged one fails here, naming it, not midway)."""
    try:
        with h5py.File(partial, "r") as out:
            list(out)  # its root group's metadata too
    except HDF5_READ_ERRORS as err:
        raise EmbedInputError(
            f"{partial} is damaged (not a readable HDF5 file: {one_line_reason(err)}): "
            f"{_start_afresh(partial, progress_file)}"
        ) from err


def load_states(bilm: "ElmoBiLM", state_file: Path, partial: Path, progress_file: Path) -> None:
    """The LSTM state a stateful run saved at its last checkpoint, or an error naming the file."""
    try:
        with numpy.load(state_file, allow_pickle=False) as arrays:
            bilm.import_states(dict(arrays))
    except FileNotFoundError as err:
        raise EmbedInputError(
            f"{state_file} is missing (a stateful run's state): {_start_afresh(partial, progress_file)}"
        ) from err
    except (OSError, ValueError, EOFError, AttributeError, zipfile.BadZipFile) as err:  # not an .npz, truncated
        raise EmbedInputError(
            f"{state_file} is damaged ({one_line_reason(err)}): {_start_afresh(state_file, partial, progress_file)}"
        ) from err


def write_sentence_index(out: h5py.File, lines: Sequence[str]) -> None:
    """AllenNLP's ``sentence_to_index``: one JSON map from sentence text to dataset name."""
    if "sentence_to_index" in out:
        del out["sentence_to_index"]
    text = json.dumps({line.strip(): str(i) for i, line in enumerate(lines)})
    require_free_space(out.filename, len(text.encode("utf8")))
    index_dataset = out.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype())
    index_dataset[0] = text


def _no_space(path: Path) -> str:
    return (
        f"no space left on device for {path}: free some (or give an OUTPUT_FILE elsewhere) and rerun "
        "the same command: it resumes from the last checkpoint"
    )


@contextmanager
def disk_full_as_one_line(path: Path) -> Iterator[None]:
    """A full disk as one line, not h5py's tracebacks; a write that would fill it, refused
    before it, says how much is free and needed."""
    try:
        with full_disk_as(path):
            yield
    except ElmoDiskFullError as err:
        raise EmbedInputError(_no_space(path) + (f" ({err.detail})" if err.detail else "")) from err


# The attribute of a line's dataset that holds its rows' tokens (JSON): readers of
# AllenNLP's layout, which read datasets, never see it.
TOKENS_ATTR = "tokens"


def write_batch(out: h5py.File, batch: Sequence[int], vectors: Sequence[numpy.ndarray], plan: EmbedPlan) -> None:
    """One batch's datasets (the plan's layers), each with its tokens, once the disk has room for them."""
    arrays = [select_layers(array, plan.layers).astype(numpy.float32) for array in vectors]
    tokens = [json.dumps(list(plan.sentences[index])) for index in batch]
    require_free_space(out.filename, hdf5_bytes(arrays) + sum(len(t.encode("utf8")) for t in tokens))
    for index, array, text in zip(batch, arrays, tokens):
        dataset = out.create_dataset(str(index), data=array)
        # A string of any length (the global heap), not a list: object headers hold 64 KiB.
        dataset.attrs.create(TOKENS_ATTR, text, dtype=h5py.string_dtype())


def embed_batches(
    output_file: Path,
    bilm: "ElmoBiLM",
    plan: EmbedPlan,
    progress: bool,
    lines_to_index: Optional[Sequence[str]] = None,
) -> None:
    """The plan's batches into ``output_file`` (resumably); with ``lines_to_index``, also
    AllenNLP's ``sentence_to_index``; a part file instead records its run."""
    partial = partial_path(output_file)
    done_batches = _resume(output_file, bilm, plan)
    if plan.announce:
        print(plan.announce, file=sys.stderr, flush=True)
    output_file.parent.mkdir(parents=True, exist_ok=True)
    bar = tqdm(
        total=sum(map(len, plan.batches)),
        initial=sum(len(b) for b in plan.batches[:done_batches]),
        unit="sent",
        desc="embed",
        disable=not progress,
        file=sys.stderr,
    )
    # The bar is closed however the run ends: an error then starts a line of its own.
    with bar, disk_full_as_one_line(partial):
        require_free_space(partial, 0)
        with h5py.File(partial, "a") as out:
            # Batches written after the last checkpoint are redone.
            for batch in plan.batches[done_batches:]:
                for index in batch:
                    if str(index) in out:
                        del out[str(index)]
            _embed_remaining(out, output_file, bilm, plan, done_batches, bar)
            if lines_to_index is not None:
                write_sentence_index(out, lines_to_index)
            else:
                out.attrs["run"] = json.dumps(plan.run_id, sort_keys=True)
    rename_finished(partial, output_file)
    progress_path(output_file).unlink(missing_ok=True)
    remove_states(output_file)


def rename_finished(partial: Path, output_file: Path) -> None:
    """The finished partial output into place. One removed while the run wrote it (the writes
    went on into the removed file) is said to be gone; nothing else is touched."""
    try:
        os.replace(partial, output_file)
    except FileNotFoundError:
        raise EmbedOutputLostError(
            f"{partial} was removed while this run wrote it: this run's output is lost, nothing else "
            f"(the input{', the old ' + output_file.name if output_file.exists() else ''} and the biLM untouched); "
            "run the command again to redo it"
        ) from None


def _resume(output_file: Path, bilm: "ElmoBiLM", plan: EmbedPlan) -> int:
    """Where an earlier run of this plan stopped (batches done), with the biLM's state then."""
    partial, progress_file = partial_path(output_file), progress_path(output_file)
    done_batches = resume_point(partial, progress_file, plan.run_id)
    state_file = state_file_for(output_file, done_batches) if plan.stateful and done_batches else None
    remove_states(output_file, keep=state_file)  # any other is from a checkpoint that never finished
    bilm.reset_states()
    if state_file is not None:
        load_states(bilm, state_file, partial, progress_file)
    return done_batches


def _embed_remaining(
    out: h5py.File, output_file: Path, bilm: "ElmoBiLM", plan: EmbedPlan, done_batches: int, bar: tqdm
) -> None:
    """The batches from ``done_batches`` on into ``out``, checkpointed every CHECKPOINT_SECONDS and at the end."""
    batches, sentences = plan.batches, plan.sentences
    last_checkpoint = time.monotonic()
    for number in range(done_batches, len(batches)):
        batch = batches[number]
        # A batch's vectors come from its own lines alone (the type cache would carry
        # last-bit differences from earlier batches): any split of the batches across
        # processes then gives the same bytes.
        bilm.type_cache.clear()
        vectors = bilm.embed_batch(
            [sentences[i] for i in batch], stateful=plan.stateful, max_length=plan.max_length or None
        )
        write_batch(out, batch, vectors, plan)
        if number < len(batches) - 1:
            bar.update(len(batch))
        else:  # shown by the bar's close, which shows it again whatever update showed
            bar.n += len(batch)
        if time.monotonic() - last_checkpoint > CHECKPOINT_SECONDS or number == len(batches) - 1:
            stateful_bilm = bilm if plan.stateful else None
            checkpoint(out, output_file, progress_path(output_file), plan.run_id, number + 1, stateful_bilm)
            last_checkpoint = time.monotonic()


def checkpoint(
    out: h5py.File,
    output_file: Path,
    progress_file: Path,
    run_id: Dict,
    done_batches: int,
    stateful_bilm: Optional["ElmoBiLM"],
) -> None:
    """Make ``done_batches`` durable in order: the HDF5 output on disk, then (--stateful) the
    LSTM state, then the progress file that vouches for both. A kill between any two
    leaves the previous checkpoint whole, and a resumed run equals an uninterrupted one."""
    out.flush()
    os.fsync(out.id.get_vfd_handle())
    state_file = None
    if stateful_bilm is not None:
        state_file = state_file_for(output_file, done_batches)
        save_states(state_file, stateful_bilm.export_states())
    write_json_atomic(progress_file, {"run": run_id, "done_batches": done_batches})
    remove_states(output_file, keep=state_file)


def finished_part(path: Path, run_id: Dict) -> bool:
    """Whether ``path`` is a part this very run finished (a rerun skips it)."""
    if not path.is_file():
        return False
    try:
        with h5py.File(path, "r") as part:
            return part.attrs.get("run") == json.dumps(run_id, sort_keys=True)
    except HDF5_READ_ERRORS:  # damaged (a kill mid-write): redone
        return False


def wait_for_parts(output_file: Path, parts: List[Path], run_id: Dict, progress: bool) -> None:
    """Until every part is finished; an error once the unfinished ones' files have not
    changed for MERGE_STALL_SECONDS."""
    waiting = [p for p in parts if not finished_part(p, run_id)]
    if waiting and progress:
        print(f"waiting for {len(waiting)} other process(es) to finish their parts", file=sys.stderr, flush=True)
    seen, since = _last_changes(waiting), time.monotonic()
    while waiting:
        time.sleep(MERGE_POLL_SECONDS)
        waiting = [p for p in waiting if not finished_part(p, run_id)]
        changes = _last_changes(waiting)
        if changes != seen:
            seen, since = changes, time.monotonic()
        elif waiting and time.monotonic() - since > MERGE_STALL_SECONDS:
            ranks = ", ".join(str(parts.index(p)) for p in waiting)
            raise EmbedInputError(
                f"waited {MERGE_STALL_SECONDS:g} s for process {ranks}'s part of {output_file} "
                f"(WORLD_SIZE={len(parts)}), and it wrote nothing meanwhile: was it started, by torchrun "
                "(which sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT for each)? "
                "Rerun the same command: finished parts are kept"
            )


def _last_changes(parts: List[Path]) -> List[Optional[int]]:
    """When each part's files (the part, its partial and progress files) last changed."""
    times: List[Optional[int]] = []
    for part in parts:
        for path in (part, partial_path(part), progress_path(part)):
            try:
                times.append(path.stat().st_mtime_ns)
            except FileNotFoundError:
                times.append(None)
    return times


def merge_parts(output_file: Path, lines: Sequence[str], run_id: Dict, world: int, progress: bool = True) -> None:
    """Process 0's last step: wait for every process's finished part of this run, copy
    their datasets into ``output_file`` in line order, then remove the parts."""
    parts = [part_path(output_file, rank, world) for rank in range(world)]
    wait_for_parts(output_file, parts, run_id, progress)
    partial = partial_path(output_file)
    sources = [h5py.File(p, "r") for p in parts]
    try:
        with disk_full_as_one_line(partial), h5py.File(partial, "w") as out:
            for index in range(len(lines)):
                name = str(index)
                source = next((s for s in sources if name in s), None)
                if source is None:
                    raise EmbedInputError(f"line {index + 1} is in none of the parts {parts[0].name}..: rerun")
                require_free_space(partial, hdf5_bytes([source[name]]))
                dataset = out.create_dataset(name, data=source[name][...])
                dataset.attrs.update(source[name].attrs)  # its tokens
            write_sentence_index(out, lines)
    finally:
        for source in sources:
            source.close()
    rename_finished(partial, output_file)
    for part in parts:
        part.unlink()
