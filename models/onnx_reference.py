"""What onnxruntime runs as the reference for kiln's results: an int4 MatMulNBits file at
accuracy_level 0. At its level 4 (what onnxruntime-genai's builder writes) onnxruntime may
quantize the activations to int8 blocks, ~5e-3 away; kiln always multiplies in fp32, which
is level 0. Used by tests/e2e/test_genai_fixtures.py and bench/gpu/e2e_check.py."""

import pathlib

import onnx


def accuracy_level_zero(model, work):
    """`model`, or for a file with MatMulNBits a copy in folder `work` whose nodes all have
    accuracy_level 0 (its path)."""
    m = onnx.load(str(model))
    nbits = [n for n in m.graph.node if n.op_type == "MatMulNBits"]
    if not nbits:
        return model
    for node in nbits:
        for attr in node.attribute:
            if attr.name == "accuracy_level":
                attr.i = 0
    path = pathlib.Path(work) / "reference.onnx"
    onnx.save(m, str(path))
    return path
