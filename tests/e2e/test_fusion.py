"""Issue 4's acceptance checks: `kiln opt -O2` fuses every Transformer block of the
generated models, the fusion report shows no misses, and the fused graph — written with
--emit-onnx in the `kiln` domain and read back by `kiln run` — still matches onnxruntime on
the original model.

Tolerance: 1e-4 max abs error, as in test_bert.py: the fused reference kernels accumulate
in double like the unfused ones; fusion only changes the float evaluation order (e.g.
x·(1/c) for x/c, one LayerNorm formula for the decomposed one), which moves O(1) outputs
by ~1e-7.
"""

import collections
import json
import pathlib
import subprocess

import numpy as np
import pytest

from conftest import KILN_TIMEOUT_S, gen_bert, run_kiln, run_onnxruntime

TOLERANCE = 1e-4
FIXTURE_DIR = pathlib.Path(gen_bert.FIXTURE_DIR)
LAYERS = gen_bert.SIZES["tiny"].layers


def expected_ops(head, layers):
    """The fused graph of a BERT-family encoder, op by op."""
    ops = collections.Counter({
        "kiln.EmbedLayerNorm": 1,
        "kiln.MultiHeadAttention": layers,
        "kiln.SkipLayerNorm": 2 * layers,
        # fused QKV, attention output, FFN in (with the GELU), FFN out
        "kiln.Linear": 4 * layers,
    })
    if head in ("pooler", "classifier"):
        ops["kiln.Linear"] += 1  # pooler dense + tanh
        ops["Gather"] += 1       # the CLS token
    if head == "classifier":
        ops["kiln.Linear"] += 1
    return ops


# The additive-mask chain from attention_mask (Unsqueeze->Cast->Sub->Mul) is computed
# once and shared by every attention block; it is not a fusion target.
MASK_CHAIN = {"Reshape", "Unsqueeze", "Cast", "Sub", "Mul"}


def kiln_opt(kiln_bin, model, workdir, *extra):
    out, report = workdir / "fused.onnx", workdir / "report.json"
    args = [kiln_bin, "opt", str(model), "-O2", "--verify-each", "--emit-onnx", str(out),
            "--fusion-report", str(report), *extra]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=KILN_TIMEOUT_S,
                          check=False)
    assert proc.returncode == 0, f"kiln opt failed ({proc.returncode}):\n{proc.stderr}"
    return out, json.loads(report.read_text())


def fused_histogram(kiln_bin, model):
    proc = subprocess.run([kiln_bin, "inspect", str(model), "--json"], capture_output=True,
                          text=True, timeout=KILN_TIMEOUT_S, check=True)
    return collections.Counter(json.loads(proc.stdout)["op_histogram"])


def assert_kiln_matches_ort(kiln_bin, fused, original, size, batch, seq, workdir):
    feeds = gen_bert.random_inputs(gen_bert.SIZES[size], batch, seq, seed=batch * 7 + seq)
    proc, outdir = run_kiln(kiln_bin, fused, feeds, workdir)
    assert proc.returncode == 0, f"kiln run on the fused model failed:\n{proc.stderr}"
    for name, want in run_onnxruntime(original, feeds).items():
        got = np.load(outdir / f"{name}.npy")
        assert got.shape == want.shape, name
        err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
        assert err <= TOLERANCE, f"{name}: max abs error {err:.3g}"


def no_misses(report):
    return {k: v["missed"] for k, v in report["fusions"].items() if v["missed"]}


BERT_FIXTURES = sorted(FIXTURE_DIR.glob("bert_tiny_*.onnx"))


def test_bert_fixture_set():
    """Every committed BERT fixture is covered below (the glob can't silently shrink)."""
    assert len(BERT_FIXTURES) == len(gen_bert.FIXTURES), [p.name for p in BERT_FIXTURES]


@pytest.mark.parametrize("model", BERT_FIXTURES, ids=lambda p: p.stem)
def test_bert_fixture_fully_fused(kiln_bin, model, tmp_path):
    head = model.stem.rsplit("_", 1)[1]  # bert_tiny_<style>_<head>
    fused, report = kiln_opt(kiln_bin, model, tmp_path, "--shape", "batch=2,sequence=16")
    assert not no_misses(report), json.dumps(no_misses(report), indent=1)
    hist = fused_histogram(kiln_bin, fused)
    want = expected_ops(head, LAYERS)
    leftover = {op: n for op, n in hist.items() if op not in want and op not in MASK_CHAIN}
    assert not leftover, f"unfused ops left: {leftover}"
    assert {op: hist[op] for op in want} == dict(want), hist
    assert report["fusions"]["attention"]["fused"] == LAYERS
    assert_kiln_matches_ort(kiln_bin, fused, model, "tiny", 2, 16, tmp_path)


def test_minilm_to_a_few_dozen_nodes(kiln_bin, tmp_path):
    """MiniLM-L6 (opset 14 export shape): ~700 ONNX nodes -> a few dozen."""
    model = tmp_path / "minilm.onnx"
    gen_bert.save(gen_bert.build_model("minilm", "opset14", "none"), str(model))
    fused, report = kiln_opt(kiln_bin, model, tmp_path, "--shape", "batch=1,sequence=128")
    assert not no_misses(report), json.dumps(no_misses(report), indent=1)
    assert report["nodes_after"] <= 60, report["nodes_after"]
    assert report["fusions"]["attention"]["fused"] == 6
    assert_kiln_matches_ort(kiln_bin, fused, model, "minilm", 1, 128, tmp_path)


@pytest.mark.parametrize("style", ["opset14", "opset17"])
def test_symbolic_shapes_fuse_or_say_why(kiln_bin, style, tmp_path):
    """Without --shape the fused model must stay correct for any batch and sequence, and
    every block that did not fuse must appear in the report with a reason."""
    model = FIXTURE_DIR / f"bert_tiny_{style}_none.onnx"
    fused, report = kiln_opt(kiln_bin, model, tmp_path)
    for kind, misses in no_misses(report).items():
        for m in misses:
            assert m["reason"] and m["nodes"], (kind, m)
    assert report["fusions"]["attention"]["fused"] + len(
        report["fusions"]["attention"]["missed"]) == LAYERS
    for batch, seq in ((1, 7), (3, 16)):
        assert_kiln_matches_ort(kiln_bin, fused, model, "tiny", batch, seq,
                                tmp_path / f"b{batch}s{seq}")


@pytest.mark.parametrize("model", sorted(FIXTURE_DIR.glob("bert_*.onnx")),
                         ids=lambda p: p.stem)
def test_run_with_o2_matches_onnxruntime(kiln_bin, model, tmp_path):
    """`kiln run -O2` optimizes for the bound shapes, then runs the fused graph."""
    feeds = gen_bert.random_inputs(gen_bert.SIZES["tiny"], 2, 16, seed=11)
    proc, outdir = run_kiln(kiln_bin, model, feeds, tmp_path, "-O2")
    assert proc.returncode == 0, proc.stderr
    assert "optimize -O2" in proc.stdout
    for name, want in run_onnxruntime(model, feeds).items():
        got = np.load(outdir / f"{name}.npy")
        assert float(np.max(np.abs(got.astype(np.float64) - want))) <= TOLERANCE, name
