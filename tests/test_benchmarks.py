"""The benchmarks run end to end at tiny sizes and print the figures the docs quote.

No timing is checked here (the figures of a run this small mean nothing): what fails is a
benchmark that no longer runs, or that stops printing a figure docs/speed.md cites."""

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Sequence

import numpy
import pytest
import spacy
from spacy.tokens import DocBin

from .benchmark_modules import benchmark_module
from .conftest import DATA, tiny_bilm
from .test_listener import examples, train
from .test_listener import make_nlp as make_ner_nlp

REPO = Path(__file__).parent.parent
NUMBER = r"[0-9][0-9,]*(?:\.[0-9]+)?"


def run_benchmark(script: str, *args: str, threads: Sequence[str] = ("--threads", "1")) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / script), *threads, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_bench_pretrain_prints_tokens_per_second_and_the_ceiling_fraction():
    out = run_benchmark(
        "bench_pretrain.py",
        "--config",
        "configs/pretrain_tiny.cfg",
        "--precision",
        "fp32",
        "--steps",
        "1",
        "--repeats",
        "1",
        "--profile",
        "1",
    )
    assert re.search(
        rf"^fp32: +{NUMBER} tokens/s .* fraction of the matmul ceiling {NUMBER} .*fp32 matmul ceiling {NUMBER} GFLOP/s",
        out,
        re.M,
    ), out
    assert "pretrain_tiny.cfg: projection 16" in out
    # --profile: the step's ops by their share of its time, the largest first
    shares = [float(s) for s in re.findall(r"^ +(\d+\.\d)%  +\d+ calls  \S", out, re.M)]
    assert shares and shares == sorted(shares, reverse=True) and sum(shares) <= 100.05, out
    assert re.search(r"^fp32 profile, 1 steps: self CPU time by op", out, re.M), out
    split = re.search(rf"^  matrix products \(.*\): ({NUMBER}) s a step; all the rest: ({NUMBER}) s a step$", out, re.M)
    assert split and float(split.group(1)) > 0 and float(split.group(2)) > 0, out


def test_bench_pretrain_alternates_the_precisions_and_prints_their_ratio_per_repeat_pair():
    out = run_benchmark(
        "bench_pretrain.py",
        *("--config", "configs/pretrain_tiny.cfg", "--precision", "fp32", "bf16", "--force-bf16"),
        *("--steps", "1", "--repeats", "2", "--profile", "1"),
    )
    for precision in ("fp32", "bf16"):
        assert re.search(rf"^{precision}: +{NUMBER} tokens/s \(median of 2 x 1 steps", out, re.M), out
    pair = re.search(
        rf"^bf16 / fp32 tokens/s: ({NUMBER})x .*median ({NUMBER})x, range ({NUMBER})-({NUMBER})\)$", out, re.M
    )
    assert pair, out
    low, high = float(pair.group(3)), float(pair.group(4))
    assert 0 < low <= float(pair.group(2)) <= high, out
    # Amdahl: the matrix products sped up by the ceilings' ratio, the rest as in fp32
    bound = re.search(rf"^bf16 / fp32 bound: ({NUMBER})x if every matrix product ran ({NUMBER})x faster", out, re.M)
    assert bound, out
    ratio = float(bound.group(2))
    assert min(1.0, ratio) - 0.005 <= float(bound.group(1)) <= max(1.0, ratio) + 0.005, out


def test_bench_pretrain_refuses_a_negative_profile_count_before_building_anything():
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_pretrain.py"), "--profile", "-1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1].endswith("--profile: a number of steps >= 0, got -1"), done.stderr
    assert "CPU:" not in done.stdout  # refused before the header (and any model) is built


def test_bench_bilm_and_gpu_check_layer_deviation_is_max_abs_and_mean_cosine_per_layer():
    """Per layer over all tokens of all sentences: layer 0 has one token off by 1 at
    cosine 0 and one equal, layer 1 one token halved (off by 1.5, cosine 1)."""
    layer_deviation = benchmark_module("layer_deviation").layer_deviation
    exact = [numpy.array([[[1, 0]], [[0, 3]]], "f"), numpy.array([[[2, 0]], [[4, 0]]], "f")]
    approximate = [numpy.array([[[0, 1]], [[0, 1.5]]], "f"), numpy.array([[[2, 0]], [[4, 0]]], "f")]
    assert layer_deviation(exact, approximate) == [(1.0, 0.5), (1.5, 1.0)]


def test_bench_bilm_prints_speed_int8_deviation_and_the_type_cache():
    out = run_benchmark(
        "bench_bilm.py", "--sizes", "small", "--repeats", "1", "--sentences", "2", "--tokens", "5",
        "--stream-sentences", "8",
    )  # fmt: skip
    assert re.search(rf"^small \| fp32: {NUMBER} of the fp32 ceiling", out, re.M), out
    assert re.search(rf"^small \| int8: {NUMBER}x fp32's tokens/s", out, re.M), out
    cosines = [
        float(c) for c in re.findall(r"^small \| int8 vs fp32, layer \d: max abs \S+, mean cosine (\S+)", out, re.M)
    ]
    assert len(cosines) == 3 and min(cosines) > 0.999, out  # int8 stays close to fp32 on every layer
    assert re.search(r"^small \| type cache off .* hit rate", out, re.M), out


def test_bench_train_epoch_prints_elmo_over_cnn_epoch_time():
    out = run_benchmark(
        "bench_train_epoch.py", "--limit", "8", "--epochs", "2", "--elmo-config", "ner_elmo_output.cfg",
        "--grad-factor", "1", "--listener", "components.ner.model.tok2vec.elmo",
    )  # fmt: skip
    assert re.search(rf"^ner_elmo_output\.cfg \| [0-9.]+ \| [0-9.]+ \| {NUMBER}$", out, re.M), out
    assert re.search(rf"^ner_elmo_output\.cfg, grad_factor 1 \| [0-9.]+ \| [0-9.]+ \| {NUMBER}$", out, re.M), out
    assert re.search(rf"^after the first epoch: ELMo/CNN epoch time = {NUMBER} \(target <= 1.5\)$", out, re.M), out


@pytest.mark.slow  # one process per store setting and size: about two minutes
def test_bench_long_doc_prints_memory_per_store_setting():
    out = run_benchmark("bench_long_doc.py", "--tokens", "300", "--bilm-size", "small")
    for store, dtype in (("all", "float32"), ("all", "float16"), ("mix", "float32"), ("none", "float32")):
        assert re.search(rf"^{store} \| {dtype} \| {NUMBER} \| {NUMBER} \| ", out, re.M), out
    assert re.search(r"^all \| float32 .* \| \(3, 300, 256\)$", out, re.M), out


def trained_ner_pipeline(tmp_path):
    """A tiny-biLM NER pipeline trained 2 steps and saved to ``tmp_path / "pipeline"``."""
    options, weights = tmp_path / "options.json", tmp_path / "weights.hdf5"
    tiny_bilm(seed=3).to_files(options, weights)
    nlp = make_ner_nlp((str(options), str(weights)))
    train(nlp, steps=2)
    nlp.to_disk(tmp_path / "pipeline")
    return nlp


def test_bench_int8_ner_scores_one_trained_pipeline_at_each_precision(tmp_path):
    nlp = trained_ner_pipeline(tmp_path)
    DocBin(docs=[eg.reference for eg in examples(nlp)]).to_disk(tmp_path / "dev.spacy")
    out = run_benchmark(
        "bench_int8_ner.py", str(tmp_path / "pipeline"), str(tmp_path / "dev.spacy"),
        "--precision", "fp32", "int8", "bf16", "--force-bf16",
    )  # fmt: skip
    for label in ("fp32", "int8", r"bf16(?: \(emulated\))?"):
        assert re.search(rf"^{label}: ents_f {NUMBER} \(\d+ tokens in {NUMBER} s", out, re.M), out
    for label in ("int8", r"bf16(?: \(emulated\))?"):
        assert re.search(rf"^{label} - fp32: [+-]{NUMBER} F1$", out, re.M), out


@pytest.mark.slow  # three pretraining processes, bf16 emulated where the CPU has none: about a minute
def test_bf16_loss_curve_compares_bf16_with_the_fp32_seeds(tmp_path):
    text = str(DATA / "sample_sentences.txt")
    out = run_benchmark(
        "bf16_loss_curve.py", text, text, "--config", "configs/pretrain_tiny.cfg", "--steps", "2",
        "--eval-every", "1", "--seeds", "0", "1", "--out", str(tmp_path / "runs"), threads=(),
    )  # fmt: skip
    rows = re.findall(rf"^ +(\d) \| ({NUMBER}) ({NUMBER}) \| {NUMBER} \| {NUMBER} \| ({NUMBER}) \|", out, re.M)
    assert [row[0] for row in rows] == ["1", "2", "2"], out  # perplexity at steps 1 and 2, the loss at step 2
    first_fp32, first_bf16 = float(rows[0][1]), float(rows[0][3])
    assert abs(first_bf16 - first_fp32) < 0.05 * first_fp32  # one bf16 step from the same seed: the same model
    assert re.search(
        r"^bf16 within the fp32 seeds' noise: held-out perplexity (yes|NO), training loss (yes|NO)$", out, re.M
    )


def test_bench_train_memory_prints_the_growth_and_the_cache_per_malloc_setting(tmp_path):
    nlp = spacy.blank("en")
    docs = []
    for text, label in (("great movie", "POS"), ("awful film", "NEG"), ("loved it", "POS"), ("dull plot", "NEG")):
        doc = nlp.make_doc(text)
        doc.cats = {"POS": float(label == "POS"), "NEG": float(label == "NEG")}
        docs.append(doc)
    DocBin(docs=docs).to_disk(tmp_path / "cats.spacy")
    tiny_bilm(seed=5).to_files(tmp_path / "options.json", tmp_path / "weights.hdf5")
    out = run_benchmark(
        "bench_train_memory.py", "configs/textcat_elmo.cfg", str(tmp_path / "cats.spacy"),
        str(tmp_path / "cats.spacy"), "--bilm-dir", str(tmp_path), "--steps", "4", "--every", "1", "--warmup", "1",
    )  # fmt: skip
    for setting in ("glibc default", "MALLOC_MMAP_THRESHOLD_=65536"):
        row = re.search(
            rf"^{setting} \| {NUMBER} \| {NUMBER} \| -?{NUMBER} \| (\d+) entries, .* (\d+)% hits$", out, re.M
        )
        assert row, out
        # the step-0 evaluation reads the same four docs the first update cached
        assert int(row.group(1)) == 4 and int(row.group(2)) > 0, out


def test_gpu_check_runs_on_cpu_skipping_every_cuda_row_and_says_so():
    """Without CUDA: exit 0, every row in the table (the CPU rows PASS, the CUDA ones SKIP
    "no CUDA device"), and a last line naming what was skipped."""
    gpu_check = benchmark_module("gpu_check")
    out = run_benchmark("gpu_check.py", threads=())
    statuses = {}
    for entry in gpu_check.ROWS:
        line = next((line for line in out.splitlines() if line.startswith(entry.name + " ")), None)
        assert line is not None, f"no row {entry.name!r}:\n{out}"
        statuses[entry.name] = line.split(" | ")[1].strip()
        if entry.cuda:
            assert statuses[entry.name] == "SKIP" and line.endswith("| no CUDA device"), line
    assert statuses["reference biLM, CPU, stateful, vs bilm-tf"] == "PASS", out
    assert statuses["GPU-marked tests (pytest --gpu)"] == "SKIP", out
    skipped = [name for name, status in statuses.items() if status == "SKIP"]
    assert f"{len(statuses)} rows: 1 PASS, 0 FAIL, {len(skipped)} SKIP" in out, out
    assert out.rstrip().splitlines()[-1] == "skipped: " + "; ".join(skipped), out


def test_bench_doc_size_prints_bytes_per_token_for_each_store(tmp_path):
    trained_ner_pipeline(tmp_path)
    out = run_benchmark(
        "bench_doc_size.py", str(tmp_path / "pipeline"), str(DATA / "sample_sentences.txt"), "--docs", "5", threads=()
    )
    sizes = {
        m[0]: float(m[1])
        for m in re.findall(r"^(store=\S+ store_dtype=\S+): [\d,]+ bytes, ([\d.]+) bytes/token$", out, re.M)
    }
    floor = float(re.search(r"^annotations only .*, ([\d.]+) bytes/token$", out, re.M).group(1))
    assert len(sizes) == 5, out
    width = tiny_bilm().options.n_output_layers * tiny_bilm().options.output_dim  # (L+1) x 2P floats a token
    # "none" writes no vectors (nor anything held for the listeners): close to the annotations alone.
    assert sizes["store=none store_dtype=float32"] < floor + 64
    # every layer, 4 bytes a value before DocBin's zlib (which gains little on float noise)
    assert sizes["store=all store_dtype=float32"] > floor + 3 * width
    assert sizes["store=all store_dtype=float16"] < sizes["store=all store_dtype=float32"]


def test_float64_drift_prints_each_float32_run_against_float64():
    out = run_benchmark("float64_drift.py", "--lengths", "5", threads=())
    for name in ("text", "Berlin x N"):
        assert re.search(rf"^ *{name} +5( +[0-9.]+e[-+][0-9]+){{5}}$", out, re.M), out
