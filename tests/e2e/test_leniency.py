"""Where kiln is lenient as onnxruntime is, and where it is strict (docs/importer.md
"Leniency"): a declared output shape the graph contradicts (stale value_info, a wrong graph
output shape) gives way to the inferred shape with a warning naming the node, in `kiln
compile`, `kiln run -O2` and `kiln opt`, and the plan's outputs match onnxruntime's; a
declared dtype the graph contradicts stays an error (onnxruntime refuses it too)."""

import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper

from conftest import KILN_TIMEOUT_S, run_kiln, run_onnxruntime


def model(path, y_dims, y_type=TensorProto.FLOAT, value_info_dims=None):
    """x f32[2,3] -> Relu ("r") -> Neg -> y, y declared `y_dims`; r's value_info
    `value_info_dims` when given."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="my_relu"),
             helper.make_node("Neg", ["r"], ["y"], name="my_neg")]
    vi = [] if value_info_dims is None else [
        helper.make_tensor_value_info("r", TensorProto.FLOAT, value_info_dims)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", y_type, y_dims)], value_info=vi)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def kiln(kiln_bin, *args):
    return subprocess.run([kiln_bin, *map(str, args)], capture_output=True, text=True,
                          timeout=KILN_TIMEOUT_S, check=False)


def test_a_contradicted_output_shape_is_replaced_with_a_warning(kiln_bin, tmp_path):
    m = model(tmp_path / "m.onnx", [2, 4], value_info_dims=[6])
    feeds = {"x": np.array([[1, -2, 3], [-4, 5, -6]], np.float32)}
    want = run_onnxruntime(m, feeds)["y"]
    proc = kiln(kiln_bin, "compile", m, "-o", tmp_path / "m.kiln")
    assert proc.returncode == 0, proc.stderr
    assert ("warning: node 'my_relu' (Relu, opset 17): output 0 'r' is declared f32[6] but its "
            "inputs give f32[2,3]; using the inferred shape (onnxruntime also runs such files)") in proc.stderr
    assert "warning: node 'my_neg' (Neg, opset 17): output 0 'y' is declared f32[2,4]" in proc.stderr
    proc, out = run_kiln(kiln_bin, tmp_path / "m.kiln", feeds, tmp_path / "run")
    assert proc.returncode == 0, proc.stderr
    got = np.load(out / "y.npy")
    assert got.shape == (2, 3) and np.array_equal(got, want)
    for cmd in (["run", m, "--random-inputs", "-O2", "--quiet"], ["opt", m, "--quiet"]):
        proc = kiln(kiln_bin, *cmd)
        assert proc.returncode == 0, proc.stderr
        assert "warning: node 'my_neg' (Neg, opset 17)" in proc.stderr, cmd


def test_a_contradicted_output_dtype_is_an_error(kiln_bin, tmp_path):
    m = model(tmp_path / "m.onnx", [2, 3], y_type=TensorProto.INT32)
    proc = kiln(kiln_bin, "compile", m, "-o", tmp_path / "m.kiln")
    assert proc.returncode == 2, proc.stderr
    assert "output 0 'y' is declared i32[2,3] but its inputs give f32[2,3]" in proc.stderr
    assert not (tmp_path / "m.kiln").exists()


def test_a_fed_initializer_input_overrides_the_initializer(kiln_bin, tmp_path):
    """ONNX IR: a graph input that is also an initializer takes the feed when fed, the
    initializer when not. `kiln run MODEL.onnx` does both (at -O0 and -O2); a compiled plan
    folds the initializer in and says so when fed."""
    from onnx import numpy_helper
    w = numpy_helper.from_array(np.full((2, 3), 10, np.float32), "w")
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("w", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                          initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    fed = {"x": x, "w": np.ones((2, 3), np.float32)}
    assert np.array_equal(run_onnxruntime(path, fed)["y"], x + 1)
    assert np.array_equal(run_onnxruntime(path, {"x": x})["y"], x + 10)
    for level in ("-O0", "-O2"):
        for feeds, want in ((fed, x + 1), ({"x": x}, x + 10)):
            proc, out = run_kiln(kiln_bin, path, feeds, tmp_path / f"{level}{len(feeds)}", level)
            assert proc.returncode == 0, proc.stderr
            assert np.array_equal(np.load(out / "y.npy"), want), (level, list(feeds))
    proc = kiln(kiln_bin, "compile", path, "-o", tmp_path / "m.kiln")
    assert proc.returncode == 0, proc.stderr
    proc, out = run_kiln(kiln_bin, tmp_path / "m.kiln", {"x": x}, tmp_path / "plan")
    assert proc.returncode == 0 and np.array_equal(np.load(out / "y.npy"), x + 10), proc.stderr
    proc, _ = run_kiln(kiln_bin, tmp_path / "m.kiln", fed, tmp_path / "plan_fed")
    assert proc.returncode == 2 and "has no input named 'w'" in proc.stderr, proc.stderr
