"""The task-model search's dev table (issue 30): every candidate as a fair pair, the same
task model with static vectors only and with vectors + ELMo, side by side.

Runs come from ``investigate`` (dev only) and are named by the project's ``search-*``
commands: ``search_<task>_vectors_<candidate>`` (the baseline) and
``search_<task>_vectors_elmo_<candidate>`` (with ELMo). A candidate ending in ``_both``
(ELMo at the encoder's input and output) pairs with the baseline of the candidate without
it. Today's efficiency configs are the first candidate: their seed-0 runs from the scored
table (``<task>_vectors`` / ``<task>_vectors_elmo``), their best dev only.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from experiment import training_minutes
from project_errors import ProjectDataError

from spacy_elmo.files.json_files import read_json

Records = Dict[str, List[Dict[str, Any]]]

SEARCH_PREFIX = "search_"
# The candidate part of a run name -> what the task model is (configs/search/ says more).
CANDIDATES = {
    "efficiency": "today's efficiency tok2vec (width 96, depth 4), today's head",
    "efficiency_both": "today's efficiency tok2vec, ELMo at its input and output",
    "acc": "spaCy's accuracy-preset tok2vec (width 256, depth 8)",
    "acc_both": "accuracy-preset tok2vec, ELMo at its input and output",
    "bilstm": "biLSTM encoder (2 layers, 200 per direction)",
    "bilstm_both": "biLSTM encoder, ELMo at its input and output",
    "reduce": "efficiency tok2vec, mean + max pooling (TextCatReduce)",
    "attn": "efficiency tok2vec, parametric attention (TextCatParametricAttention)",
}
TASKS = ("ner", "sentiment")
# ELMo at the encoder's input and output: pairs with the plain candidate's baseline.
BOTH = "_both"
# The candidate run again with the task-adapted biLM (`search-adapted`).
ADAPTED = "_adapted"
SEED = 0


@dataclass
class Pair:
    task: str
    candidate: str
    baseline: Optional[Dict[str, Any]]  # the seed-0 record, or None (not run yet)
    elmo: Optional[Dict[str, Any]]


def seed_record(records: Optional[List[Dict[str, Any]]]) -> Optional[Dict[str, Any]]:
    return next((r for r in records or [] if r["seed"] == SEED), None)


# The stem of a task's names: its search runs' and its configs' (configs/search/).
RUN_STEMS = {task: f"{SEARCH_PREFIX}{task}_vectors" for task in TASKS}
CONFIG_STEMS = {"ner": "ner_vectors", "sentiment": "textcat_vectors"}


def split_name(name: str, stems: Dict[str, str]) -> Optional[Tuple[str, bool, str]]:
    """``<stem>[_elmo][_<candidate>]`` -> (task, with ELMo, candidate); no candidate part
    is the efficiency pair."""
    for task, stem in stems.items():
        for with_elmo, prefix in ((True, stem + "_elmo"), (False, stem)):
            if name == prefix:
                return task, with_elmo, "efficiency"
            if name.startswith(prefix + "_"):
                return task, with_elmo, name[len(prefix) + 1 :]
    return None


def parse_run_name(name: str) -> Optional[Tuple[str, bool, str]]:
    """``search_<task>_vectors[_elmo][_<candidate>]`` -> (task, with ELMo, candidate); no
    candidate part is the efficiency pair (``search-*`` re-runs of today's configs)."""
    return split_name(name, RUN_STEMS)


def is_search_run(name: str) -> bool:
    return parse_run_name(name) is not None


def config_candidate(config: Path) -> Optional[str]:
    """The search candidate a config of ``configs/search/`` is (None for any other config)."""
    parsed = split_name(config.stem, CONFIG_STEMS) if config.parent.name == "search" else None
    return None if parsed is None or parsed[2] == "efficiency" else parsed[2]


def candidate_configs(task: str, candidate: str) -> Tuple[str, str]:
    """A candidate's (baseline, ELMo) configs, from the project's root: today's top-level
    configs for ``efficiency``; a ``*_both`` candidate's baseline is the plain candidate's."""
    stem = CONFIG_STEMS[task]
    plain = candidate.removesuffix(BOTH)
    baseline = f"configs/{stem}.cfg" if plain == "efficiency" else f"configs/search/{stem}_{plain}.cfg"
    elmo = f"configs/{stem}_elmo.cfg" if candidate == "efficiency" else f"configs/search/{stem}_elmo_{candidate}.cfg"
    return baseline, elmo


def chosen_candidate(config: Path) -> Optional[str]:
    """The candidate a final-table run's config is (``efficiency`` for today's top-level
    pair), or None for a config that is no candidate's."""
    today = any(config.as_posix() in candidate_configs(task, "efficiency") for task in TASKS)
    return config_candidate(config) or ("efficiency" if today else None)


def search_runs(investigations: Records) -> Dict[Tuple[str, bool, str], Dict[str, Any]]:
    """Every search run's seed-0 record by (task, with ELMo, candidate)."""
    found = {}
    for name, records in investigations.items():
        parsed = parse_run_name(name)
        record = seed_record(records)
        if parsed is not None and record is not None:
            found[parsed] = record
    return found


def runs_with_efficiency(investigations: Records, scored_runs: Records) -> Dict[Tuple[str, bool, str], Dict[str, Any]]:
    """``search_runs``, with each task's efficiency pair from the scored runs' seed 0 unless
    the search re-ran it."""
    runs = search_runs(investigations)
    for task in TASKS:
        for with_elmo, run in ((False, f"{task}_vectors"), (True, f"{task}_vectors_elmo")):
            scored = seed_record(scored_runs.get(run))
            if scored is not None:
                runs.setdefault((task, with_elmo, "efficiency"), scored)
    return runs


def search_pairs(investigations: Records, scored_runs: Records) -> List[Pair]:
    """Each task's efficiency pair, then every candidate; runs with an adapted biLM are
    left to ``adaptation_lines``."""
    runs = runs_with_efficiency(investigations, scored_runs)
    pairs = []
    for task in TASKS:
        candidates = {c for (t, _, c) in runs if t == task and not c.endswith(ADAPTED)}
        for candidate in sorted(candidates, key=lambda c: (c != "efficiency", c.removesuffix(BOTH), c)):
            if candidate.endswith(BOTH) and (task, True, candidate) not in runs:
                continue  # a baseline-only name ending in _both is no candidate
            baseline = runs.get((task, False, candidate.removesuffix(BOTH)))
            pairs.append(Pair(task, candidate, baseline, runs.get((task, True, candidate))))
    return pairs


def dev_value(record: Optional[Dict[str, Any]]) -> Optional[float]:
    """The selection score (NER F1; sentiment macro F1), in points."""
    return None if record is None else 100 * record["training"]["best_dev_score"]


def dev_cell(task: str, record: Optional[Dict[str, Any]]) -> str:
    if record is None:
        return "(not run)"
    if task == "ner":
        return f"{dev_value(record):.2f}"
    accuracy = 100 * record["training"]["best_dev_scores"]["cats_micro_f"]
    return f"{dev_value(record):.2f} / {accuracy:.2f}"


def minutes(record: Optional[Dict[str, Any]]) -> str:
    return "-" if record is None else f"{training_minutes(record['training']):.0f}"


def search_lines(investigations: Records, scored_runs: Records) -> List[str]:
    """The search section of the report ([] when no search run exists)."""
    if not any(is_search_run(name) for name in investigations):
        return []
    out = [
        "",
        "## Task-model search (dev split only, seed 0, the full training set)",
        "",
        "Each row is a fair pair: the identical task model with en_core_web_md's static vectors, "
        "and with vectors + ELMo at its encoder's input (`configs/search/`; `spacy project run "
        "search-ner` / `search-sentiment`). Every run to convergence under the same stopping rule. "
        "Dev: NER F1; sentiment macro F1 / accuracy (macro F1 picks the best step). "
        "Minutes: training time from the run's log (all stretches); the search runs trained on one thread "
        "beside one other job, on the AVX2 EPYC unless docs/results.md's run notes name another CPU; the "
        "efficiency rows are the scored runs' seed 0 (other machines, other loads).",
        "",
        "| task | candidate | vectors: dev | vectors + ELMo: dev | ELMo's gain | minutes (vectors / + ELMo) |",
        "|---|---|---|---|---|---|",
    ]
    pairs = search_pairs(investigations, scored_runs)
    for pair in pairs:
        base, elmo = dev_value(pair.baseline), dev_value(pair.elmo)
        gain = f"{elmo - base:+.2f}" if base is not None and elmo is not None else "-"
        out.append(
            f"| {pair.task} | `{pair.candidate}`: {CANDIDATES.get(pair.candidate, pair.candidate)} | "
            f"{dev_cell(pair.task, pair.baseline)} | {dev_cell(pair.task, pair.elmo)} | {gain} | "
            f"{minutes(pair.baseline)} / {minutes(pair.elmo)} |"
        )
    bow = seed_record(scored_runs.get("sentiment_bow"))
    if bow is not None:
        out += [
            "",
            f"Bag of words (`sentiment_bow`, seed 0), the other sentiment baseline: dev {dev_cell('sentiment', bow)}.",
        ]
    out += best_lines(pairs)
    return out


def best_lines(pairs: List[Pair]) -> List[str]:
    """Per task, the candidate whose ELMo run scored highest on dev so far."""
    out = []
    for task in TASKS:
        scored = [p for p in pairs if p.task == task and p.elmo is not None]
        if not scored:
            continue
        best = max(scored, key=lambda p: dev_value(p.elmo) or 0.0)
        out.append(
            f"- {task}: highest dev with ELMo so far: `{best.candidate}` ({dev_value(best.elmo):.2f}; "
            f"ELMo candidates run: {len(scored)})"
        )
    rule = (
        "The choice per task (project vars `ner_search_choice`, `sentiment_search_choice`) is the "
        "candidate whose ELMo run has the highest dev selection score (NER F1, sentiment macro F1):"
    )
    return ["", rule, ""] + out if out else []


def adapted_perplexity(adapted_dir: Optional[Path], task: str, when: str) -> Optional[float]:
    """The mean perplexity on the task's dev text (``adapt-perplexity``): ``when`` is
    "before" (the starting biLM, its LM head trained alone for as many steps) or "after"."""
    if adapted_dir is None:
        return None
    path = adapted_dir / f"bilm_adapted_{task}" / f"perplexity_{when}.json"
    return read_json(path, ProjectDataError)["mean"] if path.is_file() else None


def adaptation_lines(investigations: Records, scored_runs: Records, adapted_dir: Optional[Path]) -> List[str]:
    """``adapt-bilm``'s section: dev perplexity before and after, and each candidate run
    with the general and the adapted biLM ([] when neither exists)."""
    runs = runs_with_efficiency(investigations, scored_runs)
    rows, verdicts = [], []
    for task in TASKS:
        before, after = (adapted_perplexity(adapted_dir, task, when) for when in ("before", "after"))
        perplexity = f"{before:.1f} -> {after:.1f}" if before is not None and after is not None else "-"
        adapted = sorted(c for (t, e, c) in runs if t == task and e and c.endswith(ADAPTED))
        if not adapted and perplexity != "-":
            rows.append(f"| {task} | {perplexity} | `-` | - | - | - |")
        for candidate in adapted:
            plain = candidate.removesuffix(ADAPTED)
            general_run, adapted_run = runs.get((task, True, plain)), runs[(task, True, candidate)]
            general, better = dev_value(general_run), dev_value(adapted_run)
            change = f"{better - general:+.2f}" if general is not None and better is not None else "-"
            rows.append(
                f"| {task} | {perplexity} | `{plain}` | {dev_cell(task, general_run)} | "
                f"{dev_cell(task, adapted_run)} | {change} |"
            )
            if general is not None and better is not None:
                keep = "the adapted biLM" if better > general else "the general biLM"
                verdicts.append(f"- {task}, `{plain}`: {change} on dev with the adapted biLM: keep {keep}")
    if not rows:
        return []
    return [
        "",
        "## The biLM adapted to the task's text (`adapt-bilm`; dev split only, seed 0)",
        "",
        "The bundled biLM continued on each task's training text only (`adapt-bilm`; never dev or test). "
        "Perplexity: the task's dev text, mean of both directions, the starting biLM kept fixed with its LM head "
        "trained alone for as many steps -> the adapted biLM (`adapt-perplexity`). Dev scores as in the search table.",
        "",
        "| task | dev perplexity | candidate | dev, general biLM | dev, adapted biLM | change |",
        "|---|---|---|---|---|---|",
        *rows,
        *([""] + verdicts if verdicts else []),
    ]
