"""The onnxruntime-genai fixtures (models/fixtures/genai/, written by onnxruntime-genai's
model builder: com.microsoft GroupQueryAttention with packed QKV, rotary and the KV
cache; the int4 one with MatMulNBits) against onnxruntime: `kiln run` at a prefill, a
ragged (right-padded) prefill, a decode step, a ragged decode step (each row's new token
at its own position) and a 3-token continuation chunk; and compiled cpu plans, whose
attention fuses into kiln.Attention over the present cache (a batch-3 decode runs in the
batch-4 bucket, padded).

Compared: logits rows s < min(sequence, row length) (the rest are padding, unspecified by
onnxruntime) and present K/V rows below each row's length. Bound 2e-5 absolute on O(1)
values (fp32 on both sides; measured <= 2e-7).
The int4 fixture's MatMulNBits carry accuracy_level=4, which lets onnxruntime quantize
the activations to int8 (its results then differ by ~5e-3); kiln always multiplies in
fp32, so it is compared with onnxruntime running the same file at accuracy_level=0."""

import pathlib
import subprocess

import numpy as np
import onnx
import pytest

from conftest import KILN_TIMEOUT_S, run_kiln, run_onnxruntime

TOLERANCE = 2e-5
GENAI_DIR = pathlib.Path(__file__).resolve().parents[2] / "models" / "fixtures" / "genai"
FIXTURES = sorted(GENAI_DIR.glob("*/model.onnx"))
LAYERS, KV_HEADS, HEAD, VOCAB = 2, 2, 16, 256
# batch, sequence, past, row lengths (past + sequence when None)
SHAPES = {"prefill": (1, 5, 0, None), "prefill_ragged": (2, 5, 0, [5, 3]),
          "decode": (1, 1, 5, None), "decode_ragged": (2, 1, 5, [6, 4]),
          "chunk": (1, 3, 4, None)}


def feeds_for(batch, seq, past, lengths, seed):
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, past + seq), np.int64)
    for row, n in enumerate(lengths or []):
        mask[row, n:] = 0
    feeds = {"input_ids": rng.integers(0, VOCAB, (batch, seq)).astype(np.int64),
             "attention_mask": mask}
    for layer in range(LAYERS):
        for kind in ("key", "value"):
            feeds[f"past_key_values.{layer}.{kind}"] = rng.standard_normal(
                (batch, KV_HEADS, past, HEAD)).astype(np.float32)
    return feeds


def reference_model(model, tmp_path):
    """The file onnxruntime runs: the fixture, or for MatMulNBits a copy at accuracy_level 0."""
    m = onnx.load(str(model))
    nbits = [n for n in m.graph.node if n.op_type == "MatMulNBits"]
    if not nbits:
        return model
    for node in nbits:
        for attr in node.attribute:
            if attr.name == "accuracy_level":
                attr.i = 0
    path = tmp_path / "reference.onnx"
    onnx.save(m, str(path))
    return path


def assert_match(outdir, want, feeds):
    lengths = feeds["attention_mask"].sum(axis=1)
    seq = feeds["input_ids"].shape[1]
    for name, expected in want.items():
        got = np.load(outdir / f"{name}.npy")
        assert got.shape == expected.shape, name
        for row, n in enumerate(lengths):
            if name == "logits":
                err = np.abs(got[row, :min(seq, n)] - expected[row, :min(seq, n)]).max()
            else:
                err = np.abs(got[row, :, :n] - expected[row, :, :n]).max()
            assert float(err) <= TOLERANCE, f"{name} row {row}: {err}"


def test_fixtures_present():
    assert {p.parent.name for p in FIXTURES} == {"llama_fp32", "qwen2_int4"}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("model", FIXTURES, ids=[p.parent.name for p in FIXTURES])
def test_run_matches_onnxruntime(kiln_bin, model, shape, tmp_path):
    batch, seq, past, lengths = SHAPES[shape]
    feeds = feeds_for(batch, seq, past, lengths, seed=batch * 100 + seq + past)
    want = run_onnxruntime(reference_model(model, tmp_path), feeds)
    proc, outdir = run_kiln(kiln_bin, model, feeds, tmp_path / "run")
    assert proc.returncode == 0, f"kiln run failed ({proc.returncode}):\n{proc.stderr}"
    assert_match(outdir, want, feeds)


@pytest.mark.parametrize("model", FIXTURES, ids=[p.parent.name for p in FIXTURES])
def test_plan_fuses_and_matches_onnxruntime(kiln_bin, model, tmp_path):
    import json

    shape = "sequence_length=1,past_sequence_length=5,total_sequence_length=6,kv_cache_dim=16"
    report = tmp_path / "report.json"
    proc = subprocess.run([kiln_bin, "opt", str(model), "-O2", "--shape",
                           f"batch_size=2,{shape}", "--fusion-report", str(report),
                           "--emit-onnx", str(tmp_path / "fused.onnx"), "--quiet"],
                          capture_output=True, text=True, timeout=KILN_TIMEOUT_S, check=False)
    assert proc.returncode == 0, proc.stderr
    attention = json.loads(report.read_text())["fusions"]["attention"]
    assert attention["fused"] == LAYERS and attention["missed"] == [], attention
    ops = [n.op_type for n in onnx.load(str(tmp_path / "fused.onnx")).graph.node]
    assert ops.count("Attention") == LAYERS and "Softmax" not in ops, ops

    plan = tmp_path / "plan.kiln"
    proc = subprocess.run([kiln_bin, "compile", str(model), "-o", str(plan), "--profile",
                           "batch_size=1:4", "--shape", shape],
                          capture_output=True, text=True, timeout=KILN_TIMEOUT_S, check=False)
    assert proc.returncode == 0, proc.stderr
    reference = reference_model(model, tmp_path)
    for batch, lengths in ((1, None), (3, [6, 4, 2])):
        feeds = feeds_for(batch, 1, 5, lengths, seed=batch)
        proc, outdir = run_kiln(kiln_bin, plan, feeds, tmp_path / f"plan_{batch}")
        assert proc.returncode == 0, f"kiln run on the plan failed:\n{proc.stderr}"
        assert_match(outdir, run_onnxruntime(reference, feeds), feeds)
