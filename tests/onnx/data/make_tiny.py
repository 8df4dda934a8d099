"""Writes tiny.onnx, the committed fixture read by tests/onnx/importer_test.cc.

A real file written by the onnx Python package (onnx==1.22), so the importer is tested on
bytes it did not write itself. Opset 13, so ReduceMean still carries `axes` as an
attribute and must be canonicalized. Re-run with: python3 make_tiny.py
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 1])
w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3) / 8, name="W")
b = helper.make_tensor("b", TensorProto.FLOAT, [3], [0.5, -1.0, 2.0])  # float_data
nodes = [
    helper.make_node("MatMul", ["x", "W"], ["xw"], name="matmul"),
    helper.make_node("Add", ["xw", "b"], ["h"], name="add"),
    helper.make_node("Relu", ["h"], ["r"], name="relu"),
    helper.make_node("ReduceMean", ["r"], ["y"], name="mean", axes=[1], keepdims=1),
]
graph = helper.make_graph(nodes, "tiny", [x], [y], [w, b],
                          value_info=[helper.make_tensor_value_info("h", TensorProto.FLOAT,
                                                                    ["batch", 3])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                          producer_name="kiln-make_tiny")
model.ir_version = 7
onnx.checker.check_model(model)
onnx.save(model, "tiny.onnx")
