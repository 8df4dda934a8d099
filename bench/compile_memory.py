#!/usr/bin/env python3
"""Peak memory and wall time of `kiln compile` against the model's weight bytes (issue 14).

For each model (--model, repeatable) and each kiln binary (--kiln, repeatable: e.g. a build
of the commit before a change and one after), runs `kiln compile MODEL -o PLAN --quiet
FLAGS` --runs times in fresh processes (the binaries taking turns) and prints a Markdown
table: the model's weight bytes (every initializer and Constant tensor, inline or
external), the median peak RSS (the child's ru_maxrss, which counts resident file-mapped
pages too), RSS / weights, and the median wall time. One untimed read of the model's files first puts them in the page cache,
so every run reads them from memory, not disk. The plan is written beside the model
(MODEL.kiln) and removed afterwards.

  python3 models/gen_big.py build/big/big.onnx
  python3 bench/compile_memory.py --kiln build/kiln --model build/big/big.onnx \\
      --flags="--shape batch=1,sequence=128"
"""

import argparse
import os
import pathlib
import statistics
import sys

import numpy as np
import onnx
from onnx import helper

from compile_scale import peak_rss_mb


def tensor_bytes(t):
    """Bytes of one TensorProto's data, inline or external (from its dims and dtype)."""
    n = int(np.prod(t.dims, dtype=np.int64)) if len(t.dims) else 1
    return n * np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize


def weight_bytes(path):
    """Initializers plus Constant-node tensors, without loading external data."""
    model = onnx.load(str(path), load_external_data=False)
    total = sum(tensor_bytes(t) for t in model.graph.initializer)
    for node in model.graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                total += tensor_bytes(a.t)
    return total


def warm_page_cache(path):
    """Reads the model and every file beside it once (external data lives there)."""
    for f in pathlib.Path(path).parent.iterdir():
        if f.is_file() and (f == pathlib.Path(path) or f.name.startswith(pathlib.Path(path).name)):
            with open(f, "rb") as fh:
                while fh.read(1 << 24):
                    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", action="append", required=True)
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--flags", default="", help="extra `kiln compile` flags, one string")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    flags = args.flags.split()
    rows = []
    for model in args.model:
        weights = weight_bytes(model)
        warm_page_cache(model)
        plan = pathlib.Path(str(model) + ".kiln")
        rss = {kiln: [] for kiln in args.kiln}
        secs = {kiln: [] for kiln in args.kiln}
        for _ in range(args.runs):  # binaries interleaved, so a load change hits both
            for kiln in args.kiln:
                mib, seconds, rc = peak_rss_mb(kiln, model, plan, flags, args.timeout)
                if mib is None or rc != 0:
                    sys.exit(f"{kiln} compile {model} failed: "
                             + ("timed out" if mib is None else f"exit {rc}"))
                rss[kiln].append(mib * 1024 * 1024)
                secs[kiln].append(seconds)
                print(f"{model}: {kiln}: {seconds:.2f} s, {mib:.0f} MiB", file=sys.stderr,
                      flush=True)
        if plan.exists():
            plan.unlink()
        for kiln in args.kiln:
            peak = statistics.median(rss[kiln])
            rows.append((os.path.basename(model), kiln, weights, peak, peak / weights,
                         statistics.median(secs[kiln])))
    print("| model | kiln | weight bytes | peak RSS | RSS / weights | wall s |")
    print("|---|---|---:|---:|---:|---:|")
    for name, kiln, weights, peak, ratio, seconds in rows:
        print(f"| {name} | `{kiln}` | {weights / 1e9:.3f} GB | {peak / 1e9:.3f} GB | "
              f"{ratio:.2f} | {seconds:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
