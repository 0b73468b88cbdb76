"""The GPU paths checked in one command (at most about 8 minutes on one GPU), as a table.

    python benchmarks/gpu_check.py [--quick] [--rows NAME ...] [--workdir DIR]

Each row is one check: its name, what it found, its figure and PASS, FAIL or
SKIP. Without a CUDA device every CUDA row is SKIP "no CUDA device" and the
rows that run on the CPU (the reference biLM against the authors' outputs,
pytest --gpu, which skips its GPU tests there) still run; the script exits 0
unless a row FAILs. ``--quick`` leaves out the rows that train or time
(spacy train, pretrain, torchrun, the speed rows). What each row checks:
docs/speed.md#gpu.
"""

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, cast

import h5py
import numpy
import torch
from layer_deviation import layer_deviation
from machine import cuda_matmul_ceiling, gpu_model

from spacy_elmo.bilm import ElmoBiLM, preset
from spacy_elmo.errors import ElmoError
from spacy_elmo.loaders import DEFAULT_BILM_DIR

ROOT = Path(__file__).parent.parent
REFERENCE = ROOT / "tests" / "data" / "bilm_tf_reference"
NO_CUDA = "no CUDA device"
MAX_ABS = 1e-4  # CPU against CUDA, fp32
MIN_BF16_COSINE = 0.99
TRAIN_STEPS, PRETRAIN_STEPS = 40, 30


@dataclass
class Outcome:
    status: str  # PASS, FAIL or SKIP
    result: str
    figure: str = "-"


class Skipped(Exception):
    """A row that cannot run here: SKIP, with the reason."""


def judged(ok: bool, result: str, figure: str = "-") -> Outcome:
    return Outcome("PASS" if ok else "FAIL", result, figure)


@dataclass
class Row:
    name: str
    check: Callable[["Context"], Outcome]
    cuda: bool = True
    slow: bool = False


@dataclass
class Context:
    workdir: Path
    # What one row leaves for a later one (the trained pipelines, the texts).
    kept: Dict[str, Any] = field(default_factory=dict)


ROWS: List[Row] = []


def row(name: str, cuda: bool = True, slow: bool = False):
    def register(check: Callable[[Context], Outcome]) -> Callable[[Context], Outcome]:
        ROWS.append(Row(name, check, cuda, slow))
        return check

    return register


# -- inputs -------------------------------------------------------------------


def reference_batches() -> List[List[List[str]]]:
    """The authors' 10 stateful batches of 3 sentences (as tests/test_reference.py runs them)."""
    groups = [[s.split() for s in group] for group in json.loads((REFERENCE / "sentences.json").read_text())]
    return [[groups[k][i] for k in range(3)] for i in range(10)]


def sentences() -> List[List[str]]:
    return [s for batch in reference_batches() for s in batch]


def reference_bilm(device: str = "cpu") -> ElmoBiLM:
    return ElmoBiLM.from_files(REFERENCE / "options.json", REFERENCE / "lm_weights.hdf5", device=device)


def stateful_tops(bilm: ElmoBiLM) -> List[numpy.ndarray]:
    """Each reference sentence's top layer, run statefully batch after batch."""
    bilm.reset_states()
    return [layers[-1] for batch in reference_batches() for layers in bilm.embed_batch(batch, stateful=True)]


def authors_tops() -> List[numpy.ndarray]:
    """bilm-tf's top layers in batch order, forward and backward side by side."""
    files = [h5py.File(REFERENCE / f"lm_embeddings_{k}.hdf5", "r") for k in range(3)]
    try:
        return [numpy.concatenate(list(files[k][str(i)][...]), axis=-1) for i in range(10) for k in range(3)]
    finally:
        for f in files:
            f.close()


def max_abs(a: Sequence[numpy.ndarray], b: Sequence[numpy.ndarray]) -> float:
    return max(float(numpy.abs(x - y).max()) for x, y in zip(a, b) if x.size)


def run(cmd: Sequence[str], timeout: float, env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return done


# -- the biLM on the GPU ---------------------------------------------------------


@row("reference biLM, CPU, stateful, vs bilm-tf", cuda=False)
def reference_on_cpu(ctx: Context) -> Outcome:
    worst = max_abs(stateful_tops(reference_bilm()), authors_tops())
    return judged(worst <= MAX_ABS, f"max abs {worst:.2e} (<= {MAX_ABS:g})", f"{worst:.2e}")


@row("bundled biLM fp32, CUDA vs CPU")
def bundled_cuda(ctx: Context) -> Outcome:
    cpu, gpu = ElmoBiLM.from_dir(DEFAULT_BILM_DIR), ElmoBiLM.from_dir(DEFAULT_BILM_DIR, device="cuda")
    worst = max_abs(
        [a for s in cpu.embed_batch(sentences()) for a in s], [a for s in gpu.embed_batch(sentences()) for a in s]
    )
    return judged(worst <= MAX_ABS, f"max abs {worst:.2e} over all layers (<= {MAX_ABS:g})", f"{worst:.2e}")


@row("reference biLM fp32 stateful, CUDA vs CPU and bilm-tf")
def reference_cuda(ctx: Context) -> Outcome:
    gpu = stateful_tops(reference_bilm("cuda"))
    to_cpu, to_authors = max_abs(gpu, stateful_tops(reference_bilm())), max_abs(gpu, authors_tops())
    worst = max(to_cpu, to_authors)
    return judged(worst <= MAX_ABS, f"max abs {to_cpu:.2e} to CPU, {to_authors:.2e} to bilm-tf", f"{worst:.2e}")


@row("bf16 on CUDA: mean cosine per layer to CPU fp32")
def bf16_cosine(ctx: Context) -> Outcome:
    exact = ElmoBiLM.from_dir(DEFAULT_BILM_DIR).embed_batch(sentences())
    bf16 = ElmoBiLM.from_dir(DEFAULT_BILM_DIR, device="cuda", precision="bf16").embed_batch(sentences())
    rows = layer_deviation(exact, bf16)
    cosines = ", ".join(f"layer {i} {cos:.5f} (max abs {worst:.3f})" for i, (worst, cos) in enumerate(rows))
    lowest = min(cos for _, cos in rows)
    return judged(lowest >= MIN_BF16_COSINE, f"{cosines} (>= {MIN_BF16_COSINE})", f"{lowest:.5f}")


@row("int8 refused on CUDA")
def int8_refused(ctx: Context) -> Outcome:
    from spacy_elmo.bilm.device import resolve_device

    refusals = []
    for what, attempt in (
        ("--device cuda --precision int8", lambda: resolve_device("cuda", "int8")),
        ("ElmoBiLM.from_dir(device=cuda, precision=int8)", lambda: embed_int8_on_cuda()),
    ):
        try:
            attempt()
        except ElmoError:
            refusals.append(what)
    return judged(len(refusals) == 2, f"refused: {', '.join(refusals) or 'nothing'}", f"{len(refusals)}/2")


def embed_int8_on_cuda() -> None:
    ElmoBiLM.from_dir(DEFAULT_BILM_DIR, device="cuda", precision="int8").embed_batch([["a"]])


@row("GPU-marked tests (pytest --gpu)", cuda=False)
def gpu_tests(ctx: Context) -> Outcome:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--gpu", "-m", "gpu", "-q", "-p", "no:cacheprovider", "tests/test_gpu.py"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    summary = (done.stdout.strip().splitlines() or ["no output"])[-1]
    if done.returncode != 0:
        return Outcome("FAIL", summary)
    if not torch.cuda.is_available():
        return Outcome("SKIP", f"{NO_CUDA}: {summary}")
    return judged("skipped" not in summary, summary)


# -- spacy train on the GPU --------------------------------------------------------


def ner_corpus(ctx: Context) -> Dict[str, Path]:
    """Synthetic NER docs (the reference sentences, capitalised words inside a sentence
    as MISC), as train and dev .spacy files."""
    if "corpus" in ctx.kept:
        return ctx.kept["corpus"]
    import spacy
    from spacy.tokens import DocBin, Span

    nlp = spacy.blank("en")
    docs = []
    for words in sentences():
        doc = spacy.tokens.Doc(nlp.vocab, words=words)
        doc.ents = [Span(doc, i, i + 1, "MISC") for i in range(1, len(words)) if words[i][:1].isupper()]
        docs.append(doc)
    paths = {"train": ctx.workdir / "train.spacy", "dev": ctx.workdir / "dev.spacy"}
    DocBin(docs=docs * 4).to_disk(paths["train"])
    DocBin(docs=docs[:10]).to_disk(paths["dev"])
    ctx.kept["corpus"] = paths
    return paths


def spacy_train(ctx: Context, name: str, grad_factor: float) -> Outcome:
    corpus, out, log = ner_corpus(ctx), ctx.workdir / name, ctx.workdir / f"{name}.jsonl"
    run(
        [sys.executable, "-m", "spacy", "train", str(ROOT / "configs" / "ner_elmo.cfg"), "--output", str(out)]
        + ["--gpu-id", "0", "--paths.train", str(corpus["train"]), "--paths.dev", str(corpus["dev"])]
        + ["--training.max_steps", str(TRAIN_STEPS), "--training.eval_frequency", "10"]
        + ["--training.logger.output_file", str(log)]
        + ["--components.ner.model.tok2vec.elmo.grad_factor", str(grad_factor)],
        timeout=240,
    )
    records = [json.loads(line) for line in log.read_text(encoding="utf8").splitlines()]
    losses = [v for r in records for v in r["losses"].values()]
    ctx.kept[name] = out / "model-last"
    finite = bool(losses) and all(math.isfinite(v) for v in losses)
    last: Dict[str, Any] = records[-1] if records else {"step": 0, "score": 0.0, "losses": {}}
    figures = ", ".join(f"{k} {v:.2f}" for k, v in last["losses"].items())
    return judged(
        finite and last["step"] >= TRAIN_STEPS - 10,
        f"{len(records)} evaluations to step {last['step']}, losses finite: {finite} ({figures}), "
        f"dev score {last['score']:.3f}",
        f"{last['score']:.3f}",
    )


@row(f"spacy train --gpu-id 0, frozen biLM, {TRAIN_STEPS} steps", slow=True)
def train_frozen(ctx: Context) -> Outcome:
    return spacy_train(ctx, "frozen", 0.0)


@row(f"spacy train --gpu-id 0, fine-tuned biLM, {TRAIN_STEPS} steps", slow=True)
def train_fine_tuned(ctx: Context) -> Outcome:
    return spacy_train(ctx, "fine_tuned", 1.0)


def trained(ctx: Context, name: str) -> Path:
    if name not in ctx.kept:
        raise Skipped(f"needs the {name.replace('_', '-')} spacy train row to have run")
    return ctx.kept[name]


# The configs' trained pipelines store no layers on the Doc (annotations only): the rows that
# compare layers load them with the layers kept, as a user asks for them.
KEEP_LAYERS = {"components": {"elmo": {"store": "all"}}}


def stored_layers(nlp, texts: List[str]) -> List[numpy.ndarray]:
    """``doc._.elmo_layers`` as host arrays (a cupy array's ``get()``)."""
    layers = [doc._.elmo_layers for doc in nlp.pipe(texts)]
    return [x.get() if hasattr(x, "get") else numpy.asarray(x) for x in layers]


def spacy_on_gpu() -> None:
    """spaCy's GPU ops (thinc's CupyOps), as ``--gpu-id 0`` selects them."""
    import spacy
    from thinc.util import has_cupy_gpu

    if not has_cupy_gpu:
        raise RuntimeError("spaCy runs on a GPU through cupy, which is not installed: pip install cupy-cuda12x")
    spacy.require_gpu(0)


@row("fine-tuned on CUDA: predict after 3 updates = the same weights reloaded", slow=True)
def evaluation_follows_updates(ctx: Context) -> Outcome:
    import spacy
    from spacy.tokens import DocBin
    from spacy.training import Example

    spacy_on_gpu()
    nlp = spacy.load(trained(ctx, "fine_tuned"), config=KEEP_LAYERS)
    texts = [" ".join(words) for words in sentences()[:8]]
    gold = list(DocBin().from_disk(ner_corpus(ctx)["train"]).get_docs(nlp.vocab))[:16]
    examples = [Example(nlp.make_doc(doc.text), doc) for doc in gold]
    before = stored_layers(nlp, texts)
    optimizer = nlp.resume_training()
    for _ in range(3):
        nlp.update(examples, sgd=optimizer)
    after = stored_layers(nlp, texts)
    nlp.to_disk(ctx.workdir / "updated")
    reloaded = stored_layers(spacy.load(ctx.workdir / "updated", config=KEEP_LAYERS), texts)
    moved, stale = max_abs(before, after), max_abs(after, reloaded)
    return judged(
        moved > MAX_ABS and stale <= MAX_ABS,
        f"updates moved the layers by {moved:.3f}; against the reloaded weights max abs {stale:.2e} (<= {MAX_ABS:g})",
        f"{stale:.2e}",
    )


@row("no host sync per predict batch (set_sync_debug_mode warn)", slow=True)
def no_sync_per_batch(ctx: Context) -> Outcome:
    import spacy

    spacy_on_gpu()
    nlp = spacy.load(trained(ctx, "frozen"))
    texts = [" ".join(words) for words in sentences()]
    batches = math.ceil(len(texts) / 8)
    list(nlp.pipe(texts, batch_size=8))  # warm-up: kernels, packing, caches
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            list(nlp.pipe(texts, batch_size=8))
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in caught if "synchroniz" in str(w.message).lower()]
    where = sorted({f"{Path(w.filename).name}:{w.lineno}" for w in syncs})[:4]
    return judged(
        len(syncs) <= batches,
        f"{len(syncs)} syncs over {batches} batches (one a batch allowed: the layers stored on the Docs)"
        + (f"; at {', '.join(where)}" if where else ""),
        f"{len(syncs) / batches:.1f}/batch",
    )


@row("the GPU-trained pipeline loads and predicts on CPU", slow=True)
def gpu_trained_on_cpu(ctx: Context) -> Outcome:
    code = (
        "import sys, spacy\n"
        "from spacy_elmo.layers.bilm_layer import get_bilm\n"
        "nlp = spacy.load(sys.argv[1], config={'components': {'elmo': {'store': 'all'}}})\n"
        "doc = nlp('The Council of Europe met in Strasbourg .')\n"
        "devices = sorted({p.device.type for p in get_bilm(nlp.get_pipe('elmo').model).parameters()})\n"
        "print(doc._.elmo_layers.shape, devices, len(doc.ents))\n"
    )
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = run([sys.executable, "-c", code, str(trained(ctx, "frozen"))], timeout=120, env=env)
    printed = done.stdout.strip()
    return judged("['cpu']" in printed, f"loaded with no GPU visible: {printed}")


# -- the commands on the GPU -----------------------------------------------------------


@row("embed --device cuda equals the CPU file")
def embed_cuda(ctx: Context) -> Outcome:
    text = ctx.workdir / "embed.txt"
    text.write_text("\n".join(" ".join(s) for s in sentences()) + "\n", encoding="utf8")
    outputs = {}
    for device in ("cpu", "cuda"):
        outputs[device] = ctx.workdir / f"embed_{device}.hdf5"
        run([sys.executable, "-m", "spacy_elmo", "embed", str(text), str(outputs[device]), "--device", device], 180)
    with h5py.File(outputs["cpu"], "r") as a, h5py.File(outputs["cuda"], "r") as b:
        names = [k for k in a if k != "sentence_to_index"]
        worst = max_abs([a[k][...] for k in names], [b[k][...] for k in names])
        same_index = a["sentence_to_index"][0] == b["sentence_to_index"][0]
    return judged(worst <= MAX_ABS and same_index, f"{len(names)} datasets, max abs {worst:.2e}", f"{worst:.2e}")


def pretrain_text(ctx: Context) -> Dict[str, Path]:
    paths = {"train": ctx.workdir / "pretrain_train.txt", "dev": ctx.workdir / "pretrain_dev.txt"}
    lines = [" ".join(s) for s in sentences()]
    paths["train"].write_text("\n".join(lines * 20) + "\n", encoding="utf8")
    paths["dev"].write_text("\n".join(lines[:10]) + "\n", encoding="utf8")
    return paths


def pretrain_command(ctx: Context, out: Path, precision: str, steps: int) -> List[str]:
    text = pretrain_text(ctx)
    return [
        *("-m", "spacy_elmo", "pretrain", str(ROOT / "configs" / "pretrain_tiny.cfg"), str(out)),
        *("--device", "cuda", "--no-progress", "--paths.train", str(text["train"]), "--paths.dev", str(text["dev"])),
        *("--training.max_steps", str(steps), "--training.precision", precision),
        *("--training.checkpoint_every_steps", "10", "--training.log_every_steps", "5"),
    ]


def kill_after_checkpoint(cmd: List[str], checkpoint: Path, timeout: float) -> None:
    """Start ``cmd`` and SIGKILL it once it has written a checkpoint (or it ends)."""
    process = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while process.poll() is None and not checkpoint.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    process.wait()


def pretrain_resumed(ctx: Context, precision: str) -> Outcome:
    from spacy_elmo.pretrain.outputs import load_checkpoint

    out = ctx.workdir / f"pretrain_{precision}"
    cmd = [sys.executable, *pretrain_command(ctx, out, precision, PRETRAIN_STEPS)]
    kill_after_checkpoint(cmd, out / "checkpoint.pt", timeout=120)
    killed_at = load_checkpoint(out / "checkpoint.pt")["step"] if (out / "checkpoint.pt").exists() else 0
    run(cmd, timeout=180)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf8").splitlines()]
    losses = [r["loss"] for r in records if "loss" in r]
    final = load_checkpoint(out / "checkpoint.pt")["step"]
    ok = 0 < killed_at < PRETRAIN_STEPS and final == PRETRAIN_STEPS and all(map(math.isfinite, losses))
    return judged(
        ok,
        (
            f"killed after the step-{killed_at} checkpoint, resumed to step {final}; losses {losses[0]:.2f} -> "
            f"{losses[-1]:.2f}"
        )
        if losses
        else "no losses logged",
        f"{losses[-1]:.3f}" if losses else "-",
    )


@row(f"pretrain fp32 {PRETRAIN_STEPS} steps on CUDA, killed and resumed", slow=True)
def pretrain_fp32(ctx: Context) -> Outcome:
    return pretrain_resumed(ctx, "fp32")


@row(f"pretrain bf16 {PRETRAIN_STEPS} steps on CUDA, killed and resumed", slow=True)
def pretrain_bf16(ctx: Context) -> Outcome:
    return pretrain_resumed(ctx, "bf16")


@row("torchrun --nproc_per_node 1 pretrain through NCCL", slow=True)
def torchrun_nccl(ctx: Context) -> Outcome:
    from spacy_elmo.pretrain.outputs import load_checkpoint

    out = ctx.workdir / "pretrain_torchrun"
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1"]
    done = run(launcher + pretrain_command(ctx, out, "fp32", 10), 180, env={**os.environ, "NCCL_DEBUG": "INFO"})
    nccl = "NCCL INFO" in done.stdout + done.stderr
    state = load_checkpoint(out / "checkpoint.pt")
    return judged(
        nccl and state["step"] == 10 and state["world_size"] == 1,
        f"step {state['step']}, world size {state['world_size']}, NCCL's log seen: {nccl}",
    )


# -- speed -------------------------------------------------------------------------


def bilm_gflops(bilm: ElmoBiLM, batch: List[List[str]]) -> float:
    from bench_bilm import executed_flops

    return executed_flops(bilm.options, batch) / 1e9


def timed_on_gpu(work: Callable[..., Any], *args: Any, repeats: int = 5) -> float:
    """The median seconds of ``work(*args)`` (after a warm-up), synchronised around each run."""
    work(*args)
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        work(*args)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


@row("original-size biLM (random weights) tokens/s, fp32 and bf16", slow=True)
def bilm_speed(ctx: Context) -> Outcome:
    torch.manual_seed(0)
    batch = (sentences() * 8)[:256]
    tokens, parts = sum(map(len, batch)), []
    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        bilm = ElmoBiLM(preset("original"), type_cache_size=0).eval().to("cuda")
        bilm.set_precision(precision)
        seconds = timed_on_gpu(bilm.embed_batch, batch)
        ceiling = cuda_matmul_ceiling(dtype)
        fraction = bilm_gflops(bilm, batch) / seconds / ceiling
        parts.append(
            f"{precision} {tokens / seconds:,.0f} tokens/s, {fraction:.3f} of the {ceiling:,.0f} GFLOP/s ceiling"
        )
    return Outcome("PASS", "; ".join(parts) + f" ({len(batch)} sentences a batch, stateless)", parts[0].split(",")[0])


def annotate(nlp, texts: List[str]) -> None:
    for _ in nlp.pipe(texts, batch_size=256):
        pass


@row("paper-setup NER pipeline (configs/ner_elmo.cfg) words/s, fp32 and bf16", slow=True)
def ner_speed(ctx: Context) -> Outcome:
    from bench_pipelines import random_bilm_v1  # noqa: F401  (registers the random biLM)
    from spacy.pipeline import EntityRecognizer
    from spacy.util import load_config, load_model_from_config

    spacy_on_gpu()
    docs_words = [words for words in sentences() * 20]
    words = sum(map(len, docs_words))
    parts = []
    for precision in ("fp32", "bf16"):
        config = load_config(ROOT / "configs" / "ner_elmo.cfg")
        config["components"]["elmo"].update({"precision": precision, "cache_size_mb": 0})
        config["initialize"]["components"]["elmo"]["weights"] = {
            "@misc": "bench-pipelines.RandomBiLM.v1",
            "size": "original",
        }
        nlp = load_model_from_config(config, auto_fill=True, validate=True)
        cast(EntityRecognizer, nlp.get_pipe("ner")).add_label("MISC")
        nlp.initialize()
        texts = [" ".join(w) for w in docs_words]
        seconds = timed_on_gpu(annotate, nlp, texts, repeats=3)
        parts.append(f"{precision} {words / seconds:,.0f} words/s")
    return Outcome("PASS", "; ".join(parts) + f" ({len(docs_words)} synthetic docs, batches of 256)", parts[0])


@row("peak GPU memory of the rows above")
def peak_memory(ctx: Context) -> Outcome:
    peak = torch.cuda.max_memory_allocated() / 2**20
    return Outcome("PASS", f"torch's peak allocation in this process: {peak:,.0f} MiB", f"{peak:,.0f} MiB")


# -- the table -------------------------------------------------------------------------


def outcome_of(entry: Row, ctx: Context) -> Outcome:
    if entry.cuda and not torch.cuda.is_available():
        return Outcome("SKIP", NO_CUDA)
    try:
        return entry.check(ctx)
    except Skipped as why:
        return Outcome("SKIP", str(why))
    except Exception as err:  # a row that breaks is a FAIL with its reason; the others still run
        lines = str(err).strip().splitlines()
        return Outcome("FAIL", f"{type(err).__name__}: {lines[-1] if lines else ''}")


def print_table(results: List[tuple]) -> None:
    width = max(len(entry.name) for entry, _, _ in results)
    print(f"{'check':<{width}} | status | seconds | figure | result")
    for entry, outcome, seconds in results:
        print(f"{entry.name:<{width}} | {outcome.status:<6} | {seconds:7.1f} | {outcome.figure} | {outcome.result}")


def chosen_rows(args) -> List[Row]:
    rows = [r for r in ROWS if not (args.quick and r.slow)]
    if args.rows:
        rows = [r for r in rows if any(part in r.name for part in args.rows)]
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="leave out the rows that train or time")
    parser.add_argument("--rows", nargs="*", help="only the rows whose names contain one of these")
    parser.add_argument("--workdir", type=Path, help="where the rows write (default: a temporary directory)")
    parser.add_argument(
        "--budget-s", type=float, default=480, help="rows that would start after this many seconds are SKIP"
    )
    args = parser.parse_args()
    print(f"GPU: {gpu_model()}; torch {torch.__version__} (CUDA {torch.version.cuda})")
    with tempfile.TemporaryDirectory() as scratch:
        ctx = Context(args.workdir or Path(scratch))
        ctx.workdir.mkdir(parents=True, exist_ok=True)
        results = []
        began = time.perf_counter()
        for entry in chosen_rows(args):
            start = time.perf_counter()
            if start - began > args.budget_s:
                outcome = Outcome("SKIP", f"past the {args.budget_s:g} s budget (--budget-s)")
            else:
                outcome = outcome_of(entry, ctx)
            results.append((entry, outcome, time.perf_counter() - start))
            print(f"... {entry.name}: {outcome.status} ({results[-1][2]:.1f} s)", file=sys.stderr, flush=True)
    print_table(results)
    skipped = [entry.name for entry, outcome, _ in results if outcome.status == "SKIP"]
    failed = [entry.name for entry, outcome, _ in results if outcome.status == "FAIL"]
    print(
        f"{len(results)} rows: {len(results) - len(skipped) - len(failed)} PASS, {len(failed)} FAIL, {len(skipped)} SKIP"
    )
    if skipped:
        print(f"skipped: {'; '.join(skipped)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
