"""`kiln opt -O1 --emit-onnx` on the BERT-family fixtures: the optimized model is valid
ONNX, runs in onnxruntime, matches the original model, and the shape computations,
Dropout and Identity nodes are gone once shapes are given (issue 3's acceptance check).

Tolerance: 1e-4 max abs error, as in test_bert.py. The -O1 passes are exact rewrites
(folding evaluates in kiln's double-accumulating reference kernels and stores f32), so
the differences seen are at the 1e-7 level from ORT's own fp32 evaluation order.
"""

import collections
import pathlib
import subprocess

import numpy as np
import onnx
import pytest

from conftest import KILN_TIMEOUT_S, gen_bert, run_onnxruntime

TOLERANCE = 1e-4
FIXTURES = sorted(pathlib.Path(gen_bert.FIXTURE_DIR).glob("bert_*.onnx"))
# Ops that only compute shapes or do nothing at inference; none may survive -O1 with
# static shapes in these models (Gather/Unsqueeze may: embeddings and the mask input).
SHAPE_OPS = {"Shape", "Concat", "ConstantOfShape", "Range", "Dropout", "Identity", "Expand"}


def kiln_opt(kiln_bin, model, out, *extra):
    args = [kiln_bin, "opt", str(model), "-O1", "--verify-each", "--emit-onnx", str(out),
            "--pass-stats", *extra]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=KILN_TIMEOUT_S,
                          check=False)
    assert proc.returncode == 0, f"kiln opt failed ({proc.returncode}):\n{proc.stderr}"
    return proc


def op_counts(path):
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    return collections.Counter(n.op_type for n in model.graph.node)


def assert_matches(original, optimized, batch, seq, seed):
    feeds = gen_bert.random_inputs(gen_bert.SIZES["tiny"], batch, seq, seed=seed)
    want = run_onnxruntime(original, feeds)
    got = run_onnxruntime(optimized, feeds)
    assert set(got) == set(want), f"outputs {sorted(got)} vs {sorted(want)}"
    for name, w in want.items():
        assert got[name].shape == w.shape and got[name].dtype == w.dtype, name
        err = float(np.max(np.abs(got[name].astype(np.float64) - w.astype(np.float64))))
        assert err <= TOLERANCE, f"{name}: max abs error {err:.3g}"


@pytest.mark.parametrize("model", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_static_shapes_remove_shape_computation(kiln_bin, model, tmp_path):
    out = tmp_path / "opt.onnx"
    kiln_opt(kiln_bin, model, out, "--shape", "batch=2,sequence=16")
    before, after = op_counts(model), op_counts(out)
    left = {op: n for op, n in after.items() if op in SHAPE_OPS}
    assert not left, f"shape/no-op nodes left after -O1: {left}"
    assert sum(after.values()) < sum(before.values())
    assert_matches(model, out, 2, 16, seed=7)


@pytest.mark.parametrize("model", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_symbolic_pipeline_folds_and_stays_general(kiln_bin, model, tmp_path):
    """Without --shape the optimized model must still accept every batch and sequence,
    and still lose the nodes that do not depend on them (Dropout, Identity, ...)."""
    out = tmp_path / "opt.onnx"
    kiln_opt(kiln_bin, model, out)
    before, after = op_counts(model), op_counts(out)
    assert after["Dropout"] == 0 and after["Identity"] == 0, after
    assert sum(after.values()) < sum(before.values())
    for batch, seq in ((1, 7), (3, 16)):
        assert_matches(model, out, batch, seq, seed=batch + seq)


def test_pass_stats_report_counters(kiln_bin, tmp_path):
    model = pathlib.Path(gen_bert.FIXTURE_DIR) / "default.onnx"
    proc = kiln_opt(kiln_bin, model, tmp_path / "o.onnx", "--shape", "batch=1,sequence=8")
    for name in ("shape-inference", "constant-folding", "dce", "cse"):
        assert name in proc.stderr, proc.stderr
    assert "removed Dropout" in proc.stderr


def test_outputs_flag_prunes(kiln_bin, tmp_path):
    model = pathlib.Path(gen_bert.FIXTURE_DIR) / "bert_tiny_opset14_pooler.onnx"
    out = tmp_path / "o.onnx"
    kiln_opt(kiln_bin, model, out, "--outputs", "pooler_output")
    assert [o.name for o in onnx.load(str(out)).graph.output] == ["pooler_output"]


def test_minilm_done_criterion(kiln_bin, tmp_path):
    """Issue 3's acceptance check on a MiniLM-L6-shaped opset-14 export at 1x128."""
    model = tmp_path / "minilm.onnx"
    gen_bert.save(gen_bert.build_model("minilm", "opset14", "none"), str(model))
    out = tmp_path / "opt.onnx"
    kiln_opt(kiln_bin, model, out, "--shape",
             "input_ids=1x128,attention_mask=1x128,token_type_ids=1x128")
    before, after = op_counts(model), op_counts(out)
    left = {op: n for op, n in after.items() if op in SHAPE_OPS | {"Unsqueeze"}}
    assert not left, f"shape/no-op nodes left after -O1: {left}"
    assert sum(after.values()) < 0.5 * sum(before.values()), (before, after)
    feeds = gen_bert.random_inputs(gen_bert.SIZES["minilm"], 1, 128, seed=5)
    want, got = run_onnxruntime(model, feeds), run_onnxruntime(out, feeds)
    for name, w in want.items():
        assert float(np.max(np.abs(got[name] - w))) <= TOLERANCE, name


def test_print_after_and_dot(kiln_bin, tmp_path):
    model = pathlib.Path(gen_bert.FIXTURE_DIR) / "default.onnx"
    dot = tmp_path / "g.dot"
    proc = subprocess.run([kiln_bin, "opt", str(model), "--print-after", "dce", "--dot",
                           str(dot), "--shape", "batch=1,sequence=8"],
                          capture_output=True, text=True, timeout=KILN_TIMEOUT_S, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "IR after dce" in proc.stderr
    text = dot.read_text()
    assert text.startswith("digraph") and "->" in text and "MatMul" in text
    assert "Dropout" not in text  # the dot is the graph after dce, not the imported one


@pytest.mark.parametrize("args,code", [
    (["--passes", "no-such-pass"], 2),
    (["-O7"], 2),
    (["--disable-pass", "nope"], 2),
    (["--shape", "input_ids=1x2x3"], 2),
    (["--outputs", "not_an_output"], 2),
])
def test_opt_argument_errors(kiln_bin, args, code):
    model = pathlib.Path(gen_bert.FIXTURE_DIR) / "default.onnx"
    proc = subprocess.run([kiln_bin, "opt", str(model), "--quiet", *args], capture_output=True,
                          text=True, timeout=KILN_TIMEOUT_S, check=False)
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kiln: error: "), proc.stderr
