"""`kiln run` error behaviour: user mistakes give a documented exit code and one clear line
on stderr, never a crash.

Exit codes (the CLI contract): 2 = the model is malformed, 3 = the model is well-formed but uses
something kiln does not support.
"""

import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper

from conftest import gen_bert, run_kiln


def tiny_feeds():
    return gen_bert.random_inputs(gen_bert.SIZES["tiny"], 1, 7)


def assert_one_line_error(proc, expected_code):
    assert proc.returncode == expected_code, (
        f"exit code {proc.returncode}, expected {expected_code}; stderr:\n{proc.stderr}")
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{proc.stderr}"
    return lines[0]


def test_corrupt_model_exits_2(kiln_bin, tmp_path):
    """A truncated model file (the first 1000 bytes of a real fixture)."""
    good = open(gen_bert.fixture_path("opset14", "none"), "rb").read()
    model = tmp_path / "corrupt.onnx"
    model.write_bytes(good[:1000])
    proc, outdir = run_kiln(kiln_bin, model, tiny_feeds(), tmp_path)
    assert_one_line_error(proc, 2)
    assert not outdir.exists() or not list(outdir.glob("*.npy")), "no outputs on error"


def test_garbage_model_exits_2(kiln_bin, tmp_path):
    """Bytes that are not a protobuf at all."""
    model = tmp_path / "garbage.onnx"
    model.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, np.uint8).tobytes())
    proc, _ = run_kiln(kiln_bin, model, tiny_feeds(), tmp_path)
    assert_one_line_error(proc, 2)


def test_unsupported_op_exits_3(kiln_bin, tmp_path):
    """A valid opset-14 model using TfIdfVectorizer, which kiln does not implement."""
    graph = helper.make_graph(
        [helper.make_node("TfIdfVectorizer", ["x"], ["y"], name="tfidf_node", mode="TF",
                          min_gram_length=1, max_gram_length=1, max_skip_count=0,
                          ngram_counts=[0], ngram_indexes=[0], pool_int64s=[1])], "tfidf",
        [helper.make_tensor_value_info("x", TensorProto.INT64, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)],
                              ir_version=7)
    onnx.checker.check_model(model)
    path = tmp_path / "tfidf.onnx"
    onnx.save_model(model, str(path))
    feeds = {"x": np.array([[1, 2, 1], [3, 1, 1]], np.int64)}
    proc, _ = run_kiln(kiln_bin, path, feeds, tmp_path)
    line = assert_one_line_error(proc, 3)
    assert "TfIdfVectorizer" in line, f"the error should name the unsupported op: {line}"


def test_random_range_wider_than_dtype_exits_2(kiln_bin, tmp_path):
    """--int-range values that do not fit the input's dtype are refused, not wrapped."""
    model = tmp_path / "id8.onnx"
    x = helper.make_tensor_value_info("x", TensorProto.INT8, [4])
    y = helper.make_tensor_value_info("y", TensorProto.INT8, [4])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    base = [kiln_bin, "run", str(model), "--random-inputs"]
    proc = subprocess.run(base + ["--int-range", "x=0:300"], capture_output=True, text=True)
    line = assert_one_line_error(proc, 2)
    assert "does not fit its dtype i8" in line
    proc = subprocess.run(base + ["--int-range", "x=-128:128"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([kiln_bin, "run", str(model), "--random-inputs", "--int-range",
                           "x=-9223372036854775808:9223372036854775807"],
                          capture_output=True, text=True)
    assert_one_line_error(proc, 2)
