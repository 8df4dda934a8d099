"""fp16 exports (`model_fp16.onnx`, made here by onnxruntime's own converter from the BERT
fixture, with fp16 I/O and with fp32 I/O kept): they import, run on the reference executor
in fp16 and compile for the cpu, where `widen-fp16` computes in f32 behind Casts at the
edges so the plan fuses like the float fixture's (docs/passes.md "widen-fp16").

Bounds (last_hidden_state, |y| <= ~4: one f16 ulp there is 2^-9 = 0.002): every kiln run
within 8e-3 of onnxruntime running the same fp16 file and of the fp32 model (measured:
reference 3.9e-3 / 5.0e-3, plan 1.8-2.0e-3 / 3.4-4.3e-3; onnxruntime's own fp16 run is
4.1e-3 from fp32)."""

import re
import subprocess

import numpy as np
import pytest

from conftest import KILN_TIMEOUT_S, run_kiln, run_onnxruntime

import gen_bert  # noqa: E402  (models/ is put on sys.path by conftest)
import pathlib

FIXTURE = (pathlib.Path(gen_bert.__file__).resolve().parent / "fixtures" /
           "bert_tiny_opset17_none.onnx")


@pytest.fixture(scope="module")
def fp16_models(tmp_path_factory):
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16
    d = tmp_path_factory.mktemp("fp16")
    out = {}
    for keep_io in (False, True):
        m = convert_float_to_float16(onnx.load(str(FIXTURE)), keep_io_types=keep_io)
        path = d / f"fp16_io{'32' if keep_io else '16'}.onnx"
        onnx.save(m, str(path))
        out[keep_io] = path
    return out


def feeds():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 1000, size=(2, 16)).astype(np.int64)
    mask = np.ones((2, 16), np.int64)
    mask[1, 10:] = 0
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


def onnxruntime_optimized(model, f):
    import onnxruntime as ort
    s = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    return s.run(["last_hidden_state"], f)[0]


def counts(stderr):
    m = re.search(r"steps by kernel \(all buckets\): (.*)", stderr)
    assert m, stderr
    return {k: int(n) for k, n in (p.rsplit(" ", 1) for p in m.group(1).split(", "))}


@pytest.mark.parametrize("keep_io", [False, True], ids=["io16", "io32"])
def test_fp16_export_runs_and_compiles(kiln_bin, fp16_models, keep_io, tmp_path):
    model = fp16_models[keep_io]
    f = feeds()
    theirs = onnxruntime_optimized(model, f).astype(np.float32)
    fp32 = run_onnxruntime(FIXTURE, f)["last_hidden_state"]
    proc, out = run_kiln(kiln_bin, model, f, tmp_path / "ref")
    assert proc.returncode == 0, proc.stderr
    ref = np.load(out / "last_hidden_state.npy")
    assert ref.dtype == (np.float32 if keep_io else np.float16)

    def compile_(m, plan, *shape):
        p = subprocess.run([kiln_bin, "compile", str(m), "-o", str(plan), *shape],
                           capture_output=True, text=True, timeout=KILN_TIMEOUT_S, check=False)
        assert p.returncode == 0, p.stderr
        return counts(p.stderr)
    # One static shape, and a profile of 4 buckets compiled from the symbolic graph (where
    # the converter's value_info symbols would block attention if they were kept).
    for shape, buckets in ((["--shape", "batch=2,sequence=16"], 1),
                           (["--profile", "batch=1:2,sequence=8:16"], 4)):
        want = compile_(FIXTURE, tmp_path / "f32.kiln", *shape)
        got = compile_(model, tmp_path / "f16.kiln", *shape)
        if not keep_io:
            want["eltwise"] += buckets  # the Cast of the output back to f16
        assert got == want, shape
    proc, out = run_kiln(kiln_bin, tmp_path / "f16.kiln", f, tmp_path / "plan")
    assert proc.returncode == 0, proc.stderr
    plan = np.load(out / "last_hidden_state.npy")
    assert plan.dtype == ref.dtype
    for name, y in (("reference", ref), ("plan", plan)):
        y = y.astype(np.float32)
        assert float(np.abs(y - theirs).max()) <= 8e-3, name
        assert float(np.abs(y - fp32).max()) <= 8e-3, name


@pytest.mark.parametrize("keep_io", [False, True], ids=["io16", "io32"])
def test_fp16_export_compiles_for_cuda(kiln_bin, fp16_models, keep_io, tmp_path):
    """On cuda an fp16 export keeps its fp16 (no widen-fp16): it compiles to the steps of the
    float fixture compiled at --precision fp16 — flash attention, fp16 GEMMs and norms —
    its own fp16 attention mask cast to f32, the only mask the attention kernels take
    (f32-operands); with f32 I/O kept, one more Cast at the output. (A cuda plan compiles
    on any machine; running it is the GPU tests'.)"""
    def compile_(m, plan, *extra):
        p = subprocess.run([kiln_bin, "compile", str(m), "-o", str(plan), "--target", "cuda",
                            "--shape", "batch=2,sequence=16", "--accept", "none", *extra],
                           capture_output=True, text=True, timeout=KILN_TIMEOUT_S, check=False)
        assert p.returncode == 0, p.stderr
        return counts(p.stderr)
    want = compile_(FIXTURE, tmp_path / "f32_at_fp16.kiln", "--precision", "fp16")
    got = compile_(fp16_models[keep_io], tmp_path / "f16.kiln")
    assert want["flash_attention"] == 2, want
    if keep_io:
        want["eltwise"] += 1
    assert got == want
