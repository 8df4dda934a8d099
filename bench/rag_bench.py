#!/usr/bin/env python3
"""RAG scenario of the end-to-end benchmark: kiln (bench/rag_bench.cc) vs onnxruntime.

The pipeline, identical on both sides: embed one query with the MiniLM-L6 bi-encoder
(batch 1, sequence 32), then score 100 candidate passages with the MiniLM-L6 cross-encoder
(sequence 256) in batches of 32: 32 + 32 + 32 + 4. Latency = the whole pipeline; p50
over repetitions. The two sides read the same token arrays (.npy files written here).
kiln plans: the bi-encoder compiled for batch=1,sequence=32; the cross-encoder with
--profile batch=4:32,sequence=256, so the last batch of 4 runs in its exact bucket (no
padding; kiln_rag_bench reports the bucket of every call and whether it padded).
onnxruntime: one session per model (benchlib.ort_session), sess.run per call on row
slices of the same arrays. Repetitions are interleaved: kiln, ORT, ORT, kiln (halves).
The scores of both sides are compared (max abs difference recorded), so a broken plan
cannot produce a fast number unnoticed.
--precision bf16|int8 compiles kiln's two plans at that precision (the gate off); onnxruntime
stays fp32, and the ranking of kiln's scores is compared with its (Spearman, top-10 overlap).
Limits: mask of ones (no padded candidates), no tokenization, no pooling: model calls only;
random weights (the rankings compare two computations of one random model).
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import log  # noqa: E402

QUERY_SEQ, DOC_SEQ, CANDIDATES, BATCH = 32, 256, 100, 32


def write_inputs(directory, seed=0):
    """query_<input>.npy [1, 32] and docs_<input>.npy [100, 256] (benchlib input policy)."""
    q = benchlib.make_inputs("minilm", 1, QUERY_SEQ, seed)
    d = benchlib.make_inputs("cross", CANDIDATES, DOC_SEQ, seed)
    benchlib.write_inputs(q, directory, "query_")
    benchlib.write_inputs(d, directory, "docs_")
    return q, d


def ort_pipeline(embed, rerank, q, d, reps, warmup):
    """Per-repetition ms (total, embed, re-rank), the scores and the query output of the
    last repetition."""
    times, embed_ms, rerank_ms = [], [], []
    for rep in range(warmup + reps):
        t0 = time.perf_counter_ns()
        qout = embed.run(None, q)[0]
        te = time.perf_counter_ns()
        scores = []
        for row in range(0, CANDIDATES, BATCH):
            n = min(BATCH, CANDIDATES - row)
            scores.append(rerank.run(None, {k: v[row:row + n] for k, v in d.items()})[0])
        t1 = time.perf_counter_ns()
        if rep >= warmup:
            times.append((t1 - t0) / 1e6)
            embed_ms.append((te - t0) / 1e6)
            rerank_ms.append((t1 - te) / 1e6)
    return (times, embed_ms, rerank_ms), np.concatenate(scores).reshape(-1), qout


def spearman(a, b):
    """Spearman's rank correlation (no ties in float scores of distinct pairs)."""
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def run_scenario(kiln, rag_bench, work, threads, reps, warmup, precision="fp32"):
    """Compiles the two plans, runs both pipelines interleaved, returns the result dict."""
    os.makedirs(work, exist_ok=True)
    embed_onnx, rerank_onnx = benchlib.ensure_model("minilm"), benchlib.ensure_model("cross")
    embed_plan = os.path.join(work, "rag_embed.kiln")
    rerank_plan = os.path.join(work, "rag_rerank.kiln")
    log(f"RAG: compiling the bi-encoder (batch=1,sequence=32) and the cross-encoder "
        f"(--profile batch=4:32,sequence=256) at {precision}")
    prec = ["--precision", precision, "--accept", "none"] if precision != "fp32" else []
    benchlib.run_timed(kiln + ["compile", embed_onnx, "-o", embed_plan, "--shape",
                               f"batch=1,sequence={QUERY_SEQ}", "--quiet", *prec])
    benchlib.run_timed(kiln + ["compile", rerank_onnx, "-o", rerank_plan, "--profile",
                               f"batch=4:{BATCH},sequence={DOC_SEQ}", "--quiet", *prec])
    q, d = write_inputs(work)
    embed = benchlib.ort_session(embed_onnx, threads)
    rerank = benchlib.ort_session(rerank_onnx, threads)
    half = [reps // 2, reps - reps // 2]
    k_runs, o_times, o_embed, o_rerank = [], [], [], []
    o_scores = o_q = None
    for i, order in enumerate((["kiln", "ort"], ["ort", "kiln"])):
        if half[i] == 0:
            continue
        for side in order:
            if side == "kiln":
                cmd = rag_bench + ["--embed", embed_plan, "--rerank", rerank_plan, "--inputs",
                                   work, "--reps", str(half[i]), "--warmup", str(warmup),
                                   "--threads", str(threads), "--batch", str(BATCH)]
                k_runs.append(benchlib.run_json(cmd))
            else:
                (t, te, tr), o_scores, o_q = ort_pipeline(embed, rerank, q, d, half[i], warmup)
                o_times += t
                o_embed += te
                o_rerank += tr
        log(f"RAG round {i + 1}: kiln p50 {k_runs[-1]['p50_ms']:.1f} ms, ORT p50 "
            f"{benchlib.stats(o_times, 1)['p50_ms']:.1f} ms")
    k_times = [t for r in k_runs for t in r["times_ms"]]
    k_embed = [t for r in k_runs for t in r["embed_times_ms"]]
    k_rerank = [t for r in k_runs for t in r["rerank_times_ms"]]
    p50 = lambda v: benchlib.stats(v, 1)["p50_ms"]  # noqa: E731
    k_scores = np.array(k_runs[-1]["scores"], np.float64)
    q_head = np.array(k_runs[-1]["query_output_head"], np.float64)
    ks, os_ = benchlib.stats(k_times, CANDIDATES), benchlib.stats(o_times, CANDIDATES)
    res = {
        "pipeline": f"embed 1x{QUERY_SEQ} (MiniLM-L6) + re-rank {CANDIDATES}x{DOC_SEQ} "
                    f"(MiniLM-L6 cross-encoder) in batches of {BATCH}",
        "batches": k_runs[-1]["batches"], "kiln_buckets": k_runs[-1]["buckets"],
        "kiln_padded": k_runs[-1]["padded"],
        "last_batch": "exact bucket (cross-encoder plan --profile batch=4:32,sequence=256)",
        "threads": threads, "reps": len(k_times), "warmup": warmup,
        "kiln": {**ks, "load_ms": k_runs[-1]["load_ms"], "embed_p50_ms": p50(k_embed),
                 "rerank_p50_ms": p50(k_rerank), "peak_rss_mb": k_runs[-1].get("peak_rss_mb")},
        "ort": {**os_, "embed_p50_ms": p50(o_embed), "rerank_p50_ms": p50(o_rerank)},
        "ratio_p50": ks["p50_ms"] / os_["p50_ms"],
        "precision": precision,
        "scores_max_abs_diff": float(np.max(np.abs(k_scores - o_scores.astype(np.float64))))
        if k_scores.shape == o_scores.shape else None,
        # kiln's scores ranked against onnxruntime fp32's: Spearman's rho over the 100, and
        # how many of fp32's top 10 are in kiln's top 10.
        "rank_spearman_vs_ort_fp32": spearman(k_scores, o_scores)
        if k_scores.shape == o_scores.shape else None,
        "top10_overlap_vs_ort_fp32": int(len(set(np.argsort(-k_scores)[:10])
                                             & set(np.argsort(-o_scores.reshape(-1))[:10])))
        if k_scores.shape == o_scores.shape else None,
        "query_head_max_abs_diff": float(np.max(np.abs(
            q_head - o_q.reshape(-1)[:q_head.size].astype(np.float64)))) if q_head.size else None,
    }
    log(f"RAG: kiln p50 {ks['p50_ms']:.1f} ms, ORT p50 {os_['p50_ms']:.1f} ms, ratio "
        f"{res['ratio_p50']:.2f}; scores max |diff| {res['scores_max_abs_diff']}")
    return res


def main():
    import json
    import shlex
    root = benchlib.ROOT
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build-dir", default=os.path.join(root, "build-bench"))
    p.add_argument("--kiln", default=None, help="kiln CLI command")
    p.add_argument("--rag-bench", default=None, help="kiln_rag_bench command")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--work-dir", default=None)
    p.add_argument("--precision", default="fp32", help="kiln's plans: fp32, bf16 or int8 "
                   "(onnxruntime stays fp32, the reference the rankings are compared with)")
    a = p.parse_args()
    import tempfile
    res = run_scenario(
        kiln=shlex.split(a.kiln) if a.kiln else [os.path.join(a.build_dir, "kiln")],
        rag_bench=shlex.split(a.rag_bench) if a.rag_bench else [
            os.path.join(a.build_dir, "bench", "kiln_rag_bench")],
        work=a.work_dir or tempfile.mkdtemp(prefix="kiln-rag-"), threads=a.threads,
        reps=a.reps, warmup=a.warmup, precision=a.precision)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
