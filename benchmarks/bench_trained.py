"""Words/s of the project's trained pipelines, every config in one run: what each point of F1 costs.

    python benchmarks/bench_trained.py DATA OUTPUT (--task TASK | --runs NAME [NAME ...])
        [--training-dir training] [--seed 0] [--threads 2] [--repeats 3] [--limit N] [--batch-size N]
        [--initialize TRAIN [--records-dir metrics]]

Times each run's ``TRAINING_DIR/NAME/seed{SEED}/model-best`` (the pipeline
``scripts/experiment.py`` keeps) on the same sentences of DATA (the task's test
split): ``--runs`` names the runs, ``--task ner`` takes every run called
``ner_*`` that has that pipeline. The timing is bench_pipelines.py's: one
pre-tokenised Doc per sentence, ``nlp.pipe`` at the pipeline's own ``[nlp]
batch_size`` (``--batch-size`` sets one for all), words/s the median of
``--repeats`` passes after a warm-up, ``--threads`` for torch (the biLM; thinc's
CPU ops run on one thread). ELMo runs at the precision it was saved with, its
output cache off and its type cache cold at each pass, so no pass is a cache hit.

``--initialize TRAIN`` is for when the trained pipelines are gone (they live on
one machine's disk): each run's pipeline is built from its seed's record
(``RECORDS_DIR/NAME/seed{SEED}.json``, experiment.py's: its config and
overrides) and initialized on TRAIN (labels, vectors, the biLM), untrained. A
pipeline computes the same whatever its weights (the NER parser makes one move
per token, textcat and ELMo a fixed pass), so its words/s stand for the trained
one's; a run whose trained pipeline is there too is timed both ways in the same
run (``words_per_second_trained``), which shows it.

Prints the CPU and a table, and writes OUTPUT (JSON: the CPU, threads, repeats,
date, this command, the sentences and words timed, and per run its pipeline,
words/s, batch size and ELMo precision), which ``scripts/report.py`` puts beside
each config's score.
"""

import argparse
import gc
import json
import shlex
import sys
from datetime import date
from pathlib import Path
from typing import Any, Callable, Dict, List

import spacy
import torch
from bench_pipelines import read_sentences, words_per_second
from machine import cpu_model, header
from spacy.cli._util import parse_config_overrides
from spacy.training.initialize import init_nlp
from spacy.util import load_config

from spacy_elmo.files.atomic import atomic_path
from spacy_elmo.files.json_files import read_json


def pipeline_path(training_dir: Path, run: str, seed: int) -> Path:
    return training_dir / run / f"seed{seed}" / "model-best"


def record_path(records_dir: Path, run: str, seed: int) -> Path:
    return records_dir / run / f"seed{seed}.json"


def find_runs(root: Path, task: str, seed: int, path_of: Callable[[Path, str, int], Path]) -> List[str]:
    """Every ``TASK_*`` run under ``root`` whose ``path_of(root, run, seed)`` exists, by name
    (``pipeline_path``: trained pipelines; ``record_path``: experiment.py's records)."""
    runs = sorted(p.name for p in root.glob(f"{task}_*") if path_of(root, p.name, seed).exists())
    if not runs:
        wanted = path_of(root, "RUN", seed).relative_to(root / "RUN")
        raise SystemExit(f"error: no {task}_* run under {root} has {wanted}")
    return runs


def require_each(files: Dict[str, Path], seed: int, what: str) -> None:
    """An error naming the first run (in ``files``' order) whose file is missing, before any timing."""
    for run, path in files.items():
        if not path.is_file():
            raise SystemExit(f"error: run {run} has no {what} for seed {seed}: no {path}")


def check_runs(training_dir: Path, runs: List[str], seed: int) -> Dict[str, Path]:
    """Each run's pipeline directory, each checked to hold a trained pipeline."""
    paths = {run: pipeline_path(training_dir, run, seed) for run in runs}
    require_each({run: path / "config.cfg" for run, path in paths.items()}, seed, "trained pipeline")
    return paths


def read_records(records_dir: Path, runs: List[str], seed: int) -> Dict[str, Dict[str, Any]]:
    """Each run's record; an error naming the first run without a readable one, before any timing."""
    paths = {run: record_path(records_dir, run, seed) for run in runs}
    require_each(paths, seed, "record")
    try:
        return {run: read_json(path, ValueError) for run, path in paths.items()}
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None


def initialize_from_record(record: Dict[str, Any], train: Path):
    """The run's pipeline, untrained: its record's config and overrides, initialized on
    ``train`` as ``spacy train`` does before its first step (ELMo's output cache off)."""
    overrides = parse_config_overrides(record["overrides"])
    overrides.update({"paths.train": str(train), "paths.dev": str(train)})
    config = load_config(record["config"], overrides=overrides, interpolate=False)
    if "elmo" in config["nlp"]["pipeline"]:
        config["components"]["elmo"]["cache_size_mb"] = 0
    return init_nlp(config)


def load_trained(path: Path):
    """The pipeline as saved (ELMo at its saved precision), ELMo's output cache off."""
    has_elmo = "elmo" in load_config(path / "config.cfg")["nlp"]["pipeline"]
    return spacy.load(path, config={"components": {"elmo": {"cache_size_mb": 0}}} if has_elmo else {})


def time_pipeline(nlp, sentences, args) -> Dict[str, Any]:
    batch_size = args.batch_size or nlp.batch_size  # by default each pipeline's own, as nlp.pipe does
    return {
        "precision": nlp.get_pipe("elmo").settings.precision if "elmo" in nlp.pipe_names else None,
        "batch_size": batch_size,
        "words_per_second": round(words_per_second(nlp, sentences, batch_size, args.repeats), 1),
    }


def time_run(path: Path, sentences, args) -> Dict[str, Any]:
    result = {"pipeline": str(path), **time_pipeline(load_trained(path), sentences, args)}
    gc.collect()
    return result


def time_initialized_run(run: str, record: Dict[str, Any], sentences, args) -> Dict[str, Any]:
    """The run's untrained pipeline and, where its trained pipeline exists, that one too."""
    result = {
        "pipeline": f"{record['config']}, initialized on {args.initialize} (untrained)",
        **time_pipeline(initialize_from_record(record, args.initialize), sentences, args),
    }
    gc.collect()
    trained = pipeline_path(args.training_dir, run, args.seed)
    if (trained / "config.cfg").is_file():
        result["words_per_second_trained"] = time_run(trained, sentences, args)["words_per_second"]
    return result


def print_table(results: Dict[str, Dict[str, Any]], initialized: bool) -> None:
    """One row per run; initialized runs also show their trained twin's words/s, where timed."""
    twin = ["trained pipeline's words/s"] if initialized else []
    print("| " + " | ".join(["run", "ELMo precision", "batch", "words/s", *twin, "pipeline"]) + " |")
    print("| --- | --- | ---: | ---: | " + "---: | " * len(twin) + "--- |")
    for run, r in results.items():
        cells = [run, r["precision"] or "-", str(r["batch_size"]), f"{r['words_per_second']:,.0f}"]
        if initialized:
            cells.append(f"{r['words_per_second_trained']:,.0f}" if "words_per_second_trained" in r else "-")
        print("| " + " | ".join([*cells, r["pipeline"]]) + " |")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", type=Path, help="a .spacy file: the task's test split (e.g. corpus/conll/test.spacy)")
    parser.add_argument("output", type=Path, help="the JSON file to write (e.g. metrics/speed_ner.json)")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--task", help="time every run called TASK_* that has a trained pipeline (with --initialize: a record)"
    )
    which.add_argument("--runs", nargs="+", help="time these runs (their names under --training-dir)")
    parser.add_argument("--training-dir", type=Path, default=Path("training"), help="where experiment.py trained")
    parser.add_argument("--seed", type=int, default=0, help="whose model-best (or record) is timed")
    parser.add_argument("--threads", type=int, default=2, help="torch's threads (the biLM)")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per run (the median is reported)")
    parser.add_argument("--limit", type=int, default=0, help="the first N sentences only (0: all)")
    parser.add_argument(
        "--batch-size", type=int, default=0, help="nlp.pipe's batch size for every run (0: each pipeline's own)"
    )
    parser.add_argument(
        "--initialize",
        type=Path,
        help="time untrained pipelines built from each run's record and initialized on this .spacy file "
        "(the task's training split): for when the trained pipelines are gone",
    )
    parser.add_argument(
        "--records-dir", type=Path, default=Path("metrics"), help="with --initialize: experiment.py's records"
    )
    args = parser.parse_args(argv)
    for name in ("threads", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.limit < 0 or args.batch_size < 0:
        parser.error("--limit and --batch-size must be 0 or more")
    return args


def time_runs(args, sentences) -> Dict[str, Dict[str, Any]]:
    """Every run's timing, each printed as it lands; the runs are checked before any timing."""
    if args.initialize:
        runs = args.runs or find_runs(args.records_dir, args.task, args.seed, record_path)
        records = read_records(args.records_dir, runs, args.seed)

        def time_one(run: str) -> Dict[str, Any]:
            return time_initialized_run(run, records[run], sentences, args)

    else:
        runs = args.runs or find_runs(args.training_dir, args.task, args.seed, pipeline_path)
        paths = check_runs(args.training_dir, runs, args.seed)

        def time_one(run: str) -> Dict[str, Any]:
            return time_run(paths[run], sentences, args)

    results = {}
    for run in runs:
        results[run] = time_one(run)
        print(f"{run}: {results[run]['words_per_second']:,.0f} words/s", flush=True)
    return results


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.initialize and not args.initialize.is_file():
        raise SystemExit(f"error: --initialize {args.initialize}: no such file (the task's training .spacy)")
    sentences = read_sentences(args.data, args.limit)
    torch.set_num_threads(args.threads)
    words = sum(len(w) for w, _ in sentences)
    print(header(args.threads))
    pipelines = (
        f"each run's seed-{args.seed} config, initialized on {args.initialize} (untrained)"
        if args.initialize
        else f"seed {args.seed}'s model-best of each run"
    )
    print(
        f"{len(sentences)} sentences, {words} words of {args.data}; nlp.pipe (batch: each pipeline's own); "
        f"words/s: median of {args.repeats} passes after a warm-up; {pipelines}"
    )
    results = time_runs(args, sentences)
    print_table(results, initialized=args.initialize is not None)
    record = {
        "cpu": cpu_model(),
        "torch": torch.__version__,
        "threads": args.threads,
        "repeats": args.repeats,
        "date": date.today().isoformat(),
        "command": shlex.join(["python", *(sys.argv if argv is None else [__file__, *argv])]),
        "data": str(args.data),
        "seed": args.seed,
        "initialized_on": str(args.initialize) if args.initialize else None,
        "sentences": len(sentences),
        "words": words,
        "runs": results,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(args.output) as tmp:
        tmp.write_text(json.dumps(record, indent=2), encoding="utf8")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
