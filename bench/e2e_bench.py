#!/usr/bin/env python3
"""End-to-end benchmark: kiln plans vs onnxruntime on generated BERT-family encoders.

What it measures (bench/README.md has the full description):
- the latency matrix batch x sequence per model and thread count: `kiln bench PLAN --json`
  against an onnxruntime session (ORT_ENABLE_ALL, intra-op = T, inter-op 1, sequential),
  interleaved per configuration (the side that goes first alternates) with the same
  inputs, warmup and run counts; p50 each, ratio kiln/ORT (< 1: kiln faster), throughput,
  and the roofline floor (exact matmul + attention FLOPs / measured fp32 Linear peak (kiln_kernels_bench BM_Linear));
- compile time (`kiln compile` wall, the matrix plan and a one-shape plan) vs ORT session
  creation; cold start (plan load + first run vs session creation + first run); peak RSS;
  arena vs no-reuse bytes from `kiln plan-info --json`;
- the RAG scenario (bench/rag_bench.py).
Writes one results JSON (bench/results/); bench/report.py and bench/plot.py turn it into
the docs section and PNGs. Progress lines go to stderr.
Limits: timings are only meaningful on an otherwise idle machine (the load average is
recorded before and after). Each configuration has a time budget: heavy shapes run fewer
times than --runs (never fewer than --min-runs); the JSON and the report say where.
"""

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import ROOT, log  # noqa: E402
import rag_bench  # noqa: E402

FULL_BATCHES = [1, 8, 32]
FULL_SEQS = [32, 128, 256]
QUICK_BATCHES = [1, 8]
QUICK_SEQS = [32, 128]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="tiny matrix for smoke tests: every model at batch 1/8 x sequence "
                        "32/128, 3 warmup / 5 runs, RAG with 3 repetitions")
    p.add_argument("--models", default=None,
                   help=f"comma-separated subset of {','.join(benchlib.MODELS)} (default all; "
                        "--quick too)")
    p.add_argument("--threads", default=None,
                   help="comma-separated thread counts (default: nproc)")
    p.add_argument("--batches", default=None, help="comma-separated (default 1,8,32)")
    p.add_argument("--seqs", default=None, help="comma-separated (default 32,128,256)")
    p.add_argument("--warmup", type=int, default=None, help="warmup runs per side (default 5)")
    p.add_argument("--runs", type=int, default=None, help="timed runs per side (default 30)")
    p.add_argument("--min-runs", type=int, default=5,
                   help="the per-configuration budget never lowers runs below this (default 5)")
    p.add_argument("--budget-s", type=float, default=3.0,
                   help="seconds of timed runs per configuration and side; heavier shapes run "
                        "fewer times (default 3.0)")
    p.add_argument("--rag-reps", type=int, default=None, help="RAG repetitions per side (10)")
    p.add_argument("--no-rag", action="store_true", help="skip the RAG scenario")
    p.add_argument("--kiln", default=None,
                   help="kiln CLI command (default BUILD_DIR/kiln); may be a command line, e.g. "
                        "'python3 bench/fake_kiln.py' for a harness self-test")
    p.add_argument("--rag-bench", default=None,
                   help="kiln_rag_bench command (default BUILD_DIR/bench/kiln_rag_bench)")
    p.add_argument("--kernels-bench", default=None,
                   help="kiln_kernels_bench binary for the matmul peak (default "
                        "BUILD_DIR/bench/kiln_kernels_bench; numpy if missing)")
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build-bench"),
                   help="the CMake build with kiln and bench/ (default build-bench, as "
                        "scripts/bench.sh builds it)")
    p.add_argument("--work-dir", default=None,
                   help="keep plans and inputs here (default: a temp dir, removed at the end)")
    p.add_argument("-o", "--output", default=None,
                   help="results JSON (default bench/results/e2e-<date>[-quick].json)")
    p.add_argument("--cpu-isa", choices=["native", "avx2"], default="native",
                   help=benchlib.CPU_ISA_HELP)
    a = p.parse_args(argv)
    a.models = (a.models or ",".join(benchlib.MODELS)).split(",")
    for m in a.models:
        if m not in benchlib.MODELS:
            p.error(f"--models: unknown model {m!r} (known: {', '.join(benchlib.MODELS)})")
    a.threads = [int(t) for t in (a.threads or str(os.cpu_count() or 1)).split(",")]
    a.batches = [int(x) for x in a.batches.split(",")] if a.batches else (
        QUICK_BATCHES if a.quick else FULL_BATCHES)
    a.seqs = [int(x) for x in a.seqs.split(",")] if a.seqs else (
        QUICK_SEQS if a.quick else FULL_SEQS)
    a.warmup = a.warmup if a.warmup is not None else (3 if a.quick else 5)
    a.runs = a.runs if a.runs is not None else (5 if a.quick else 30)
    a.rag_reps = a.rag_reps if a.rag_reps is not None else (3 if a.quick else 10)
    a.min_runs = min(a.min_runs, a.runs)
    if min(a.threads + a.batches + a.seqs) < 1 or a.runs < 1 or a.warmup < 0:
        p.error("threads, batches, sequences and runs must be >= 1, warmup >= 0")
    a.build_dir = os.path.abspath(a.build_dir)
    # Cold start, RSS and the one-shape plan: batch 1 (or the smallest), sequence 128 (or the
    # matrix sequence nearest to it), so the matrix plan has that bucket.
    a.cold_shape = (min(a.batches), min(a.seqs, key=lambda s: (abs(s - 128), s)))
    a.kiln = shlex.split(a.kiln) if a.kiln else [os.path.join(a.build_dir, "kiln")]
    a.rag_bench = shlex.split(a.rag_bench) if a.rag_bench else [
        os.path.join(a.build_dir, "bench", "kiln_rag_bench")]
    a.kernels_bench = a.kernels_bench or os.path.join(a.build_dir, "bench", "kiln_kernels_bench")
    return a


def profile_spec(batches, seqs):
    """`kiln compile --profile` listing exactly the matrix points (a:b:c form)."""
    return (f"batch={':'.join(map(str, sorted(batches)))},"
            f"sequence={':'.join(map(str, sorted(seqs)))}")


def machine_facts():
    cpu, flags = "unknown", []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and cpu == "unknown":
                    cpu = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = line.split(":", 1)[1].split()
    except OSError:
        pass
    mem_gb = None
    try:
        with open("/proc/meminfo") as f:
            mem_gb = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    isa = [x for x in ("avx512f", "avx512_bf16", "avx512_vnni", "avx2", "fma") if x in flags]
    return {"cpu": cpu, "nproc": os.cpu_count(), "isa_flags": isa, "mem_gb": mem_gb,
            "kernel": platform.release(), "python": platform.python_version()}


def versions(kiln_cmd):
    import onnxruntime
    v = {"onnxruntime": onnxruntime.__version__, "numpy": np.__version__}
    try:
        p = subprocess.run(kiln_cmd + ["--version"], capture_output=True, text=True, timeout=30)
        v["kiln"] = (p.stdout.strip() or p.stderr.strip()).splitlines()[0] if (
            p.stdout.strip() or p.stderr.strip()) else "unknown"
    except (OSError, subprocess.SubprocessError) as e:
        v["kiln"] = f"unavailable ({e})"
    try:
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30).stdout.strip()
        v["kiln_git"] = rev + ("+dirty" if dirty else "") if rev else "unknown"
    except (OSError, subprocess.SubprocessError):
        v["kiln_git"] = "unknown"
    return v


def measure_peak(a, threads):
    """Matmul GFLOP/s at `threads`: kiln_kernels_bench BM_Linear M=1024 K=768 N=768 (the
    PackedLinear kiln's linear steps call, its backend chosen as for them; KILN_CPU_ISA and
    KILN_GEMM apply), median of 3; numpy matmul if the bench is missing."""
    if os.path.exists(a.kernels_bench):
        cmd = [a.kernels_bench, "--benchmark_filter=^BM_Linear/M:1024/K:768/N:768/gelu:0(/|$)",
               "--benchmark_min_time=0.2", "--benchmark_repetitions=3",
               "--benchmark_report_aggregates_only=true", "--benchmark_format=json"]
        env = dict(os.environ, KILN_BENCH_THREADS=str(threads))
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        try:
            found = json.loads(p.stdout)["benchmarks"] if p.returncode == 0 else []
        except (json.JSONDecodeError, KeyError):
            found = []
        if found:
            for b in found:
                if b.get("aggregate_name") == "median" and "GFLOP/s" in b:
                    return {"gflops": b["GFLOP/s"], "source":
                            "kiln_kernels_bench BM_Linear/M:1024/K:768/N:768 (fp32, the backend kiln picks), "
                            "median of 3", "label": b.get("label", "")}
        log(f"kernel bench failed ({p.returncode}); falling back to numpy")
    n = 1024
    x = np.random.default_rng(0).random((n, 768), np.float32)
    w = np.random.default_rng(1).random((768, 768), np.float32)
    for _ in range(3):
        x @ w
    ts = []
    for _ in range(20):
        t0 = time.perf_counter()
        x @ w
        ts.append(time.perf_counter() - t0)
    return {"gflops": 2 * n * 768 * 768 / sorted(ts)[len(ts) // 2] / 1e9,
            "source": "numpy float32 matmul 1024x768x768 (its BLAS's own thread count, "
                      "not --threads), median of 20"}


def kiln_bench(a, plan, inputs, warmup, runs, threads):
    cmd = a.kiln + ["bench", plan, "--warmup", str(warmup), "--runs", str(runs), "--threads",
                    str(threads), "--json"]
    for k, v in inputs.items():
        cmd += ["--input", f"{k}={v}"]
    return benchlib.run_json(cmd)


def plan_buckets(info):
    """Every dict in `info` (plan-info/inspect JSON) with arena_bytes and no_reuse_bytes."""
    found = []
    if isinstance(info, dict):
        if "arena_bytes" in info and "no_reuse_bytes" in info:
            found.append(info)
        for v in info.values():
            found += plan_buckets(v)
    elif isinstance(info, list):
        for v in info:
            found += plan_buckets(v)
    return found


def compile_model(a, name, work):
    """Compiles the matrix plan and a one-shape plan (a.cold_shape); returns wall times,
    plan paths and the arena figures of the matrix plan."""
    src = benchlib.ensure_model(name)
    plan = os.path.join(work, f"{name}.kiln")
    single = os.path.join(work, f"{name}_one_shape.kiln")
    one = "batch={},sequence={}".format(*a.cold_shape)
    prof = profile_spec(a.batches, a.seqs)
    log(f"{name}: kiln compile --profile {prof}")
    ms = benchlib.run_timed(a.kiln + ["compile", src, "-o", plan, "--profile", prof, "--quiet"])
    log(f"{name}: kiln compile --shape {one}")
    ms1 = benchlib.run_timed(a.kiln + ["compile", src, "-o", single, "--shape", one, "--quiet"])
    rec = {"model": name, "label": benchlib.MODELS[name][2], "onnx_mb":
           os.path.getsize(src) / 2**20, "profile": prof, "compile_ms": ms,
           "compile_single_ms": ms1, "single_shape": one, "plan_mb": os.path.getsize(plan) / 2**20,
           "plan": plan, "plan_single": single}
    try:
        info = benchlib.run_json(a.kiln + ["plan-info", plan, "--json"])
        buckets = plan_buckets(info)
        rec["arena"] = [{"bindings": b.get("bindings"), "arena_bytes": b["arena_bytes"],
                         "no_reuse_bytes": b["no_reuse_bytes"],
                         "peak_live_bytes": b.get("peak_live_bytes")} for b in buckets]
        ratios = [b["arena_bytes"] / b["no_reuse_bytes"] for b in buckets if b["no_reuse_bytes"]]
        rec["arena_ratio_max"] = max(ratios) if ratios else None
    except RuntimeError as e:
        log(f"{name}: plan-info failed: {e}")
        rec["arena_error"] = str(e)
    return rec


def budgeted_counts(a, est_ms):
    """Warmup and runs for a configuration whose single run takes about est_ms."""
    est_s = max(est_ms, 1e-3) / 1000.0
    runs = max(a.min_runs, min(a.runs, int(a.budget_s / est_s)))
    warmup = max(min(2, a.warmup), min(a.warmup, int(0.25 * a.budget_s / est_s)))
    return warmup, runs


def estimate_minutes(a, peak_gflops, efficiency=0.5):
    """Rough duration of the matrix, assuming both sides reach `efficiency` of the matmul
    peak and ~0.5 s of process/plan-load overhead per kiln bench call (compiles, cold
    starts and the RAG scenario not included)."""
    total = 0.0
    for t in a.threads:
        for name in a.models:
            for b in a.batches:
                for s in a.seqs:
                    run_s = benchlib.encoder_flops(name, b, s) / (peak_gflops * 1e9 * efficiency)
                    warmup, runs = budgeted_counts(a, run_s * 1e3)
                    total += run_s * (1 + 2 * (warmup + runs)) + 0.5
    return total / 60


def run_matrix(a, name, rec, threads, peak, inputs_dir, rows):
    sess = benchlib.ort_session(benchlib.model_path(name), threads)
    i = 0
    for b in a.batches:
        for s in a.seqs:
            feeds = benchlib.make_inputs(name, b, s)
            paths = benchlib.write_inputs(feeds, os.path.join(inputs_dir, f"{name}_b{b}_s{s}"))
            # One ORT run at the new shape (its cold run, like kiln bench's first_run)
            # estimates the per-run cost for the budget.
            t0 = time.perf_counter()
            sess.run(None, feeds)
            est_ms = (time.perf_counter() - t0) * 1e3
            warmup, runs = budgeted_counts(a, est_ms)
            order = ["kiln", "ort"] if i % 2 == 0 else ["ort", "kiln"]
            i += 1
            res = {"kiln": None}
            for side in order:
                if side == "kiln":
                    try:
                        res["kiln"] = kiln_bench(a, rec["plan"], paths, warmup, runs, threads)
                    except RuntimeError as e:  # recorded; the rest of the matrix still runs
                        res["kiln_error"] = str(e)
                        log(f"{name} T={threads} b={b} s={s}: kiln bench failed: {e}")
                else:
                    res["ort"] = benchlib.stats(benchlib.time_ort(sess, feeds, warmup, runs), b)
            k, o = res["kiln"], res["ort"]
            flops = benchlib.encoder_flops(name, b, s)
            floor_ms = flops / (peak["gflops"] * 1e9) * 1e3
            row = {"model": name, "threads": threads, "batch": b, "seq": s, "warmup": warmup,
                   "runs": runs, "budget_lowered": runs < a.runs, "order": order,
                   "gflop": flops / 1e9, "floor_ms": floor_ms, "kiln": k, "ort": o,
                   "ort_floor_frac": floor_ms / o["p50_ms"]}
            if k:
                row.update(ratio_p50=k["p50_ms"] / o["p50_ms"],
                           throughput_ratio=k["throughput_per_s"] / o["throughput_per_s"],
                           kiln_floor_frac=floor_ms / k["p50_ms"])
            else:
                row["kiln_error"] = res["kiln_error"]
            rows.append(row)
            if k:
                log(f"{name} T={threads} b={b} s={s}: kiln p50 {k['p50_ms']:.2f} ms, ORT p50 "
                    f"{o['p50_ms']:.2f} ms, ratio {row['ratio_p50']:.2f}, floor {floor_ms:.2f} "
                    f"ms ({runs} runs{', lowered by the budget' if row['budget_lowered'] else ''})")
    del sess


def cold_and_rss(a, name, rec, threads, work):
    """Fresh-process figures at a.cold_shape (batch 1, sequence 128 by default): ORT session
    creation + first run + peak RSS; kiln load + first run + peak RSS from `kiln bench` on
    the matrix plan and on the one-shape plan."""
    b, s = a.cold_shape
    o = benchlib.ort_cold(name, b, s, threads)
    paths = benchlib.write_inputs(benchlib.make_inputs(name, b, s),
                                  os.path.join(work, "inputs", f"{name}_cold"))
    k = kiln_bench(a, rec["plan"], paths, 0, 3, threads)
    k1 = kiln_bench(a, rec["plan_single"], paths, 0, 3, threads)
    out = {"model": name, "threads": threads, "batch": b, "seq": s, "ort": o,
           "kiln": {key: k.get(key) for key in ("load_ms", "first_run_ms", "peak_rss_mb")},
           "kiln_single": {key: k1.get(key) for key in ("load_ms", "first_run_ms", "peak_rss_mb")}}
    log(f"{name}: cold start kiln {k.get('load_ms', 0) + k.get('first_run_ms', 0):.1f} ms "
        f"(one-shape plan {k1.get('load_ms', 0) + k1.get('first_run_ms', 0):.1f}), ORT "
        f"{o['session_ms'] + o['first_run_ms']:.1f} ms; peak RSS kiln "
        f"{k.get('peak_rss_mb', 0):.0f} MB, ORT {o['peak_rss_mb']:.0f} MB")
    return out


def targets(res):
    """The issue's targets, each with the measured value and met / not met / not measured."""
    tmax = max(res["config"]["threads"])
    rows = {(r["model"], r["threads"], r["batch"], r["seq"]): r for r in res["matrix"]}
    comp = {c["model"]: c for c in res["compile"]}
    cold = {c["model"]: c for c in res["cold_start"] if "error" not in c}
    out = []

    def add(what, value, ok, unit=""):
        out.append({"target": what, "value": value, "unit": unit,
                    "status": "not measured" if ok is None else ("met" if ok else "not met")})

    r = rows.get(("minilm", tmax, 1, 128))  # absent from a matrix without it: not measured
    v = r and r.get("ratio_p50")
    add(f"MiniLM-L6 b1 s128 p50 <= 1.0x ORT (T={tmax})", v, None if v is None else v <= 1.0, "x")
    r = rows.get(("base", tmax, 8, 128))
    v = r and r.get("throughput_ratio")
    add(f"BERT-base b8 s128 throughput >= 1.0x ORT (T={tmax})", v,
        None if v is None else v >= 1.0, "x")
    c = comp.get("base")
    c = c if c and "error" not in c else None
    nb = len(c.get("arena", [])) if c else 0
    add(f"compile BERT-base <= 10 s (matrix plan, {nb or '?'} buckets)",
        c and c["compile_ms"] / 1e3,
        c and c["compile_ms"] <= 10e3, "s")
    c = cold.get("minilm")
    v = c and c["kiln"].get("load_ms") is not None and (
        c["kiln"]["load_ms"] + c["kiln"]["first_run_ms"]) / 1e3
    shape = f"b{c['batch']} s{c['seq']}, " if c else ""
    add(f"MiniLM-L6 plan load + first inference <= 0.3 s ({shape}matrix plan)", v or None,
        (v <= 0.3) if v else None, "s")
    ratios = [c["arena_ratio_max"] for c in res["compile"] if c.get("arena_ratio_max")]
    add("arena <= 0.5x no-reuse (worst bucket, all models)", max(ratios) if ratios else None,
        (max(ratios) <= 0.5) if ratios else None, "x")
    if res.get("rag"):
        add("RAG pipeline p50 (no target; kiln/ORT)", res["rag"]["ratio_p50"], None, "x")
        out[-1]["status"] = "reported"
    return out


def main(argv):
    a = parse_args(argv)
    cpuid_mask = benchlib.cpuid_mask(a.cpu_isa, a.build_dir, __file__, argv)
    start = time.time()
    work = a.work_dir or tempfile.mkdtemp(prefix="kiln-e2e-")
    os.makedirs(work, exist_ok=True)
    for tool in (a.kiln[0],):
        if not shutil.which(tool) and not os.path.exists(tool):
            sys.exit(f"e2e_bench: kiln CLI not found: {tool} (build it, or pass --kiln)")
    res = {
        "schema": 1,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        # scripts/bench.sh passes its own command line; the driver's is kept beside it.
        "command": os.environ.get("KILN_BENCH_COMMAND") or
        "python3 bench/e2e_bench.py " + shlex.join(argv),
        "driver_command": "python3 bench/e2e_bench.py " + shlex.join(argv),
        "machine": machine_facts(), "versions": versions(a.kiln),
        "loadavg_start": list(os.getloadavg()),
        "config": {"quick": a.quick, "models": a.models, "threads": a.threads,
                   "batches": a.batches, "seqs": a.seqs, "warmup": a.warmup, "runs": a.runs,
                   "min_runs": a.min_runs, "budget_s": a.budget_s, "rag_reps": a.rag_reps,
                   "cpuid_mask": cpuid_mask,
                   "input_policy": "input_ids uniform in [0, vocab), attention_mask ones, "
                                   "token_type_ids zeros; int64; same arrays for both sides",
                   "ort": "ORT_ENABLE_ALL, intra_op_num_threads=T, inter_op_num_threads=1, "
                          "ORT_SEQUENTIAL, CPUExecutionProvider, default spinning",
                   "plans": "one plan per model, --profile listing exactly the matrix points "
                            "(every configuration runs its exact bucket, no padding)"},
        "peak": {}, "compile": [], "matrix": [], "cold_start": [], "rag": None,
    }
    log(f"kiln e2e benchmark: models {','.join(a.models)}, threads {a.threads}, batches "
        f"{a.batches}, sequences {a.seqs}, warmup {a.warmup}, runs {a.runs} (budget "
        f"{a.budget_s:g} s per configuration and side, min {a.min_runs}); work dir {work}")
    for t in a.threads:
        res["peak"][str(t)] = measure_peak(a, t)
        log(f"matmul peak at {t} thread(s): {res['peak'][str(t)]['gflops']:.0f} GFLOP/s "
            f"({res['peak'][str(t)]['source']})")
    first_peak = res["peak"][str(a.threads[0])]["gflops"]
    est = estimate_minutes(a, first_peak)
    heavy = max(((n, b, s) for n in a.models for b in a.batches for s in a.seqs),
                key=lambda x: benchlib.encoder_flops(*x))
    heavy_s = benchlib.encoder_flops(*heavy) / (first_peak * 1e9 * 0.5)
    w, r = budgeted_counts(a, heavy_s * 1e3)
    res["estimate"] = {"matrix_minutes": est, "heaviest": list(heavy),
                       "heaviest_run_s": heavy_s, "heaviest_warmup": w, "heaviest_runs": r}
    log(f"estimated matrix time {est:.1f} min at 50% of the matmul peak; heaviest "
        f"configuration {heavy[0]} b={heavy[1]} s={heavy[2]}: ~{heavy_s:.2f} s per run -> "
        f"{w} warmup + {r} runs per side (budget {a.budget_s:g} s, min {a.min_runs} runs)")
    recs = {}
    for name in a.models:
        try:
            rec = compile_model(a, name, work)
        except RuntimeError as e:  # recorded; the other models still run
            log(f"{name}: kiln compile failed: {e}")
            res["compile"].append({"model": name, "label": benchlib.MODELS[name][2],
                                   "error": str(e)})
            continue
        o = benchlib.ort_cold(name, *a.cold_shape, max(a.threads), runs=0)
        rec["ort_session_ms"] = o["session_ms"]
        log(f"{name}: kiln compile {rec['compile_ms'] / 1e3:.2f} s (one shape "
            f"{rec['compile_single_ms'] / 1e3:.2f} s), ORT session {o['session_ms'] / 1e3:.2f} s")
        res["compile"].append(rec)
        recs[name] = rec
    inputs_dir = os.path.join(work, "inputs")
    for t in a.threads:
        for name in recs:
            run_matrix(a, name, recs[name], t, res["peak"][str(t)], inputs_dir, res["matrix"])
    for name in recs:
        try:
            res["cold_start"].append(cold_and_rss(a, name, recs[name], max(a.threads), work))
        except RuntimeError as e:
            log(f"{name}: cold start failed: {e}")
            res["cold_start"].append({"model": name, "error": str(e)})
    if not a.no_rag:
        try:
            res["rag"] = rag_bench.run_scenario(
                kiln=a.kiln, rag_bench=a.rag_bench, work=os.path.join(work, "rag"),
                threads=max(a.threads), reps=a.rag_reps,
                warmup=1 if a.quick else min(a.warmup, 2))
        except RuntimeError as e:
            log(f"RAG scenario failed: {e}")
            res["rag_error"] = str(e)
    res["loadavg_end"] = list(os.getloadavg())
    res["elapsed_s"] = time.time() - start
    res["targets"] = targets(res)
    for rec in res["compile"]:  # temp-dir paths mean nothing in a committed file
        rec.pop("plan", None)
        rec.pop("plan_single", None)
    out = a.output or os.path.join(
        ROOT, "bench", "results",
        f"e2e-{datetime.date.today().isoformat()}{'-quick' if a.quick else ''}.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
        f.write("\n")
    for t in res["targets"]:
        log(f"target: {t['target']}: {t['value']} -> {t['status']}")
    log(f"wrote {out} ({res['elapsed_s'] / 60:.1f} min)")
    if not a.work_dir:
        shutil.rmtree(work, ignore_errors=True)
    print(out)


if __name__ == "__main__":
    main(sys.argv[1:])
