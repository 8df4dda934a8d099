#!/usr/bin/env python3
"""Where each side's time goes, op by op: kiln's per-kernel step times (`kiln bench --steps`)
beside onnxruntime's per-op-type node times (its profiler), for one benchmark model and shape.

The end-to-end ratio says who is faster; this says on which ops. Both sides run the same
inputs (bench/benchlib.make_inputs) at the same thread count; kiln's plan is compiled for
exactly the shape. onnxruntime's figures are, per category, the median over the profiled runs
of the category's summed node time in each run (its "Node" events, `kernel_time`); kiln's
are the sums of `kiln bench --steps`'s per-kernel medians. The categories line up kiln kernels with the onnxruntime ops that do the same work
(kiln fuses more, so a category can be one kernel on one side and three ops on the other).

  bench/op_breakdown.py --model minilm --batch 1 --seq 128 --threads 2 [--cpu-isa avx2]
"""
import argparse
import collections
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import ROOT  # noqa: E402

# onnxruntime op type (after its optimizations) -> category; kiln kernel -> category.
ORT_CATEGORY = {
    "MatMul": "linear", "FusedMatMul": "linear", "MatMul (attention)": "attention",
    "FusedMatMul (attention)": "attention", "Gemm": "linear", "MatMulAddFusion": "linear",
    "Attention": "attention", "MultiHeadAttention": "attention", "Softmax": "attention",
    "SkipLayerNormalization": "layer norm", "LayerNormalization": "layer norm",
    "EmbedLayerNormalization": "embedding", "Gather": "embedding",
    "BiasGelu": "linear epilogue", "FastGelu": "linear epilogue", "Gelu": "linear epilogue",
    "Add": "element-wise", "Mul": "element-wise", "Sub": "element-wise", "Div": "element-wise",
    "Tanh": "element-wise", "Erf": "element-wise", "Cast": "element-wise",
}
KILN_CATEGORY = {
    "linear": "linear", "attention": "attention", "packed_attention": "attention",
    "skip_layer_norm": "layer norm", "layer_norm": "layer norm",
    "embed_layer_norm": "embedding", "gather": "embedding", "eltwise": "element-wise",
}


def ort_op(args):
    """The node's op type; a MatMul of rank-4 operands (onnxruntime keeps the attention
    scores and context as batched MatMuls) is reported as "MatMul (attention)"."""
    op = args["op_name"]
    shapes = [next(iter(t.values())) for t in args.get("input_type_shape", [])]
    if op in ("MatMul", "FusedMatMul") and shapes and len(shapes[0]) == 4:
        return f"{op} (attention)"
    return op


def ort_profile(model, feeds, threads, warmup, runs, work):
    """([{op type: ms} per run], [wall ms per run]) for `runs` profiled runs after `warmup`
    unprofiled ones."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(work, "ort_profile")
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    for _ in range(warmup):
        sess.run(None, feeds)
    walls = benchlib.time_ort(sess, feeds, 0, runs)
    with open(sess.end_profiling()) as f:
        events = json.load(f)
    # Runs are the "model_run" events; each node's "kernel_time" event falls inside one.
    run_spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                       if e.get("cat") == "Session" and e.get("name") == "model_run")
    run_spans = run_spans[-runs:]  # the timed ones (the warmup runs came first)
    per_run = [collections.Counter() for _ in run_spans]
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        for i, (t0, t1) in enumerate(run_spans):
            if t0 <= e["ts"] <= t1:
                per_run[i][ort_op(e["args"])] += e["dur"] / 1e3
                break
    return per_run, walls


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="minilm", choices=list(benchlib.MODELS))
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    p.add_argument("--cpu-isa", choices=["native", "avx2"], default="native",
                   help=benchlib.CPU_ISA_HELP)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args(argv)
    a.build_dir = os.path.abspath(a.build_dir)
    mask = benchlib.cpuid_mask(a.cpu_isa, a.build_dir, __file__, argv)
    kiln = os.path.join(a.build_dir, "kiln")
    model = benchlib.ensure_model(a.model)
    feeds = benchlib.make_inputs(a.model, a.batch, a.seq)
    with tempfile.TemporaryDirectory(prefix="kiln-ops-") as work:
        plan = os.path.join(work, "plan.kiln")
        benchlib.run_timed([kiln, "compile", model, "-o", plan, "--quiet", "--shape",
                            f"batch={a.batch},sequence={a.seq}"])
        paths = benchlib.write_inputs(feeds, os.path.join(work, "inputs"))
        cmd = [kiln, "bench", plan, "--json", "--steps", "--threads", str(a.threads),
               "--warmup", str(a.warmup), "--runs", str(a.runs)]
        for k, v in paths.items():
            cmd += ["--input", f"{k}={v}"]
        k = benchlib.run_json(cmd)
        ort_runs, ort_walls = ort_profile(model, feeds, a.threads, a.warmup, a.runs, work)
    ort_wall = statistics.median(ort_walls)
    rows = collections.defaultdict(lambda: {"kiln_ms": 0.0, "ort_ms": 0.0, "kiln": [], "ort": []})
    for kernel, s in k["steps"].items():  # kiln bench --steps gives medians per kernel
        r = rows[KILN_CATEGORY.get(kernel, "other")]
        r["kiln_ms"] += s["median_ms"]
        r["kiln"].append(f"{kernel} ×{s['count']}")
    # onnxruntime: each category's per-run sum, then the median over runs.
    by_category = collections.defaultdict(lambda: [0.0] * len(ort_runs))
    for i, ops in enumerate(ort_runs):
        for op, ms in ops.items():
            by_category[ORT_CATEGORY.get(op, "other")][i] += ms
            if op not in rows[ORT_CATEGORY.get(op, "other")]["ort"]:
                rows[ORT_CATEGORY.get(op, "other")]["ort"].append(op)
    for cat, per_run in by_category.items():
        rows[cat]["ort_ms"] = statistics.median(per_run)
    rows["outside steps / nodes"]["kiln_ms"] = k["between_steps_ms"]
    rows["outside steps / nodes"]["ort_ms"] = statistics.median(
        max(0.0, wall - sum(ops.values())) for wall, ops in zip(ort_walls, ort_runs))
    res = {"model": a.model, "batch": a.batch, "seq": a.seq, "threads": a.threads,
           "cpu_isa": k.get("cpu_isa"), "cpuid_mask": mask, "impls": k.get("impls"),
           "kiln_p50_ms": k["p50_ms"], "ort_p50_ms": ort_wall, "categories": rows}
    if a.json:
        print(json.dumps(res, indent=1, sort_keys=True))
        return 0
    print(f"{a.model} b{a.batch} s{a.seq}, {a.threads} thread(s), kiln ISA {k.get('cpu_isa')}"
          f"{' (CPUID masked: ' + a.cpu_isa + ')' if mask else ''}; kiln p50 "
          f"{k['p50_ms']:.2f} ms (untraced), onnxruntime p50 {ort_wall:.2f} ms (profiled)")
    print("| category | kiln ms | ORT ms | kiln/ORT | kiln kernels | ORT ops |\n"
          "|---|---:|---:|---:|---|---|")
    for cat, r in sorted(rows.items(), key=lambda kv: -max(kv[1]["kiln_ms"], kv[1]["ort_ms"])):
        ratio = f"{r['kiln_ms'] / r['ort_ms']:.2f}" if r["ort_ms"] > 0 else "–"
        print(f"| {cat} | {r['kiln_ms']:.3f} | {r['ort_ms']:.3f} | {ratio} | "
              f"{', '.join(r['kiln'])} | {', '.join(sorted(r['ort']))} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
