"""onnxruntime-optimized graphs (`model_O1.onnx` / `model_O2.onnx`, com.microsoft ops), made
here by onnxruntime's own transformer optimizer from the BERT fixtures at its levels 0, 1
and 2: they import (src/onnx/contrib_ops.cc expands each com.microsoft op into standard
ops), run on the reference executor like onnxruntime runs the same file, and compile to the
plan steps of the unoptimized model (kiln's fusions find their patterns again), plus, at
levels 1 and 2, the steps of onnxruntime's own mask semantics (see the test).

The optimizer is onnxruntime's Python package (requirements-test.txt); it imports torch
only to read its version for ROCm, so the generator runs in a subprocess with a stand-in
`torch` module (torch is not a test dependency).

Also in fp16 (the optimizer's own fp16 conversion, f32 I/O kept: what optimum's O4 writes):
the fused ops then compute in fp16 in onnxruntime, and kiln's expansions cast their f32
scale and masks to the model's dtype; a cpu plan computes in f32 (widen-fp16) with the
fp32 file's steps.

Bound: 1e-5 absolute (logits of a std-1 head and LayerNorm'd hidden states, O(1)): fp32 on
both sides, the optimizer's fused ops reassociate a few sums (measured: <= 2e-6). fp16:
8e-3, test_fp16_export.py's bound (a few f16 ulps at |y| <= 4), against onnxruntime's
fp16 run (measured: reference 5.9e-3, plan 2.9e-3)."""

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import KILN_TIMEOUT_S, run_kiln, run_onnxruntime

import gen_bert  # noqa: E402  (models/ is put on sys.path by conftest)

TOLERANCE = 1e-5
SOURCES = {"classifier": gen_bert.fixture_path("opset14", "classifier"),
           "none": gen_bert.fixture_path("opset17", "none")}

GENERATE = textwrap.dedent("""
    import sys, types
    sys.modules.setdefault("torch", types.SimpleNamespace(
        version=types.SimpleNamespace(hip=None, cuda=None, __version__="0")))
    from onnxruntime.transformers.optimizer import optimize_model
    src, dst, level, fp16 = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "fp16"
    m = optimize_model(src, model_type="bert", num_heads=4, hidden_size=64, opt_level=level)
    if fp16:
        m.convert_float_to_float16(keep_io_types=True)
    m.save_model_to_file(dst)
""")


def counts(stderr):
    m = re.search(r"steps by kernel \(all buckets\): (.*)", stderr)
    assert m, stderr
    return {k: int(n) for k, n in (p.rsplit(" ", 1) for p in m.group(1).split(", "))}


def compile_steps(kiln_bin, model, plan):
    p = subprocess.run([kiln_bin, "compile", str(model), "-o", str(plan), "--profile",
                        "batch=1:3,sequence=8:16"], capture_output=True, text=True,
                       timeout=KILN_TIMEOUT_S, check=False)
    assert p.returncode == 0, p.stderr
    return counts(p.stderr)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("level", [0, 1, 2])
@pytest.mark.parametrize("source", sorted(SOURCES))
def test_optimized_file_runs_and_compiles(kiln_bin, source, level, precision, tmp_path):
    import onnx

    optimized = tmp_path / f"{source}_O{level}.onnx"
    p = subprocess.run([sys.executable, "-c", GENERATE, str(SOURCES[source]), str(optimized),
                        str(level), precision], capture_output=True, text=True, timeout=300,
                       check=False)
    assert p.returncode == 0, p.stderr
    ops = {(n.domain, n.op_type) for n in onnx.load(str(optimized)).graph.node}
    # What the optimizer wrote: the test is about these ops.
    assert ("com.microsoft", "SkipLayerNormalization") in ops, ops
    assert ("com.microsoft", "BiasGelu") in ops, ops
    if level > 0:
        assert ("com.microsoft", "Attention") in ops, ops
        assert ("com.microsoft", "EmbedLayerNormalization") in ops, ops

    feeds = gen_bert.random_inputs(gen_bert.SIZES["tiny"], batch=3, seq=16)
    want = run_onnxruntime(optimized, feeds)
    plan = tmp_path / "optimized.kiln"
    steps = compile_steps(kiln_bin, optimized, plan)
    want_steps = compile_steps(kiln_bin, SOURCES[source], tmp_path / "source.kiln")
    if level > 0:
        # EmbedLayerNormalization hands Attention the count of each row's mask ones and
        # Attention masks the keys at or past it (onnxruntime's semantics, which equal the
        # 0/1 mask's only for trailing padding): per bucket (4) one reduce of the mask, a
        # ref step (cpu has no integer reduce kernel), and five eltwise steps
        # (Cast, Less, Cast, 1 - keep, · filter) build the additive mask.
        want_steps["eltwise"] += 5 * 4
        want_steps["ref"] = 4
    assert steps == want_steps
    for what, target in (("reference", optimized), ("plan", plan)):
        proc, out = run_kiln(kiln_bin, target, feeds, tmp_path / what)
        assert proc.returncode == 0, proc.stderr
        for name, expected in want.items():
            err = float(np.abs(np.load(out / f"{name}.npy") - expected).max())
            assert err <= (TOLERANCE if precision == "fp32" else 8e-3), (what, name, err)
    if precision == "fp16":
        # cuda keeps the file's fp16: flash attention, the fp16 mask cast to f32 for it (the
        # mask-index reduce of levels 1 and 2 is a cuda kernel too), no host step.
        p = subprocess.run([kiln_bin, "compile", str(optimized), "-o", str(tmp_path / "c.kiln"),
                            "--target", "cuda", "--shape", "batch=3,sequence=16"],
                           capture_output=True, text=True, timeout=KILN_TIMEOUT_S, check=False)
        assert p.returncode == 0, p.stderr
        cuda = counts(p.stderr)
        assert cuda["flash_attention"] == 2 and cuda["linear"] == want_steps["linear"] // 4, cuda
