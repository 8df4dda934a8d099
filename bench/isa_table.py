#!/usr/bin/env python3
"""Side-by-side kiln/onnxruntime ratios from several e2e_bench.py results JSONs (e.g. one
run natively, one under KILN_CPU_ISA=avx2, one under KILN_GEMM=onednn), as the markdown
table of docs/benchmarks.md "kiln per ISA". Each column is labelled NAME=FILE on the
command line; the ISA and the Linear implementations each run used are read from the
results (kiln bench --json cpu_isa / impls), not assumed.

  bench/isa_table.py avx512=bench/results/a.json avx2=bench/results/b.json
  bench/isa_table.py --roof 1=94.3,2=188.6 avx2=bench/results/c.json

--roof THREADS=GFLOPS,...: the measured FMA roof per thread count (BM_FmaRoof); adds, per
row, the matmul + attention FLOPs of the row (bench/benchlib.encoder_flops) at that roof,
and the fraction of the roof a run must sustain end to end to take 0.8x the last run's
onnxruntime time: above ~90 % the 0.8x target is out of reach for any kernel.
"""
import json
import sys


def load(spec):
    name, _, path = spec.partition("=")
    with open(path) as f:
        res = json.load(f)
    rows = {(r["model"], r["threads"], r["batch"], r["seq"]): r for r in res["matrix"]}
    isas, impls = set(), set()
    for r in res["matrix"]:
        k = r.get("kiln") or {}
        if k.get("cpu_isa"):
            isas.add(k["cpu_isa"])
        for by_impl in (k.get("impls") or {}).values():
            impls.update(by_impl)
    return name, path, rows, isas, impls


def parse_roof(spec):
    roof = {}
    for part in spec.split(","):
        t, _, g = part.partition("=")
        roof[int(t)] = float(g)
    return roof


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    roof = {}
    if argv[0] == "--roof" and len(argv) > 2:
        roof, argv = parse_roof(argv[1]), argv[2:]
    runs = [load(s) for s in argv]
    out = ["| run | results | kiln ISA | Linear implementations |", "|---|---|---|---|"]
    for name, path, _, isas, impls in runs:
        out.append(f"| {name} | `{path}` | {', '.join(sorted(isas)) or '?'} | "
                   f"{', '.join(f'`{i}`' for i in sorted(impls)) or '?'} |")
    out += ["", "| model | threads | batch | seq | " +
            " | ".join(f"{n}: kiln ms | {n}: ORT ms | {n}: kiln/ORT" for n, *_ in runs) +
            (" | FMA floor ms | 0.8x ORT needs |" if roof else " |"),
            "|---|---:|---:|---:|" + "---:|---:|---:|" * len(runs) + ("---:|---:|" if roof else "")]
    keys = sorted(set().union(*(r[2].keys() for r in runs)))
    for key in keys:
        cells = []
        for _, _, rows, _, _ in runs:
            r = rows.get(key)
            if not r or not r.get("kiln"):
                cells += ["–", "–", "–"]
                continue
            ratio = r["ratio_p50"]
            cells += [f"{r['kiln']['p50_ms']:.2f}", f"{r['ort']['p50_ms']:.2f}",
                      f"**{ratio:.2f}**" if ratio <= 0.8 else f"{ratio:.2f}"]
        if roof:
            last = runs[-1][2].get(key)
            floor_ms = last["gflop"] / roof[key[1]] * 1e3 if last and key[1] in roof else None
            if floor_ms and last.get("ort"):
                need = floor_ms / (0.8 * last["ort"]["p50_ms"])
                cells += [f"{floor_ms:.2f}", f"{need:.0%}"]
            else:
                cells += ["–", "–"]
        out.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | " + " | ".join(cells) + " |")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
