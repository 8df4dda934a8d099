#!/usr/bin/env python3
"""Large graphs for compile-time scaling (bench/compile_scale.py, tests/e2e/test_compile_scale.py).

  chain(n):        x [1, 64] through n elementwise nodes (Add, Mul, Relu, Sub, Tanh in turn,
                   the binary ones with one shared [1, 64] constant): nothing fuses, so every
                   node reaches lowering as its own step.
  deep_bert(l):    gen_bert's TorchScript-style opset-14 encoder with `l` layers of hidden
                   64, 4 heads, FFN 256 (~115 ONNX nodes per layer): every fusion fires in
                   every layer and the exporter's per-layer mask and shape arithmetic gives
                   CSE thousands of duplicates of a few constants.
Usage: python3 models/gen_scale.py chain 50000 out.onnx | deep 400 out.onnx
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import gen_bert


def chain(n):
    nodes = []
    prev = "x"
    ops = ["Add", "Mul", "Relu", "Sub", "Tanh"]
    for i in range(n):
        op = ops[i % len(ops)]
        ins = [prev, "c"] if op in ("Add", "Mul", "Sub") else [prev]
        nodes.append(helper.make_node(op, ins, [f"v{i}"], name=f"n{i}"))
        prev = f"v{i}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 64])],
        [numpy_helper.from_array(np.full((1, 64), 0.5, np.float32), "c")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def deep_bert(layers):
    name = f"deep{layers}"
    gen_bert.SIZES[name] = gen_bert.BertConfig(layers=layers, hidden=64, heads=4, ffn=256,
                                               vocab=1000, max_pos=128)
    return gen_bert.build_model(size=name, style="opset14", head="none")


def main(argv):
    kind, n, out = argv[1], int(argv[2]), argv[3]
    model = chain(n) if kind == "chain" else deep_bert(n)
    onnx.save(model, out)
    print(f"{out}: {len(model.graph.node)} nodes")


if __name__ == "__main__":
    main(sys.argv)
