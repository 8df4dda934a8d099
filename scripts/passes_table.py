#!/usr/bin/env python3
"""Prints the before/after node tables for docs/passes.md: for every committed fixture
(BERT family, variants, torch.onnx exports) and the generated MiniLM-L6 (and BERT-base
with --large), the ONNX node count before and after `kiln opt -O1` and `-O2`, with static
shapes (batch 1, sequence 128) and without, and the -O2 fusion report's totals.
Usage: scripts/passes_table.py [--kiln build/kiln] [--large]"""

import argparse
import collections
import json
import pathlib
import subprocess
import sys
import tempfile

import onnx

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "models"))
import gen_bert  # noqa: E402

SHAPE_OPS = ("Shape", "Gather", "Unsqueeze", "Concat", "Dropout", "Identity")
STATIC = ["--shape", "batch=1,sequence=128"]
# The torch.onnx fixtures have 64 positions: a longer sequence is rightly an error.
STATIC_TORCH = ["--shape", "batch=1,sequence=32"]


def counts(path):
    return collections.Counter(n.op_type for n in onnx.load(str(path)).graph.node)


def kiln_opt(kiln, model, level, shape_args, tmp):
    out, report = pathlib.Path(tmp) / f"o{level}.onnx", pathlib.Path(tmp) / "r.json"
    subprocess.run([kiln, "opt", str(model), f"-O{level}", "--emit-onnx", str(out),
                    "--fusion-report", str(report), *shape_args], check=True,
                   capture_output=True)
    return counts(out), json.loads(report.read_text())


def o1_row(kiln, model, label, shape_args):
    with tempfile.TemporaryDirectory() as tmp:
        before = counts(model)
        after, _ = kiln_opt(kiln, model, 1, shape_args, tmp)
    cells = " | ".join(f"{before[op]}→{after[op]}" for op in SHAPE_OPS)
    return (f"| {label} | {'static' if shape_args else 'symbolic'} | {sum(before.values())} | "
            f"{sum(after.values())} | {cells} |")


def o2_row(kiln, model, label, shape_args):
    with tempfile.TemporaryDirectory() as tmp:
        before = counts(model)
        after, report = kiln_opt(kiln, model, 2, shape_args, tmp)
    fused = report["fusions"]
    att = fused["attention"]
    kinds = ", ".join(f"{k} {v['fused']}" for k, v in fused.items()
                      if v["fused"] and k != "attention")
    missed = sum(len(v["missed"]) for v in fused.values())
    return (f"| {label} | {'static' if shape_args else 'symbolic'} | {sum(before.values())} | "
            f"{sum(after.values())} | {att['fused']} | {missed} | {kinds} |")


def models(tmp, large):
    fixtures = ROOT / "models" / "fixtures"
    for path in sorted(fixtures.glob("bert_*.onnx")):
        yield path, path.stem
    for path in sorted((fixtures / "variants").glob("*.onnx")):
        yield path, f"variants/{path.stem}"
    for path in sorted((fixtures / "torch").glob("*.onnx")):
        yield path, f"torch/{path.stem}"
    for path in sorted((fixtures / "decoder").glob("*.onnx")):
        yield path, f"decoder/{path.stem}"
    for size in ["minilm"] + (["base"] if large else []):
        for style in ("opset14", "opset17"):
            path = pathlib.Path(tmp) / f"{size}_{style}.onnx"
            gen_bert.save(gen_bert.build_model(size, style, "none"), str(path))
            yield path, f"bert_{size}_{style}_none (generated)"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kiln", default=str(ROOT / "build" / "kiln"))
    ap.add_argument("--large", action="store_true", help="include BERT-base (0.4 GB)")
    args = ap.parse_args()
    o1 = ["| model | shapes | nodes before | nodes after -O1 | " + " | ".join(SHAPE_OPS) + " |",
          "|---|---|---|---|" + "---|" * len(SHAPE_OPS)]
    o2 = ["| model | shapes | nodes before | nodes after -O2 | attention fused | misses | "
          "other fusions |", "|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for path, label in models(tmp, args.large):
            static = STATIC_TORCH if label.startswith(("torch/", "decoder/")) else STATIC
            for shapes in (static, []):
                if not label.startswith(("torch/", "variants/", "decoder/")):
                    o1.append(o1_row(args.kiln, path, label, shapes))
                o2.append(o2_row(args.kiln, path, label, shapes))
    print("\n".join(o1))
    print()
    print("\n".join(o2))


if __name__ == "__main__":
    main()
