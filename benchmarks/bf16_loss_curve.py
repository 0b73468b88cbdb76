"""bf16 pretraining against fp32: is a short run's loss curve the same within noise?

    python benchmarks/bf16_loss_curve.py TRAIN_TXT DEV_TXT [--config configs/pretrain_demo.cfg]
        [--steps 300] [--seeds 0 1 2] [--out /tmp/bf16_loss_curve]

Runs ``python -m spacy_elmo pretrain`` from zero on the same text, in fp32 once
per seed and in bf16 with the first seed, and prints the held-out perplexity
at every evaluation (``--eval-every`` steps) and the training loss averaged
over windows of ``--eval-every`` steps. The noise is how far the fp32 runs of
different seeds lie apart at each evaluation (their range); bf16 is "equal
within noise" where its distance to the fp32 runs' mean is at most that range.

Not a timing, so it may run beside other jobs. Where the CPU has no native
bf16 (AVX512-BF16 or AMX) torch emulates it: the figures are the same, only
slower, and ``pretrain`` warns. Runs that finished are reused from ``--out``
(delete the folder to start over).
"""

import argparse
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

from machine import cpu_model

from spacy_elmo.files.json_files import read_jsonl


def run_pretrain(args, precision: str, seed: int) -> Path:
    out = args.out / f"{precision}_seed{seed}"
    if not any(r.get("step") == args.steps and "dev_perplexity" in r for r in read_jsonl(out / "metrics.jsonl")):
        cmd = [
            sys.executable,
            "-m",
            "spacy_elmo",
            "pretrain",
            str(args.config),
            str(out),
            "--paths.train",
            str(args.train),
            "--paths.dev",
            str(args.dev),
            "--training.max_steps",
            str(args.steps),
            "--training.eval_every_steps",
            str(args.eval_every),
            "--training.log_every_steps",
            "10",
            "--training.precision",
            precision,
            "--system.seed",
            str(seed),
            "--no-progress",
        ]
        print(f"running {precision}, seed {seed}: {' '.join(cmd[3:])}", flush=True)
        code = subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode
        if code != 0:  # pretrain's own message (a missing file, a bad option) is on stderr above
            sys.exit(f"error: pretrain exited with {code} for {precision}, seed {seed} (output {out})")
    return out


def curves(out: Path, window: int) -> Dict[str, Dict[int, float]]:
    """Held-out perplexity by step, and the mean training loss of each window of steps (keyed by its end)."""
    records = read_jsonl(out / "metrics.jsonl")
    dev = {r["step"]: r["dev_perplexity"] for r in records if "dev_perplexity" in r}
    losses: Dict[int, List[float]] = {}
    for r in records:
        if "loss" in r:
            losses.setdefault(-(-r["step"] // window) * window, []).append(r["loss"])
    return {"dev": dev, "loss": {end: statistics.fmean(values) for end, values in losses.items()}}


def compare(name: str, fp32: List[Dict[int, float]], bf16: Dict[int, float]) -> bool:
    """Print one curve's table; True where bf16 is within the fp32 seeds' range of their mean at every point."""
    steps = sorted(set(bf16).intersection(*fp32))
    print(f"\n{name}: step | fp32 seeds | fp32 mean | range (noise) | bf16 | |bf16 - mean| | within noise")
    all_within = True
    for step in steps:
        values = [curve[step] for curve in fp32]
        mean, noise = statistics.fmean(values), max(values) - min(values)
        gap = abs(bf16[step] - mean)
        within = gap <= noise
        all_within &= within
        print(
            f"{step:>6} | {' '.join(f'{v:.3f}' for v in values)} | {mean:.3f} | {noise:.3f} | "
            f"{bf16[step]:.3f} | {gap:.3f} | {'yes' if within else 'NO'}"
        )
    return all_within


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("train", type=Path)
    parser.add_argument("dev", type=Path)
    parser.add_argument("--config", type=Path, default=Path("configs/pretrain_demo.cfg"))
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=Path("/tmp/bf16_loss_curve"))
    args = parser.parse_args()
    if len(args.seeds) < 2:
        parser.error("--seeds: at least two, to measure the noise")
    print(f"CPU: {cpu_model()}; config {args.config}, {args.steps} steps from zero, seeds {args.seeds}")
    fp32 = [curves(run_pretrain(args, "fp32", seed), args.eval_every) for seed in args.seeds]
    bf16 = curves(run_pretrain(args, "bf16", args.seeds[0]), args.eval_every)
    dev_ok = compare("held-out perplexity", [c["dev"] for c in fp32], bf16["dev"])
    loss_ok = compare(f"training loss, mean over {args.eval_every} steps", [c["loss"] for c in fp32], bf16["loss"])
    print(
        f"\nbf16 within the fp32 seeds' noise: held-out perplexity {'yes' if dev_ok else 'NO'}, "
        f"training loss {'yes' if loss_ok else 'NO'}"
    )


if __name__ == "__main__":
    main()
