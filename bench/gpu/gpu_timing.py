"""Helpers shared by the GPU benchmarks: CUDA-event timing (torch_bench.py, attn_bench.py)
and running a kiln command (rerank_gpu.py, generate_gpu.py)."""

import subprocess

import numpy as np
import torch


def run(cmd, timeout=900):
    """stdout of `cmd`; RuntimeError with the end of stderr when it exits non-zero."""
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))}: {proc.stderr.strip()[-2000:]}")
    return proc.stdout


def time_cuda(fn, warmup, runs):
    """Median milliseconds of `fn` (work enqueued on the current stream) over `runs` CUDA-event
    pairs, after `warmup` calls, under inference mode."""
    with torch.inference_mode():
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(runs):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
    return float(np.median(times))
