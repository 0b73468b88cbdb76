"""plan: the expected duration printed before the full run."""
from pathlib import Path

from spacy_elmo.project import plan

from .conftest import run_cli

CONFIGS = Path(__file__).parent.parent.parent / "configs"


def test_plan_counts_pretraining_from_the_config_and_tasks_per_seed(tmp_path):
    result = run_cli(plan.main, [CONFIGS / "pretrain_en.cfg", tmp_path / "plan.md", "--seeds", "0,1",
                                 "--tokens-per-sec", "4096"])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "plan.md").read_text()
    assert "| pretrain (4000 steps x 4096 tokens at 4096 tokens/s) | 67 |" in text  # 4000 s
    assert "| ner_elmo, 2 seed(s) | 30 |" in text
    total = 5 + 4000 / 60 + 2 * sum(minutes for minutes, _ in plan.TASK_MINUTES.values())
    assert f"**{total:.0f}**" in text and text in result.output
