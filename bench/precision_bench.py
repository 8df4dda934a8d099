#!/usr/bin/env python3
"""bf16 and int8 cpu plans against fp32 and against onnxruntime's own int8 (docs/precision.md,
docs/benchmarks.md "Precision"): latency and accuracy, the same inputs on every side.

Sides, per case (model, batch x sequence), all in this process, in 4 rounds of blocks of
runs per side (the order rotating per round), `--threads` threads each:
  kiln fp32 / bf16 / int8   plans compiled for exactly that shape (`--precision`, the
                            accuracy gate off: it is measured here instead)
  ORT fp32                  onnxruntime (benchlib.ort_session: all graph optimizations)
  ORT int8                  onnxruntime.quantization.quantize_dynamic of the same model
                            (QInt8 weights per output channel (per_channel=True), u8 dynamic
                            activations per tensor), run the same way
  kiln int8 (ORT file)      that quantized file compiled by kiln at int8 (the `dequantize`
                            pass, then kiln's own int8 GEMMs; docs/precision.md)
Latency: p50 of --runs runs (each block after --warmup untimed runs). Accuracy of every side against ORT fp32 on the
timed inputs: the worst cosine over the output's rows (the last axis).
Models: "minilm" is all-MiniLM-L6-v2 with its REAL weights (models/pretrained.py, the
sentence_embedding output: pooled and normalized in the graph), so its cosines mean what
retrieval sees; "base" is BERT-base with gen_bert's random weights (no real checkpoint ships
on PyPI), last_hidden_state. Token ids are random in [1000, vocab), masks full.
Floor: the int8 GEMM work at the measured int8 peak is not printed (no such peak exists for
ORT); the fp32 Linear floor of e2e_bench.py applies to the fp32 rows.

Usage: PYTHONPATH=build/python python3 bench/precision_bench.py [--threads 2] [--runs 30]
       [--cases minilm:1x128,minilm:32x128,base:8x128] [--json out.json]
       (KILN_CPU_ISA=avx2: kiln's AVX2 path; ORT picks its own)
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import benchlib  # noqa: E402
from benchlib import log  # noqa: E402

CASES = "minilm:1x128,minilm:32x128,base:8x128"
ROUNDS = 4


def cpu_line():
    flags = open("/proc/cpuinfo").read()
    model = next((l.split(":", 1)[1].strip() for l in flags.splitlines()
                  if l.startswith("model name")), platform.processor())
    have = [f for f in ("avx512f", "avx512_vnni", "avx512_bf16", "avx2") if f" {f}" in flags]
    return f"{model} ({', '.join(have)}), {os.cpu_count()} cores"


def model_file(name, work):
    """(onnx path, output name)."""
    if name == "minilm":
        import gen_bert
        import pretrained
        path = os.path.join(work, "minilm_real.onnx")
        if not os.path.exists(path):
            gen_bert.save(pretrained.build_model(), path)
        return path, pretrained.OUTPUT_NAME
    return benchlib.ensure_model(name), "last_hidden_state"


def quantize_ort(path, work):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    out = os.path.join(work, os.path.basename(path).replace(".onnx", ".ort_int8.onnx"))
    if not os.path.exists(out):
        quantize_dynamic(path, out, weight_type=QuantType.QInt8, per_channel=True)
    return out


def worst_cosine(got, want):
    g = got.reshape(-1, got.shape[-1]).astype(np.float64)
    w = want.reshape(-1, want.shape[-1]).astype(np.float64)
    cos = (g * w).sum(1) / (np.linalg.norm(g, axis=1) * np.linalg.norm(w, axis=1))
    return float(cos.min())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--cases", default=CASES)
    ap.add_argument("--json")
    a = ap.parse_args()
    import kiln  # noqa: E402  (PYTHONPATH=build/python)

    work = tempfile.mkdtemp(prefix="kiln_precision_")
    rows = []
    for case in a.cases.split(","):
        name, shape = case.split(":")
        batch, seq = map(int, shape.split("x"))
        path, out_name = model_file(name, work)
        feeds = benchlib.make_inputs("minilm" if name == "minilm" else name, batch, seq)
        sides = {}
        for precision in ("fp32", "bf16", "int8"):
            plan = kiln.compile(path, symbols={"batch": batch, "sequence": seq},
                                precision=precision, accept="none")
            session = plan.session(threads=a.threads)
            sides[f"kiln {precision}"] = (lambda s: lambda: s.run(feeds)[out_name])(session)
        ort_file = quantize_ort(path, work)
        plan = kiln.compile(ort_file, symbols={"batch": batch, "sequence": seq},
                            precision="int8", accept="none")
        session = plan.session(threads=a.threads)
        sides["kiln int8 (ORT file)"] = (lambda s: lambda: s.run(feeds)[out_name])(session)
        ort32 = benchlib.ort_session(path, a.threads)
        ort8 = benchlib.ort_session(ort_file, a.threads)
        sides["ORT fp32"] = lambda: ort32.run([out_name], feeds)[0]
        sides["ORT int8"] = lambda: ort8.run([out_name], feeds)[0]
        names = list(sides)
        times = {n: [] for n in names}
        outputs = {}
        # Blocks of runs per side, the order rotating per round: run-by-run alternation
        # measured each side with the other's worker threads still spinning (ORT's pool
        # and kiln's OpenMP team both spin after a run), 1.3-3x slower than alone.
        for r in range(ROUNDS):
            for n in names[r % len(names):] + names[:r % len(names)]:
                for _ in range(a.warmup):
                    outputs[n] = sides[n]()
                for _ in range((a.runs + ROUNDS - 1) // ROUNDS):
                    t0 = time.perf_counter_ns()
                    sides[n]()
                    times[n].append((time.perf_counter_ns() - t0) / 1e6)
        ref = outputs["ORT fp32"]
        row = {"model": name, "batch": batch, "sequence": seq, "threads": a.threads}
        for n in names:
            row[n] = {"p50_ms": benchlib.stats(times[n], batch)["p50_ms"],
                      "cosine_vs_ort_fp32": worst_cosine(outputs[n], ref)}
        row["kiln int8 / ORT int8"] = row["kiln int8"]["p50_ms"] / row["ORT int8"]["p50_ms"]
        row["kiln int8 (ORT file) / ORT int8"] = (row["kiln int8 (ORT file)"]["p50_ms"]
                                                  / row["ORT int8"]["p50_ms"])
        row["kiln (ORT file) vs ORT int8 cosine"] = worst_cosine(
            outputs["kiln int8 (ORT file)"], outputs["ORT int8"])
        row["kiln bf16 / kiln fp32"] = row["kiln bf16"]["p50_ms"] / row["kiln fp32"]["p50_ms"]
        row["kiln int8 / kiln fp32"] = row["kiln int8"]["p50_ms"] / row["kiln fp32"]["p50_ms"]
        log(f"{case}: " + ", ".join(f"{n} {row[n]['p50_ms']:.2f} ms (cos {row[n]['cosine_vs_ort_fp32']:.5f})"
                                    for n in names))
        rows.append(row)
    result = {"cpu": cpu_line(), "kiln_cpu_isa": os.environ.get("KILN_CPU_ISA", "auto"),
              "onnxruntime": __import__("onnxruntime").__version__, "runs": a.runs,
              "rows": rows}
    print("| model | batch x seq | kiln fp32 | kiln bf16 | kiln int8 | ORT fp32 | ORT int8 | "
          "kiln int8 / ORT int8 | bf16 / fp32 | cosine: kiln bf16, kiln int8, ORT int8 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    tail = []
    for r in rows:
        c = lambda n: f"{r[n]['cosine_vs_ort_fp32']:.4f}"  # noqa: E731
        print(f"| {r['model']} | {r['batch']}x{r['sequence']} | "
              + " | ".join(f"{r[n]['p50_ms']:.2f}" for n in ("kiln fp32", "kiln bf16", "kiln int8",
                                                             "ORT fp32", "ORT int8"))
              + f" | {r['kiln int8 / ORT int8']:.2f} | {r['kiln bf16 / kiln fp32']:.2f} | "
              f"{c('kiln bf16')}, {c('kiln int8')}, {c('ORT int8')} |")
        tail.append(f"| {r['model']} | {r['batch']}x{r['sequence']} | "
                    f"{r['kiln int8 (ORT file)']['p50_ms']:.2f} | {r['ORT int8']['p50_ms']:.2f} | "
                    f"{r['kiln int8 (ORT file) / ORT int8']:.2f} | "
                    f"{r['kiln (ORT file) vs ORT int8 cosine']:.4f} | {c('kiln int8 (ORT file)')} |")
    print("\nORT's quantize_dynamic file compiled by kiln (--precision int8) against onnxruntime "
          "running it:")
    print("| model | batch x seq | kiln int8 (ORT file) | ORT int8 | ratio | cosine to ORT int8 | "
          "cosine to ORT fp32 |")
    print("|---|---|---:|---:|---:|---:|---:|")
    print("\n".join(tail))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
