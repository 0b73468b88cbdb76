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
from typing import Any, Dict, List, Optional

from experiment import training_minutes

Records = Dict[str, List[Dict[str, Any]]]

SEARCH_PREFIX = "search_"
# The candidate part of a run name -> what the task model is (configs/search/ says more).
CANDIDATES = {
    "efficiency": "today's efficiency tok2vec (width 96, depth 4), today's head",
    "acc": "spaCy's accuracy-preset tok2vec (width 256, depth 8)",
    "acc_both": "accuracy-preset tok2vec, ELMo at its input and output",
    "bilstm": "biLSTM encoder (2 layers, 200 per direction)",
    "bilstm_both": "biLSTM encoder, ELMo at its input and output",
    "reduce": "efficiency tok2vec, mean + max pooling (TextCatReduce)",
    "attn": "efficiency tok2vec, parametric attention (TextCatParametricAttention)",
}
TASKS = ("ner", "sentiment")
SEED = 0


@dataclass
class Pair:
    task: str
    candidate: str
    baseline: Optional[Dict[str, Any]]  # the seed-0 record, or None (not run yet)
    elmo: Optional[Dict[str, Any]]


def seed_record(records: Optional[List[Dict[str, Any]]]) -> Optional[Dict[str, Any]]:
    return next((r for r in records or [] if r["seed"] == SEED), None)


def search_pairs(investigations: Records, scored_runs: Records) -> List[Pair]:
    """The efficiency pair of each task (from the scored runs), then every search candidate."""
    pairs = []
    for task in TASKS:
        baseline = seed_record(scored_runs.get(f"{task}_vectors"))
        elmo = seed_record(scored_runs.get(f"{task}_vectors_elmo"))
        if baseline or elmo:
            pairs.append(Pair(task, "efficiency", baseline, elmo))
        candidates = set()
        for name in investigations:
            for kind in ("vectors_elmo_", "vectors_"):
                prefix = f"{SEARCH_PREFIX}{task}_{kind}"
                if name.startswith(prefix):
                    candidates.add(name[len(prefix) :])
                    break
        for candidate in sorted(candidates, key=lambda c: (c.removesuffix("_both"), c)):
            baseline_name = f"{SEARCH_PREFIX}{task}_vectors_{candidate.removesuffix('_both')}"
            elmo_name = f"{SEARCH_PREFIX}{task}_vectors_elmo_{candidate}"
            if candidate.endswith("_both") and elmo_name not in investigations:
                continue
            pairs.append(
                Pair(
                    task,
                    candidate,
                    seed_record(investigations.get(baseline_name)),
                    seed_record(investigations.get(elmo_name)),
                )
            )
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
    if not any(name.startswith(SEARCH_PREFIX) for name in investigations):
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
        "beside one other job, the efficiency rows are the scored runs' seed 0 (other machines, other loads).",
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
        n_run = sum(p.elmo is not None for p in pairs if p.task == task)
        out.append(
            f"- {task}: highest dev with ELMo so far: `{best.candidate}` ({dev_value(best.elmo):.2f}; "
            f"ELMo candidates run: {n_run})"
        )
    return [""] + out if out else []
