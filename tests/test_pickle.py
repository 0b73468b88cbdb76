"""The pipeline pickles, so spaCy's n_process works where workers are spawned (macOS, Windows).

The biLM wrapper's serializers were closures: `pickle.dumps(nlp)` raised "Can't pickle local
object 'bilm_wrapper.<locals>.serialize'", and so did `nlp.pipe(n_process=2)` under the
spawn and forkserver start methods.
"""

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import warnings

import pytest

from .test_listener import TEST_TEXTS, assert_same_predictions, listener, make_nlp, predictions, train
from .test_listener import weight_files as weight_files  # noqa: F401 (the fixture)


@pytest.mark.parametrize("store", ["none", "all"])
def test_a_pickled_pipeline_predicts_what_the_pipeline_does(weight_files, store):  # noqa: F811
    nlp = make_nlp(weight_files, textcat_listener=listener(), store=store)
    train(nlp, steps=2)
    expected = predictions(nlp)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every listener reads real layers
        got = predictions(pickle.loads(pickle.dumps(nlp)))
    assert_same_predictions(got, expected)


def test_a_pickled_model_carries_no_cached_layers(weight_files):  # noqa: F811
    nlp = make_nlp(weight_files, cache_size_mb=16)
    train(nlp, steps=1)
    list(nlp.pipe(TEST_TEXTS))
    cache = nlp.get_pipe("elmo").model.attrs["cache"]
    assert len(cache) > 0
    copied = pickle.loads(pickle.dumps(nlp)).get_pipe("elmo").model.attrs["cache"]
    assert len(copied) == 0 and copied.max_bytes == cache.max_bytes


SCRIPT = textwrap.dedent(
    """
    import json, multiprocessing, sys
    import spacy

    if __name__ == "__main__":
        multiprocessing.set_start_method(sys.argv[2])
        nlp = spacy.load(sys.argv[1], config={"components": {"elmo": {"store": "all"}}})
        texts = [f"Alice visited Berlin on day {i} ." for i in range(6)]

        def seen(docs):
            return [[doc._.elmo_layers.sum().item(), [(e.start, e.end, e.label_) for e in doc.ents]] for doc in docs]

        print(json.dumps({"one": seen(nlp.pipe(texts)), "two": seen(nlp.pipe(texts, n_process=2, batch_size=2))}))
    """
)


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_n_process_under_spawn_and_forkserver_gives_the_one_process_result(weight_files, tmp_path, method):  # noqa: F811
    nlp = make_nlp(weight_files, store="none")
    train(nlp, steps=3)
    nlp.to_disk(tmp_path / "pipeline")
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    process = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "pipeline"), method],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # on a hang, the workers are killed with their parent
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        stdout, stderr = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise AssertionError(f"nlp.pipe(n_process=2) under {method} hung for 300 s") from None
    assert process.returncode == 0, stderr[-2000:]
    report = json.loads(stdout.strip().splitlines()[-1])
    assert len(report["two"]) == 6 and report["one"][0][0] != 0
    for (sum_one, ents_one), (sum_two, ents_two) in zip(report["one"], report["two"]):
        assert ents_two == ents_one
        assert sum_two == pytest.approx(sum_one, rel=1e-5)  # another process may sum in another order
