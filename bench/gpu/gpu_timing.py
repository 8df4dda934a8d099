"""CUDA-event timing shared by the GPU benchmarks (torch_bench.py, attn_bench.py)."""

import numpy as np
import torch


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
