"""`kiln run` vs onnxruntime on the encoder variants of models/gen_variants.py: DistilBERT,
RoBERTa/XLM-R, and sentence-transformers bi-encoders with mean and CLS pooling.

Every committed fixture (models/fixtures/variants/) runs at batch 2 x sequence 16 and
batch 1 x sequence 7 on seeded inputs with trailing padding, unoptimized and after
`kiln opt -O2` (fused model written with --emit-onnx and read back by `kiln run`).

Tolerance: max |kiln - onnxruntime| <= 1e-4 per output, as in test_bert.py. Both compute
in fp32 but kiln's reference kernels accumulate in double while ORT accumulates fp32 in
another order (MLAS GEMM blocking), and Erf/Exp come from different libraries; fusion only
changes the float evaluation order further. Outputs are O(1) (hidden states) or O(0.1)
(unit-norm 64-d embeddings), and the errors seen are ~1e-7..1e-6, so 1e-4 leaves margin
without hiding real bugs: ignoring the padding alone moves every output by more than 1e-3
(test_inputs_are_discriminating checks that).
"""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from conftest import KILN_TIMEOUT_S, SOURCE_DIR, run_kiln, run_onnxruntime

sys.path.insert(0, str(SOURCE_DIR / "models"))
import gen_variants  # noqa: E402  (models/ is on the path via conftest)

TOLERANCE = 1e-4
SHAPES = [(2, 16), (1, 7)]
VARIANTS = sorted(gen_variants.VARIANTS)


def fixture(variant):
    return pathlib.Path(gen_variants.fixture_path(variant))


def compare(kiln_bin, run_model, oracle_model, variant, batch, seq, workdir):
    """Runs kiln on `run_model` and ORT on `oracle_model` with the same seeded inputs."""
    feeds = gen_variants.random_inputs(variant, "tiny", batch, seq, seed=batch * 100 + seq)
    proc, outdir = run_kiln(kiln_bin, run_model, feeds, workdir)
    assert proc.returncode == 0, f"kiln run failed ({proc.returncode}):\n{proc.stderr}"
    expected = run_onnxruntime(oracle_model, feeds)
    assert set(expected) == set(gen_variants.VARIANTS[variant][2])
    for name, want in expected.items():
        path = outdir / f"{name}.npy"
        assert path.is_file(), f"kiln wrote no {path.name}; wrote {sorted(os.listdir(outdir))}"
        got = np.load(path)
        assert got.dtype == want.dtype, f"{name}: dtype {got.dtype}, expected {want.dtype}"
        assert got.shape == want.shape, f"{name}: shape {got.shape}, expected {want.shape}"
        err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
        assert err <= TOLERANCE, f"{name}: max abs error {err:.3g} > {TOLERANCE}"


def test_fixtures_are_reproducible():
    """The committed fixtures are exactly what the generator writes today."""
    for variant in VARIANTS:
        model = gen_variants.build_model(variant, "tiny")
        assert fixture(variant).read_bytes() == model.SerializeToString(), variant
        assert fixture(variant).stat().st_size <= 2 << 20, variant


@pytest.mark.parametrize("batch,seq", SHAPES, ids=[f"b{b}s{s}" for b, s in SHAPES])
@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_matches_onnxruntime(kiln_bin, variant, batch, seq, tmp_path):
    compare(kiln_bin, fixture(variant), fixture(variant), variant, batch, seq, tmp_path)


def kiln_opt(kiln_bin, model, workdir, *extra):
    out = workdir / "fused.onnx"
    args = [kiln_bin, "opt", str(model), "-O2", "--verify-each", "--quiet", "--emit-onnx",
            str(out), *extra]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=KILN_TIMEOUT_S,
                          check=False)
    assert proc.returncode == 0, f"kiln opt failed ({proc.returncode}):\n{proc.stderr}"
    return out


def op_histogram(kiln_bin, model):
    proc = subprocess.run([kiln_bin, "inspect", str(model), "--json"], capture_output=True,
                          text=True, timeout=KILN_TIMEOUT_S, check=True)
    return json.loads(proc.stdout)["op_histogram"]


# What fuse-embed-layernorm and fuse-pooling must produce on each variant.
EXPECTED_FUSED = {
    "distilbert": {"kiln.EmbedLayerNorm": 1},
    "roberta": {"kiln.EmbedLayerNorm": 1},
    "st_mean": {"kiln.EmbedLayerNorm": 1, "kiln.Pool": 1},
    "st_cls": {"kiln.EmbedLayerNorm": 1, "kiln.Pool": 1},
}


@pytest.mark.parametrize("shape_spec", ["static", "symbolic"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_fused_variant_matches_onnxruntime(kiln_bin, variant, shape_spec, tmp_path):
    """-O2 fuses the embeddings (and the pooling head) and still matches ORT. Static shapes
    are specialized to batch 2 x 16, so only that shape runs; symbolic runs both."""
    extra = ["--shape", "batch=2,sequence=16"] if shape_spec == "static" else []
    fused = kiln_opt(kiln_bin, fixture(variant), tmp_path, *extra)
    hist = op_histogram(kiln_bin, fused)
    for op, count in EXPECTED_FUSED[variant].items():
        assert hist.get(op, 0) == count, f"{op}: {hist}"
    shapes = SHAPES[:1] if shape_spec == "static" else SHAPES
    for batch, seq in shapes:
        compare(kiln_bin, fused, fixture(variant), variant, batch, seq,
                tmp_path / f"b{batch}s{seq}")


def test_inputs_are_discriminating():
    """The comparison can catch masking bugs: in ORT, ignoring the padding (mask all ones)
    moves every output by far more than TOLERANCE."""
    for variant in VARIANTS:
        feeds = gen_variants.random_inputs(variant, "tiny", 2, 16, seed=216)
        unmasked = dict(feeds, attention_mask=np.ones_like(feeds["attention_mask"]))
        with_mask = run_onnxruntime(fixture(variant), feeds)
        without = run_onnxruntime(fixture(variant), unmasked)
        for name in with_mask:
            delta = float(np.max(np.abs(with_mask[name] - without[name])))
            assert delta > 10 * TOLERANCE, f"{variant} {name}: mask moves output {delta}"


def test_roberta_positions_follow_padding(kiln_bin, tmp_path):
    """RoBERTa's position ids come from input_ids (padding_idx 1): with the padding moved
    from the end to the start of a row, the real tokens keep positions 2..6, so their
    outputs stay the same in ORT (a fixed 0..S-1 rule would shift them), and kiln's fused
    model matches ORT on the left-padded row too."""
    right = np.array([[5, 6, 7, 8, 9, 1, 1, 1]], np.int64)
    left = np.array([[1, 1, 1, 5, 6, 7, 8, 9]], np.int64)
    feeds = {ids.tobytes(): {"input_ids": ids, "attention_mask": (ids != 1).astype(np.int64)}
             for ids in (right, left)}
    a = run_onnxruntime(fixture("roberta"), feeds[right.tobytes()])["last_hidden_state"]
    b = run_onnxruntime(fixture("roberta"), feeds[left.tobytes()])["last_hidden_state"]
    assert float(np.max(np.abs(a[0, :5] - b[0, 3:]))) < TOLERANCE
    fused = kiln_opt(kiln_bin, fixture("roberta"), tmp_path)
    proc, outdir = run_kiln(kiln_bin, fused, feeds[left.tobytes()], tmp_path / "left")
    assert proc.returncode == 0, proc.stderr
    err = float(np.max(np.abs(np.load(outdir / "last_hidden_state.npy") - b)))
    assert err <= TOLERANCE, err
