"""An opset-11 BERT export (models/gen_bert.py --style opset11: Unsqueeze axes and Dropout
ratio as attributes, Softmax(axis=3) with the pre-13 flatten-at-axis semantics) imports,
matches onnxruntime on the reference executor and as a plan, and compiles to exactly the
steps of the opset-14 model: the importer's canonical forms (docs/importer.md) leave the
fusions nothing new to learn.

Bound: 1e-5 absolute on logits of magnitude ~1 (the classifier head's weights are N(0, 1)):
the f32 kernels reassociate sums differently from onnxruntime's (measured: below 3e-6)."""

import re
import subprocess

import numpy as np

from conftest import KILN_TIMEOUT_S, run_kiln, run_onnxruntime

import gen_bert  # noqa: E402  (models/ is put on sys.path by conftest)


def counts(stderr):
    m = re.search(r"steps by kernel \(all buckets\): (.*)", stderr)
    assert m, stderr
    return {k: int(n) for k, n in (p.rsplit(" ", 1) for p in m.group(1).split(", "))}


def test_opset11_bert_compiles_like_opset14(kiln_bin, tmp_path):
    models = {}
    for style in ("opset11", "opset14"):
        models[style] = tmp_path / f"{style}.onnx"
        gen_bert.save(gen_bert.build_model("tiny", style, "classifier"), str(models[style]))
    feeds = gen_bert.random_inputs(gen_bert.SIZES["tiny"], batch=3, seq=16)
    theirs = run_onnxruntime(models["opset11"], feeds)["logits"]

    proc, out = run_kiln(kiln_bin, models["opset11"], feeds, tmp_path / "ref")
    assert proc.returncode == 0, proc.stderr
    assert float(np.abs(np.load(out / "logits.npy") - theirs).max()) <= 1e-5

    steps = {}
    for style, model in models.items():
        p = subprocess.run([kiln_bin, "compile", str(model), "-o", str(tmp_path / f"{style}.kiln"),
                            "--profile", "batch=1:4,sequence=8:16"],
                           capture_output=True, text=True, timeout=KILN_TIMEOUT_S, check=False)
        assert p.returncode == 0, p.stderr
        steps[style] = counts(p.stderr)
    assert steps["opset11"] == steps["opset14"]
    assert steps["opset11"].get("attention", 0) > 0, steps

    proc, out = run_kiln(kiln_bin, tmp_path / "opset11.kiln", feeds, tmp_path / "plan")
    assert proc.returncode == 0, proc.stderr
    assert float(np.abs(np.load(out / "logits.npy") - theirs).max()) <= 1e-5
