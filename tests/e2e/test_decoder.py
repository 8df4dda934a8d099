"""The LLaMA-style decoder fixture (models/gen_decoder.py): `kiln run` vs onnxruntime, and
`kiln opt -O2` folding the rotary sin/cos tables into constants and fusing every RMSNorm.

The fixture is a TorchScript-style (opset 17) LlamaForCausalLM with 2 layers, hidden 64,
4 heads, vocab 256: decomposed RMSNorm, per-layer rotary embedding computed from
Range(0, S) positions, a Trilu causal mask combined with the padding mask, SwiGLU MLP.

Tolerance: max |kiln - onnxruntime| <= 1e-4 on the logits. Both compute in fp32, but
kiln's reference kernels accumulate in double while ORT accumulates fp32 in MLAS's order,
and Sin/Cos/Exp/Sigmoid come from different libraries; the logits are O(0.5) and the
errors seen are ≤ 2.1e-7, so 1e-4 leaves margin without hiding real bugs: ignoring the
padding mask moves the logits by more than 1e-3 (0.2 to 0.63 here;
test_inputs_are_discriminating checks it).
"""

import collections
import json
import pathlib
import subprocess

import numpy as np
import onnx
import pytest

from conftest import KILN_TIMEOUT_S, run_kiln, run_onnxruntime

import gen_decoder  # noqa: E402  (models/ is put on sys.path by conftest)

TOLERANCE = 1e-4
FIXTURE = pathlib.Path(gen_decoder.FIXTURE)
CFG = gen_decoder.TINY
RMSNORMS = 2 * CFG.layers + 1  # input + post-attention norm per layer, final norm
# Every norm but layer 0's input norm follows a residual Add: fuse-skip-layernorm makes it
# a kiln.SkipRMSNorm (the residual sum its second output).
SKIP_RMSNORMS = RMSNORMS - 1
# (batch, sequence, padding side) of the run checks.
CASES = [(2, 16, "left"), (1, 7, "right")]
# Ops that compute the rotary tables and the causal mask; with static shapes all of them
# depend on constants only and must be folded away.
FOLDED_OPS = {"Sin", "Cos", "Range", "Trilu", "ConstantOfShape", "Expand"}
# The pieces of a decomposed RMSNorm; none may survive -O2.
RMSNORM_PIECES = {"Pow", "ReduceMean", "Sqrt", "Reciprocal", "Div"}


def feeds_for(batch, seq, padding):
    return gen_decoder.random_inputs(CFG, batch, seq, seed=batch * 7 + seq, padding=padding)


def max_error(got, want):
    assert got.shape == want.shape
    return float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))


def assert_kiln_matches_ort(kiln_bin, model, feeds, workdir):
    """`kiln run` on `model` vs onnxruntime on the original fixture."""
    proc, outdir = run_kiln(kiln_bin, model, feeds, workdir)
    assert proc.returncode == 0, f"kiln run failed ({proc.returncode}):\n{proc.stderr}"
    want = run_onnxruntime(FIXTURE, feeds)
    assert list(want) == ["logits"]
    err = max_error(np.load(outdir / "logits.npy"), want["logits"])
    assert err <= TOLERANCE, f"logits: max abs error {err:.3g}"


def kiln_opt(kiln_bin, workdir, *extra):
    """`kiln opt FIXTURE -O2 ... --emit-onnx`: (fused model path, report, op histogram)."""
    out, report = workdir / "fused.onnx", workdir / "report.json"
    args = [kiln_bin, "opt", str(FIXTURE), "-O2", "--verify-each", "--emit-onnx", str(out),
            "--fusion-report", str(report), *extra]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=KILN_TIMEOUT_S,
                          check=False)
    assert proc.returncode == 0, f"kiln opt failed ({proc.returncode}):\n{proc.stderr}"
    inspect = subprocess.run([kiln_bin, "inspect", str(out), "--json"], capture_output=True,
                             text=True, timeout=KILN_TIMEOUT_S, check=True)
    histogram = collections.Counter(json.loads(inspect.stdout)["op_histogram"])
    return out, json.loads(report.read_text()), histogram


def assert_rmsnorm_fused(report, histogram, rotary_left=0):
    rms = report["fusions"]["rmsnorm"]
    assert rms["fused"] == RMSNORMS and rms["missed"] == [], rms
    assert histogram["kiln.RMSNorm"] == RMSNORMS - SKIP_RMSNORMS, histogram
    assert histogram["kiln.SkipRMSNorm"] == SKIP_RMSNORMS, histogram
    assert report["fusions"]["skip_layernorm"]["fused"] == SKIP_RMSNORMS, report
    assert not RMSNORM_PIECES & set(histogram), histogram
    # Q and K of every layer: the rotate-half RoPE is one kiln.Rotary, no piece left, and
    # fuse-attention then takes it (and the rest of the block) into the fused attention:
    # no kiln.Rotary, no MatMul or Softmax left, and no near-miss of any kind.
    assert report["fusions"]["rotary"]["fused"] == 2 * CFG.layers, report["fusions"]["rotary"]
    attention = report["fusions"]["attention"]
    assert attention["fused"] == CFG.layers, attention
    assert histogram["kiln.MultiHeadAttention"] == CFG.layers, histogram
    # rotary_left: with symbolic shapes each layer's K rotary also feeds the Shape that
    # slices the mask to the key length, so it stays (for that Shape only) — a known
    # leftover of -O2 without --shape; compiled plans have static shapes and fold it.
    assert histogram["kiln.Rotary"] == rotary_left, histogram
    assert not {"Neg", "Softmax"} & set(histogram), histogram
    for kind, entry in report["fusions"].items():
        assert entry["missed"] == [], (kind, entry["missed"])


def test_fixture_is_reproducible_and_small():
    """The committed file is exactly what the seeded generator writes, and ≤ 1 MB."""
    assert FIXTURE.stat().st_size <= 1024 * 1024
    assert gen_decoder.build_model().SerializeToString() == FIXTURE.read_bytes()
    model = onnx.load(str(FIXTURE))
    ops = collections.Counter(n.op_type for n in model.graph.node)
    # The patterns this fixture exists for are really in it.
    assert ops["Trilu"] == 1 and ops["Sin"] == CFG.layers and ops["Cos"] == CFG.layers
    assert ops["Range"] == 2 and ops["Pow"] == RMSNORMS and ops["Sigmoid"] == CFG.layers


@pytest.mark.parametrize("batch,seq,padding", CASES)
def test_kiln_run_matches_onnxruntime(kiln_bin, tmp_path, batch, seq, padding):
    assert_kiln_matches_ort(kiln_bin, FIXTURE, feeds_for(batch, seq, padding), tmp_path)


def test_inputs_are_discriminating():
    """Dropping the padding mask moves the logits well past the tolerance, so the run
    checks would catch a kiln that ignored it."""
    for batch, seq, padding in CASES:
        feeds = feeds_for(batch, seq, padding)
        assert (feeds["attention_mask"] == 0).any()
        unmasked = dict(feeds, attention_mask=np.ones_like(feeds["attention_mask"]))
        diff = max_error(run_onnxruntime(FIXTURE, feeds)["logits"],
                         run_onnxruntime(FIXTURE, unmasked)["logits"])
        assert diff > 1e-3, (batch, seq, diff)


def test_O2_static_folds_rotary_and_fuses_rmsnorm(kiln_bin, tmp_path):
    """With static shapes the rotary cos/sin tables and the causal mask fold to
    constants, every RMSNorm and attention block (rotary included) fuses, and the emitted
    model still matches onnxruntime."""
    out, report, histogram = kiln_opt(kiln_bin, tmp_path, "--shape", "batch=1,sequence=16")
    assert not FOLDED_OPS & set(histogram), histogram
    assert histogram["Shape"] == 0, histogram
    assert_rmsnorm_fused(report, histogram)
    assert_kiln_matches_ort(kiln_bin, out, feeds_for(1, 16, "left"), tmp_path / "run")


def test_O2_symbolic_numbers_match(kiln_bin, tmp_path):
    """Without --shape the tables stay computed (S is symbolic) but once, not per layer,
    every RMSNorm and attention block fuses, and the fused model runs at any batch x
    sequence."""
    out, report, histogram = kiln_opt(kiln_bin, tmp_path)
    assert histogram["Sin"] == 1 and histogram["Cos"] == 1, histogram
    assert_rmsnorm_fused(report, histogram, rotary_left=CFG.layers)
    for batch, seq, padding in CASES:
        assert_kiln_matches_ort(kiln_bin, out, feeds_for(batch, seq, padding),
                                tmp_path / f"run_{batch}x{seq}")


def test_grouped_query_variant_fuses_and_matches(kiln_bin, tmp_path):
    """The generator's GQA form (--kv-heads 2: Qwen2-style repeat_kv on K after rotary and
    on V) fuses every attention block with num_kv_heads = 2 and no near-miss, and the fused
    model matches onnxruntime on the generated model (same tolerance; the generator's own
    check compares onnxruntime with its numpy reference)."""
    cfg = gen_decoder.DecoderConfig(kv_heads=2)
    model_path = tmp_path / "gqa.onnx"
    gen_decoder.save(gen_decoder.build_model(cfg), str(model_path))
    fused, report = tmp_path / "fused.onnx", tmp_path / "report.json"
    proc = subprocess.run([kiln_bin, "opt", str(model_path), "-O2", "--verify-each",
                           "--emit-onnx", str(fused), "--fusion-report", str(report),
                           "--quiet"], capture_output=True, text=True,
                          timeout=KILN_TIMEOUT_S, check=False)
    assert proc.returncode == 0, proc.stderr
    fusions = json.loads(report.read_text())["fusions"]
    assert all(not v["missed"] for v in fusions.values()), fusions
    assert fusions["attention"]["fused"] == CFG.layers, fusions["attention"]
    heads = [{a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
             for n in onnx.load(str(fused)).graph.node if n.op_type == "MultiHeadAttention"]
    assert [h.get("num_kv_heads") for h in heads] == [2] * CFG.layers, heads
    for batch, seq, padding in CASES:
        feeds = gen_decoder.random_inputs(cfg, batch, seq, seed=batch * 7 + seq, padding=padding)
        proc, outdir = run_kiln(kiln_bin, fused, feeds, tmp_path / f"run_{batch}x{seq}")
        assert proc.returncode == 0, proc.stderr
        want = run_onnxruntime(model_path, feeds)["logits"]
        err = max_error(np.load(outdir / "logits.npy"), want)
        assert err <= TOLERANCE, f"{batch}x{seq}: logits max abs error {err:.3g}"
