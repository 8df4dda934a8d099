#!/usr/bin/env python3
"""What the Python package costs per call: kiln.Session.run against the same plan timed by
`kiln bench` (the C++ loop, no Python) and against onnxruntime's Python session, on the same
inputs, in the same run.

For each configuration: p50 of `kiln bench PLAN --json` (C++), p50 of Session.run from
Python (timed around the call, outputs allocated per call as users get them), p50 of
onnxruntime InferenceSession.run (ORT_ENABLE_ALL, intra-op = threads, sequential), the
Python overhead (Python p50 - C++ p50) and the ratio kiln-from-Python / onnxruntime.
Models: gen_bert's tiny and minilm sizes (random weights; the timing does not depend on
them), opset 14, head none. Prints a Markdown table (docs/benchmarks.md) and, with --json,
one JSON object.

Usage: PYTHONPATH=build/python python3 bench/python_bench.py [--threads 1] [--runs 200]
Limits: wall-clock medians on a shared machine; the load average is printed beside them.
"""

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "models"))

import gen_bert  # noqa: E402
import kiln  # noqa: E402

CONFIGS = [("tiny", 1, 8), ("minilm", 1, 32), ("minilm", 8, 128)]


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def isa():
    flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    if "avx512f" in flags:
        extra = [f for f in ("avx512_vnni", "avx512_bf16") if f in flags]
        return "AVX-512" + (f" ({', '.join(extra)})" if extra else "")
    return "AVX2" if "avx2" in flags else "SSE"


def p50(times):
    return float(np.median(times)) * 1e3


def feeds(batch, seq, vocab):
    rng = np.random.default_rng(0)
    ids = rng.integers(1, vocab, size=(batch, seq), dtype=np.int64)
    return {"input_ids": ids, "attention_mask": np.ones_like(ids),
            "token_type_ids": np.zeros_like(ids)}


def time_calls(fn, warmup, runs):
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--kiln-bin", default=str(ROOT / "build" / "kiln"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import onnxruntime as ort

    rows = []
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        for size, batch, seq in CONFIGS:
            cfg = gen_bert.SIZES[size]
            model = pathlib.Path(tmp) / f"{size}.onnx"
            if not model.exists():
                gen_bert.save(gen_bert.build_model(size, "opset14", "none"), str(model))
            plan_path = pathlib.Path(tmp) / f"{size}_{batch}x{seq}.kiln"
            kiln.compile(model, plan_path, symbols={"batch": batch, "sequence": seq})
            inputs = feeds(batch, seq, cfg.vocab)
            bench = subprocess.run(
                [args.kiln_bin, "bench", str(plan_path), "--json", "--threads",
                 str(args.threads), "--runs", str(args.runs), "--warmup", str(args.warmup),
                 "--vocab", str(cfg.vocab)], capture_output=True, text=True, check=True)
            cpp = json.loads(bench.stdout)["p50_ms"]
            session = kiln.Plan.load(plan_path).session(threads=args.threads)
            py = p50(time_calls(lambda: session.run(inputs), args.warmup, args.runs))
            options = ort.SessionOptions()
            options.intra_op_num_threads = args.threads
            options.inter_op_num_threads = 1
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            sess = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
            ort_p50 = p50(time_calls(lambda: sess.run(None, inputs), args.warmup, args.runs))
            rows.append({"model": size, "batch": batch, "sequence": seq, "cpp_p50_ms": cpp,
                         "python_p50_ms": py, "overhead_us": (py - cpp) * 1e3,
                         "ort_python_p50_ms": ort_p50, "ratio_vs_ort": py / ort_p50})
            print(f"{size} {batch}x{seq}: C++ {cpp:.3f} ms, Python {py:.3f} ms, "
                  f"ORT {ort_p50:.3f} ms", file=sys.stderr)
    result = {"cpu": cpu_name(), "isa": isa(), "threads": args.threads, "runs": args.runs,
              "load_before": load, "load_after": os.getloadavg()[0], "rows": rows}
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"{result['cpu']}, {result['isa']}, {args.threads} thread(s), p50 of {args.runs} "
          f"runs, load average {load:.2f} -> {result['load_after']:.2f}\n")
    print("| model | batch x seq | kiln bench (C++) p50 ms | kiln Session.run p50 ms | "
          "Python overhead µs | onnxruntime (Python) p50 ms | kiln / ORT |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['batch']} x {r['sequence']} | {r['cpp_p50_ms']:.3f} | "
              f"{r['python_p50_ms']:.3f} | {r['overhead_us']:.0f} | "
              f"{r['ort_python_p50_ms']:.3f} | {r['ratio_vs_ort']:.2f} |")


if __name__ == "__main__":
    main()
