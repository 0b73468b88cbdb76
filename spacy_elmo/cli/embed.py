"""``embed``: one sentence per line in, one HDF5 dataset of ELMo vectors per line out.

The output is what AllenNLP's ``allennlp elmo`` wrote, so scripts that read
those files keep working: dataset ``"i"`` holds line i's vectors (its
attribute ``tokens`` the tokens its rows are, as JSON) and
``sentence_to_index`` a JSON map from sentence text to its dataset name.

Long inputs are resumable: running the same command again continues where it
stopped. An existing OUTPUT (always a finished file) is replaced only with
``--overwrite``.

Under ``torchrun --nproc_per_node N -m spacy_elmo embed ...`` each process
embeds every N-th batch of the single-process plan into its own resumable
part; process 0 then merges the parts into OUTPUT, whose datasets equal a
single process's byte for byte (same batches, same threads per process).
How the files are written, resumed and merged: ``embed_writer.py``.
"""

from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

import typer

from ..defaults import DEFAULT_MAX_SEGMENT_LENGTH
from ..errors import ElmoError, EmbedInputError
from ..files.hashing import arrays_sha256, file_sha256
from ..files.locks import exclusive_lock, lock_path
from ..files.paths import require_readable, require_writable_path, same_file, special_file_kind
from ..files.text_lines import iter_utf8_lines
from . import app
from .embed_writer import (
    LAYER_CHOICES,
    EmbedPlan,
    embed_batches,
    finished_part,
    merge_parts,
    part_path,
    partial_path,
    progress_path,
)

# How this command names the three ways of giving weights (a component's config: its keys).
WEIGHT_OPTIONS = ("--options-file", "--weight-file", "--bilm-dir")
# torch and spaCy are imported where a command runs, not here: `--help` stays fast.
if TYPE_CHECKING:
    import torch

    from ..bilm import ElmoBiLM


def read_lines(path: Path) -> List[str]:
    """Lines of a UTF-8 file; a clear error names the first undecodable line."""
    check_input_file(path)
    return list(iter_utf8_lines(path, EmbedInputError))


def check_input_file(path: Path) -> None:
    if path.is_dir():
        raise EmbedInputError(f"the input {path} is a directory: give a text file, one sentence per line")
    kind = special_file_kind(path)
    if kind:  # read twice (its sha256 names the run, then its lines): a pipe or device cannot be
        raise EmbedInputError(
            f"the input {path} is a {kind}, not a regular file: give a text file, one sentence per line"
        )
    if not path.is_file():
        raise EmbedInputError(f"input file not found: {path}")
    require_readable(path, "the input")


def make_tokenizer(spacy_tokenizer: Optional[str]) -> Callable[[str], List[str]]:
    """Whitespace splitting, or a spaCy tokenizer (language code, package or path)."""
    if not spacy_tokenizer:
        return str.split
    import spacy

    if is_language_code(spacy_tokenizer):
        nlp = spacy.blank(spacy_tokenizer)
    else:
        try:
            nlp = spacy.load(spacy_tokenizer, exclude=["*"])
        except OSError as err:
            raise EmbedInputError(
                f"--spacy-tokenizer {spacy_tokenizer!r} is neither a language code (e.g. 'en') "
                f"nor a loadable spaCy pipeline: {err}"
            ) from err
    tokenizer = nlp.tokenizer
    return lambda text: [t.text for t in tokenizer(text) if not t.text.isspace()]


def is_language_code(spacy_tokenizer: str) -> bool:
    """Whether ``--spacy-tokenizer`` names a language (a blank tokenizer), else a pipeline."""
    from spacy.util import get_lang_class

    try:
        get_lang_class(spacy_tokenizer)
    except (ImportError, KeyError, ValueError):
        return False
    return True


def plan_batches(lengths: Sequence[int], batch_size: int, stateful: bool) -> List[List[int]]:
    """Line indices per batch. Stateful: file order. Stateless: sorted by length."""
    order = list(range(len(lengths)))
    if not stateful:
        order.sort(key=lambda i: -lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def check_embed_options(layers: str, batch_size: int, max_length: int = 0) -> None:
    if layers not in LAYER_CHOICES:
        raise EmbedInputError(f"--layers must be one of {LAYER_CHOICES}, got {layers!r}")
    if batch_size < 1:
        raise EmbedInputError(f"--batch-size must be >= 1, got {batch_size}")
    if max_length < 0:
        raise EmbedInputError(f"--max-length must be >= 0 (0: no windows), got {max_length}")


def process_share() -> Tuple[int, int]:
    """``(rank, world size)``: torchrun's ``RANK``/``WORLD_SIZE``, else ``(0, 1)``."""
    from ..pretrain.distributed import torchrun_share  # brings torch: only when a command runs

    return torchrun_share()


def check_share(share: Tuple[int, int], stateful: bool) -> None:
    if share[1] > 1 and stateful:
        raise EmbedInputError(
            "--stateful carries state from line to line in file order: it cannot be split "
            "across processes (run it in one process)"
        )


def check_output_free(output_file: Path, overwrite: bool) -> None:
    """A run writes OUTPUT.partial and renames it into place at its end, so an existing
    OUTPUT is never this run's unfinished work: it is replaced only when asked."""
    if output_file.exists() and not overwrite:
        raise EmbedInputError(
            f"OUTPUT_FILE {output_file} already exists: give --overwrite to replace it, or another name"
        )


def check_output_not_an_input(output_file: Path, inputs: Dict[str, Optional[Path]]) -> None:
    """Writing OUTPUT (or its partial, progress or lock file) must not replace a file the
    run reads: ``inputs`` maps how each is named to its path (None: not given)."""
    working = {partial_path(output_file): "working file", progress_path(output_file): "working file"}
    working[lock_path(output_file)] = "lock file"
    for what, path in inputs.items():
        for target in (output_file, *working):
            if path is not None and same_file(target, path):
                owner = "" if target == output_file else f"'s {working[target]} {target.name}"
                raise EmbedInputError(
                    f"OUTPUT_FILE {output_file}{owner} is {what} {path}: writing it would replace "
                    f"{what}; give another OUTPUT_FILE"
                )


def source_files(source: Dict) -> Dict[str, Optional[Path]]:
    """The files a weight source reads (as its format lists them), named as the user gave them."""
    directory = source["bilm_dir"]
    if directory is None:
        return {"the --options-file": source["options_file"], "the --weight-file": source["weight_file"]}
    from ..formats.bilm_dir import bilm_dir_files

    owner = "the bundled biLM" if is_bundled(directory) else "--bilm-dir"
    return {f"the {name} of {owner}": path for name, path in bilm_dir_files(Path(directory)).items()}


def tokenizer_files(spacy_tokenizer: Optional[str]) -> Dict[str, Optional[Path]]:
    """The files of the pipeline ``--spacy-tokenizer`` loads (a directory or an installed
    package; a language code reads none, as ``make_tokenizer`` decides), each named for the
    user: all of them, since ``spacy.load`` reads its config, meta, tokenizer and vocabulary."""
    if not spacy_tokenizer or is_language_code(spacy_tokenizer):
        return {}
    from spacy.util import get_package_path, is_package

    directory = Path(spacy_tokenizer)
    if not directory.is_dir():
        if not is_package(spacy_tokenizer):  # nothing loadable: refused when loaded
            return {}
        directory = get_package_path(spacy_tokenizer)
    owner = f"the --spacy-tokenizer pipeline {spacy_tokenizer}"
    return {
        f"the file {path.relative_to(directory)} of {owner}": path for path in directory.rglob("*") if path.is_file()
    }


def describe_source(source: Dict) -> str:
    """The biLM a weight source names, for the user: its files or directory, and format."""
    directory = source["bilm_dir"]
    if directory is None:
        return f"{source['options_file']} + {source['weight_file']} (bilm-tf format)"
    from ..formats.bilm_dir import bilm_dir_format

    kind = f"{bilm_dir_format(Path(directory))} format"
    return f"the bundled biLM ({directory}, {kind})" if is_bundled(directory) else f"{directory} ({kind})"


def is_bundled(bilm_dir: Path) -> bool:
    from ..loaders import DEFAULT_BILM_DIR

    return Path(bilm_dir) == DEFAULT_BILM_DIR


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
    max_length: int = DEFAULT_MAX_SEGMENT_LENGTH,
    share: Tuple[int, int] = (0, 1),
    overwrite: bool = True,
    bilm_name: str = "",
) -> int:
    """Embed every line of ``input_file`` into ``output_file``; returns the line count.

    ``settings`` identifies the run (tokenizer, precision...) beside the input, the
    layout and the biLM's content, so that a resumed run refuses to mix outputs of
    different settings or weights. ``share = (rank, world)``:
    this process embeds every world-th batch into its part, and process 0
    merges the parts (see the module's docstring). ``overwrite=False`` refuses an
    existing ``output_file``. Another run writing the same output is refused, naming it.
    ``bilm_name``: how the biLM was named, printed (by process 0) with its content's
    sha256 once the run's files are checked.
    """
    check_embed_options(layers, batch_size, max_length)
    input_file, output_file = Path(input_file), Path(output_file)
    check_share(share, stateful)
    check_output_not_an_input(output_file, {"the input file": input_file})
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
        "bilm_sha256": arrays_sha256(*bilm.content()),  # the weights' content: a file replaced at its path differs
        **(settings or {}),
    }
    announce = f"embed: using {bilm_name}, content sha256 {run_id['bilm_sha256']}" if bilm_name and rank == 0 else ""
    plan = EmbedPlan(sentences, batches, run_id, layers, stateful, max_length, announce)
    # Process 0 holds OUTPUT (a single run's file, or the merge), each process its part.
    with exclusive_lock(output_file, "OUTPUT_FILE") if rank == 0 else nullcontext():
        check_output_free(output_file, overwrite)  # again: another run may have finished it meanwhile
        if world > 1:
            target = part_path(output_file, rank, world)
            with exclusive_lock(target, "this process's part"):
                if not finished_part(target, run_id):
                    embed_batches(target, bilm, plan.share(rank, world), progress)
            if rank == 0:
                merge_parts(output_file, lines, run_id, world, progress)
        else:
            embed_batches(output_file, bilm, plan, progress, lines_to_index=lines)
    return len(lines)


@app.command("embed")
def embed_command(
    input_file: Path = typer.Argument(
        ..., help="Text file, one sentence per line (UTF-8). Blank lines give empty datasets."
    ),
    output_file: Path = typer.Argument(
        ...,
        help="HDF5 file to write: dataset 'i' per line i (its tokens in its 'tokens' attribute), plus 'sentence_to_index'.",
    ),
    options_file: Optional[str] = typer.Option(
        None, "--options-file", metavar="PATH", help="bilm-tf/AllenNLP options.json (with --weight-file)"
    ),
    weight_file: Optional[str] = typer.Option(
        None, "--weight-file", metavar="PATH", help="bilm-tf/AllenNLP weights.hdf5 (with --options-file)"
    ),
    bilm_dir: Optional[str] = typer.Option(
        None,
        "--bilm-dir",
        metavar="PATH",
        help="a biLM directory (`pretrain` output) or an ELMoForManyLangs model directory. None of the three: the bundled English biLM",
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
    device: str = typer.Option(
        "cpu",
        "--device",
        help="torch device, e.g. cpu or cuda:0 (under torchrun, cuda is each process's cuda:LOCAL_RANK)",
    ),
    max_length: int = typer.Option(
        DEFAULT_MAX_SEGMENT_LENGTH,
        "--max-length",
        help="Longer lines run in overlapping windows of this many tokens (0: never; --stateful: never)",
    ),
    precision: str = typer.Option(
        "fp32",
        "--precision",
        help="fp32 (exact), int8 (quantized matmuls on CPU: faster, not exact: on the bundled biLM, whose values reach about 5, max abs difference from fp32 0.11-0.15 per layer was measured, mean cosine 0.9994) or bf16 (bfloat16 matmuls where the CPU/GPU has native bf16; SPACY_ELMO_FORCE_BF16=1 runs it emulated elsewhere)",
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace OUTPUT_FILE if it exists (else an existing one is refused)"
    ),
):
    """Embed a file of sentences with an ELMo biLM (like AllenNLP's `allennlp elmo`).
    Under torchrun, the processes share the work. More: docs/embed.md (resuming, several processes, the output)."""
    try:
        torch_device, share = check_command(
            input_file, output_file, layers, batch_size, max_length, precision, device, stateful, overwrite
        )
        source = weight_source(options_file, weight_file, bilm_dir)
        check_output_not_an_input(output_file, {**source_files(source), **tokenizer_files(spacy_tokenizer)})
        n = embed_file(
            input_file,
            output_file,
            loaded_bilm(source, torch_device, precision),
            layers=layers,
            batch_size=batch_size,
            stateful=stateful,
            max_length=max_length,
            tokenize=make_tokenizer(spacy_tokenizer),
            share=share,
            overwrite=overwrite,
            settings=run_settings(spacy_tokenizer, precision),
            bilm_name=describe_source(source),
        )
    except ElmoError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=1)
    if share[0] == 0:
        typer.echo(f"wrote {n} sentences to {output_file}", err=True)


def check_command(
    input_file: Path,
    output_file: Path,
    layers: str,
    batch_size: int,
    max_length: int,
    precision: str,
    device: str,
    stateful: bool,
    overwrite: bool,
) -> Tuple["torch.device", Tuple[int, int]]:
    """The command's options, checked before any weights load: the torch device and this
    process's ``(rank, world size)``."""
    from ..bilm.device import resolve_device

    check_input_file(input_file)
    check_output_not_an_input(output_file, {"the input file": input_file})
    check_embed_options(layers, batch_size, max_length)
    torch_device = resolve_device(device, precision)  # the precision is decided here, with the device
    share = process_share()
    check_share(share, stateful)
    require_writable_path(output_file, "OUTPUT_FILE")
    check_output_free(output_file, overwrite)
    return torch_device, share


def run_settings(spacy_tokenizer: Optional[str], precision: str) -> Dict:
    """What identifies the run beside the input, the layout and the biLM's content (a
    resume must match it). Not the weights' paths: moved files still resume."""
    return {"spacy_tokenizer": spacy_tokenizer, "precision": precision}


def weight_source(options_file: Optional[str], weight_file: Optional[str], bilm_dir: Optional[str]) -> Dict:
    """What to load, by the one resolution (``loaders.weight_source``: none named, the bundled
    biLM), its errors naming this command's options. Taken as typed: a Path would make "" the
    current directory, which the component refuses as empty."""
    from ..loaders import weight_source as resolve  # brings torch: only when a command runs

    source = resolve(options_file, weight_file, bilm_dir, spelling=WEIGHT_OPTIONS)
    return {key: None if path is None else Path(path) for key, path in source.items()}


def load_bilm(**source: Any) -> "ElmoBiLM":
    """``loaders.load_bilm``, imported when a command runs (it brings torch and spaCy)."""
    from ..loaders import load_bilm as load

    return load(**source)


def loaded_bilm(source: Dict, device: "torch.device", precision: str) -> "ElmoBiLM":
    """The biLM ``source`` names, on ``device``, running at ``precision``."""
    if device.type == "cuda" and device.index is not None:
        import torch

        torch.cuda.set_device(device)  # what torch puts on a bare "cuda" is this process's GPU too
    bilm = load_bilm(**source).to(device)
    bilm.set_precision(precision)
    return bilm
