"""``probe``: what each biLM layer knows (the paper's section 5.3).

    python scripts/probe.py OUTPUT_DIR [--bilm-dir BILM_DIR] [--brown assets/brown] \\
        [--conll-train corpus/conll/train.spacy] [--conll-dev corpus/conll/dev.spacy] \\
        [--vectors assets/en_core_web_md] [--max-sentences 2000] [--seed 0]

For each biLM layer (0: the char CNN's token vector, 1 and 2: the LSTM
layers) and their average, a linear classifier on frozen features, with no
context of its own, for
- POS tags on the Brown files that are never pretraining text
  (``pretrain_corpus.BROWN_PROBE_FILES``; base tags, e.g. ``nn-tl`` -> ``nn``),
  80/20 split by sentence with the seed;
- CoNLL-2003 NER tags per token (BIO), trained on the first train sentences,
  scored on the first dev sentences (the test split is never read);
and the same probe on a random-weight biLM of the same size (the floor) and
on static vectors (``en_core_web_md``, the reference). Writes probe.json,
probe.md (the table) and probe.png (the bar chart).
"""

import fnmatch
import json
import random
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy
import spacy
import torch
import typer
from pretrain_corpus import BROWN_PROBE_FILES, BROWN_QUOTES
from project_errors import ProjectDataError
from spacy.tokens import DocBin

from spacy_elmo.bilm import ElmoBiLM
from spacy_elmo.files.atomic import write_text_atomic
from spacy_elmo.loaders import DEFAULT_BILM_DIR
from spacy_elmo.pretrain.target_vectors import load_spacy_vectors

Tagged = List[Tuple[List[str], List[str]]]  # (words, labels) per sentence
LAYER_NAMES = ("layer 0 (char CNN)", "layer 1 (LSTM)", "layer 2 (LSTM)", "average")


def brown_pos(folder: Path) -> Tagged:
    """The held-out Brown files' sentences with base POS tags."""
    files = sorted(p for p in folder.iterdir() if fnmatch.fnmatchcase(p.name, BROWN_PROBE_FILES))
    if not files:
        raise ProjectDataError(f"{folder}: no Brown probe files ({BROWN_PROBE_FILES})")
    sentences = []
    for path in files:
        for line in path.read_text(encoding="utf8").splitlines():
            pairs = [pair.rsplit("/", 1) for pair in line.split() if "/" in pair]
            if pairs:
                words = [BROWN_QUOTES.get(word, word) for word, _ in pairs]
                sentences.append((words, [tag.split("-")[0] or tag for _, tag in pairs]))
    return sentences


def conll_ner(path: Path, max_sentences: int) -> Tagged:
    """The first sentences of a CoNLL .spacy file with their BIO entity tags."""
    nlp = spacy.blank("en")
    sentences: Tagged = []
    for doc in DocBin().from_disk(path).get_docs(nlp.vocab):
        for sent in doc.sents:
            labels = [f"{t.ent_iob_}-{t.ent_type_}" if t.ent_type_ else "O" for t in sent]
            sentences.append(([t.text for t in sent], labels))
            if len(sentences) >= max_sentences:
                return sentences
    return sentences


def split(sentences: Tagged, seed: int, test_share: float = 0.2) -> Tuple[Tagged, Tagged]:
    order = list(range(len(sentences)))
    random.Random(seed).shuffle(order)
    n_test = int(len(order) * test_share)
    return [sentences[i] for i in order[n_test:]], [sentences[i] for i in order[:n_test]]


def bilm_features(bilm: ElmoBiLM, sentences: Tagged) -> List[numpy.ndarray]:
    """Per representation (the layers, then their average): (tokens, 2P) rows of all sentences."""
    layers = numpy.concatenate(bilm.embed_batch([words for words, _ in sentences]), axis=1)
    return [layers[k] for k in range(layers.shape[0])] + [layers.mean(axis=0)]


def static_features(vectors, sentences: Tagged) -> numpy.ndarray:
    """Each token's static vector (as it is, else lower-cased; zeros if neither has one)."""
    table = numpy.asarray(vectors.data, dtype=numpy.float32)
    rows = []
    for words, _ in sentences:
        for word in words:
            row = vectors.find(key=word)
            row = row if row >= 0 else vectors.find(key=word.lower())
            rows.append(table[row] if row >= 0 else numpy.zeros(table.shape[1], dtype=numpy.float32))
    return numpy.stack(rows)


def train_probe(
    x_train: numpy.ndarray, y_train: numpy.ndarray, n_labels: int, seed: int, steps: int = 300
) -> torch.nn.Linear:
    """Multinomial logistic regression (full batch, Adam, a little L2) on standardised features."""
    torch.manual_seed(seed)
    probe = torch.nn.Linear(x_train.shape[1], n_labels)
    optimizer = torch.optim.Adam(probe.parameters(), lr=0.01, weight_decay=1e-4)
    x, y = torch.from_numpy(x_train), torch.from_numpy(y_train)
    for _ in range(steps):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(probe(x), y).backward()
        optimizer.step()
    return probe


def score(predicted: numpy.ndarray, gold: numpy.ndarray, labels: Sequence[str], task: str) -> float:
    """POS: accuracy. NER: macro F1 over the entity tags (not O), per token."""
    if task == "pos":
        return float((predicted == gold).mean())
    f1s = []
    for k, label in enumerate(labels):
        if label == "O":
            continue
        tp = float(((predicted == k) & (gold == k)).sum())
        fp, fn = float(((predicted == k) & (gold != k)).sum()), float(((predicted != k) & (gold == k)).sum())
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return float(numpy.mean(f1s))


def probe_task(
    features: Dict[str, Tuple[numpy.ndarray, numpy.ndarray]], train: Tagged, test: Tagged, task: str, seed: int
) -> Dict[str, float]:
    """The probe's test score for each representation of one task."""
    labels = sorted({label for _, tags in train for label in tags})
    index = {label: k for k, label in enumerate(labels)}
    y_train = numpy.array([index[t] for _, tags in train for t in tags])
    # A test label the train part never had counts as an error (-1 is never predicted).
    y_test = numpy.array([index.get(t, -1) for _, tags in test for t in tags])
    scores = {}
    for name, (x_train, x_test) in features.items():
        mean, std = x_train.mean(axis=0), x_train.std(axis=0) + 1e-6
        probe = train_probe(((x_train - mean) / std).astype(numpy.float32), y_train, len(labels), seed)
        with torch.no_grad():
            logits = probe(torch.from_numpy(((x_test - mean) / std).astype(numpy.float32)))
        scores[name] = score(logits.argmax(-1).numpy(), y_test, labels, task)
    return scores


def representations(bilm: ElmoBiLM, random_bilm: ElmoBiLM, vectors, train: Tagged, test: Tagged):
    features = {}
    for prefix, model in (("biLM", bilm), ("random biLM", random_bilm)):
        for name, a, b in zip(LAYER_NAMES, bilm_features(model, train), bilm_features(model, test)):
            features[f"{prefix}: {name}"] = (a, b)
    if vectors is not None:
        features["static vectors (en_core_web_md)"] = (static_features(vectors, train), static_features(vectors, test))
    return features


# results.md includes probe.md as a section of its own (report.py turns this into a "## " heading).
PROBE_HEADING = "# What each layer knows: linear probes on frozen features (test scores)"


def probed_line(bilm_dir: Path, bilm: ElmoBiLM) -> str:
    """Which biLM the table probes: a demo probes its own small biLM, not the bundled one its tasks read."""
    n_parameters = sum(parameter.numel() for parameter in bilm.parameters())
    which = f"`{bilm_dir.as_posix()}`"
    if bilm_dir.resolve() == Path(DEFAULT_BILM_DIR).resolve():
        which += ', the package\'s bundled biLM (what `nlp.add_pipe("elmo")` loads)'
    else:
        which += ', not the package\'s bundled biLM (what `nlp.add_pipe("elmo")` loads)'
    return f"The biLM probed: {which}: {n_parameters / 1e6:.1f}M parameters, 2P = {bilm.options.output_dim}."


# How to read the table (a short pretraining run's biLM can sit below its random-weight floor).
READING = (
    "How to read it: a linear classifier reads one layer's vector of each token, with no context of its own. "
    "The random biLM (the same size, its weights as pretraining starts them) is the floor: its char CNN "
    "already tells many tags apart by spelling, so what pretraining taught shows only above that floor."
)


def meaning_lines(results: Dict[str, Dict[str, float]]) -> List[str]:
    """Each task's best biLM layer against the best of the random biLM (the floor), and what a biLM
    at or below its floor means: it has not learned more than spelling gives, not that pretraining hurts."""
    lines = ["", READING, ""]
    for task, scores in results.items():
        probed = [name for name in scores if name.startswith("biLM: ")]
        floors = [name for name in scores if name.startswith("random biLM: ")]
        if not probed or not floors:
            continue
        best, floor = max(probed, key=lambda name: scores[name]), max(floors, key=lambda name: scores[name])
        gain = 100 * (scores[best] - scores[floor])
        line = (
            f"- {task}: the biLM's best, {best.split(': ', 1)[1]} {100 * scores[best]:.1f}, is {gain:+.1f} points "
            f"from the floor's best ({floor.split(': ', 1)[1]} {100 * scores[floor]:.1f})"
        )
        if gain <= 0:
            line += (
                ": this biLM has learned no more than spelling gives for it (too little pretraining, such as the "
                "demo's 400 steps); it says nothing of a biLM trained to the end"
            )
        lines.append(line)
    return lines


def write_outputs(
    output_dir: Path, results: Dict[str, Dict[str, float]], sizes: Dict[str, int], bilm_dir: Path, probed: str
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    output_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(
        output_dir / "probe.json",
        json.dumps({"bilm_dir": str(bilm_dir), "tokens": sizes, "scores": results}, indent=2) + "\n",
    )
    names = list(next(iter(results.values())))
    lines = [PROBE_HEADING, "", probed, ""]
    lines += ["| representation | " + " | ".join(results) + " |", "|---|" + "---|" * len(results)]
    lines += [
        f"| {name} | " + " | ".join(f"{100 * results[task][name]:.1f}" for task in results) + " |" for name in names
    ]
    write_text_atomic(output_dir / "probe.md", "\n".join(lines + meaning_lines(results)) + "\n")
    figure, axis = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / len(results)
    for k, task in enumerate(results):
        axis.bar(numpy.arange(len(names)) + k * width, [100 * results[task][n] for n in names], width, label=task)
    axis.set_xticks(
        numpy.arange(len(names)) + width * (len(results) - 1) / 2, names, rotation=35, ha="right", fontsize=8
    )
    axis.set_ylabel("test score (%)")
    axis.set_title("Linear probes on frozen features: which layer knows what", pad=24)
    # Above the axes: inside, it covered a bar.
    axis.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncol=len(results), frameon=False, fontsize=8)
    figure.tight_layout()
    figure.savefig(output_dir / "probe.png", dpi=120)


def main(
    output_dir: Path = typer.Argument(..., file_okay=False, help="Writes probe.json, probe.md, probe.png"),
    bilm_dir: Path = typer.Option(DEFAULT_BILM_DIR, "--bilm-dir", help="the biLM to probe (default: the bundled one)"),
    brown: Path = typer.Option(Path("assets/brown"), "--brown"),
    conll_train: Path = typer.Option(Path("corpus/conll/train.spacy"), "--conll-train"),
    conll_dev: Path = typer.Option(Path("corpus/conll/dev.spacy"), "--conll-dev"),
    vectors: Optional[Path] = typer.Option(
        Path("assets/en_core_web_md"),
        "--vectors",
        help="static vectors for the reference row (a missing path leaves it out)",
    ),
    max_sentences: int = typer.Option(
        2000, "--max-sentences", min=10, help="CoNLL train sentences (dev: half as many)"
    ),
    seed: int = typer.Option(0, "--seed"),
    threads: int = typer.Option(0, "--threads", min=0, help="torch threads (0: torch's default)"),
) -> None:
    """Probe each biLM layer for POS (Brown, held out of pretraining) and NER (CoNLL)."""
    if threads:
        torch.set_num_threads(threads)
    bilm = ElmoBiLM.from_dir(bilm_dir)
    torch.manual_seed(seed)
    random_bilm = ElmoBiLM(bilm.options).eval()  # pretraining's initialisation: the floor
    static = load_spacy_vectors(vectors) if vectors is not None and vectors.exists() else None
    tasks = {
        "POS accuracy (Brown)": ("pos", *split(brown_pos(brown), seed)),
        "NER token macro F1 (CoNLL dev)": (
            "ner",
            conll_ner(conll_train, max_sentences),
            conll_ner(conll_dev, max_sentences // 2),
        ),
    }
    results, sizes = {}, {}
    for title, (task, train, test) in tasks.items():
        features = representations(bilm, random_bilm, static, train, test)
        results[title] = probe_task(features, train, test, task, seed)
        sizes[title] = sum(len(words) for words, _ in test)
        typer.echo(f"{title}: " + ", ".join(f"{name} {100 * s:.1f}" for name, s in results[title].items()), err=True)
    write_outputs(output_dir, results, sizes, bilm_dir, probed_line(bilm_dir, bilm))


if __name__ == "__main__":
    typer.run(main)
