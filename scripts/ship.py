"""``ship``: a pretrained biLM as the float16 files the package bundles.

    python scripts/ship.py BILM_DIR DEST [--max-mb 32]

Writes ``options.json`` + float16 ``weights.hdf5`` (half the size; readers
upcast to float32), ``vocab.txt`` + float16 ``softmax.hdf5`` (so the shipped
biLM can be warm-started with its LM head: ``pretrain --paths.init_dir``) and
``provenance.json`` (the training config, steps, tokens seen, also before a
warm start, hours, held-out perplexity, the corpus report) to DEST, a project
output (``training/default_bilm`` in ``project.yml``). Refuses a biLM over
``--max-mb`` megabytes; the LM head goes with it only where both fit (a warm
start from a biLM without one trains a fresh head), and the provenance says
which. Putting it into the package is a separate, deliberate step:
``install_default.py``.
"""

import bisect
import json
import os
import shutil
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Dict, List, Optional, Tuple

import h5py
import numpy
import typer
from confection import Config
from project_errors import ProjectDataError

from spacy_elmo.bilm import ElmoBiLM
from spacy_elmo.files.atomic import move_dir
from spacy_elmo.files.hashing import file_sha256
from spacy_elmo.files.json_files import read_json, read_jsonl
from spacy_elmo.formats.bilm_dir import OPTIONS_NAME, WEIGHTS_NAME
from spacy_elmo.pretrain.outputs import CONFIG_NAME, METRICS_NAME, SOFTMAX_NAME, VOCAB_NAME

PROVENANCE_NAME = "provenance.json"
# What ship writes and install_default copies: the package's default_bilm folder. The
# LM head's files go only where they fit under the size limit beside the biLM.
BILM_FILES = (OPTIONS_NAME, WEIGHTS_NAME, PROVENANCE_NAME)
HEAD_FILES = (VOCAB_NAME, SOFTMAX_NAME)
SHIPPED_FILES = BILM_FILES + HEAD_FILES
# The bundled biLM's size budget: room for a 2P = 512 biLM (23.8 MB as float16) and its
# LM head (vocabulary and float16 adaptive softmax of 50,000 words), so `perplexity`
# and a warm start with its head work on what the package ships.
MAX_MB = 32.0

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)


def fresh_tmp(dest: Path) -> Path:
    """An empty folder next to `dest` to build it in (see ``swap_in``)."""
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def swap_in(tmp: Path, dest: Path) -> None:
    """Replace `dest` with the finished `tmp`: a failure before this leaves the old `dest` whole."""
    move_dir(tmp, dest)


def warm_start_provenance(config_text: Optional[str]) -> Optional[dict]:
    """The provenance of the biLM this one was warm-started from (``paths.init_dir``), if it has one."""
    if not config_text:
        return None
    init_dir = Config().from_str(config_text, interpolate=False)["paths"].get("init_dir")
    path = Path(init_dir) / PROVENANCE_NAME if init_dir else None
    return read_json(path, ProjectDataError) if path is not None and path.is_file() else None


def earlier_totals(before: Optional[dict]) -> Tuple[int, float]:
    """Tokens seen and training seconds over every stretch of a warm start's provenance (0 without one);
    records written before the totals existed give their own stretch's figures."""
    before = before or {}
    tokens = before.get("tokens_seen_total", before.get("tokens_seen")) or 0
    seconds = before.get("training_seconds_total", before.get("training_seconds")) or 0
    return tokens, seconds


def held_out_curve(records: List[dict], earlier_tokens: int) -> List[dict]:
    """Each held-out evaluation of a run: its step, the tokens seen by then over every warm start, the score."""
    tokens_at = {r["step"]: r["tokens"] for r in records if "loss" in r}
    logged = sorted(tokens_at)
    curve = []
    for record in records:
        key = "dev_perplexity" if "dev_perplexity" in record else "dev_loss" if "dev_loss" in record else None
        if key is None:
            continue
        # The last training record at or before the evaluation (training logs every few steps).
        n_before = bisect.bisect_right(logged, record["step"])
        tokens = tokens_at[logged[n_before - 1]] if n_before else 0
        curve.append({"step": record["step"], "tokens_seen_total": earlier_tokens + tokens, key: record[key]})
    return curve


def steps_by_precision(records: List[dict]) -> Dict[str, int]:
    """This run's training steps per precision (its stretches may differ); records from before
    pretrain logged it count as "not recorded"."""
    steps: Dict[str, int] = {}
    last = 0
    for record in records:
        if "loss" in record and record["step"] > last:  # a step logged again after a resume counts once
            precision = record.get("precision", "not recorded")
            steps[precision] = steps.get(precision, 0) + record["step"] - last
            last = record["step"]
    return steps


def held_out_sha256(config_text: Optional[str]) -> Optional[str]:
    """The sha256 of the run's held-out text (``paths.dev``), so runs on the same set can be told apart."""
    dev = Config().from_str(config_text, interpolate=False)["paths"].get("dev") if config_text else None
    return file_sha256(Path(dev)) if dev and Path(dev).is_file() else None


def is_absolute_path(value: str) -> bool:
    """An absolute path of a POSIX or a Windows machine."""
    return PurePosixPath(value).is_absolute() or PureWindowsPath(value).is_absolute()


def portable_path(value: str, role: str, run_dir: Optional[Path]) -> str:
    """`value` without the absolute path of the machine that wrote it: relative to the run's folder
    where it lies beside it (under the folder that holds the run), else named by its role."""
    if not is_absolute_path(value):
        return value
    if run_dir is not None:
        run = Path(os.path.abspath(run_dir))  # as pretrain's paths were given: symlinks kept
        if Path(value).is_relative_to(run.parent):
            return Path(os.path.relpath(value, run)).as_posix()
    name = PureWindowsPath(value).name if "\\" in value else PurePosixPath(value).name
    return f"<{role}>/{name}"


def portable_section(section: dict, prefix: str, run_dir: Optional[Path]) -> None:
    for key, value in section.items():
        if isinstance(value, dict):
            portable_section(value, f"{prefix}{key}.", run_dir)
        elif isinstance(value, str):
            section[key] = portable_path(value, f"{prefix}{key}", run_dir)


def portable_config(config_text: Optional[str], run_dir: Optional[Path]) -> Optional[str]:
    """A run's config as provenance.json keeps it: every absolute path relative to the run's folder
    (``../corpus_pretrain/train.txt``) or named by its role (``<paths.init_dir>/default_bilm``), so the
    shipped file holds no path of the machine that trained it (the run's own config.cfg keeps them)."""
    if not config_text:
        return config_text
    config = Config().from_str(config_text, interpolate=False)
    portable_section(config, "", run_dir)
    return config.to_str(interpolate=False)


def portable_record(record: Optional[dict]) -> Optional[dict]:
    """A warm start's provenance chain with every config portable (a record shipped before configs were
    made portable holds absolute paths; its run's folder is unknown, so they are named by role)."""
    if record is None:
        return None
    portable = dict(record)
    if portable.get("config"):
        portable["config"] = portable_config(portable["config"], None)
    if portable.get("warm_started_from"):
        portable["warm_started_from"] = portable_record(portable["warm_started_from"])
    return portable


def provenance(bilm_dir: Path, size_mb: float, corpus_report: Optional[Path] = None) -> dict:
    """How the biLM in `bilm_dir` was trained (``pretrain``'s outputs), for provenance.json."""
    records = read_jsonl(bilm_dir / METRICS_NAME)
    train = [r for r in records if "loss" in r]
    config, perplexity = bilm_dir / CONFIG_NAME, bilm_dir / "perplexity.json"
    config_text = config.read_text(encoding="utf8") if config.is_file() else None
    before = warm_start_provenance(config_text)
    tokens = train[-1]["tokens"] if train else None
    earlier, earlier_seconds = earlier_totals(before)
    seconds = train[-1]["elapsed"] if train else None
    return {
        "trained_with": "python -m spacy_elmo pretrain (see config.cfg)",
        "config": portable_config(config_text, bilm_dir),
        "steps": train[-1]["step"] if train else None,
        "steps_by_precision": steps_by_precision(records),
        "tokens_seen": tokens,
        "tokens_seen_total": tokens + earlier if tokens is not None else None,
        "training_seconds": seconds,
        "training_seconds_total": seconds + earlier_seconds if seconds is not None else None,
        "perplexity": read_json(perplexity, ProjectDataError) if perplexity.is_file() else None,
        "held_out_sha256": held_out_sha256(config_text),
        "held_out_curve": held_out_curve(records, earlier),
        "corpus": read_json(corpus_report, ProjectDataError)["total"] if corpus_report is not None else None,
        "warm_started_from": portable_record(before),
        "size_mb": round(size_mb, 2),
    }


def write_half_softmax(source: Path, dest: Path) -> None:
    """``pretrain``'s softmax.hdf5 with float16 arrays (its kind and settings kept)."""
    with h5py.File(source, "r") as f, h5py.File(dest, "w") as out:
        for key, value in f.attrs.items():
            out.attrs[key] = value
        for name in f.keys():
            array = numpy.asarray(f[name])
            out.create_dataset(name, data=array.astype(numpy.float16) if array.dtype.kind == "f" else array)


def megabytes(folder: Path, names) -> float:
    return sum((folder / name).stat().st_size for name in names) / 1e6


def ship(bilm_dir: Path, dest: Path, max_mb: float = MAX_MB, corpus_report: Optional[Path] = None) -> Path:
    bilm = ElmoBiLM.from_dir(bilm_dir)
    for name in HEAD_FILES:
        if not (bilm_dir / name).is_file():
            raise ProjectDataError(f"{bilm_dir}: no {name} (ship takes a `pretrain` output directory)")
    tmp = fresh_tmp(dest)
    bilm.to_files(tmp / OPTIONS_NAME, tmp / WEIGHTS_NAME, dtype="float16")
    bilm_mb = megabytes(tmp, (OPTIONS_NAME, WEIGHTS_NAME))
    if bilm_mb > max_mb:
        shutil.rmtree(tmp)
        raise ProjectDataError(f"{bilm_dir}: the float16 biLM takes {bilm_mb:.1f} MB, over the {max_mb} MB limit")
    shutil.copyfile(bilm_dir / VOCAB_NAME, tmp / VOCAB_NAME)
    write_half_softmax(bilm_dir / SOFTMAX_NAME, tmp / SOFTMAX_NAME)
    head_mb = megabytes(tmp, HEAD_FILES)
    keep_head = bilm_mb + head_mb <= max_mb
    record = provenance(bilm_dir, bilm_mb + head_mb if keep_head else bilm_mb, corpus_report)
    if not keep_head:
        for name in HEAD_FILES:
            (tmp / name).unlink()
        record["lm_head"] = (
            f"left out: with its {head_mb:.1f} MB the biLM would take {bilm_mb + head_mb:.1f} MB, "
            f"over the {max_mb} MB limit (a warm start from it trains a fresh head)"
        )
    (tmp / PROVENANCE_NAME).write_text(json.dumps(record, indent=2) + "\n", encoding="utf8")
    swap_in(tmp, dest)
    return dest


@app.command()
def main(
    bilm_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="a `pretrain` output directory"),
    dest: Path = typer.Argument(..., help="where the float16 biLM goes (a project output, not the package)"),
    max_mb: float = typer.Option(
        MAX_MB, "--max-mb", help="refuse a biLM larger than this (MB); its LM head goes with it where both fit"
    ),
    corpus_report: Optional[Path] = typer.Option(
        None,
        "--corpus-report",
        exists=True,
        dir_okay=False,
        help="pretrain_corpus's report.json: its totals go into the provenance",
    ),
):
    """Write BILM_DIR as float16, with its provenance, to DEST."""
    out = ship(bilm_dir, dest, max_mb, corpus_report)
    record = read_json(out / PROVENANCE_NAME, ProjectDataError)
    typer.echo(f"float16 biLM written to {out} ({record['size_mb']} MB)")
    if "lm_head" in record:
        typer.echo(f"its LM head (softmax and vocabulary): {record['lm_head']}")


if __name__ == "__main__":
    app()
