#!/usr/bin/env python3
"""A plan whose only work is a Gather from a large external-data embedding table, run by
`kiln bench`: what a step costs when its operand is a big mapped weight (issue 18, "no
copies in reference steps"; every decoder's token-embedding Gather has this shape).

The model: ids i64[rows] -> Gather(table f32[vocab, hidden], ids, axis 0) -> f32[rows,
hidden], the table (default 300 000 x 2048 = 2.46 GB) saved as external data the way
onnx.save_model(save_as_external_data=True) writes it. Compiled with `kiln compile` (the
Gather is a cpu `gather` step since issue 18; a `ref` step, viewing its operands in place,
before), then `kiln bench --json` per row count: p50, load time and peak RSS. The weights
are mapped read-only from the plan; a step that copied its operands would read the whole
table every call.

Usage: python3 bench/big_gather.py [--kiln build/kiln] [--workdir build/big_gather]
         [--vocab 300000] [--hidden 2048] [--rows 4,64,1024]
Writes ~2 x the table's size to --workdir (model + plan); keep it under build/.
"""

import argparse
import json
import pathlib
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper

ROOT = pathlib.Path(__file__).resolve().parents[1]


def write_model(path, vocab, hidden):
    data_name = path.name + ".data"
    with open(path.parent / data_name, "wb") as f:
        row = np.arange(hidden, dtype=np.float32)
        chunk = np.tile(row, (4096, 1))
        for start in range(0, vocab, 4096):
            n = min(4096, vocab - start)
            f.write((chunk[:n] + np.arange(start, start + n, dtype=np.float32)[:, None]).tobytes())
    table = TensorProto(name="table", data_type=TensorProto.FLOAT, dims=[vocab, hidden])
    table.data_location = TensorProto.EXTERNAL
    for key, value in (("location", data_name), ("offset", "0"),
                       ("length", str(vocab * hidden * 4))):
        table.external_data.add(key=key, value=value)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0)], "big_gather",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])],
        [helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["n", hidden])],
        initializer=[table])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kiln", default=str(ROOT / "build" / "kiln"))
    parser.add_argument("--workdir", default=str(ROOT / "build" / "big_gather"))
    parser.add_argument("--vocab", type=int, default=300000)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--rows", default="4,64,1024")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    work = pathlib.Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    model = work / f"gather_{args.vocab}x{args.hidden}.onnx"
    if not model.exists():
        print(f"writing {model} ({args.vocab * args.hidden * 4 / 1e9:.2f} GB table)",
              file=sys.stderr)
        write_model(model, args.vocab, args.hidden)
    rows = [int(r) for r in args.rows.split(",")]
    plan = work / "gather.kiln"
    subprocess.run([args.kiln, "compile", str(model), "-o", str(plan), "--profile",
                    "n=" + ":".join(map(str, rows))], check=True, capture_output=True)
    print(f"{'rows':>6} {'p50 ms':>10} {'load ms':>9} {'peak RSS MiB':>13}")
    for n in rows:
        out = subprocess.run([args.kiln, "bench", str(plan), "--json", "--shape", f"n={n}",
                              "--runs", str(args.runs), "--warmup", "2", "--vocab",
                              str(args.vocab), "--threads", "1"],
                             check=True, capture_output=True, text=True)
        r = json.loads(out.stdout)
        print(f"{n:>6} {r['p50_ms']:>10.3f} {r['load_ms']:>9.1f} {r['peak_rss_mb']:>13.1f}")


if __name__ == "__main__":
    main()
