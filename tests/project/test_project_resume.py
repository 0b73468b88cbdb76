"""A seed whose ``spacy train`` was killed resumes from its last evaluation
(scripts/resume_training.py): one global log, the stretches written down, the
best model of all stretches kept, and a finished seed still skipped."""

import json
import shutil
import subprocess
from pathlib import Path
from typing import List

import experiment
import pytest
import resume_training
from spacy.util import load_config, registry

from spacy_elmo.files.json_files import read_jsonl

from .conftest import REPO
from .test_project_workflow import tiny_vectors_pipeline

REFERENCE = REPO / "tests" / "data" / "bilm_tf_reference"
# Evaluate every 2 steps; patience large enough never to stop these runs early.
TINY = ["--training.eval_frequency", "2", "--training.patience", "100", "--training.batch_size", "8"]


class Killed(Exception):
    """Stands in for the end of a work session right after an evaluation."""


def run(
    corpus: Path, tmp_path: Path, config: str, max_steps: int, extra=(), seed: int = 0, name="tiny", same_as=None
) -> Path:
    conll = corpus / "conll"
    return experiment.run_seed(
        REPO / "configs" / config,
        conll / "train.spacy",
        conll / "dev.spacy",
        None,
        name,
        seed,
        [*TINY, "--training.max_steps", str(max_steps), *extra],
        False,
        -1,
        tmp_path / "training",
        tmp_path / "metrics",
        same_as=same_as,
    )


@pytest.fixture(scope="module")
def finished_tiny_seed(prepared_corpora, tmp_path_factory) -> Path:
    """One finished seed of ner_cnn.cfg, 2 steps: what several tests start from, trained once here
    (a `spacy train` process each) and copied into each test's folder by ``finished_seed``."""
    root = tmp_path_factory.mktemp("finished")
    run(prepared_corpora, root, "ner_cnn.cfg", 2)
    return root


def finished_seed(trained: Path, tmp_path: Path) -> Path:
    """A copy of ``finished_tiny_seed``'s run in TMP_PATH, as ``run`` would leave it: its metrics file."""
    for folder in ("training", "metrics"):
        shutil.copytree(trained / folder, tmp_path / folder)
    return tmp_path / "metrics" / "tiny" / "seed0.json"


def killed_after_first_stretch(corpus, tmp_path, monkeypatch, config, steps, extra=()) -> Path:
    """Train until `steps`, then 'kill' before the seed's training is recorded as finished."""

    def kill(out_dir):
        raise Killed()

    with monkeypatch.context() as patch:
        patch.setattr(resume_training, "end_stretch", kill)
        with pytest.raises(Killed):
            run(corpus, tmp_path, config, steps, extra)
    return tmp_path / "training" / "tiny" / "seed0"


def test_a_killed_seed_resumes_into_one_global_curve_and_is_then_skipped(
    prepared_corpora, tmp_path, monkeypatch, capfd
):
    out_dir = killed_after_first_stretch(prepared_corpora, tmp_path, monkeypatch, "ner_cnn.cfg", 4)
    assert [r["step"] for r in read_jsonl(out_dir / "log.jsonl")] == [0, 2, 4]
    assert json.loads((out_dir / "resume.json").read_text())["finished"] is False
    assert "spacy-elmo.StatefulOptimizer.v1" in (out_dir / "first.cfg").read_text()
    assert (out_dir / resume_training.OPTIMIZER_STATE).is_file()
    capfd.readouterr()
    metrics_file = run(prepared_corpora, tmp_path, "ner_cnn.cfg", 9)
    # Adam's moments continue from the resume point's evaluation (tests/test_optimizer_state.py: exactly)
    assert "Restored the optimizer's state of step 4 from" in capfd.readouterr().out
    assert not (out_dir / resume_training.OPTIMIZER_STATE).exists()  # removed once training is over
    # The second stretch starts at step 5 (its own step 0) with 9 - 5 steps left: evaluations at 5, 7, 9.
    log = read_jsonl(out_dir / "log.jsonl")
    assert [r["step"] for r in log] == [0, 2, 4, 5, 7, 9]
    assert [r["epoch"] for r in log][3] > log[2]["epoch"]  # the data order restarts at a new epoch
    assert all(a["seconds"] <= b["seconds"] and a["words"] < b["words"] for a, b in zip(log, log[1:]))
    state = json.loads((out_dir / "resume.json").read_text())
    assert state == {
        "stretches": [{"first_step": 0, "last_step": 4}, {"first_step": 5, "last_step": 9}],
        "finished": True,
        "config": str(REPO / "configs" / "ner_cnn.cfg"),
        "inputs": {},
    }
    record = json.loads(metrics_file.read_text())
    assert record["training"]["steps"] == 9 and len(record["training"]["stretches"]) == 2
    assert record["training"]["words"] == log[-1]["words"]
    assert record["training"]["best_step"] == resume_training.patience_start(log)["step"]
    # model-best is the best of both stretches (the latest of tied scores, as spaCy keeps it)
    assert resume_training.saved_at(out_dir / "model-best", resume_training.best_record(log))
    assert not (out_dir / resume_training.EARLIER_BEST).exists() and not (out_dir / "resume-point").exists()
    cfg = (out_dir / "resume.cfg").read_text()  # patience counts from step 0, the earliest of the tied best
    assert (
        "max_steps = 4\n" in cfg
        and "patience = 100\n" in cfg  # whole: counted from the earlier best, below
        and "best_step = 0\n" in cfg
        and "step_offset = 5\n" in cfg
        and "init_tok2vec = null\n" in cfg
    )
    # the batch size continues where step 5 of an uninterrupted run is, not at 100 words again
    resumed_size = load_config(out_dir / "resume.cfg")["training"]["batcher"]["size"]
    assert resumed_size["start"] == pytest.approx(100 * 1.001**5) and resumed_size["stop"] == 1000

    def no_training(*args, **kwargs):
        raise AssertionError("a finished seed was trained again")

    monkeypatch.setattr(subprocess, "run", no_training)
    assert run(prepared_corpora, tmp_path, "ner_cnn.cfg", 9) == metrics_file


@pytest.mark.parametrize("last_stretch_scores,kept", [((0.7, 0.6), "model-best"), ((0.6, 0.65), "earlier")])
def test_the_earlier_best_is_kept_unless_the_resumed_stretch_reaches_it(tmp_path, last_stretch_scores, kept):
    out_dir = tmp_path / "seed0"
    for name in (resume_training.EARLIER_BEST, "model-best"):
        (out_dir / name).mkdir(parents=True)
        (out_dir / name / "which").write_text(name)
    scores = [0.5, 0.7, *last_stretch_scores]
    lines = [{"step": step, "score": score} for step, score in zip([0, 2, 3, 5], scores)]
    (out_dir / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    resume_training.write_state(
        out_dir,
        {"stretches": [{"first_step": 0, "last_step": 2}, {"first_step": 3, "last_step": None}], "finished": False},
    )
    resume_training.end_stretch(out_dir)
    # A tie goes to the later step, as spaCy's own model-best does.
    expected = "model-best" if kept == "model-best" else resume_training.EARLIER_BEST
    assert (out_dir / "model-best" / "which").read_text() == expected
    assert not (out_dir / resume_training.EARLIER_BEST).exists()
    assert json.loads((out_dir / "resume.json").read_text())["stretches"][-1]["last_step"] == 5


def test_the_resume_starts_from_the_evaluations_model_not_the_later_model_last(prepared_corpora, tmp_path, monkeypatch):
    """spaCy saves model-last once more as training ends (an interrupt included), with the weights
    of that moment under the last evaluation's meta.json: the log kept the evaluation's copy."""
    out_dir = killed_after_first_stretch(prepared_corpora, tmp_path, monkeypatch, "ner_cnn.cfg", 4)
    evaluated = out_dir / resume_training.EVALUATED
    assert resume_training.saved_at(evaluated, read_jsonl(out_dir / "log.jsonl")[-1])
    (evaluated / "which").write_text("the evaluation's")
    conll = prepared_corpora / "conll"
    overrides = [*TINY, "--training.max_steps", "9", "--paths.train", str(conll / "train.spacy")]
    overrides += ["--paths.dev", str(conll / "dev.spacy")]
    assert resume_training.next_stretch(REPO / "configs" / "ner_cnn.cfg", out_dir, overrides, {}) is not None
    assert (out_dir / resume_training.RESUME_POINT / "which").read_text() == "the evaluation's"
    assert not evaluated.exists()
    # and where only model-last is torn by the kill, the seed still resumes, from the kept copy
    out_dir = killed_after_first_stretch(prepared_corpora, tmp_path / "torn", monkeypatch, "ner_cnn.cfg", 4)
    (out_dir / "model-last" / "meta.json").write_text("{")
    run(prepared_corpora, tmp_path / "torn", "ner_cnn.cfg", 9)
    assert [r["step"] for r in read_jsonl(out_dir / "log.jsonl")] == [0, 2, 4, 5, 7, 9]
    assert not (out_dir / resume_training.EVALUATED).exists()  # removed once training is over


def test_a_damaged_model_last_starts_the_seed_afresh_with_a_message(prepared_corpora, tmp_path, monkeypatch, capsys):
    out_dir = killed_after_first_stretch(prepared_corpora, tmp_path, monkeypatch, "ner_cnn.cfg", 2)
    for model in ("model-last", resume_training.EVALUATED):
        (out_dir / model / "meta.json").write_text("{")  # torn by the kill
    run(prepared_corpora, tmp_path, "ner_cnn.cfg", 2)
    assert "cannot resume (no model-last saved at the last logged evaluation, step 2)" in capsys.readouterr().out
    assert [r["step"] for r in read_jsonl(out_dir / "log.jsonl")] == [0, 2]
    assert json.loads((out_dir / "resume.json").read_text())["stretches"] == [{"first_step": 0, "last_step": 2}]
    kept = list(out_dir.parent.glob("superseded/*/seed0/log.jsonl"))
    assert len(kept) == 1  # the old run moved aside, not mixed in


def test_a_listener_config_with_elmo_and_vectors_resumes(prepared_corpora, tmp_path, monkeypatch):
    tiny_vectors_pipeline(tmp_path / "vectors")
    extra = [
        "--paths.vectors",
        str(tmp_path / "vectors"),
        "--paths.elmo_options",
        str(REFERENCE / "options.json"),
        "--paths.elmo_weights",
        str(REFERENCE / "lm_weights.hdf5"),
    ]
    out_dir = killed_after_first_stretch(prepared_corpora, tmp_path, monkeypatch, "ner_vectors_elmo.cfg", 2, extra)
    metrics_file = run(prepared_corpora, tmp_path, "ner_vectors_elmo.cfg", 5, extra)
    assert [r["step"] for r in read_jsonl(out_dir / "log.jsonl")] == [0, 2, 3, 5]
    record = json.loads(metrics_file.read_text())
    assert record["training"]["steps"] == 5 and len(record["training"]["stretches"]) == 2
    assert abs(sum(record["elmo_mix"]["ner"][0]["weights"]) - 1.0) < 1e-5


def test_a_stretch_killed_before_its_first_evaluation_resumes_from_the_kept_point(
    prepared_corpora, tmp_path, monkeypatch
):
    out_dir = killed_after_first_stretch(prepared_corpora, tmp_path, monkeypatch, "ner_cnn.cfg", 2)
    conll = prepared_corpora / "conll"
    overrides = [
        "--paths.train",
        str(conll / "train.spacy"),
        "--paths.dev",
        str(conll / "dev.spacy"),
        *TINY,
        "--training.max_steps",
        "5",
    ]
    # The second stretch starts, spaCy clears model-last and model-best, and the kill comes before step 3's evaluation.
    assert resume_training.next_stretch(REPO / "configs" / "ner_cnn.cfg", out_dir, overrides, {}) is not None
    assert (out_dir / resume_training.RESUME_POINT).is_dir() and not (out_dir / resume_training.EVALUATED).exists()
    for cleared in ("model-last", "model-best"):  # what spaCy clears as the stretch starts
        if (out_dir / cleared).exists():
            shutil.rmtree(out_dir / cleared)
    metrics_file = run(prepared_corpora, tmp_path, "ner_cnn.cfg", 5)
    assert [r["step"] for r in read_jsonl(out_dir / "log.jsonl")] == [0, 2, 3, 5]
    # the stretch that logged nothing is not counted
    assert json.loads((out_dir / "resume.json").read_text())["stretches"] == [
        {"first_step": 0, "last_step": 2},
        {"first_step": 3, "last_step": 5},
    ]
    assert json.loads(metrics_file.read_text())["training"]["steps"] == 5
    assert (out_dir / "model-best" / "meta.json").is_file()


def test_a_damaged_resume_state_is_named(tmp_path):
    (tmp_path / resume_training.STATE_FILE).write_text('{"stretches": [{"first_step"', encoding="utf8")
    with pytest.raises(experiment.ProjectDataError, match=r"resume\.json: not a valid JSON file"):
        resume_training.read_state(tmp_path)


def test_the_fingerprint_hashes_the_files_that_paths_overrides_name(tmp_path):
    weights, vectors = tmp_path / "weights.hdf5", tmp_path / "vectors"
    weights.write_bytes(b"one biLM")
    vectors.mkdir()
    overrides = ["--paths.elmo_weights", str(weights), "--paths.vectors", str(vectors), "--training.max_steps", "5"]
    first = experiment.input_fingerprint(overrides)
    assert list(first) == ["paths.elmo_weights"]  # directories and non-path settings are not hashed
    weights.write_bytes(b"another biLM")
    assert experiment.input_fingerprint(overrides) != first
    assert resume_training.changed_inputs(first, experiment.input_fingerprint(overrides)) == ["paths.elmo_weights"]
    assert resume_training.changed_inputs(first, {}) == ["paths.elmo_weights"]


def superseded_items(folder: Path) -> List[Path]:
    return sorted((folder / "superseded").glob("*/*"))


def test_a_finished_seed_trained_on_other_files_is_moved_aside_and_trained_again(
    prepared_corpora, finished_tiny_seed, tmp_path, capsys
):
    metrics_file = finished_seed(finished_tiny_seed, tmp_path)
    record = json.loads(metrics_file.read_text())
    assert record["inputs"] == {}  # no --paths.* override names a file here
    record["inputs"] = {"paths.elmo_weights": "0" * 64}  # as if trained on a biLM since pretrained again
    metrics_file.write_text(json.dumps(record))
    assert run(prepared_corpora, tmp_path, "ner_cnn.cfg", 2) == metrics_file
    assert "trained with another config or other files (paths.elmo_weights); moved to" in capsys.readouterr().out
    assert json.loads(metrics_file.read_text())["inputs"] == {}  # trained again on today's files
    [old_record] = superseded_items(metrics_file.parent)
    assert json.loads(old_record.read_text())["inputs"] == {"paths.elmo_weights": "0" * 64}
    [old_dir] = superseded_items(tmp_path / "training" / "tiny")
    assert old_dir.name == "seed0" and (old_dir / "model-best").is_dir()  # kept, not deleted


def test_a_record_from_before_inputs_were_recorded_is_kept_with_a_note(
    prepared_corpora, finished_tiny_seed, tmp_path, monkeypatch, capsys
):
    metrics_file = finished_seed(finished_tiny_seed, tmp_path)
    record = json.loads(metrics_file.read_text())
    del record["inputs"]
    metrics_file.write_text(json.dumps(record))

    def no_training(*args, **kwargs):
        raise AssertionError("a record without inputs was trained again")

    monkeypatch.setattr(subprocess, "run", no_training)
    assert run(prepared_corpora, tmp_path, "ner_cnn.cfg", 2) == metrics_file
    assert "written before input files were recorded" in capsys.readouterr().out
    assert not (metrics_file.parent / "superseded").exists()


def test_a_killed_seed_begun_on_other_files_starts_afresh(prepared_corpora, tmp_path, monkeypatch):
    out_dir = killed_after_first_stretch(prepared_corpora, tmp_path, monkeypatch, "ner_cnn.cfg", 4)
    state = json.loads((out_dir / "resume.json").read_text())
    assert state["inputs"] == {}
    state["inputs"] = {"paths.elmo_weights": "0" * 64}
    (out_dir / "resume.json").write_text(json.dumps(state))
    run(prepared_corpora, tmp_path, "ner_cnn.cfg", 2)
    # Not resumed at step 5 from the old model: trained from step 0 again.
    assert [r["step"] for r in read_jsonl(out_dir / "log.jsonl")] == [0, 2]
    [old_dir] = superseded_items(out_dir.parent)
    assert [r["step"] for r in read_jsonl(old_dir / "log.jsonl")] == [0, 2, 4]


def test_the_fingerprint_leaves_the_overrides_as_they_were(tmp_path):
    overrides = ["--paths.elmo_weights", str(tmp_path), "--training.max_steps", "5"]
    experiment.input_fingerprint(overrides)
    assert overrides == ["--paths.elmo_weights", str(tmp_path), "--training.max_steps", "5"]


def test_setting_aside_twice_in_one_second_keeps_both(tmp_path):
    """A seed moved aside twice (damaged, then begun on other files) keeps both old runs."""
    seed = tmp_path / "seed0"
    for text in ("first", "second"):
        seed.mkdir()
        (seed / "log.jsonl").write_text(text)
        resume_training.set_aside([seed], "test")
    kept = sorted(p.read_text() for p in tmp_path.glob("superseded/*/seed0/log.jsonl"))
    assert kept == ["first", "second"]
    assert not seed.exists()


def test_a_finished_seed_of_another_config_is_moved_aside_and_trained_again(
    prepared_corpora, finished_tiny_seed, tmp_path, capsys
):
    """A run re-pointed at another config (a new dev-search choice) trains its seeds again."""
    metrics_file = finished_seed(finished_tiny_seed, tmp_path)
    record = json.loads(metrics_file.read_text())
    record["config"] = str(REPO / "configs" / "ner_vectors.cfg")
    metrics_file.write_text(json.dumps(record))
    run(prepared_corpora, tmp_path, "ner_cnn.cfg", 2)
    assert "(config); moved to" in capsys.readouterr().out
    assert json.loads(metrics_file.read_text())["config"] == str(REPO / "configs" / "ner_cnn.cfg")
    [old_record] = superseded_items(metrics_file.parent)
    assert json.loads(old_record.read_text())["config"].endswith("ner_vectors.cfg")


def test_a_killed_seed_of_another_config_starts_afresh(prepared_corpora, tmp_path, monkeypatch):
    out_dir = killed_after_first_stretch(prepared_corpora, tmp_path, monkeypatch, "ner_cnn.cfg", 4)
    state = json.loads((out_dir / "resume.json").read_text())
    assert state["config"] == str(REPO / "configs" / "ner_cnn.cfg")
    state["config"] = str(REPO / "configs" / "ner_vectors.cfg")
    (out_dir / "resume.json").write_text(json.dumps(state))
    run(prepared_corpora, tmp_path, "ner_cnn.cfg", 2)
    assert [r["step"] for r in read_jsonl(out_dir / "log.jsonl")] == [0, 2]
    [old_dir] = superseded_items(out_dir.parent)
    assert [r["step"] for r in read_jsonl(old_dir / "log.jsonl")] == [0, 2, 4]


def test_what_changed_reads_a_config_spelled_otherwise_as_the_same():
    config = Path("configs/search/ner_vectors_acc.cfg")
    assert resume_training.what_changed({"config": "./configs/search/ner_vectors_acc.cfg"}, config, {}) == []
    assert resume_training.what_changed({}, config, {}) == []  # a record from before configs were recorded
    other = {"config": "configs/search/ner_vectors_bilstm.cfg", "inputs": {"paths.elmo_weights": "0" * 64}}
    assert resume_training.what_changed(other, config, {}) == ["config", "paths.elmo_weights"]


COMPOUNDING = {"@schedules": "compounding.v1", "start": 100, "stop": 1000, "compound": 1.001, "t": 0.0}


@pytest.mark.parametrize("first_step", [1, 5, 2302, 2303, 5000])
def test_a_resumed_stretch_draws_the_batch_sizes_the_uninterrupted_run_would(first_step):
    uninterrupted = registry.resolve({"size": dict(COMPOUNDING)})["size"]
    expected = [next(uninterrupted) for _ in range(first_step + 3)][first_step:]
    batcher = {"@batchers": "spacy.batch_by_words.v1", "size": dict(COMPOUNDING)}
    assert resume_training.continue_batch_sizes(batcher, first_step) is None
    resumed = registry.resolve({"size": batcher["size"]})["size"]
    assert [next(resumed) for _ in range(3)] == pytest.approx(expected, rel=1e-9)
    assert max(expected) <= 1000


def test_a_fixed_batch_size_is_kept_and_another_schedule_is_named():
    fixed = {"@batchers": "spacy.batch_by_words.v1", "size": 500}
    assert resume_training.continue_batch_sizes(fixed, 40) is None and fixed["size"] == 500
    other = {"@batchers": "spacy.batch_by_words.v1", "size": {"@schedules": "constant.v1", "rate": 500}}
    message = resume_training.continue_batch_sizes(other, 40)
    assert message == "the batch-size schedule (constant.v1) restarts from its first value"


def no_training(*args, **kwargs):
    raise AssertionError("trained although the same run was scored")


def test_the_same_run_under_another_name_is_recorded_without_training(
    prepared_corpora, finished_tiny_seed, tmp_path, monkeypatch, capsys
):
    """--same-as: NER's chosen baseline (efficiency_both's) is ner_vectors' very config and data."""
    source = finished_seed(finished_tiny_seed, tmp_path)
    record = json.loads(source.read_text())
    assert set(record["data"]) == {"train", "dev", "test"} and record["data"]["test"] is None
    with monkeypatch.context() as patch:
        patch.setattr(subprocess, "run", no_training)
        copy = run(prepared_corpora, tmp_path, "ner_cnn.cfg", 2, name="twin", same_as="tiny")
    copied = json.loads(copy.read_text())
    assert copy == tmp_path / "metrics" / "twin" / "seed0.json"
    assert copied == {**record, "name": "twin", "same_as": "tiny"}
    assert "recorded for twin without training" in capsys.readouterr().out
    assert not (tmp_path / "training" / "twin").exists()


@pytest.mark.parametrize(
    "change,named",
    [
        (lambda r: r.update(overrides=r["overrides"][:-2] + ["--training.max_steps", "4"]), "overrides"),
        (lambda r: r.update(config=str(REPO / "configs" / "ner_vectors.cfg")), "config"),
        # each trains the twin (a `spacy train` process): the default run checks two, `make test-slow` all
        pytest.param(lambda r: r["data"].update(train="0" * 64), "train data", marks=pytest.mark.slow),
        pytest.param(lambda r: r.update(gold_preproc=True), "gold_preproc", marks=pytest.mark.slow),
        pytest.param(lambda r: r.update(test={"ents_f": 0.5}), "scored on test", marks=pytest.mark.slow),
    ],
)
def test_another_run_under_the_same_as_name_is_not_copied(
    prepared_corpora, finished_tiny_seed, tmp_path, capsys, change, named
):
    source = finished_seed(finished_tiny_seed, tmp_path)
    record = json.loads(source.read_text())
    change(record)
    source.write_text(json.dumps(record))
    copy = run(prepared_corpora, tmp_path, "ner_cnn.cfg", 2, name="twin", same_as="tiny")
    assert f"another run ({named}), so twin trains this seed itself" in capsys.readouterr().out
    assert "same_as" not in json.loads(copy.read_text())
    assert (tmp_path / "training" / "twin" / "seed0" / "model-best").is_dir()


def test_a_same_as_record_from_before_data_was_recorded_is_taken_at_its_word(
    prepared_corpora, finished_tiny_seed, tmp_path, monkeypatch, capsys
):
    source = finished_seed(finished_tiny_seed, tmp_path)
    record = json.loads(source.read_text())
    del record["data"]
    source.write_text(json.dumps(record))
    monkeypatch.setattr(subprocess, "run", no_training)
    copy = run(prepared_corpora, tmp_path, "ner_cnn.cfg", 2, name="twin", same_as="tiny")
    assert "written before data files were recorded" in capsys.readouterr().out
    assert json.loads(copy.read_text())["same_as"] == "tiny"


def test_a_same_as_run_not_scored_yet_trains_the_seed(prepared_corpora, tmp_path, capsys):
    copy = run(prepared_corpora, tmp_path, "ner_cnn.cfg", 2, name="twin", same_as="tiny")
    assert "not scored yet, so twin trains this seed itself" in capsys.readouterr().out
    assert "same_as" not in json.loads(copy.read_text())


def test_threads_reach_spacy_train_and_evaluate_through_the_environment(tmp_path, monkeypatch):
    """The demo's `spacy train` ran at torch's default threads: beside other jobs its biLM ran
    10x slower. ``--threads N`` gives each child OMP_NUM_THREADS=N; 0 leaves the environment."""
    assert experiment.threads_env(0) is None
    env = experiment.threads_env(1)
    assert env is not None and env["OMP_NUM_THREADS"] == "1" and env["MKL_NUM_THREADS"] == "1"
    seen = []
    monkeypatch.setattr(experiment.subprocess, "run", lambda command, check, env=None: seen.append((command, env)))
    (tmp_path / "test_scores.json").write_text(json.dumps({"ents_f": 0.5}))
    assert experiment.score_test(tmp_path, tmp_path / "test.spacy", False, -1, env) == {"ents_f": 0.5}
    assert seen[0][0][3] == "evaluate" and seen[0][1]["OMP_NUM_THREADS"] == "1"
