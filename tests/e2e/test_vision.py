"""Image towers (models/fixtures/vision/: transformers' CLIPVisionModel and ViTModel,
exported by torch.onnx's TorchScript and dynamo exporters, models/export_vision.py) against
onnxruntime: on the reference executor (`kiln run MODEL.onnx`) and as a compiled plan,
where the patch-embedding Conv is a `conv` step (oneDNN), the attention blocks fuse, and
no step is left to the reference executor but the ones named below.

Tolerance: max |kiln - onnxruntime| <= 1e-4 per output, as for the text fixtures
(tests/e2e/test_torch_fixtures.py): fp32 on both sides, different accumulation orders, O(1)
LayerNorm'd outputs; the errors seen are ~1e-6. torch is not needed."""

import pathlib
import re
import subprocess

import numpy as np
import pytest

from conftest import KILN_TIMEOUT_S, run_kiln, run_onnxruntime

import export_vision  # noqa: E402  (models/ is put on sys.path by conftest)

TOLERANCE = 1e-4
FIXTURES = sorted(pathlib.Path(export_vision.FIXTURE_DIR).glob("*.onnx"))


def counts(stderr):
    m = re.search(r"steps by kernel \(all buckets\): (.*)", stderr)
    assert m, stderr
    return {k: int(n) for k, n in (p.rsplit(" ", 1) for p in m.group(1).split(", "))}


def test_every_fixture_is_here():
    names = {p.name for p in FIXTURES}
    assert names == {export_vision.fixture_name(f, e) for f in export_vision.FAMILIES
                     for e in export_vision.EXPORTERS}


@pytest.mark.parametrize("model", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_reference_and_plan_match_onnxruntime(kiln_bin, model, tmp_path):
    plan = tmp_path / "model.kiln"
    p = subprocess.run([kiln_bin, "compile", str(model), "-o", str(plan), "--profile",
                        "batch=1:2"], capture_output=True, text=True, timeout=KILN_TIMEOUT_S,
                       check=False)
    assert p.returncode == 0, p.stderr
    steps = counts(p.stderr)
    assert steps.get("conv") == 2, steps  # the patch embedding, one per bucket
    assert steps.get("attention", 0) == 2 * export_vision.LAYERS, steps
    assert "ref" not in steps, steps
    for batch in (2, 1):
        feeds = {"pixel_values": export_vision.random_pixels(batch, seed=10 + batch)}
        want = run_onnxruntime(model, feeds)
        for what, target in (("reference", model), ("plan", plan)):
            proc, out = run_kiln(kiln_bin, target, feeds, tmp_path / f"{what}{batch}")
            assert proc.returncode == 0, proc.stderr
            for name, expected in want.items():
                got = np.load(out / f"{name}.npy")
                assert got.shape == expected.shape, (what, name)
                err = float(np.abs(got - expected).max())
                assert err <= TOLERANCE, (what, batch, name, err)
