#!/usr/bin/env python3
"""A stand-in for the kiln CLI and kiln_rag_bench, for testing the benchmark harness only.

What: implements the subset of `kiln compile / bench --json / plan-info --json / --version`
and of kiln_rag_bench's command line that bench/e2e_bench.py and bench/rag_bench.py call,
with onnxruntime (ORT_ENABLE_BASIC) doing the work. A "plan" is a small JSON file naming
the model. Why: the harness (interleaving, budgets, JSON, report, plots) can be exercised
without a kiln build:
    python3 bench/e2e_bench.py --quick --kiln 'python3 bench/fake_kiln.py' \
        --rag-bench 'python3 bench/fake_kiln.py rag' -o /tmp/fake.json
Limits: its numbers are onnxruntime's, not kiln's; `kiln --version` says "fake", and
bench/report.py marks such results FAKE. Never use it for published numbers.
"""

import json
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def session(model, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def opts(argv, flags):
    """--key value pairs (repeatable ones collected in lists) and positionals."""
    out, pos, i = {}, [], 0
    while i < len(argv):
        if argv[i] in flags:
            out.setdefault(argv[i], []).append(argv[i + 1])
            i += 2
        elif argv[i].startswith("-"):
            out.setdefault(argv[i], []).append(True)
            i += 1
        else:
            pos.append(argv[i])
            i += 1
    return out, pos


def quantile(v, q):
    s = sorted(v)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def main(argv):
    if argv[:1] == ["--version"]:
        print("kiln fake (harness self-test, onnxruntime inside)")
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd == "compile":
        o, pos = opts(rest, {"-o", "--profile", "--shape"})
        time.sleep(0.05)
        with open(o["-o"][0], "w") as f:
            json.dump({"fake": True, "model": os.path.abspath(pos[0]),
                       "profile": o.get("--profile"), "shape": o.get("--shape")}, f)
        return 0
    if cmd == "plan-info":
        o, pos = opts(rest, set())
        with open(pos[0]) as f:
            plan = json.load(f)
        print(json.dumps({"fake": True, "buckets": [
            {"bindings": {"batch": 1, "sequence": 32}, "arena_bytes": 400,
             "no_reuse_bytes": 1000, "peak_live_bytes": 380}]}))
        return 0
    if cmd == "bench":
        o, pos = opts(rest, {"--input", "--warmup", "--runs", "--threads", "--shape"})
        with open(pos[0]) as f:
            plan = json.load(f)
        threads = int(o["--threads"][0])
        t0 = time.perf_counter()
        sess = session(plan["model"], threads)
        load_ms = (time.perf_counter() - t0) * 1e3
        feeds = {kv.split("=", 1)[0]: np.load(kv.split("=", 1)[1]) for kv in o["--input"]}
        t0 = time.perf_counter()
        sess.run(None, feeds)
        first = (time.perf_counter() - t0) * 1e3
        for _ in range(int(o["--warmup"][0])):
            sess.run(None, feeds)
        ts = []
        for _ in range(int(o["--runs"][0])):
            t0 = time.perf_counter()
            sess.run(None, feeds)
            ts.append((time.perf_counter() - t0) * 1e3)
        batch = next(iter(feeds.values())).shape[0]
        print(json.dumps({"p50_ms": quantile(ts, .5), "p90_ms": quantile(ts, .9),
                          "min_ms": min(ts), "mean_ms": sum(ts) / len(ts),
                          "throughput_per_s": batch / (sum(ts) / len(ts) / 1e3),
                          "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                          "load_ms": load_ms, "first_run_ms": first, "runs": len(ts),
                          "threads": threads, "bucket": 0}))
        return 0
    if cmd == "rag":
        o, pos = opts(rest, {"--embed", "--rerank", "--inputs", "--reps", "--warmup",
                             "--threads", "--batch"})
        threads, bs = int(o["--threads"][0]), int(o["--batch"][0])
        d = o["--inputs"][0]
        names = ("input_ids", "attention_mask", "token_type_ids")
        q = {n: np.load(f"{d}/query_{n}.npy") for n in names}
        docs = {n: np.load(f"{d}/docs_{n}.npy") for n in names}
        t0 = time.perf_counter()
        plans = [json.load(open(o[k][0]))["model"] for k in ("--embed", "--rerank")]
        e, r = session(plans[0], threads), session(plans[1], threads)
        load_ms = (time.perf_counter() - t0) * 1e3
        ts, es, rs = [], [], []
        warm = int(o["--warmup"][0])
        n_cand = docs["input_ids"].shape[0]
        for rep in range(warm + int(o["--reps"][0])):
            t0 = time.perf_counter()
            qo = e.run(None, q)[0]
            t1 = time.perf_counter()
            scores = [r.run(None, {k: v[i:i + bs] for k, v in docs.items()})[0]
                      for i in range(0, n_cand, bs)]
            t2 = time.perf_counter()
            if rep >= warm:
                ts.append((t2 - t0) * 1e3), es.append((t1 - t0) * 1e3), rs.append((t2 - t1) * 1e3)
        batches = [min(bs, n_cand - i) for i in range(0, n_cand, bs)]
        print(json.dumps({"kiln_version": "fake", "reps": len(ts), "batches": batches,
                          "load_ms": load_ms, "p50_ms": quantile(ts, .5),
                          "p90_ms": quantile(ts, .9), "min_ms": min(ts),
                          "embed_p50_ms": quantile(es, .5), "rerank_p50_ms": quantile(rs, .5),
                          "times_ms": ts, "embed_times_ms": es, "rerank_times_ms": rs, "buckets": [0] * (1 + len(batches)),
                          "padded": [False] * (1 + len(batches)),
                          "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                          "query_output_sum": float(qo.sum()),
                          "query_output_head": qo.reshape(-1)[:16].tolist(),
                          "scores": np.concatenate(scores).reshape(-1).tolist()}))
        return 0
    print(f"fake_kiln: unknown command {cmd}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
