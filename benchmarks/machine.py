"""What every benchmark prints first: the CPU, and its matmul ceiling measured in the same run."""

import multiprocessing
import platform
import statistics
import subprocess
import time

import torch


def cpu_model() -> str:
    """``lscpu``'s model name (and whether the CPU has AVX-512 / native bf16)."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or "unknown CPU"
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    name = fields.get("Model name", "unknown CPU").strip()
    flags = fields.get("Flags", "").split()
    extras = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    return f"{name} ({', '.join(extras) or 'no avx2'})"


def matmul_ceiling(dtype: torch.dtype = torch.float32, size: int = 2048, repeats: int = 8) -> float:
    """GFLOP/s of a large square matmul: the best of ``repeats`` (a ceiling, so a fraction
    of it is conservative)."""
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    out = torch.empty(size, size, dtype=dtype)
    for _ in range(2):
        torch.mm(a, b, out=out)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b, out=out)
        times.append(time.perf_counter() - start)
    return 2 * size**3 / min(times) / 1e9


def median_seconds(run, repeats: int) -> float:
    """Median wall time of ``repeats`` calls of ``run()`` (after one warm-up call)."""
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def header(threads: int) -> str:
    return f"CPU: {cpu_model()}; torch {torch.__version__}, {threads} threads"


def in_fresh_process(target, *args):
    """``target(*args, queue)`` in a spawned process (its own heap, allocator settings and
    peak RSS); what it puts on the queue."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=target, args=(*args, queue))
    process.start()
    result = queue.get()  # before join: a child blocks on a full queue until it is read
    process.join()
    return result


def cuda_matmul_ceiling(dtype: torch.dtype = torch.float32, size: int = 8192, repeats: int = 10) -> float:
    """GFLOP/s of a large square matmul on the current GPU, timed with CUDA events:
    the best of ``repeats`` (TF32 stays as torch's default: off for fp32 matmuls)."""
    a, b = torch.randn(size, size, dtype=dtype, device="cuda"), torch.randn(size, size, dtype=dtype, device="cuda")
    out = torch.empty(size, size, dtype=dtype, device="cuda")
    for _ in range(3):
        torch.mm(a, b, out=out)
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.mm(a, b, out=out)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    return 2 * size**3 / min(times) / 1e9


def gpu_model() -> str:
    """The current GPU's name and memory, or why there is none."""
    if not torch.cuda.is_available():
        return "no CUDA device"
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return f"{props.name} ({props.total_memory / 2**30:.0f} GiB, compute capability {props.major}.{props.minor})"
