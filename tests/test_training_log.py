"""spacy-elmo.TrainingLog.v2, the log of a resumed stretch: the stretch stops by the
uninterrupted rule (best_score, best_step), and keep_evaluated keeps the last evaluation's
model when training ends.

spaCy's own training loop (``train_while_improving``) runs on a blank pipeline with
scripted dev scores, and the log's ``log_step`` is called on each of its steps as
``spacy train`` calls it."""

import inspect
import io
import itertools
import json
from typing import Dict, List, Optional, Tuple

import pytest
import spacy
from spacy.training.loop import train_while_improving
from spacy.util import registry
from thinc.api import Adam

from spacy_elmo.training.log import training_log_v2

EVAL_FREQUENCY = 2
PATIENCE = 10


def run_stretch(scores: Dict[int, float], first_step: int, earlier_best: Optional[tuple]) -> Tuple[List[int], int]:
    """The global steps a stretch starting at ``first_step`` evaluates, and the step spaCy
    stops it at. ``scores`` maps a global step to its dev score (0.0 where not given)."""
    nlp = spacy.blank("en")
    nlp.config["training"].update(eval_frequency=EVAL_FREQUENCY, patience=PATIENCE)  # what spacy train reads
    best_score, best_step = earlier_best or (None, None)
    setup = training_log_v2(step_offset=first_step, best_score=best_score, best_step=best_step)
    log_step, finalize = setup(nlp, stdout=io.StringIO(), stderr=io.StringIO())
    current = {}
    evaluated = []

    def evaluate():
        evaluated.append(current["step"])
        return scores.get(current["step"], 0.0), {}

    def before_update(_nlp, args):
        current["step"] = first_step + args["step"]

    no_data = ((0, []) for _ in itertools.count())
    loop = train_while_improving(
        nlp,
        Adam(0.001),
        no_data,
        evaluate,
        dropout=0.0,
        eval_frequency=EVAL_FREQUENCY,
        accumulate_gradient=1,
        patience=PATIENCE,
        max_steps=200,
        exclude=[],
        annotating_components=[],
        before_update=before_update,
    )
    for _batch, info, is_best in loop:
        log_step(info if is_best is not None else None)
    finalize()
    return evaluated, current["step"]


# Killed after the evaluation at step 10; the best so far was 0.5 at step 6. spaCy checks
# patience at every step: an uninterrupted run evaluates at 8, 10, 12, 14 and 16, and stops
# at 16, the first step g with g - best >= 10. The stretch evaluates at 11, 13, 15, ..., one
# step after the uninterrupted run's 10, 12, 14, ...: its counterpart of 16 is 17.
EARLIER = {0: 0.1, 2: 0.3, 4: 0.4, 6: 0.5, 8: 0.45, 10: 0.48}


@pytest.mark.parametrize(
    "later,stop_step",
    [
        # Nothing reaches 0.5 again: patience runs out at the stretch's counterpart of 16
        # (at 16 itself, a step it does not evaluate, the stretch would lose that evaluation).
        ({11: 0.2, 13: 0.1, 15: 0.1}, 17),
        # 13 beats the stretch's first evaluation (11) but not 0.5: still counted from step 6
        # (counted from the stretch's own best, 13, it would run to 23).
        ({11: 0.2, 13: 0.3, 15: 0.3}, 17),
        # 13 beats 0.5: patience counts from 13 (from 11 with the patience cut to what was
        # left, 10 - 5, it would stop at 18).
        ({11: 0.2, 13: 0.6}, 23),
        # 17, the last evaluation of the window, beats 0.5: training goes on from there.
        ({11: 0.2, 17: 0.7}, 27),
        # 11 ties 0.5: the earliest of tied scores counts, as in spaCy's own rule.
        ({11: 0.5, 13: 0.5}, 17),
    ],
)
def test_a_resumed_stretch_stops_by_the_uninterrupted_rule(later, stop_step):
    evaluated, stopped = run_stretch({**EARLIER, **later}, first_step=11, earlier_best=(0.5, 6))
    assert stopped == stop_step
    assert evaluated == list(range(11, stop_step + 1, EVAL_FREQUENCY))  # the stretch's own step 0, 2, ...


def test_a_second_resume_on_the_uninterrupted_grid_again_stops_at_its_step():
    """Killed again after 11: the third stretch evaluates at 12, 14, 16: patience runs out at 16."""
    evaluated, stopped = run_stretch({**EARLIER, 11: 0.2}, first_step=12, earlier_best=(0.5, 6))
    assert (evaluated, stopped) == ([12, 14, 16], 16)


def test_without_an_earlier_best_the_stretch_is_spacys_own_rule():
    evaluated, stopped = run_stretch(EARLIER, first_step=0, earlier_best=None)
    assert (evaluated, stopped) == ([0, 2, 4, 6, 8, 10, 12, 14, 16], 16)


def test_best_score_and_step_come_together():
    with pytest.raises(ValueError, match="best_score and best_step together"):
        training_log_v2(best_score=0.5)


def evaluation(step: int, **more) -> dict:
    """spaCy's ``info`` at an evaluation of epoch 0, 1 second and 10 words in."""
    info = {"epoch": 0, "step": step, "score": 0.5, "other_scores": {}, "losses": {}, "checkpoints": [(0.5, step)]}
    return {**info, "seconds": 1, "words": 10, **more}


def test_a_config_written_for_the_earlier_v2_still_loads(tmp_path):
    """v2's first seven parameters are those of the v2 that only appended with offsets,
    in their order; the later ones default to a fresh run's."""
    first = ["output_file", "progress_bar", "append", "epoch_offset", "step_offset", "seconds_offset", "words_offset"]
    assert list(inspect.signature(training_log_v2).parameters)[:7] == first
    log = tmp_path / "log.jsonl"
    log.write_text('{"step": 0}\n')
    offsets = {"epoch_offset": 1, "step_offset": 11, "seconds_offset": 60, "words_offset": 100}
    config = {"@loggers": "spacy-elmo.TrainingLog.v2", "output_file": str(log), "append": True, **offsets}
    setup = registry.resolve({"logger": config})["logger"]
    log_step, finalize = setup(spacy.blank("en"), stdout=io.StringIO(), stderr=io.StringIO())
    log_step(evaluation(step=2))
    finalize()
    earlier, record = log.read_text().splitlines()
    assert earlier == '{"step": 0}'
    want = {"epoch": 1, "step": 13, "score": 0.5, "seconds": 61, "words": 110, "losses": {}, "scores": {}}
    assert json.loads(record) == want


def test_the_last_evaluations_model_is_kept_before_spacy_saves_model_last_again(tmp_path):
    """keep_evaluated: finalize (spaCy calls it just before its last save of model-last)
    moves the model saved at the last evaluation aside, replacing an older copy."""
    nlp = spacy.blank("en")
    model_last, kept = tmp_path / "model-last", tmp_path / "model-evaluated"
    kept.mkdir()
    (kept / "which").write_text("an earlier stretch's")
    setup = training_log_v2(keep_evaluated=str(kept))
    log_step, finalize = setup(nlp, stdout=io.StringIO(), stderr=io.StringIO())
    model_last.mkdir()
    (model_last / "which").write_text("step 4's")
    log_step(evaluation(step=4, output_path=str(model_last)))
    finalize()
    assert (kept / "which").read_text() == "step 4's" and not model_last.exists()


def test_a_stretch_without_an_evaluation_keeps_nothing(tmp_path):
    """Killed before its first evaluation: model-last on disk is no evaluation of this stretch's."""
    (tmp_path / "model-last").mkdir()
    setup = training_log_v2(keep_evaluated=str(tmp_path / "model-evaluated"))
    log_step, finalize = setup(spacy.blank("en"), stdout=io.StringIO(), stderr=io.StringIO())
    log_step(None)
    finalize()
    assert (tmp_path / "model-last").is_dir() and not (tmp_path / "model-evaluated").exists()
