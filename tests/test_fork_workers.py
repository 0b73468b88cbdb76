"""nlp.pipe(n_process=2) after the parent ran the pipeline with two torch threads.

Linux forks spaCy's worker processes; a fork after torch ran a two-thread
parallel region used to hang the workers in an OpenMP barrier. The run goes in
a subprocess with a timeout, so a hang fails this test instead of the suite.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from .conftest import tiny_bilm

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import torch
    import spacy

    torch.set_num_threads(2)  # torch's default on a 2-core machine (the tests run under OMP_NUM_THREADS=1)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"bilm_dir": sys.argv[1], "cache_size_mb": 0})
    texts = [f"sentence number {i} is here and it is long enough to split work" for i in range(8)]
    nlp(texts[0])  # the parent warms up: torch runs its two-thread parallel regions
    expected = [doc._.elmo_layers.sum().item() for doc in nlp.pipe(texts)]
    docs = list(nlp.pipe(texts, n_process=2, batch_size=2))
    got = [doc._.elmo_layers.sum().item() for doc in docs]
    print(json.dumps({"expected": expected, "got": got, "parent_threads": torch.get_num_threads()}))
    """
)


def test_worker_processes_do_not_hang_after_a_two_thread_parent(tmp_path):
    tiny_bilm().to_files(tmp_path / "options.json", tmp_path / "weights.hdf5")
    # A session of its own: on a hang, the workers are killed with their parent.
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise AssertionError("nlp.pipe(n_process=2) hung for 120 s after a two-thread parent") from None
    assert process.returncode == 0, stderr[-2000:]
    report = json.loads(stdout.strip().splitlines()[-1])
    assert report["parent_threads"] == 2  # the parent keeps its own setting
    assert len(report["got"]) == 8
    # One worker thread may sum in another order than the parent's two: last-bit differences.
    assert report["got"] == pytest.approx(report["expected"], rel=1e-5)
