"""speed: benchmarks/bench_trained.py times trained pipelines in one run, and report puts
their words/s beside each config's score (no timing is asserted beyond > 0)."""

import json
import re
import sys
from pathlib import Path

import pytest
import report_runs
import report_tables
import spacy
from spacy.tokens import Doc, DocBin, Span
from spacy.util import load_config, load_model_from_config

from ..conftest import tiny_bilm
from .conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import bench_trained  # noqa: E402

SENTENCES = [["Japan", "beat", "Syria", "."], ["Nadim", "Ladki"], ["AL-AIN", ",", "United", "Arab", "Emirates"]]


def save_pipeline(config_name: str, out: Path, **overrides) -> None:
    """A pipeline built from one of the project's configs with CoNLL's labels, untrained
    (speed does not depend on the weights), saved where experiment.py keeps model-best."""
    config = load_config(REPO / "configs" / config_name, overrides=overrides)
    nlp = load_model_from_config(config, auto_fill=True, validate=True)
    for label in ("PER", "LOC", "ORG", "MISC"):
        nlp.get_pipe("ner").add_label(label)
    nlp.initialize()
    out.parent.mkdir(parents=True)
    nlp.to_disk(out)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """training/ with a CNN and an int8 ELMo NER run (seed 0), a sentiment run and a
    learning-curve run (neither is an ner_* run), and the test sentences."""
    root = tmp_path_factory.mktemp("speed")
    options, weights = root / "options.json", root / "weights.hdf5"
    tiny_bilm(seed=5).to_files(options, weights)
    training = root / "training"
    save_pipeline("ner_cnn.cfg", training / "ner_cnn/seed0/model-best")
    save_pipeline(
        "ner_elmo.cfg",
        training / "ner_elmo/seed0/model-best",
        **{
            "paths.elmo_options": str(options),
            "paths.elmo_weights": str(weights),
            "components.elmo.precision": "int8",
        },
    )
    (training / "sentiment_bow/seed0/model-best").mkdir(parents=True)
    (training / "curve_ner_cnn_10pct/seed0/model-best").mkdir(parents=True)
    (training / "ner_unfinished/seed0").mkdir(parents=True)  # no model-best yet: not a run to time
    data = root / "test.spacy"
    DocBin(docs=[Doc(spacy.blank("en").vocab, words=words) for words in SENTENCES * 3]).to_disk(data)
    return root


def bench(trained: Path, output: Path, *args: str, data=None) -> None:
    data = data or trained / "test.spacy"
    bench_trained.main([str(data), str(output), "--training-dir", str(trained / "training"), *args])


def test_every_ner_run_is_timed_in_one_run_and_written(trained, tmp_path, capsys):
    output = tmp_path / "metrics" / "speed_ner.json"
    bench(trained, output, "--task", "ner", "--repeats", "1", "--limit", "4", "--threads", "1")
    record = json.loads(output.read_text(encoding="utf8"))
    assert sorted(record["runs"]) == ["ner_cnn", "ner_elmo"]
    assert (record["sentences"], record["words"]) == (4, 4 + 2 + 5 + 4)
    assert (record["threads"], record["repeats"], record["seed"]) == (1, 1, 0)
    assert record["cpu"] and record["date"] and "--task ner" in record["command"]
    cnn, elmo = record["runs"]["ner_cnn"], record["runs"]["ner_elmo"]
    assert cnn["words_per_second"] > 0 and elmo["words_per_second"] > 0
    assert cnn["pipeline"] == str(trained / "training/ner_cnn/seed0/model-best")
    # ELMo at the precision it was saved with; a pipeline without ELMo has none
    assert (cnn["precision"], elmo["precision"]) == (None, "int8")
    printed = capsys.readouterr().out
    assert printed.startswith("CPU: ") and "| ner_elmo | int8 |" in printed
    # The report reads what the benchmark wrote.
    assert report_tables.load_speeds(output.parent)["ner"] == record


def test_elmo_is_timed_with_its_output_cache_off(trained):
    nlp = bench_trained.load_trained(trained / "training/ner_elmo/seed0/model-best")
    assert nlp.get_pipe("elmo").cfg["cache_size_mb"] == 0
    assert nlp.get_pipe("elmo").cfg["precision"] == "int8"


def test_a_named_run_without_a_trained_pipeline_is_named_before_any_timing(trained, tmp_path):
    output = tmp_path / "speed.json"
    with pytest.raises(SystemExit, match=r"run ner_unfinished has no trained pipeline for seed 0: no .*model-best"):
        bench(trained, output, "--runs", "ner_cnn", "ner_unfinished")
    assert not output.exists()


def test_a_task_without_runs_and_an_empty_data_file_are_refused(trained, tmp_path):
    with pytest.raises(SystemExit, match=r"no textcat_\* run under .*training has seed0/model-best"):
        bench(trained, tmp_path / "speed.json", "--task", "textcat")
    empty = tmp_path / "empty.spacy"
    DocBin().to_disk(empty)
    with pytest.raises(SystemExit, match=re.escape(f"error: {empty} holds no sentences")):
        bench(trained, tmp_path / "speed.json", "--runs", "ner_cnn", data=empty)
    zero_bytes = tmp_path / "zero.spacy"
    zero_bytes.write_bytes(b"")
    with pytest.raises(SystemExit, match=re.escape(f"error: {zero_bytes} is empty (0 bytes), not a .spacy file")):
        bench(trained, tmp_path / "speed.json", "--runs", "ner_cnn", data=zero_bytes)


@pytest.fixture(scope="module")
def records(trained):
    """experiment.py's records of three NER runs (two with trained pipelines in `trained`, one
    without), a sentiment run's, and a training split with two entity labels."""
    root = trained / "records"
    options, weights = str(trained / "options.json"), str(trained / "weights.hdf5")
    elmo = ["--paths.elmo_options", options, "--paths.elmo_weights", weights]
    runs = {
        "ner_cnn": ("ner_cnn.cfg", []),
        "ner_elmo": ("ner_elmo.cfg", [*elmo, "--components.elmo.precision", "int8"]),
        "ner_gone": ("ner_cnn.cfg", []),
        "sentiment_bow": ("textcat_bow.cfg", []),
    }
    for run, (config, overrides) in runs.items():
        (root / run).mkdir(parents=True)
        record = {"config": str(REPO / "configs" / config), "overrides": overrides, "seed": 0}
        (root / run / "seed0.json").write_text(json.dumps(record), encoding="utf8")
    docs = []
    for words in SENTENCES:
        doc = Doc(spacy.blank("en").vocab, words=words)
        doc.ents = [Span(doc, 0, 1, label="LOC" if words[0] == "Japan" else "PER")]
        docs.append(doc)
    DocBin(docs=docs).to_disk(trained / "train.spacy")
    return root


def test_without_trained_pipelines_each_run_is_built_from_its_record_and_timed_untrained(
    trained, records, tmp_path, capsys
):
    output = tmp_path / "speed_ner.json"
    train = trained / "train.spacy"
    bench(trained, output, "--task", "ner", "--repeats", "1", "--threads", "1", "--initialize", str(train),
          "--records-dir", str(records))  # fmt: skip
    record = json.loads(output.read_text(encoding="utf8"))
    assert sorted(record["runs"]) == ["ner_cnn", "ner_elmo", "ner_gone"]
    assert record["initialized_on"] == str(train)
    cnn, elmo, gone = (record["runs"][run] for run in ("ner_cnn", "ner_elmo", "ner_gone"))
    assert cnn["pipeline"] == f"{REPO / 'configs/ner_cnn.cfg'}, initialized on {train} (untrained)"
    assert elmo["precision"] == "int8"  # the record's overrides reach the pipeline
    # a run whose trained pipeline is there is timed both ways, in the same run; one without, once
    assert cnn["words_per_second_trained"] > 0 and elmo["words_per_second_trained"] > 0
    assert gone["words_per_second"] > 0 and "words_per_second_trained" not in gone
    assert "| ner_gone | - | 1000 |" in capsys.readouterr().out
    note = report_tables.speed_note(record)
    assert f"initialized on `{train}`, untrained (the trained pipelines were gone" in note
    assert f"`ner_cnn` {cnn['words_per_second_trained']:,.0f} trained against {cnn['words_per_second']:,.0f}" in note


def test_a_record_builds_the_pipeline_spacy_train_would_start_from(trained, records):
    record = json.loads((records / "ner_elmo/seed0.json").read_text(encoding="utf8"))
    nlp = bench_trained.initialize_from_record(record, trained / "train.spacy")
    assert nlp.pipe_names == ["elmo", "ner"]
    assert sorted(nlp.get_pipe("ner").labels) == ["LOC", "PER"]  # from the training split
    elmo = nlp.get_pipe("elmo")
    assert (elmo.cfg["cache_size_mb"], elmo.cfg["precision"]) == (0, "int8")


def test_initialize_names_a_missing_split_or_record_before_any_timing(trained, records, tmp_path):
    output = tmp_path / "speed.json"
    with pytest.raises(SystemExit, match=r"--initialize .*nowhere.spacy: no such file"):
        bench(trained, output, "--task", "ner", "--initialize", str(tmp_path / "nowhere.spacy"))
    train = str(trained / "train.spacy")
    with pytest.raises(SystemExit, match=r"run ner_missing has no record for seed 0: no .*ner_missing/seed0.json"):
        bench(trained, output, "--runs", "ner_cnn", "ner_missing", "--initialize", train, "--records-dir", str(records))
    (tmp_path / "records/ner_cut").mkdir(parents=True)
    (tmp_path / "records/ner_cut/seed0.json").write_text('{"config": ', encoding="utf8")
    with pytest.raises(SystemExit, match=r"ner_cut/seed0.json: not a valid JSON file"):
        bench(trained, output, "--task", "ner", "--initialize", train, "--records-dir", str(tmp_path / "records"))
    with pytest.raises(SystemExit, match=r"no textcat_\* run under .*records has seed0.json"):
        bench(trained, output, "--task", "textcat", "--initialize", train, "--records-dir", str(tmp_path / "records"))
    assert not output.exists()


def ner_record(f1: float):
    test = {"ents_f": f1, "ents_p": f1, "ents_r": f1, "ents_per_type": {}}
    return {
        "test": test,
        "training": {"best_dev_score": f1, "epochs": 3, "steps": 200, "seconds": 60.0, "wall_seconds": 75.0},
    }


def sentiment_record(accuracy: float):
    test = {"cats_micro_f": accuracy, "cats_macro_f": accuracy, "cats_f_per_type": {}}
    return {
        "test": test,
        "training": {"best_dev_score": accuracy, "epochs": 3, "steps": 200, "seconds": 60.0, "wall_seconds": 75.0},
    }


SPEED_NER = {
    "cpu": "AMD EPYC (avx2)",
    "torch": "2.13.0",
    "threads": 2,
    "repeats": 3,
    "date": "2026-11-26",
    "command": "python benchmarks/bench_trained.py corpus/conll/test.spacy metrics/speed_ner.json --task ner",
    "data": "corpus/conll/test.spacy",
    "seed": 0,
    "sentences": 3453,
    "words": 46435,
    "runs": {"ner_cnn": {"pipeline": "training/ner_cnn/seed0/model-best", "words_per_second": 11992.4}},
}
NER_HEADER = "| config | token representation | test F1 | P | R | LOC | MISC | ORG | PER | best dev F1 | epochs | steps | minutes | seeds |"
SENTIMENT_HEADER = "| config | token representation | test accuracy | macro F1 | neutral F1 | best dev macro F1 | epochs | steps | minutes | seeds |"


def results_md(speeds) -> str:
    runs = {"ner_cnn": [ner_record(0.8)], "ner_elmo": [ner_record(0.85)], "sentiment_bow": [sentiment_record(0.5)]}
    return report_tables.markdown(report_runs.summarize(runs), runs, [], "t", speeds=speeds)


def test_the_report_puts_words_per_second_beside_the_score_and_says_how_it_was_measured():
    lines = results_md({"ner": SPEED_NER}).splitlines()
    header = lines.index(NER_HEADER.replace("| test F1 |", "| test F1 | words/s |"))
    assert lines[header + 1] == "|" + "---|" * 15
    assert lines[header + 2].startswith("| `ner_cnn` | CNN tok2vec | 80.00 | 11,992 | 80.00 |")
    assert lines[header + 3].startswith("| `ner_elmo` | CNN embedding + ELMo at the encoder's input | 85.00 | - | ")
    assert lines[header + 5] == (
        "words/s: each config's seed-0 pipeline (`model-best`) on the test split (3,453 sentences, 46,435 words, "
        "one Doc each), `nlp.pipe`, the median of 3 passes after a warm-up; one run for all configs, on "
        f"AMD EPYC (avx2) with 2 threads for torch, 2026-11-26: `{SPEED_NER['command']}`."
    )
    # no sentiment speed measured: that table is as without any
    assert SENTIMENT_HEADER in lines


def test_without_speed_records_the_tables_are_unchanged(tmp_path):
    text = results_md({})
    assert NER_HEADER in text.splitlines() and SENTIMENT_HEADER in text.splitlines()
    assert "words/s" not in text
    assert (
        "| `ner_cnn` | CNN tok2vec | 80.00 | 80.00 | 80.00 | 0.00 | 0.00 | 0.00 | 0.00 | 80.00 | 3 | 200 | 1.0 | 1 |"
        in text
    )
    assert report_tables.load_speeds(tmp_path) == {}


def test_a_run_recorded_from_another_shows_its_runs_and_their_words_per_second():
    """ner_vectors_acc recorded from ner_cnn here (experiment --same-as): no pipeline of its own."""
    runs = {"ner_cnn": [ner_record(0.8)], "ner_vectors_acc": [{**ner_record(0.8), "same_as": "ner_cnn"}]}
    text = report_tables.markdown(report_runs.summarize(runs), runs, [], "t", speeds={"ner": SPEED_NER})
    row = next(line for line in text.splitlines() if line.startswith("| `ner_vectors_acc`"))
    assert row.startswith(
        "| `ner_vectors_acc` | chosen task model (dev search) + en_core_web_md static vectors "
        "(the same runs as `ner_cnn`: its config and data) | 80.00 | 11,992 |"
    )
    runs["ner_vectors_acc"].append(ner_record(0.8))  # a seed trained for itself: not all from ner_cnn
    text = report_tables.markdown(report_runs.summarize(runs), runs, [], "t", speeds={"ner": SPEED_NER})
    row = next(line for line in text.splitlines() if line.startswith("| `ner_vectors_acc`"))
    assert "the same runs as" not in row and "| 80.00 ± 0.00 | - |" in row
