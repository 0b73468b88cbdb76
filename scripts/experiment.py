"""``experiment``: one config, several seeds: ``spacy train`` to convergence,
then the best model scored ONCE on the test split with ``spacy evaluate``.

    python scripts/experiment.py CONFIG TRAIN DEV TEST NAME \\
        [--seeds 0,1,2] [--gold-preproc] [--gpu-id -1] [SPACY TRAIN OVERRIDES...]

Every config runs under its own stopping rule (``training.patience``, the same
value in all our configs); overrides such as ``--paths.elmo_options`` or
``--training.max_steps`` go straight to ``spacy train``. ``--threads N`` runs
``spacy train`` and ``spacy evaluate`` with N torch threads (``OMP_NUM_THREADS``;
0, the default: torch's own, a thread per core): beside another job, 1 thread
keeps the biLM from running many times slower (docs/project.md, "Threads").

Per seed it writes ``training/NAME/seed{N}/`` (the models and ``log.jsonl``,
one line per evaluation) and ``metrics/NAME/seed{N}.json``: the test scores,
how training went (epochs, steps, seconds, best dev score and its step) and,
for ELMo pipelines, each listener's learned layer weights. A seed whose
metrics file exists is skipped, so an interrupted run resumes; a seed whose
``spacy train`` was killed resumes from its last evaluation (see
``resume_training``: what differs from an uninterrupted run, and
``training/NAME/seed{N}/resume.json``, its stretches).

The metrics file records the config and the sha256 of every file a
``--paths.*`` override names (``inputs``: in the project, the biLM's
``options.json`` and ``weights.hdf5``). A finished seed given another config
since, or whose files have changed (a biLM pretrained again), is trained again:
its metrics file and training directory are first moved to
``superseded/<time>/`` beside them. A metrics file written before
inputs were recorded cannot be checked and is kept, with a note saying so.

``--same-as OTHER`` records a seed already scored under the run OTHER instead of
training it again, where OTHER's record of that seed is this very run: the same
config, overrides, input files, data files (train, dev, test; a record from
before they were recorded is taken at its word, with a note) and gold_preproc.
The copy names OTHER (``same_as``); otherwise the seed trains as usual. The
project's final table uses it where the dev search's chosen baseline is an
existing row's config (NER's ``efficiency_both``: its baseline is
``ner_vectors``).
"""

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, cast

import resume_training
import typer
from project_errors import ProjectDataError

from spacy_elmo.files.hashing import file_sha256
from spacy_elmo.files.json_files import read_json, read_jsonl, write_json_atomic

if TYPE_CHECKING:  # spaCy and torch load only when a pipeline is read
    from spacy_elmo.pipeline.elmo import ElmoComponent

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)


def training_summary(log_file: Path) -> Dict[str, Any]:
    """Epochs, steps, seconds and the best dev score, from spacy-elmo.TrainingLog.v1's JSONL."""
    if not log_file.is_file():
        raise ProjectDataError(f"{log_file}: no training log (did spacy train run with the TrainingLog logger?)")
    # A line cut by a kill (spacy train stopped mid-write) ends the records, as in pretrain's metrics.
    records = read_jsonl(log_file)
    if not records:
        raise ProjectDataError(f"{log_file}: the training log is empty")
    best = max(records, key=lambda r: r["score"])
    last = records[-1]
    return {
        "epochs": last["epoch"],
        "steps": last["step"],
        "seconds": last["seconds"],
        "words": last["words"],
        "best_dev_score": best["score"],
        "best_dev_scores": best["scores"],
        "best_step": best["step"],
        "dev_curve": [(r["step"], r["score"]) for r in records],
    }


def training_minutes(training: Dict[str, Any]) -> float:
    """A record's training time: the log's seconds, which cover every stretch of a resumed
    run (``wall_seconds`` is the last stretch's, with start-up and saving)."""
    return training["seconds"] / 60


def elmo_mix(model_dir: Path) -> Optional[Dict[str, Any]]:
    """Each listening component's learned softmax(s) and gamma, if the pipeline has ELMo."""
    import spacy

    nlp = spacy.load(model_dir)
    if "elmo" not in nlp.pipe_names:
        return None
    return cast("ElmoComponent", nlp.get_pipe("elmo")).listener_mix_weights()


def run_seed(
    config: Path,
    train: Path,
    dev: Path,
    test: Optional[Path],
    name: str,
    seed: int,
    overrides: List[str],
    gold_preproc: bool,
    gpu_id: int,
    training_dir: Path,
    metrics_dir: Path,
    same_as: Optional[str] = None,
    threads: int = 0,
) -> Path:
    out_dir = training_dir / name / f"seed{seed}"
    metrics_file = metrics_dir / name / f"seed{seed}.json"
    inputs = input_fingerprint(overrides)
    if metrics_file.is_file() and not superseded(metrics_file, out_dir, config, inputs):
        typer.echo(f"{metrics_file} exists: seed {seed} of {name} is done")
        return metrics_file
    data = data_fingerprint(train, dev, test)
    run = {"config": str(config), "overrides": overrides, "gold_preproc": gold_preproc, "inputs": inputs, "data": data}
    if same_as is not None and copied_from(metrics_dir / same_as / f"seed{seed}.json", run, metrics_file, name):
        return metrics_file
    corpus_flags = []
    if gold_preproc:
        corpus_flags = ["--corpora.train.gold_preproc", "true", "--corpora.dev.gold_preproc", "true"]
    train_overrides = [
        "--paths.train",
        str(train),
        "--paths.dev",
        str(dev),
        "--system.seed",
        str(seed),
        "--training.logger.output_file",
        str(out_dir / "log.jsonl"),
        *corpus_flags,
        *overrides,
    ]
    start = time.time()
    env = threads_env(threads)
    train_next_stretch(config, out_dir, train_overrides, inputs, f"{name}, seed {seed}", gpu_id, env)
    wall_seconds = time.time() - start
    test_scores = None if test is None else score_test(out_dir, test, gold_preproc, gpu_id, env)
    result = {
        "name": name,
        **run,
        "seed": seed,
        # None for a dev-only run (`investigate`): the test split is kept for the final table.
        "test": test_scores,
        # wall_seconds: this call's training (the last stretch); the log's "seconds" cover all stretches.
        "training": {
            **training_summary(out_dir / "log.jsonl"),
            "wall_seconds": round(wall_seconds, 1),
            "stretches": resume_training.read_state(out_dir)["stretches"],
        },
        "elmo_mix": elmo_mix(out_dir / "model-best"),
    }
    metrics_file.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(metrics_file, result, indent=2)
    return metrics_file


def input_fingerprint(overrides: List[str]) -> Dict[str, str]:
    """The sha256 of every file a ``--paths.*`` override names (directories, such as
    a vectors pipeline, are not hashed), by override: {"paths.elmo_weights": sha256, ...}."""
    from spacy.cli._util import parse_config_overrides

    named = parse_config_overrides(list(overrides))  # it empties the list it is given
    return {
        key: file_sha256(Path(value))
        for key, value in sorted(named.items())
        if key.startswith("paths.") and isinstance(value, str) and Path(value).is_file()
    }


def data_fingerprint(train: Path, dev: Path, test: Optional[Path]) -> Dict[str, Optional[str]]:
    """The sha256 of the data files a seed trains, selects and is scored on."""
    return {
        "train": file_sha256(train),
        "dev": file_sha256(dev),
        "test": None if test is None else file_sha256(test),
    }


def copied_from(source: Path, run: Dict[str, Any], metrics_file: Path, name: str) -> bool:
    """Write SOURCE's record as NAME's (``same_as``: its run) if SOURCE is the same run as
    ``run`` (config, overrides, gold_preproc, input and data files); False if it is not
    scored yet or is another run (then the seed trains)."""
    if not source.is_file():
        typer.echo(f"{source}: not scored yet, so {name} trains this seed itself")
        return False
    record = read_json(source, ProjectDataError)
    differs = resume_training.what_changed(record, Path(run["config"]), run["inputs"])
    differs += [key for key in ("overrides", "gold_preproc") if record.get(key) != run[key]]
    if (record.get("test") is None) != (run["data"]["test"] is None):
        differs.append("scored on test" if record.get("test") is not None else "not scored on test")
    if "data" in record:
        differs += [f"{split} data" for split, sha in run["data"].items() if record["data"].get(split) != sha]
    else:
        typer.echo(f"{source}: written before data files were recorded, so taken to be on the same data")
    if differs:
        typer.echo(f"{source}: another run ({', '.join(differs)}), so {name} trains this seed itself")
        return False
    metrics_file.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(metrics_file, {**record, "name": name, "same_as": source.parent.name}, indent=2)
    typer.echo(f"{metrics_file}: the same run as {source}, recorded for {name} without training")
    return True


def superseded(metrics_file: Path, out_dir: Path, config: Path, inputs: Dict[str, str]) -> bool:
    """Whether a finished seed was trained with another config or on other files than
    ``inputs`` (then both its metrics file and training directory are moved aside, and
    the seed is trained again)."""
    record = read_json(metrics_file, ProjectDataError)
    if record.get("inputs") is None:
        typer.echo(f"{metrics_file}: written before input files were recorded, so not checked against them; kept")
    changed = resume_training.what_changed(record, config, inputs)
    if changed:
        why = f"trained with another config or other files ({', '.join(changed)})"
        resume_training.set_aside([metrics_file, out_dir], why)
    return bool(changed)


def threads_env(threads: int) -> Optional[Dict[str, str]]:
    """The environment of a child that runs torch on THREADS threads (None: 0, this one's)."""
    if not threads:
        return None
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def train_next_stretch(
    config: Path,
    out_dir: Path,
    train_overrides: List[str],
    inputs: Dict[str, str],
    label: str,
    gpu_id: int,
    env: Optional[Dict[str, str]] = None,
) -> None:
    """Train the run's next stretch (from its last evaluation if it was stopped); nothing if it is finished."""
    stretch = resume_training.next_stretch(config, out_dir, train_overrides, inputs)
    if stretch is None:
        return
    command = [sys.executable, "-m", "spacy", "train", str(stretch.config), "--output", str(out_dir)]
    command += ["--gpu-id", str(gpu_id), *stretch.overrides]
    typer.echo(f"=== {label}: {' '.join(command)}")
    subprocess.run(command, check=True, env=env)
    resume_training.end_stretch(out_dir)


def score_test(
    out_dir: Path, test: Path, gold_preproc: bool, gpu_id: int, env: Optional[Dict[str, str]] = None
) -> Dict[str, Any]:
    """The best model's scores on the test split (spacy evaluate), kept beside the model."""
    scores_file = out_dir / "test_scores.json"
    command = [sys.executable, "-m", "spacy", "evaluate", str(out_dir / "model-best"), str(test)]
    command += ["--output", str(scores_file), "--gpu-id", str(gpu_id)]
    subprocess.run(command + (["--gold-preproc"] if gold_preproc else []), check=True, env=env)
    return read_json(scores_file, ProjectDataError)


def parse_seeds(seeds: str) -> List[int]:
    try:
        return [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        raise typer.BadParameter(f"--seeds must be comma-separated integers, got {seeds!r}") from None


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def main(
    ctx: typer.Context,
    config: Path = typer.Argument(..., exists=True, dir_okay=False, help="spaCy training config"),
    train: Path = typer.Argument(..., exists=True, help="training .spacy"),
    dev: Path = typer.Argument(..., exists=True, help="dev .spacy (model selection and early stopping)"),
    test: Path = typer.Argument(..., exists=True, help="test .spacy (scored once per seed, at the end)"),
    name: str = typer.Argument(..., help="run name: training/NAME/ and metrics/NAME/"),
    seeds: str = typer.Option("0,1,2", "--seeds", help="comma-separated random seeds"),
    gold_preproc: bool = typer.Option(False, "--gold-preproc", help="one example per gold sentence, gold tokens"),
    gpu_id: int = typer.Option(-1, "--gpu-id", help="GPU id, or -1 for CPU"),
    training_dir: Path = typer.Option(Path("training"), "--training-dir"),
    metrics_dir: Path = typer.Option(Path("metrics"), "--metrics-dir"),
    same_as: Optional[str] = typer.Option(
        None, "--same-as", help="a run whose seeds, where they are this very run, are recorded for NAME untrained"
    ),
    threads: int = typer.Option(
        0, "--threads", min=0, help="torch threads of spacy train and evaluate (0: torch's default)"
    ),
):
    """Train NAME for each seed, then score each best model once on TEST."""
    for seed in parse_seeds(seeds):
        overrides = list(ctx.args)
        run_seed(
            config,
            train,
            dev,
            test,
            name,
            seed,
            overrides,
            gold_preproc,
            gpu_id,
            training_dir,
            metrics_dir,
            same_as,
            threads,
        )


if __name__ == "__main__":
    app()
