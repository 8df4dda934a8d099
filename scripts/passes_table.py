#!/usr/bin/env python3
"""Prints the before/after node table of `kiln opt -O1` for docs/passes.md: every committed
BERT fixture and the generated MiniLM-L6 and BERT-base shapes (opset 14 and 17), with and
without static shapes. Usage: scripts/passes_table.py [--kiln build/kiln] [--large]"""

import argparse
import collections
import pathlib
import subprocess
import sys
import tempfile

import onnx

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "models"))
import gen_bert  # noqa: E402

SHAPE_OPS = ("Shape", "Gather", "Unsqueeze", "Concat", "Dropout", "Identity")


def counts(path):
    return collections.Counter(n.op_type for n in onnx.load(str(path)).graph.node)


def row(kiln, model, label, shape_args):
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "o.onnx"
        subprocess.run([kiln, "opt", str(model), "-O1", "--emit-onnx", str(out), *shape_args],
                       check=True, capture_output=True)
        before, after = counts(model), counts(out)
    shape_cells = " | ".join(f"{before[op]}→{after[op]}" for op in SHAPE_OPS)
    return (f"| {label} | {'static' if shape_args else 'symbolic'} | {sum(before.values())} | "
            f"{sum(after.values())} | {shape_cells} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kiln", default=str(ROOT / "build" / "kiln"))
    ap.add_argument("--large", action="store_true", help="include BERT-base (0.4 GB)")
    args = ap.parse_args()
    print("| model | shapes | nodes before | nodes after | " + " | ".join(SHAPE_OPS) + " |")
    print("|---|---|---|---|" + "---|" * len(SHAPE_OPS))
    static = ["--shape", "batch=1,sequence=128"]
    for model in sorted((ROOT / "models" / "fixtures").glob("bert_*.onnx")):
        for shapes in (static, []):
            print(row(args.kiln, model, model.stem, shapes))
    sizes = ["minilm"] + (["base"] if args.large else [])
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            for style in ("opset14", "opset17"):
                path = pathlib.Path(tmp) / f"{size}_{style}.onnx"
                gen_bert.save(gen_bert.build_model(size, style, "none"), str(path))
                for shapes in (static, []):
                    print(row(args.kiln, path, f"bert_{size}_{style}_none (generated)", shapes))
                path.unlink()


if __name__ == "__main__":
    main()
