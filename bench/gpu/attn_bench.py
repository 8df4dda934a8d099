#!/usr/bin/env python3
"""GPU benchmark: kiln's fused attention kernels against PyTorch's scaled_dot_product_attention.

Runs on the GPU machine (bench/gpu/check.sh). The shapes are issue 10's, fp16, B x S x N x D:
  32 x 128 x 12 x 64 with a key-padding mask (row b keeps 128 - 37b mod 64 keys),
  8 x 512 x 12 x 64 and 4 x 1024 x 16 x 128, without a mask and causal.
kiln: `kiln_gpu_bench attention` (the flash kernel at every instantiated launch shape, and
the simple kernel; packed QKV [B, S, 3·N·D] read in place, y [B, S, N·D]; CUDA events,
medians). PyTorch, in the same run on the same shapes: SDPA on q, k, v as [B, N, S, D]
views of one packed [B, S, 3, N, D] tensor (what a BERT layer hands it), timed with CUDA
events, medians of --runs after warm-up —
  "sdpa_flash": the flash backend forced (no mask; is_causal for causal), where it applies;
  "sdpa_auto":  whatever PyTorch picks with the same mask (the key-padding mask as a bool
                [B, 1, 1, S] attn_mask, which rules the flash backend out).
TFLOP/s count 4·B·N·S²·D (halved when causal), as FlashAttention's benchmarks do. The
dense fp16 GEMM rate (kiln_gpu_bench kernels) is the roof beside them. Writes --json.
"""

import argparse
import json
import pathlib
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from gpu_timing import time_cuda  # noqa: E402

CASES = [(32, 128, 12, 64, "keypad"), (8, 512, 12, 64, "none"), (8, 512, 12, 64, "causal"),
         (4, 1024, 16, 128, "none"), (4, 1024, 16, 128, "causal")]



def sdpa_rows(runs):
    rows = []
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # older torch
        SDPBackend = sdpa_kernel = None
    for (b, s, n, d, mask) in CASES:
        g = torch.Generator(device="cuda").manual_seed(3)
        qkv = torch.rand(b, s, 3, n, d, device="cuda", generator=g, dtype=torch.float16) - 0.5
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
        causal = mask == "causal"
        attn_mask = None
        if mask == "keypad":
            keep = torch.arange(s, device="cuda")[None, :] < torch.tensor(
                [s - (37 * r) % (s // 2) for r in range(b)], device="cuda")[:, None]
            attn_mask = keep[:, None, None, :]
        flops = 4.0 * b * n * s * s * d * (0.5 if causal else 1.0)
        label = f"{b}x{s}x{n}x{d}"

        def call():
            return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=causal)

        variants = [("sdpa_auto", None)]
        if attn_mask is None and sdpa_kernel is not None:
            variants.insert(0, ("sdpa_flash", SDPBackend.FLASH_ATTENTION))
        for name, backend in variants:
            try:
                if backend is None:
                    ms = time_cuda(call, 10, runs)
                else:
                    with sdpa_kernel(backend):
                        ms = time_cuda(call, 10, runs)
                rows.append({"attention": label, "mask": mask, "kernel": name, "p50_ms": ms,
                             "tflops": flops / (ms * 1e-3) / 1e12})
            except RuntimeError as e:  # backend not available for this shape
                rows.append({"attention": label, "mask": mask, "kernel": name,
                             "error": str(e)[:200]})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu-bench", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()
    proc = subprocess.run([args.gpu_bench, "attention", "--runs", str(args.runs)],
                          capture_output=True, text=True, timeout=300)
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    kiln_rows = [r for r in lines if "kernel" in r]
    agreement = [r for r in lines if "flash_vs_simple_max_abs" in r]
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "kiln": kiln_rows, "agreement": agreement, "sdpa": sdpa_rows(args.runs)}
    if proc.returncode != 0:
        result["kiln_error"] = proc.stderr.strip()[-2000:]
    pathlib.Path(args.json).write_text(json.dumps(result, indent=1))
    for r in kiln_rows + agreement + result["sdpa"]:
        print(json.dumps(r))
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
