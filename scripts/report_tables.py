"""The report's text: results.md's tables and sections (scores, words/s, targets, layer weights,
investigations, the biLM, the entities found), from the summary of ``report_runs``."""

import platform
from datetime import date
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from confection import Config
from experiment import training_minutes
from project_errors import ProjectDataError
from report_runs import (
    ENTITY_TYPES,
    NER_RUNS,
    REDUCED_NOTE,
    SENTIMENT_RUNS,
    described,
    fmt,
    layer_weight_rows,
    target_lines,
    words_per_second,
)
from search_table import adaptation_lines, is_search_run, search_lines
from ship import earlier_totals, warm_start_provenance

from spacy_elmo.bilm.options import ElmoOptions
from spacy_elmo.files.json_files import read_json, read_jsonl
from spacy_elmo.formats.bilm_dir import OPTIONS_NAME
from spacy_elmo.pretrain.outputs import CONFIG_NAME, METRICS_NAME

PAPER_CONTEXT = (
    "Peters et al. (2018) report 92.22 F1 on CoNLL-2003 test (biLSTM-CRF + ELMo) and 54.7 accuracy on SST-5 "
    "(BCN + ELMo), with a 93.6M-parameter biLM trained for 10 epochs on the 1B Word Benchmark. Our setup differs: "
    "a much smaller biLM (below) pretrained on a 2-core CPU; spaCy's transition-based NER and its "
    "ensemble text classifier (bag of words + attention over the token vectors) instead of biLSTM-CRF and BCN; the sentiment data are the movie-review snippets "
    "SST was built from, with our own seeded split, not SST-5's. The comparison that counts is within this table: "
    "the same task model with and without ELMo."
)


def pretrain_section(bilm_dir: Optional[Path]) -> Tuple[List[str], Optional[List[Dict[str, Any]]]]:
    if bilm_dir is None or not bilm_dir.is_dir():
        return ["(no pretraining output given)"], None
    lines = []
    options_file = bilm_dir / OPTIONS_NAME
    if options_file.is_file():
        options = ElmoOptions.from_file(options_file)
        lines.append(
            f"- biLM: char CNN {options.n_filters} filters, {options.n_highway} highway, projection "
            f"{options.projection_dim}, LSTM {options.lstm_dim}, {options.n_layers} layers "
            f"(output 2P = {options.output_dim})"
        )
    # pretrain appends as it goes: a line a kill cut short is dropped, not an error.
    records = read_jsonl(bilm_dir / METRICS_NAME)
    if records:
        last = [r for r in records if "loss" in r][-1]
        dev = [r for r in records if "dev_perplexity" in r]
        lines.append(
            f"- trained for {last['step']} steps, {last['elapsed'] / 60:.1f} minutes (`pretrain`'s metrics.jsonl)"
        )
        if "tokens" in last:
            lines.append(f"- tokens seen: {last['tokens']:,}")
        config = bilm_dir / CONFIG_NAME
        if config.is_file():
            config_text = config.read_text(encoding="utf8")
            lines += warm_start_lines(config_text, last) + corpus_lines(config_text)
        if dev:
            lines.append(f"- dev perplexity at the end: {dev[-1]['dev_perplexity']:.1f}{kept_checkpoint_remark(dev)}")
    perplexity_file = bilm_dir / "perplexity.json"
    if perplexity_file.is_file():
        ppl = read_json(perplexity_file, ProjectDataError)
        lines.append(
            f"- held-out perplexity (full softmax): forward {ppl['forward']:.1f}, backward {ppl['backward']:.1f}, "
            f"mean {ppl['mean']:.1f} ({ppl['sentences']:,} held-out sentences, "
            f"{ppl['predictions_per_direction']:,} predictions per direction)"
        )
    return lines or ["(no pretraining metrics found)"], records


def kept_checkpoint_remark(dev: List[Dict[str, Any]]) -> str:
    """Where the curve ends above its lowest dev perplexity: which weights the biLM folder holds."""
    best = min(dev, key=lambda record: record["dev_perplexity"])
    if best["dev_perplexity"] >= dev[-1]["dev_perplexity"]:
        return ""
    return (
        f"; the lowest was {best['dev_perplexity']:.1f} at step {best['step']:,}: the biLM kept is the last "
        "step's (`pretrain` writes the final weights, not the best; a short run's dev perplexity still moves)"
    )


def bilm_read_lines(runs: Dict[str, List[Dict[str, Any]]], bilm_dir: Optional[Path]) -> List[str]:
    """Which biLM the ELMo rows read (their ``--paths.elmo_weights``), where it is not the one this
    section describes (the demo's: its tasks read the bundled biLM, its pretraining step shows a small one)."""
    read = {
        Path(record["overrides"][i + 1]).parent.as_posix()
        for records in runs.values()
        for record in records
        for i, item in enumerate(record.get("overrides", [])[:-1])
        if item == "--paths.elmo_weights"
    }
    if bilm_dir is None or not read or {Path(path).resolve() for path in read} == {bilm_dir.resolve()}:
        return []
    named = ", ".join(f"`{path}`" for path in sorted(read))
    return [
        f"The scores above read the biLM in {named} (the ELMo runs' `--paths.elmo_weights`); this section "
        f"describes `{bilm_dir.as_posix()}`, which no row above used.",
        "",
    ]


def warm_start_lines(config_text: str, last: Dict[str, Any]) -> List[str]:
    """What the run's warm start (``paths.init_dir``, via its provenance.json) had already trained."""
    before = warm_start_provenance(config_text)
    if before is None or "tokens" not in last:
        return []
    tokens, seconds = earlier_totals(before)
    hours = seconds / 3600
    return [
        f"- warm-started from a biLM that had seen {tokens:,} tokens in {hours:.1f} hours: "
        f"{tokens + last['tokens']:,} tokens seen in all, {hours + last['elapsed'] / 3600:.1f} hours"
    ]


def corpus_lines(config_text: str) -> List[str]:
    """The pretraining text's size, from the corpus report beside ``paths.train`` (if there is one)."""
    train = Config().from_str(config_text, interpolate=False)["paths"].get("train")
    corpus_report = Path(train).parent / "report.json" if train else None
    if corpus_report is None or not corpus_report.is_file():
        return []
    total = read_json(corpus_report, ProjectDataError)["total"]
    return [
        f"- pretraining text: {total['train_words']:,} words ({total['train_sentences']:,} sentences), "
        f"held out: {total['dev_words']:,} words"
    ]


# benchmarks/bench_trained.py's output (the `speed` command), by task: METRICS_DIR/speed_<task>.json.
SPEED_TASKS = ("ner", "sentiment")


def load_speeds(metrics_dir: Path) -> Dict[str, Dict[str, Any]]:
    """Each task's speed record (words/s of its trained pipelines), where one was measured."""
    paths = {task: metrics_dir / f"speed_{task}.json" for task in SPEED_TASKS}
    return {task: read_json(path, ProjectDataError) for task, path in paths.items() if path.is_file()}


def score_table(
    columns: List[str],
    rows: List[Tuple[str, Optional[str], List[str]]],
    speed: Optional[Dict[str, Any]] = None,
    evaluated: Optional[Dict[str, float]] = None,
) -> List[str]:
    """A results table of (run, the run it was recorded from or None, cells); with a speed record,
    a words/s column beside the score (the third column; "-" for a run it did not time) and a
    line under the table saying how it was measured. Without one, ``evaluated`` (words/s by run,
    as ``spacy evaluate`` measured them) fills the column where it has figures."""
    if speed is not None:
        columns = columns[:3] + ["words/s"] + columns[3:]
        rows = [
            (name, same, cells[:3] + [words_per_second_cell(speed, name, same)] + cells[3:])
            for name, same, cells in rows
        ]
    elif evaluated:
        columns = columns[:3] + ["words/s"] + columns[3:]
        rows = [
            (name, same, cells[:3] + [f"{evaluated[name]:,.0f}" if name in evaluated else "-"] + cells[3:])
            for name, same, cells in rows
        ]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cells) + " |" for _, _, cells in rows]
    if speed is not None:
        return lines + ["", speed_note(speed)]
    return lines + (["", EVALUATE_SPEED_NOTE] if evaluated else [])


# Where no `speed` record timed the runs together (the demo): each run's own evaluation.
EVALUATE_SPEED_NOTE = (
    "words/s: what `spacy evaluate` measured while scoring each run on the test split (a run of several "
    "seeds: their mean), at the torch threads the run trained with: the price of each score. Each run was timed "
    "alone, at its own time, so on a busy machine compare them loosely; the `speed` command times "
    "every pipeline in one sitting."
)


def words_per_second_cell(speed: Dict[str, Any], name: str, same_as: Optional[str] = None) -> str:
    """A run's words/s; a run recorded from another (``same_as``) has that run's pipelines."""
    run = speed["runs"].get(name) or speed["runs"].get(same_as or "")
    return f"{run['words_per_second']:,.0f}" if run else "-"


def speed_note(speed: Dict[str, Any]) -> str:
    return (
        f"words/s: {timed_pipelines(speed)} on the test split "
        f"({speed['sentences']:,} sentences, {speed['words']:,} words, one Doc each), `nlp.pipe`, the median of "
        f"{speed['repeats']} passes after a warm-up; one run for all configs, on {speed['cpu']} with "
        f"{speed['threads']} threads for torch, {speed['date']}: `{speed['command']}`."
    )


def timed_pipelines(speed: Dict[str, Any]) -> str:
    """What the speed record timed: the trained pipelines, or untrained ones (bench_trained.py
    --initialize) with every trained twin it timed beside them, which shows the two equal."""
    if not speed.get("initialized_on"):
        return f"each config's seed-{speed['seed']} pipeline (`model-best`)"
    twins = [
        f"`{run}` {r['words_per_second_trained']:,.0f} trained against {r['words_per_second']:,.0f}"
        for run, r in speed["runs"].items()
        if "words_per_second_trained" in r
    ]
    return (
        f"each config's pipeline built from its seed-{speed['seed']} record and initialized on "
        f"`{speed['initialized_on']}`, untrained (the trained pipelines were gone; a pipeline computes the same "
        f"whatever its weights{': ' + ', '.join(twins) if twins else ''})"
    )


def markdown(
    summary,
    runs,
    pretrain_lines,
    title: str,
    investigations=None,
    bilm_dir=None,
    speeds=None,
    adapted_dir=None,
    reduced: bool = False,
    example: Sequence[str] = (),
) -> str:
    out = [
        f"# {title}",
        "",
        f"Generated by `python scripts/report.py` on {date.today()}; "
        f"{platform.processor() or platform.machine()}, {platform.system()}.",
        "",
    ]
    speeds = speeds or {}
    out += ner_table_lines(summary, speeds.get("ner"), reduced)
    out += sentiment_table_lines(summary, speeds.get("sentiment"), reduced)
    out += [
        "",
        f"{seeds_note(summary)} Minutes: training time of `spacy train` (its log; all stretches of a resumed run).",
    ]
    out += ["", REDUCED_NOTE] if reduced else []
    out += list(example)
    out += ["", "## Targets", ""] + (target_lines(summary, judged=not reduced) or ["(not enough runs to compare)"])
    out += layer_weight_lines(runs)
    investigations = investigations or {}
    out += search_lines(investigations, runs)
    out += adaptation_lines(investigations, runs, adapted_dir)
    others = {name: records for name, records in investigations.items() if not is_search_run(name)}
    out += investigation_lines(others, bilm_dir, runs)
    out += ["", "## The biLM", ""] + bilm_read_lines(runs, bilm_dir) + pretrain_lines
    out += ["", "## Context: the paper", "", PAPER_CONTEXT, ""]
    return "\n".join(out)


def seeds_note(summary: Dict[str, Dict[str, Any]]) -> str:
    """What a table cell is: a mean ± sd over seeds, or one seed's figure where a run has one."""
    seeds = {row["n_seeds"] for row in summary.values()}
    if seeds == {1}:
        return "One seed per run: each figure is that seed's (the spread between seeds is not known)."
    if 1 in seeds:
        return (
            "Mean ± sample standard deviation over seeds; a run of one seed (its seeds column) shows its figure alone."
        )
    return "Mean ± sample standard deviation over seeds."


def ner_table_lines(summary, speeds, reduced: bool = False) -> List[str]:
    rows = [
        (
            name,
            s["same_as"],
            [f"`{name}`", described(name, description, s), fmt(s["f1"]), fmt(s["p"]), fmt(s["r"])]
            + [fmt(s["per_type"][e]) for e in ENTITY_TYPES]
            + [fmt(s["best_dev"]), fmt(s["epochs"], 1, 0), fmt(s["steps"], 1, 0), fmt(s["minutes"], 1, 1)]
            + [str(s["n_seeds"])],
        )
        for name, description in NER_RUNS
        if (s := summary.get(name))
    ]
    header = ["config", "token representation", "test F1", "P", "R", *ENTITY_TYPES]
    header += ["best dev F1", "epochs", "steps", "minutes", "seeds"]
    split = "a slice of testb: its first sentences" if reduced else "test = testb"
    title = f"## NER: CoNLL-2003 English ({split}, gold tokens and sentences)"
    return [title, ""] + score_table(header, rows, speeds, words_per_second(summary))


def sentiment_table_lines(summary, speeds, reduced: bool = False) -> List[str]:
    rows = [
        (
            name,
            s["same_as"],
            [f"`{name}`", described(name, description, s), fmt(s["accuracy"]), fmt(s["macro_f1"])]
            + [fmt(s["per_label"]["neutral"])]
            + [fmt(s["best_dev"]), fmt(s["epochs"], 1, 0), fmt(s["steps"], 1, 0), fmt(s["minutes"], 1, 1)]
            + [str(s["n_seeds"])],
        )
        for name, description in SENTIMENT_RUNS
        if (s := summary.get(name))
    ]
    if not rows:  # the demo trains no sentiment run unless train-sentiment-demo was run
        return []
    header = ["config", "token representation", "test accuracy", "macro F1", "neutral F1"]
    header += ["best dev macro F1", "epochs", "steps", "minutes", "seeds"]  # spaCy's cats_score, exclusive classes
    split = "a slice of the test split" if reduced else "test split"
    title = f"## Sentiment: movie-review snippets, 5 classes ({split} of the seeded 80/10/10 split)"
    return ["", title, ""] + score_table(header, rows, speeds, words_per_second(summary))


def layer_weight_lines(runs) -> List[str]:
    mixes = layer_weight_rows(runs)
    if not mixes:
        return []
    out = [
        "",
        "## What the tasks learned to use: ELMo layer weights softmax(s) and gamma "
        + ("(one seed)" if all(len(seeds) == 1 for seeds in runs.values()) else "(seed means)"),
        "",
        "| run | component | layer 0 (char CNN) | layer 1 | layer 2 | gamma |",
        "|---|---|---|---|---|---|",
    ]
    for run, component, weights, gamma in mixes:
        out.append(f"| `{run}` | {component} | " + " | ".join(f"{w:.3f}" for w in weights) + f" | {gamma:.3f} |")
    return out


def investigation_lines(
    investigations: Dict[str, List[Dict[str, Any]]],
    bilm_dir: Optional[Path] = None,
    scored_runs: Optional[Dict[str, List[Dict[str, Any]]]] = None,
) -> List[str]:
    """The dev-only variants tried after a missed target (``investigate``),
    with the scored runs' best dev on the same seeds to compare them with."""
    if not investigations:
        return []
    out = [
        "",
        "## Investigations (dev split only; the test split was not scored)",
        "",
        "Variants trained to convergence under the same stopping rule.",
        "",
    ]
    investigated_seeds = sorted({r["seed"] for records in investigations.values() for r in records})
    references = [
        f"`{name}` {fmt([r['training']['best_dev_score'] for r in same_seeds])}"
        for name, records in sorted((scored_runs or {}).items())
        if (same_seeds := [r for r in records if r["seed"] in investigated_seeds])
    ]
    if references:
        out += [
            f"Best dev of the scored runs on the same seed(s) ({', '.join(map(str, investigated_seeds))}), "
            f"to compare with: {', '.join(references)}.",
            "",
        ]
    out += [
        "| run | config | changed (overrides) | best dev | epochs | minutes | seeds |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, records in sorted(investigations.items()):
        training = [r["training"] for r in records]
        out.append(
            f"| `{name}` | `{Path(records[0]['config']).name}` | {changed_settings(records[0]['overrides'], bilm_dir)} | "
            f"{fmt([t['best_dev_score'] for t in training])} | {fmt([t['epochs'] for t in training], 1, 0)} | "
            f"{fmt([training_minutes(t) for t in training], 1, 1)} | {len(records)} |"
        )
    return out


def changed_settings(overrides: List[str], bilm_dir: Optional[Path]) -> str:
    """A variant's overrides as a table cell. The biLM paths are left out when
    they are the report's biLM (or no biLM is given); another biLM is the change."""
    shown, other_bilm = [], None
    for i, item in enumerate(overrides):
        if item.startswith("--paths.elmo_"):
            continue
        if i and overrides[i - 1].startswith("--paths.elmo_"):
            if bilm_dir is not None and Path(item).parent.resolve() != bilm_dir.resolve():
                other_bilm = Path(item).parent.as_posix()
            continue
        shown.append(item)
    cell = f"`{' '.join(shown)}`" if shown else ""
    if other_bilm:
        cell = f"{cell}{'; ' if cell else ''}biLM `{other_bilm}`"
    return cell or "(none)"


# The product in use: the NER pipelines with and without ELMo on a sentence (report --example).
EXAMPLE_RUNS = ("ner_vectors", "ner_vectors_elmo")


def entities_cell(doc) -> str:
    return ", ".join(f"{ent.text} ({ent.label_})" for ent in doc.ents) or "(none)"


def example_lines(training_dir: Path, texts: Sequence[str], test: Optional[Path] = None) -> List[str]:
    """The entities each of EXAMPLE_RUNS' seed-0 pipelines (``model-best``) finds in TEXTS and, with
    TEST, in the first test sentence on which they differ (beside the gold entities)."""
    import spacy
    from spacy.tokens import Doc, DocBin

    models = {run: training_dir / run / "seed0" / "model-best" for run in EXAMPLE_RUNS}
    if not (texts or test) or not all(path.is_dir() for path in models.values()):
        return []
    pipelines = {run: spacy.load(path) for run, path in models.items()}
    rows: List[Tuple[str, Optional[str], List[str]]] = [
        (text, None, [entities_cell(nlp(text)) for nlp in pipelines.values()]) for text in texts
    ]
    if test is not None:
        vocab = next(iter(pipelines.values())).vocab
        for gold in (sent.as_doc() for doc in DocBin().from_disk(test).get_docs(vocab) for sent in doc.sents):
            words = [token.text for token in gold]
            found = [entities_cell(nlp(Doc(nlp.vocab, words=words))) for nlp in pipelines.values()]
            if len(set(found)) > 1:
                rows.append((gold.text, entities_cell(gold), found))
                break
    header = "| sentence | gold | " + " | ".join(f"`{run}` found" for run in pipelines) + " |"
    lines = ["", "## The product in use: entities found with and without ELMo", "", header, "|---|---|---|---|"]
    lines += [f"| {text} | {gold or '-'} | " + " | ".join(found) + " |" for text, gold, found in rows]
    return lines + [
        "",
        f"Each run's seed-0 `model-best` under `{training_dir.as_posix()}`; the last row"
        + (", the first test sentence on which the two differ." if test is not None else "."),
    ]


# Sections other steps wrote into the reports folder (learning-curve, probe), included when present.
OTHER_SECTIONS = [("learning_curve.md", "learning_curve.png"), ("probe/probe.md", "probe/probe.png")]


def other_sections(reports_dir: Path) -> str:
    parts = []
    for text, image in OTHER_SECTIONS:
        if (reports_dir / text).is_file():
            section = (reports_dir / text).read_text(encoding="utf8").replace("\n# ", "\n## ")
            section = "#" + section if section.startswith("# ") else section
            parts.append(f"\n{section.rstrip()}\n\n![{image}]({image})\n")
    return "".join(parts)
