#!/usr/bin/env python3
"""PNG plots of an end-to-end results JSON (bench/e2e_bench.py): per model, p50 latency
vs batch (one line per sequence length) and vs sequence length (one line per batch),
kiln solid, onnxruntime dashed, log scale, at the largest thread count measured.

Usage: python3 bench/plot.py RESULTS.json [--out-dir docs/img]
Writes e2e_<model>.png and prints each path. Needs matplotlib (requirements-bench.txt).
"""

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def plot_model(res, model, threads, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in res["matrix"] if r["model"] == model and r["threads"] == threads]
    if not rows:
        return None
    batches = sorted({r["batch"] for r in rows})
    seqs = sorted({r["seq"] for r in rows})
    at = {(r["batch"], r["seq"]): r for r in rows}
    label = next((c["label"] for c in res["compile"] if c["model"] == model), model)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, xs, lines, xname, lname in ((axes[0], batches, seqs, "batch", "seq"),
                                        (axes[1], seqs, batches, "sequence", "batch")):
        for i, ln in enumerate(lines):
            pts = [(x, at.get((x, ln) if xname == "batch" else (ln, x))) for x in xs]
            pts = [(x, r) for x, r in pts if r]
            if not pts:
                continue
            c = colors[i % len(colors)]
            kp = [(x, r) for x, r in pts if r.get("kiln")]  # a failed kiln run has no point
            ax.plot([x for x, _ in kp], [r["kiln"]["p50_ms"] for _, r in kp], "o-", color=c,
                    label=f"kiln {lname} {ln}")
            ax.plot([x for x, _ in pts], [r["ort"]["p50_ms"] for _, r in pts], "s--", color=c,
                    alpha=0.8, label=f"ORT {lname} {ln}")
            ax.plot([x for x, _ in pts], [r["floor_ms"] for _, r in pts], ":", color=c,
                    alpha=0.5, label=f"roofline floor {lname} {ln}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(xs)
        ax.set_xticklabels([str(x) for x in xs])
        ax.set_xlabel(xname)
        ax.set_ylabel("p50 latency (ms)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=1)
    notes = []
    if "fake" in res["versions"].get("kiln", ""):
        notes.append("FAKE kiln (harness test)")
    if res["config"].get("quick"):
        notes.append("--quick smoke run")
    load = max(res["loadavg_start"][0], res.get("loadavg_end", [0])[0])
    if load > 0.5 * (res["machine"].get("nproc") or 1):
        notes.append(f"busy machine (load {load:.1f}): timings unreliable")
    fig.suptitle(f"{label}: kiln vs onnxruntime {res['versions'].get('onnxruntime', '')}, "
                 f"{threads} thread(s), {res['date']}"
                 + (f"\n{'; '.join(notes)}" if notes else ""), fontsize=10)
    fig.tight_layout()
    path = os.path.join(out_dir, f"e2e_{model}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results")
    p.add_argument("--out-dir", default=os.path.join(ROOT, "docs", "img"))
    a = p.parse_args(argv)
    with open(a.results) as f:
        res = json.load(f)
    os.makedirs(a.out_dir, exist_ok=True)
    threads = max(res["config"]["threads"])
    for model in res["config"]["models"]:
        path = plot_model(res, model, threads, a.out_dir)
        if path:
            print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
