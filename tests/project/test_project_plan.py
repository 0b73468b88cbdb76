"""plan: the expected duration printed before the full run."""

from pathlib import Path

import plan

from .conftest import run_cli

CONFIGS = Path(__file__).parent.parent.parent / "configs"


def test_plan_counts_pretraining_from_the_config_and_tasks_per_seed(tmp_path):
    result = run_cli(
        plan.main,
        [
            CONFIGS / "pretrain_en.cfg",
            tmp_path / "plan.md",
            "--seeds",
            "0,1",
            "--tokens-per-sec",
            "4096",
            "--task-minutes",
            "ner_elmo=15.1,sentiment_bow=0.9",
            "--data-minutes",
            "5",
            "--machine",
            "a test box",
        ],
    )
    assert result.exit_code == 0, result.output
    text = (tmp_path / "plan.md").read_text()
    assert text.startswith("# Expected duration of `spacy project run all` on a test box\n")
    assert "| pretrain (4000 steps x 4096 tokens at 4096 tokens/s) | 67 |" in text  # 4000 s
    assert "| ner_elmo, 2 seed(s) | 30 | measured: 15.1 min/seed |" in text  # whole minutes per seed
    assert "| sentiment_bow, 2 seed(s) | 2 | measured: 0.9 min/seed |" in text
    # 5 + 66.7 + 30 + 2
    assert "| **total** | **104** (about 1.7 hours) | |" in text and text in result.output


def test_a_malformed_minutes_list_names_the_option(tmp_path):
    result = run_cli(
        plan.main,
        [
            CONFIGS / "pretrain_en.cfg",
            tmp_path / "plan.md",
            "--tokens-per-sec",
            "4096",
            "--task-minutes",
            "ner_elmo=15.1,sentiment_bow",
            "--data-minutes",
            "5",
            "--machine",
            "x",
        ],
    )
    assert result.exit_code == 2 and "--task-minutes" in result.output and "'sentiment_bow'" in result.output


def test_steps_run_once_are_counted_once(tmp_path):
    result = run_cli(
        plan.main,
        [
            CONFIGS / "pretrain_en.cfg",
            tmp_path / "plan.md",
            "--seeds",
            "0,1,2",
            "--tokens-per-sec",
            "4096",
            "--task-minutes",
            "ner_elmo=15.1",
            "--data-minutes",
            "5",
            "--machine",
            "x",
            "--other-minutes",
            "probe=9",
        ],
    )
    assert result.exit_code == 0, result.output
    text = (tmp_path / "plan.md").read_text()
    assert "| probe | 9 | measured: 9 min |" in text  # not x3 seeds
    assert "| **total** | **126** (about 2.1 hours) | |" in text  # 5 + 66.7 + 45 + 9


def one_seed_plan(tmp_path, task_minutes: str, other_minutes: str) -> str:
    """plan.md for one seed with these minutes (the rest fixed)."""
    args = [CONFIGS / "pretrain_en.cfg", tmp_path / "plan.md", "--seeds", "0", "--tokens-per-sec", "4096"]
    args += ["--task-minutes", task_minutes, "--data-minutes", "5", "--machine", "x", "--other-minutes", other_minutes]
    result = run_cli(plan.main, args)
    assert result.exit_code == 0, result.output
    return (tmp_path / "plan.md").read_text()


def test_plan_says_which_minutes_are_estimates(tmp_path):
    text = one_seed_plan(tmp_path, "ner_elmo=15.1,ner_vectors_elmo=~17.3", "probe=9,learning-curve=~95")
    assert "| ner_elmo, 1 seed(s) | 15 | measured: 15.1 min/seed |" in text
    assert "| ner_vectors_elmo, 1 seed(s) | 17 | estimated (not measured yet): 17.3 min/seed |" in text
    assert "| learning-curve | 95 | estimated (not measured yet): 95 min |" in text


def test_a_run_recorded_from_another_is_planned_as_no_training(tmp_path):
    text = one_seed_plan(tmp_path, "ner_vectors=16,ner_vectors_acc=0", "probe=9")
    assert (
        "| ner_vectors_acc, 1 seed(s) | 0 | no training: the seeds of another run with its config (`--same-as`) |"
        in text
    )
    assert "| ner_vectors, 1 seed(s) | 16 | measured: 16 min/seed |" in text


def test_an_estimate_is_known_by_its_exact_name_spaces_included(tmp_path):
    text = one_seed_plan(
        tmp_path, "ner_vectors=16,ner_vectors_acc=~40", "learning-curve=516,learning-curve (chosen pair)=~425,curve=~3"
    )
    assert "| ner_vectors, 1 seed(s) | 16 | measured: 16 min/seed |" in text
    assert "| ner_vectors_acc, 1 seed(s) | 40 | estimated (not measured yet): 40 min/seed |" in text
    # "curve=~3" is no estimate of learning-curve
    assert "| learning-curve | 516 | measured: 516 min |" in text
    assert "| learning-curve (chosen pair) | 425 | estimated (not measured yet): 425 min |" in text


def test_plan_counts_the_steps_the_workflow_runs_of_a_warm_start_config(tmp_path):
    result = run_cli(
        plan.main,
        [
            CONFIGS / "pretrain_en_wide.cfg",
            tmp_path / "plan.md",
            "--seeds",
            "0",
            "--tokens-per-sec",
            "4096",
            "--max-steps",
            "1500",
            "--task-minutes",
            "ner_cnn=9",
            "--data-minutes",
            "5",
            "--machine",
            "x",
        ],
    )
    assert result.exit_code == 0, result.output
    text = (tmp_path / "plan.md").read_text()
    assert (
        "| pretrain (1500 steps x 4096 tokens at 4096 tokens/s) | 25 |" in text
    )  # 1500 s, not the config's 1000 steps


def test_steps_outside_all_are_listed_apart_with_adapt_bilm_from_its_config(tmp_path):
    result = run_cli(
        plan.main,
        [
            CONFIGS / "pretrain_en.cfg",
            tmp_path / "plan.md",
            "--seeds",
            "0",
            "--tokens-per-sec",
            "4096",
            "--task-minutes",
            "ner_cnn=9",
            "--data-minutes",
            "5",
            "--machine",
            "x",
            "--adapt-config",
            CONFIGS / "pretrain_adapt.cfg",
            "--adapt-steps",
            "200",
            "--adapt-head-steps",
            "100",
            "--optional-minutes",
            "search-ner=~290",
        ],
    )
    assert result.exit_code == 0, result.output
    text = (tmp_path / "plan.md").read_text()
    total, _, apart = text.partition("Not in `all`")
    assert "| **total** | **81** (about 1.3 hours) | |" in total  # 5 + 66.7 + 9: the optional steps not added
    assert "| search-ner | 290 | estimated (not measured yet): 290 min |" in apart
    # 2 tasks x 300 steps x 4096 tokens at 4096 tokens/s = 600 s
    assert "| adapt-bilm (2 tasks x (400 head-only + 200) steps x 4096 tokens at 4096 tokens/s) | 20 |" in apart
