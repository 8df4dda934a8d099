#!/usr/bin/env python3
"""Re-ranking with realistic lengths (docs/packing.md, docs/benchmarks.md): kiln packed vs
kiln padded vs onnxruntime padded vs onnxruntime with the candidates sorted by length.

The workload: one query of 8-16 tokens (uniform) paired with each of N candidate passages
(N = 100 and 1000), the pair laid out as BERT cross-encoders take it: [CLS] query [SEP]
passage [SEP], token types 0 then 1, capped at 256 tokens (the passage truncated). Passage
lengths are log-normal with mean 70 tokens (sigma 0.6, mu = ln 70 - sigma^2/2), at least 1:
roughly the shape of web passage collections (MS MARCO passages average ~60-80 word pieces
with a long right tail). Seeded; every side reads the same token arrays.
Batches of 32 candidates in the order given, each padded to its own longest pair (dynamic
padding, as `tokenizer(..., padding=True)` does) — what both runtimes are handed:
  kiln packed   one plan (--profile batch=4:8:16:32,sequence=16:32:64:128:256,
                tokens=256:512:1024:2048:4096), Session.run(feeds): the real tokens run
                end to end, outputs back in the padded layout;
  kiln padded   the same plan and feeds, Session.run(feeds, pack=False): each batch in the
                smallest padded bucket that fits (sequence rounded up to the bucket);
  ORT padded    onnxruntime (all graph optimizations), the same feeds;
  ORT sorted    onnxruntime with the candidates sorted by length before batching, each
                batch padded to its longest: the best a careful onnxruntime user can do.
Metrics: total ms per N candidates (median of repetitions, sides interleaved), candidates/s,
ratios; the real-token FLOPs (gen_bert encoder FLOPs summed over each pair's own length) and
the floor they set at the measured fp32 Linear peak (kiln_kernels_bench BM_Linear, as
e2e_bench.py). Scores of kiln packed are checked against ORT (max abs diff reported).
Limits: random weights (models/gen_bert.py cross-encoder of MiniLM-L6 size), no tokenizer.

--precision bf16|int8 compiles kiln's plan at that precision (the accuracy gate off);
onnxruntime stays fp32 and kiln's ranking is compared with its (Spearman, top-10 overlap).

Usage: PYTHONPATH=build/python python3 bench/rerank_bench.py [--threads 2] [--reps 5]
       [--candidates 100,1000] [--tokens 256:512:...] [--precision int8] [--json out.json]
       (KILN_CPU_ISA=avx2: kiln's AVX2 path)
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import log  # noqa: E402

BATCH = 32
MAX_LEN = 256
SIGMA = 0.6
MEAN_PASSAGE = 70.0
PROFILE = {"batch": [4, 8, 16, 32], "sequence": [16, 32, 64, 128, 256],
           "tokens": [256, 512, 1024, 2048, 4096]}


def pair_lengths(n, rng):
    q = int(rng.integers(8, 17))
    mu = math.log(MEAN_PASSAGE) - SIGMA ** 2 / 2
    p = np.maximum(1, np.round(rng.lognormal(mu, SIGMA, n))).astype(np.int64)
    return q, np.minimum(MAX_LEN, 3 + q + p)


def make_pairs(n, seed):
    """input_ids, token_type_ids [n, 256] and lengths [n] (the mask is the prefix)."""
    rng = np.random.default_rng(seed)
    vocab = benchlib.config("cross").vocab
    q, lengths = pair_lengths(n, rng)
    ids = np.zeros((n, MAX_LEN), np.int64)
    types = np.zeros((n, MAX_LEN), np.int64)
    for i, L in enumerate(lengths):
        ids[i, :L] = rng.integers(1000, vocab, L)
        ids[i, 0], ids[i, q + 1], ids[i, L - 1] = 101, 102, 102
        types[i, q + 2:L] = 1
    return ids, types, lengths


def batches(ids, types, lengths, order):
    """Feeds per batch of 32 (in `order`), each padded to its own longest pair."""
    out = []
    for start in range(0, len(order), BATCH):
        rows = order[start:start + BATCH]
        s = int(lengths[rows].max())
        mask = (np.arange(s)[None, :] < lengths[rows][:, None]).astype(np.int64)
        out.append((rows, {"input_ids": np.ascontiguousarray(ids[rows, :s]),
                           "attention_mask": mask,
                           "token_type_ids": np.ascontiguousarray(types[rows, :s])}))
    return out


def run_all(run, feeds_list, n):
    scores = np.zeros(n, np.float32)
    t0 = time.perf_counter()
    for rows, feeds in feeds_list:
        scores[rows] = run(feeds).reshape(-1)
    return (time.perf_counter() - t0) * 1e3, scores


def measure_peak(threads):
    exe = os.path.join(benchlib.ROOT, "build", "bench", "kiln_kernels_bench")
    if not os.path.exists(exe):
        return None
    p = subprocess.run([exe, "--benchmark_filter=^BM_Linear/M:1024/K:768/N:768/gelu:0(/|$)",
                        "--benchmark_min_time=0.2", "--benchmark_repetitions=3",
                        "--benchmark_report_aggregates_only=true", "--benchmark_format=json"],
                       capture_output=True, text=True,
                       env=dict(os.environ, KILN_BENCH_THREADS=str(threads)))
    for b in json.loads(p.stdout or "{}").get("benchmarks", []):
        if b.get("aggregate_name") == "median" and "GFLOP/s" in b:
            return b["GFLOP/s"]
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--candidates", default="100,1000")
    ap.add_argument("--tokens", default=":".join(str(t) for t in PROFILE["tokens"]),
                    help="the packed token buckets, a:b:c")
    ap.add_argument("--json")
    ap.add_argument("--precision", default="fp32",
                    help="kiln's plan: fp32, bf16 or int8 (onnxruntime stays fp32; the "
                         "ranking of kiln's scores is compared with its)")
    a = ap.parse_args()
    import kiln  # noqa: E402  (PYTHONPATH=build/python)

    PROFILE["tokens"] = [int(t) for t in a.tokens.split(":")]
    onnx_path = benchlib.ensure_model("cross")
    work = tempfile.mkdtemp(prefix="kiln_rerank_")
    plan_path = os.path.join(work, "cross.kiln")
    log(f"compiling {os.path.basename(onnx_path)} with profile {PROFILE}")
    t0 = time.perf_counter()
    plan = kiln.compile(onnx_path, plan_path, profile=PROFILE, precision=a.precision,
                        accept="none")
    log(f"compiled in {time.perf_counter() - t0:.1f} s")
    session = plan.session(threads=a.threads)
    ort = benchlib.ort_session(onnx_path, a.threads)
    peak = measure_peak(a.threads)
    sides = {
        "kiln_packed": lambda f: session.run(f)["logits"],
        "kiln_padded": lambda f: session.run(f, pack=False)["logits"],
        "ort_padded": lambda f: ort.run(["logits"], f)[0],
    }
    result = {"threads": a.threads, "cpu": benchlib_cpu(),
              "kiln_cpu_isa": os.environ.get("KILN_CPU_ISA", "auto"), "profile": PROFILE,
              "precision": a.precision,
              "distribution": f"query U[8,16] tokens; passage lognormal mean {MEAN_PASSAGE} "
                              f"sigma {SIGMA}, >= 1; pair = 3 + query + passage, cap {MAX_LEN}",
              "linear_peak_gflops": peak, "rows": []}
    for n in [int(x) for x in a.candidates.split(",")]:
        ids, types, lengths = make_pairs(n, seed=n)
        given = batches(ids, types, lengths, np.arange(n))
        by_len = batches(ids, types, lengths, np.argsort(lengths, kind="stable"))
        real_tokens = int(lengths.sum())
        padded_tokens = sum(f["input_ids"].size for _, f in given)
        flops = sum(benchlib.encoder_flops("cross", 1, int(L)) for L in lengths)
        times = {k: [] for k in [*sides, "ort_sorted"]}
        scores = {}
        reps = a.reps if n <= 100 else max(1, a.reps // 2)
        for side, run in [*sides.items(), ("ort_sorted", sides["ort_padded"])]:  # warm-up
            run_all(run, (by_len if side == "ort_sorted" else given)[:1], n)
        for rep in range(reps):
            order = list(times) if rep % 2 == 0 else list(reversed(times))
            for side in order:
                run = sides["ort_padded"] if side == "ort_sorted" else sides[side]
                ms, sc = run_all(run, by_len if side == "ort_sorted" else given, n)
                times[side].append(ms)
                scores[side] = sc
        med = {k: float(np.median(v)) for k, v in times.items()}
        row = {"candidates": n, "batches": len(given), "real_tokens": real_tokens,
               "padded_tokens": padded_tokens, "mean_pair_tokens": float(lengths.mean()),
               "reps": reps, "median_ms": med, "times_ms": times,
               "candidates_per_s": {k: n / (v / 1e3) for k, v in med.items()},
               "packed_vs_padded_throughput": med["kiln_padded"] / med["kiln_packed"],
               "packed_vs_ort_padded": med["kiln_packed"] / med["ort_padded"],
               "packed_vs_ort_sorted": med["kiln_packed"] / med["ort_sorted"],
               "real_token_gflop": flops / 1e9,
               "floor_ms": flops / (peak * 1e9) * 1e3 if peak else None,
               "scores_max_abs_diff_vs_ort": float(np.max(np.abs(
                   scores["kiln_packed"] - scores["ort_padded"]))),
               "packed_vs_padded_max_abs_diff": float(np.max(np.abs(
                   scores["kiln_packed"] - scores["kiln_padded"]))),
               # kiln's ranking of the N against onnxruntime fp32's: Spearman's rho and how
               # many of fp32's top 10 kiln also ranks in its top 10.
               "rank_spearman_vs_ort": float(np.corrcoef(
                   np.argsort(np.argsort(scores["kiln_packed"])),
                   np.argsort(np.argsort(scores["ort_padded"])))[0, 1]),
               "top10_overlap_vs_ort": len(set(np.argsort(-scores["kiln_packed"])[:10])
                                           & set(np.argsort(-scores["ort_padded"])[:10]))}
        result["rows"].append(row)
        log(f"N={n}: real tokens {real_tokens} of {padded_tokens} padded; median ms " +
            ", ".join(f"{k} {v:.1f}" for k, v in med.items()) +
            f"; packed/padded throughput {row['packed_vs_padded_throughput']:.2f}x; "
            f"floor {row['floor_ms'] or float('nan'):.1f} ms; |packed - ORT| "
            f"{row['scores_max_abs_diff_vs_ort']:.2g}; rank rho {row['rank_spearman_vs_ort']:.4f}, "
            f"top-10 overlap {row['top10_overlap_vs_ort']}")
    print(json.dumps(result, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


def benchlib_cpu():
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
        name = next(l.split(":", 1)[1].strip() for l in info.splitlines() if "model name" in l)
        flags = next(l.split(":", 1)[1].split() for l in info.splitlines() if l.startswith("flags"))
        isa = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "sse"
        extra = [f for f in ("avx512_vnni", "avx512_bf16") if f in flags]
        return f"{name} ({isa}{', ' + ', '.join(extra) if extra else ''}), {os.cpu_count()} cores"
    except (OSError, StopIteration):
        return "unknown"


if __name__ == "__main__":
    main()
