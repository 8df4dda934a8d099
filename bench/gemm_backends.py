#!/usr/bin/env python3
"""Runs kiln_gemm_backends_bench on both ISA paths (native, and AVX2 caps for every
candidate) at 1 and 2 threads, and prints the markdown tables of docs/benchmarks.md
"GEMM backends": median GFLOP/s per backend and shape, the best one, and % of the measured
per-core FMA roof (roof x threads) beside it.

  bench/gemm_backends.py --bench build/bench/kiln_gemm_backends_bench [--threads 1,2]
      [--isa native,avx2] [--reps 3] [--min-time 0.1] [--json OUT.json]
"""
import argparse
import json
import os
import platform
import subprocess
import sys

NAMES = ["onednn", "kiln", "openblas", "blis", "libxsmm"]
# Environment that caps each candidate at AVX2 on an AVX-512 machine.
AVX2_ENV = {"KILN_CPU_ISA": "avx2", "OPENBLAS_CORETYPE": "Haswell", "LIBXSMM_TARGET": "hsw",
            "BLIS_ARCH_TYPE": "haswell"}


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def run(bench, isa, threads, reps, min_time, filt):
    env = dict(os.environ)
    env["KILN_BENCH_THREADS"] = str(threads)
    if isa == "avx2":
        env.update(AVX2_ENV)
    cmd = [bench, f"--benchmark_filter={filt}", f"--benchmark_min_time={min_time}",
           f"--benchmark_repetitions={reps}", "--benchmark_report_aggregates_only=true",
           "--benchmark_format=json"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out)["benchmarks"]


def parse(results):
    """{(be, m, k, n, gelu): (gflops, label)} and {bits: gflops} from median aggregates."""
    gemm, roof, skipped = {}, {}, {}
    for b in results:
        name = b.get("run_name", b["name"])
        if b.get("error_occurred"):
            skipped[name] = b.get("error_message", "")
            continue
        if b.get("aggregate_name") != "median":
            continue
        parts = dict(p.split(":") for p in name.split("/")[1:] if ":" in p)
        if name.startswith("BM_FmaRoof"):
            roof[int(name.split("/")[1])] = b["GFLOP/s"] / 1e9 if b["GFLOP/s"] > 1e6 else b["GFLOP/s"]
        elif name.startswith("BM_Gemm"):
            key = tuple(int(parts[k]) for k in ("be", "M", "K", "N", "gelu"))
            g = b["GFLOP/s"]
            gemm[key] = (g / 1e9 if g > 1e6 else g, b.get("label", ""))
    return gemm, roof, skipped


def table(gemm, roof_core, threads, isa):
    roof = roof_core * threads
    shapes = sorted({k[1:] for k in gemm}, key=lambda s: (s[0], s[1], s[2]))
    impl = {}
    for k, (_, label) in gemm.items():
        if k[0] in (0, 1) and label:
            impl[k[0]] = label
    head = "| M | K | N | GELU | " + " | ".join(NAMES) + " | best | best % roof |"
    lines = [f"**{isa}, {threads} thread{'s' if threads > 1 else ''}** — roof {roof:.0f} GFLOP/s "
             f"({roof_core:.1f} per core × {threads}); oneDNN ran `{impl.get(0, '?')}`, "
             f"kiln `{impl.get(1, '?')}`", "", head,
             "|" + "---|" * (len(NAMES) + 6)]
    for s in shapes:
        vals = [gemm.get((be,) + s, (None, ""))[0] for be in range(len(NAMES))]
        best = max((v, i) for i, v in enumerate(vals) if v is not None)
        cells = []
        for i, v in enumerate(vals):
            if v is None:
                cells.append("–")
            elif i == best[1]:
                cells.append(f"**{v:.1f}**")
            else:
                cells.append(f"{v:.1f}")
        lines.append(f"| {s[0]} | {s[1]} | {s[2]} | {'yes' if s[3] else ''} | " + " | ".join(cells) +
                     f" | {NAMES[best[1]]} | {100 * best[0] / roof:.0f} % |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default="build/bench/kiln_gemm_backends_bench")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--isa", default="native,avx2")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--min-time", default="0.1")
    ap.add_argument("--filter", default="BM_Gemm", help="extra regex on BM_Gemm names")
    ap.add_argument("--json", help="write the raw medians here")
    a = ap.parse_args()
    print(f"CPU: {cpu_model()}; {os.cpu_count()} hardware threads", file=sys.stderr)
    raw = {}
    out = []
    for isa in a.isa.split(","):
        roof_res = run(a.bench, isa, 1, a.reps, a.min_time, "BM_FmaRoof")
        _, roof, _ = parse(roof_res)
        bits = 512 if isa == "native" and 512 in roof else 256
        for t in (int(x) for x in a.threads.split(",")):
            print(f"running {isa} threads={t} ...", file=sys.stderr, flush=True)
            gemm, _, skipped = parse(run(a.bench, isa, t, a.reps, a.min_time, a.filter))
            for name, why in sorted(skipped.items())[:3]:
                print(f"  skipped {name}: {why}", file=sys.stderr)
            out.append(table(gemm, roof[bits], t, "AVX-512" if bits == 512 else "AVX2"))
            raw[f"{isa}/{t}"] = {"roof_core": roof[bits],
                                 "gemm": {"/".join(map(str, k)): v for k, v in gemm.items()}}
    print("\n\n".join(out))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"cpu": cpu_model(), "results": raw}, f, indent=1)


if __name__ == "__main__":
    main()
