"""``embed``: one sentence per line in, one HDF5 dataset of ELMo vectors per line out.

The output is what AllenNLP's ``allennlp elmo`` wrote, so scripts that read
those files keep working: dataset ``"i"`` holds line i's vectors and
``sentence_to_index`` a JSON map from sentence text to its dataset name.

Long inputs are resumable: results go to ``OUTPUT.partial`` and a small
progress file (with ``--stateful``, also the LSTM state of the last
checkpoint); running the same command again continues where it stopped. An
existing OUTPUT (always a finished file) is replaced only with ``--overwrite``.

Under ``torchrun --nproc_per_node N -m spacy_elmo embed ...`` each process
embeds every N-th batch of the single-process plan into its own resumable
part (``OUTPUT.part-R-of-N``); process 0 then merges the parts into OUTPUT,
whose datasets equal a single process's byte for byte (same batches, same
threads per process).
"""

import glob
import json
import os
import sys
import time
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

import h5py
import numpy
import typer
from tqdm import tqdm

from ..errors import ElmoError, EmbedInputError
from ..io import atomic_path, file_sha256, iter_utf8_lines, require_writable_path, write_json_atomic
from . import app

# torch and spaCy are imported where a command runs, not here: `--help` stays fast.
if TYPE_CHECKING:
    from ..bilm import ElmoBiLM

LAYER_CHOICES = ("all", "top", "average")
# Seconds between checkpoints of the partial output.
CHECKPOINT_SECONDS = 30.0
# Seconds between process 0's looks for the other processes' finished parts.
MERGE_POLL_SECONDS = 2.0


def read_lines(path: Path) -> List[str]:
    """Lines of a UTF-8 file; a clear error names the first undecodable line."""
    if not path.is_file():
        raise EmbedInputError(f"input file not found: {path}")
    return list(iter_utf8_lines(path, EmbedInputError))


def make_tokenizer(spacy_tokenizer: Optional[str]) -> Callable[[str], List[str]]:
    """Whitespace splitting, or a spaCy tokenizer (language code, package or path)."""
    if not spacy_tokenizer:
        return str.split
    import spacy
    from spacy.util import get_lang_class

    try:
        get_lang_class(spacy_tokenizer)
        nlp = spacy.blank(spacy_tokenizer)
    except (ImportError, KeyError, ValueError):
        try:
            nlp = spacy.load(spacy_tokenizer, exclude=["*"])
        except OSError as err:
            raise EmbedInputError(
                f"--spacy-tokenizer {spacy_tokenizer!r} is neither a language code (e.g. 'en') "
                f"nor a loadable spaCy pipeline: {err}"
            ) from None
    tokenizer = nlp.tokenizer
    return lambda text: [t.text for t in tokenizer(text) if not t.text.isspace()]


def plan_batches(lengths: Sequence[int], batch_size: int, stateful: bool) -> List[List[int]]:
    """Line indices per batch. Stateful: file order. Stateless: sorted by length."""
    order = list(range(len(lengths)))
    if not stateful:
        order.sort(key=lambda i: -lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def select_layers(layers: numpy.ndarray, which: str) -> numpy.ndarray:
    if which == "top":
        return layers[-1]
    if which == "average":
        return layers.mean(axis=0)
    return layers


def check_embed_options(layers: str, batch_size: int, max_length: int = 0, precision: str = "fp32") -> None:
    if layers not in LAYER_CHOICES:
        raise EmbedInputError(f"--layers must be one of {LAYER_CHOICES}, got {layers!r}")
    if batch_size < 1:
        raise EmbedInputError(f"--batch-size must be >= 1, got {batch_size}")
    if max_length < 0:
        raise EmbedInputError(f"--max-length must be >= 0 (0: no windows), got {max_length}")
    from ..bilm.kernels import check_precision

    check_precision(precision, "--precision")


def process_share() -> Tuple[int, int]:
    """``(rank, world size)``: torchrun's ``RANK``/``WORLD_SIZE``, else ``(0, 1)``."""
    try:
        rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        raise EmbedInputError("RANK and WORLD_SIZE (set by torchrun) must be integers") from None
    if world < 1 or not 0 <= rank < world:
        raise EmbedInputError(f"RANK {rank} / WORLD_SIZE {world} (set by torchrun) do not fit together")
    return rank, world


def check_share(share: Tuple[int, int], stateful: bool) -> None:
    if share[1] > 1 and stateful:
        raise EmbedInputError(
            "--stateful carries state from line to line in file order: it cannot be split "
            "across processes (run it in one process)"
        )


def part_path(output_file: Path, rank: int, world: int) -> Path:
    return output_file.with_name(f"{output_file.name}.part-{rank}-of-{world}")


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


def check_output_free(output_file: Path, overwrite: bool) -> None:
    """A run writes OUTPUT.partial and renames it into place at its end, so an existing
    OUTPUT is never this run's unfinished work: it is replaced only when asked."""
    if output_file.exists() and not overwrite:
        raise EmbedInputError(
            f"OUTPUT_FILE {output_file} already exists: give --overwrite to replace it, or another name"
        )


def _start_afresh(*files: Path) -> str:
    return f"delete {', '.join(f.name for f in files)} (in {files[0].parent}) to start afresh"


def read_progress(progress_file: Path, partial: Path) -> Dict:
    """An unfinished run's progress file, or an error naming it if it is damaged."""
    try:
        saved = json.loads(progress_file.read_text(encoding="utf8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise EmbedInputError(f"{progress_file} is damaged ({err}): {_start_afresh(progress_file, partial)}") from None
    done = saved.get("done_batches") if isinstance(saved, dict) else None
    if not (isinstance(done, int) and not isinstance(done, bool) and done >= 0):
        raise EmbedInputError(
            f"{progress_file} is damaged (no count of done batches): {_start_afresh(progress_file, partial)}"
        )
    return saved


def check_partial(partial: Path, progress_file: Path) -> None:
    """The unfinished output opens as HDF5 (a damaged one fails here, naming it, not midway)."""
    try:
        with h5py.File(partial, "r"):
            pass
    except OSError:
        raise EmbedInputError(
            f"{partial} is damaged (not a readable HDF5 file): {_start_afresh(partial, progress_file)}"
        ) from None


def load_states(bilm: "ElmoBiLM", state_file: Path, partial: Path, progress_file: Path) -> None:
    """The LSTM state a stateful run saved at its last checkpoint, or an error naming the file."""
    try:
        with numpy.load(state_file, allow_pickle=False) as arrays:
            bilm.import_states(dict(arrays))
    except FileNotFoundError:
        raise EmbedInputError(
            f"{state_file} is missing (a stateful run's state): {_start_afresh(partial, progress_file)}"
        ) from None
    except (OSError, ValueError, EOFError, AttributeError, zipfile.BadZipFile) as err:  # not an .npz, truncated
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise EmbedInputError(
            f"{state_file} is damaged ({reason}): {_start_afresh(state_file, partial, progress_file)}"
        ) from None


def write_sentence_index(out: h5py.File, lines: Sequence[str]) -> None:
    """AllenNLP's ``sentence_to_index``: one JSON map from sentence text to dataset name."""
    if "sentence_to_index" in out:
        del out["sentence_to_index"]
    index_dataset = out.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype())
    index_dataset[0] = json.dumps({line.strip(): str(i) for i, line in enumerate(lines)})


def embed_file(
    input_file: Path,
    output_file: Path,
    bilm: "ElmoBiLM",
    layers: str = "all",
    batch_size: int = 64,
    stateful: bool = False,
    tokenize: Callable[[str], List[str]] = str.split,
    settings: Optional[Dict] = None,
    progress: bool = True,
    max_length: int = 256,
    share: Tuple[int, int] = (0, 1),
) -> int:
    """Embed every line of ``input_file`` into ``output_file``; returns the line count.

    ``settings`` identifies the run (weights, tokenizer...) so that a resumed
    run refuses to mix outputs of different settings. ``share = (rank, world)``:
    this process embeds every world-th batch into its part, and process 0
    merges the parts (see the module's docstring).
    """
    check_embed_options(layers, batch_size, max_length)
    input_file, output_file = Path(input_file), Path(output_file)
    check_share(share, stateful)
    rank, world = share
    lines = read_lines(input_file)
    sentences = [tokenize(line) for line in lines]
    batches = plan_batches([len(s) for s in sentences], batch_size, stateful)
    run_id = {
        "input_sha256": file_sha256(input_file),
        "layers": layers,
        "batch_size": batch_size,
        "stateful": stateful,
        "max_length": max_length,
        **(settings or {}),
    }
    if world > 1:
        target = part_path(output_file, rank, world)
        if not _finished_part(target, run_id):
            _embed_batches(
                target, bilm, sentences, batches[rank::world], run_id, layers, stateful, max_length, progress
            )
        if rank == 0:
            merge_parts(output_file, lines, run_id, world, progress)
        return len(lines)
    _embed_batches(
        output_file, bilm, sentences, batches, run_id, layers, stateful, max_length, progress, lines_to_index=lines
    )
    return len(lines)


def _embed_batches(
    output_file: Path,
    bilm: "ElmoBiLM",
    sentences,
    batches,
    run_id: Dict,
    layers: str,
    stateful: bool,
    max_length: int,
    progress: bool,
    lines_to_index: Optional[Sequence[str]] = None,
):
    """``batches`` of ``sentences`` into ``output_file`` (resumably); with ``lines_to_index``, also
    AllenNLP's ``sentence_to_index``; a part file instead records its run."""
    partial = output_file.with_name(output_file.name + ".partial")
    progress_file = output_file.with_name(output_file.name + ".progress.json")
    done_batches = resume_point(partial, progress_file, run_id)
    state_file = state_file_for(output_file, done_batches) if stateful and done_batches else None
    remove_states(output_file, keep=state_file)  # any other is from a checkpoint that never finished
    bilm.reset_states()
    if state_file is not None:
        load_states(bilm, state_file, partial, progress_file)
    output_file.parent.mkdir(parents=True, exist_ok=True)
    n_done_lines = sum(len(b) for b in batches[:done_batches])
    bar = tqdm(
        total=sum(map(len, batches)),
        initial=n_done_lines,
        unit="sent",
        desc="embed",
        disable=not progress,
        file=sys.stderr,
    )
    with h5py.File(partial, "a") as out:
        # Batches written after the last checkpoint are redone.
        for batch in batches[done_batches:]:
            for index in batch:
                if str(index) in out:
                    del out[str(index)]
        last_checkpoint = time.monotonic()
        for number in range(done_batches, len(batches)):
            batch = batches[number]
            # A batch's vectors come from its own lines alone (the type cache would carry
            # last-bit differences from earlier batches): any split of the batches across
            # processes then gives the same bytes.
            bilm.type_cache.clear()
            vectors = bilm.embed_batch([sentences[i] for i in batch], stateful=stateful, max_length=max_length or None)
            for index, array in zip(batch, vectors):
                out.create_dataset(str(index), data=select_layers(array, layers).astype(numpy.float32))
            bar.update(len(batch))
            if time.monotonic() - last_checkpoint > CHECKPOINT_SECONDS or number == len(batches) - 1:
                checkpoint(out, output_file, progress_file, run_id, number + 1, bilm if stateful else None)
                last_checkpoint = time.monotonic()
        if lines_to_index is not None:
            write_sentence_index(out, lines_to_index)
        else:
            out.attrs["run"] = json.dumps(run_id, sort_keys=True)
    bar.close()
    os.replace(partial, output_file)
    progress_file.unlink(missing_ok=True)
    remove_states(output_file)


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


def _finished_part(path: Path, run_id: Dict) -> bool:
    """Whether ``path`` is a part this very run finished (a rerun skips it)."""
    if not path.is_file():
        return False
    try:
        with h5py.File(path, "r") as part:
            return part.attrs.get("run") == json.dumps(run_id, sort_keys=True)
    except OSError:
        return False


def merge_parts(output_file: Path, lines: Sequence[str], run_id: Dict, world: int, progress: bool = True) -> None:
    """Process 0's last step: wait for every process's finished part of this run, copy
    their datasets into ``output_file`` in line order, then remove the parts."""
    parts = [part_path(output_file, rank, world) for rank in range(world)]
    waiting = [p for p in parts if not _finished_part(p, run_id)]
    if waiting and progress:
        typer.echo(f"waiting for {len(waiting)} other process(es) to finish their parts", err=True)
    while waiting:
        time.sleep(MERGE_POLL_SECONDS)
        waiting = [p for p in waiting if not _finished_part(p, run_id)]
    partial = output_file.with_name(output_file.name + ".partial")
    sources = [h5py.File(p, "r") for p in parts]
    try:
        with h5py.File(partial, "w") as out:
            for index in range(len(lines)):
                name = str(index)
                source = next((s for s in sources if name in s), None)
                if source is None:
                    raise EmbedInputError(f"line {index + 1} is in none of the parts {parts[0].name}..: rerun")
                out.create_dataset(name, data=source[name][...])
            write_sentence_index(out, lines)
    finally:
        for source in sources:
            source.close()
    os.replace(partial, output_file)
    for part in parts:
        part.unlink()


@app.command("embed")
def embed_command(
    input_file: Path = typer.Argument(
        ..., help="Text file, one sentence per line (UTF-8). Blank lines give empty datasets."
    ),
    output_file: Path = typer.Argument(
        ..., help="HDF5 file to write: dataset 'i' per line i, plus 'sentence_to_index'."
    ),
    options_file: Optional[Path] = typer.Option(
        None, "--options-file", help="bilm-tf/AllenNLP options.json (with --weight-file)"
    ),
    weight_file: Optional[Path] = typer.Option(
        None, "--weight-file", help="bilm-tf/AllenNLP weights.hdf5 (with --options-file)"
    ),
    bilm_dir: Optional[Path] = typer.Option(
        None, "--bilm-dir", help="a biLM directory (`pretrain` output). None of the three: the bundled English biLM"
    ),
    layers: str = typer.Option(
        "all", "--layers", help="all: (L+1, n, 2P); top: (n, 2P); average: (n, 2P) mean of the layers"
    ),
    batch_size: int = typer.Option(
        64,
        "--batch-size",
        help="Lines per step: the unit of progress and resume; with --stateful, the batch whose rows carry state (stateless steps are re-batched by length inside)",
    ),
    stateful: bool = typer.Option(
        False, "--stateful", help="Carry LSTM state across batches like bilm-tf (lines run in file order)"
    ),
    spacy_tokenizer: Optional[str] = typer.Option(
        None, "--spacy-tokenizer", help="Tokenise lines with spaCy: a language code ('en') or a pipeline name/path"
    ),
    device: str = typer.Option("cpu", "--device", help="torch device, e.g. cpu or cuda:0"),
    max_length: int = typer.Option(
        256,
        "--max-length",
        help="Longer lines run in overlapping windows of this many tokens (0: never; --stateful: never)",
    ),
    precision: str = typer.Option(
        "fp32",
        "--precision",
        help="fp32 (exact), int8 (quantized matmuls on CPU: faster, not exact: on the bundled biLM, whose values reach about 5, max abs difference from fp32 0.06-0.15 per layer was measured, mean cosine 0.9994) or bf16 (bfloat16 matmuls where the CPU/GPU has native bf16; SPACY_ELMO_FORCE_BF16=1 runs it emulated elsewhere)",
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace OUTPUT_FILE if it exists (else an existing one is refused)"
    ),
):
    """Embed a file of sentences with an ELMo biLM (like AllenNLP's `allennlp elmo`).
    Under torchrun, the processes share the work (see `embed`'s module docs)."""
    from ..bilm.device import resolve_device

    try:
        check_embed_options(layers, batch_size, max_length, precision)
        torch_device = resolve_device(device, precision)
        share = process_share()
        check_share(share, stateful)
        require_writable_path(output_file, "OUTPUT_FILE")
        check_output_free(output_file, overwrite)
        source = weight_source(options_file, weight_file, bilm_dir)
        bilm = load_bilm(**source).to(torch_device)
        bilm.set_precision(precision)
        n = embed_file(
            input_file,
            output_file,
            bilm,
            layers=layers,
            batch_size=batch_size,
            stateful=stateful,
            max_length=max_length,
            tokenize=make_tokenizer(spacy_tokenizer),
            share=share,
            settings={
                **{k: str(Path(v).resolve()) for k, v in source.items() if v},
                "spacy_tokenizer": spacy_tokenizer,
                "precision": precision,
            },
        )
    except ElmoError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=1)
    if share[0] == 0:
        typer.echo(f"wrote {n} sentences to {output_file}", err=True)


def weight_source(options_file: Optional[Path], weight_file: Optional[Path], bilm_dir: Optional[Path]) -> Dict:
    """What to load: the files, the directory, or (none given) the bundled biLM."""
    if (options_file is None) != (weight_file is None):
        raise EmbedInputError("--options-file and --weight-file go together: give both (or --bilm-dir)")
    if bilm_dir is not None and options_file is not None:
        raise EmbedInputError("give either --bilm-dir or --options-file/--weight-file, not both")
    if options_file is None and bilm_dir is None:
        from ..loaders import default_bilm_dir

        bilm_dir = default_bilm_dir()
        if bilm_dir is None:
            raise EmbedInputError("this install has no bundled biLM: give --options-file/--weight-file or --bilm-dir")
    return {"options_file": options_file, "weight_file": weight_file, "bilm_dir": bilm_dir}


def load_bilm(**source: Any) -> "ElmoBiLM":
    """``loaders.load_bilm``, imported when a command runs (it brings torch and spaCy)."""
    from ..loaders import load_bilm as load

    return load(**source)
