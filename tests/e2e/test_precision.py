"""bf16 and int8 cpu plans (docs/precision.md) through the CLI: every fixture compiles at
both precisions and passes its default accuracy gate; the gate fails the compile with exit
4 and leaves an earlier plan untouched; `kiln verify` (text, JSON, --accept, --calib and its
errors); `kiln plan-info` lists what stays fp32 and why; and real all-MiniLM-L6-v2 weights on
real sentences (its own tokenizer) keep their embeddings and rankings.

Bounds. The default gates are the issue's: worst-row cosine to the fp32 plan >= 0.9999 for
bf16 and >= 0.99 for int8, over seeded random valid inputs. On the real MiniLM weights this
machine measured, per sentence embedding, cosine >= 0.99998 (bf16) and >= 0.9953 (int8);
the tests ask >= 0.9999 and >= 0.99, and that the query's passages rank in the same order
as fp32 ranks them (their fp32 cosines are -0.03, 0.63, 0.08, -0.05, 0.17: the gaps, >= 0.02,
are far above the int8 error, ~0.013 at most on a cosine here).
"""

import importlib.util
import json
import pathlib
import subprocess

import numpy as np
import pytest

from conftest import KILN_TIMEOUT_S

import gen_bert  # noqa: E402  (models/ is put on sys.path by conftest)
import pretrained  # noqa: E402

FIXTURE_ROOT = pathlib.Path(gen_bert.__file__).resolve().parent / "fixtures"
MODELS = (sorted(FIXTURE_ROOT.glob("*.onnx")) + sorted((FIXTURE_ROOT / "variants").glob("*.onnx"))
          + sorted((FIXTURE_ROOT / "torch").glob("*.onnx"))
          + sorted((FIXTURE_ROOT / "decoder").glob("*.onnx")))
PROFILE = "batch=1:2,sequence=16:32"
CLASSIFIER = FIXTURE_ROOT / "bert_tiny_opset17_classifier.onnx"


def kiln(kiln_bin, *args):
    return subprocess.run([kiln_bin, *map(str, args)], capture_output=True, text=True,
                          timeout=KILN_TIMEOUT_S, check=False)


def test_the_fixture_globs_found_models():
    assert len(MODELS) >= 30, [m.name for m in MODELS]


@pytest.mark.parametrize("precision", ["bf16", "int8"])
@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.relative_to(FIXTURE_ROOT).as_posix())
def test_every_fixture_passes_its_default_gate(kiln_bin, model, precision, tmp_path):
    out = tmp_path / "plan.kiln"
    proc = kiln(kiln_bin, "compile", model, "-o", out, "--profile", PROFILE, "--precision",
                precision, "--verify-samples", "2")
    assert proc.returncode == 0, proc.stderr
    assert "gates: cosine>=" in proc.stderr and "(all met)" in proc.stderr, proc.stderr
    info = json.loads(kiln(kiln_bin, "plan-info", out, "--json").stdout)
    notes = info["precision_notes"]
    lowered = [n for n in notes if n["precision"] == precision]
    kept = [n for n in notes if n["precision"] == "fp32"]
    assert lowered, f"no GEMM at {precision}: {notes}"
    assert all(n["reason"] for n in kept), "every op kept at fp32 says why"
    assert all(not n["reason"] for n in lowered)
    if precision == "int8":
        assert {n["op"] for n in lowered} == {"kiln.QuantLinear"}


def test_plan_info_lists_the_precisions(kiln_bin, tmp_path):
    out = tmp_path / "int8.kiln"
    assert kiln(kiln_bin, "compile", CLASSIFIER, "-o", out, "--profile", PROFILE,
                "--precision", "int8", "--quiet").returncode == 0
    text = kiln(kiln_bin, "plan-info", out).stdout
    assert "precision     int8: 9 kiln.QuantLinear" in text, text
    assert "fp32: 1 kiln.Linear (output head:" in text, text
    assert "fp32: 4 kiln.SkipLayerNorm (normalization" in text, text
    assert "int8 GEMMs on " in text


def test_a_gate_not_met_exits_4_and_keeps_the_earlier_plan(kiln_bin, tmp_path):
    out = tmp_path / "model.kiln"
    assert kiln(kiln_bin, "compile", CLASSIFIER, "-o", out, "--profile", PROFILE,
                "--quiet").returncode == 0
    before = out.read_bytes()
    proc = kiln(kiln_bin, "compile", CLASSIFIER, "-o", out, "--profile", PROFILE,
                "--precision", "int8", "--accept", "max_abs<=1e-9")
    assert proc.returncode == 4, proc.stderr
    assert "fails its accuracy gate (logits: max_abs" in proc.stderr
    assert "NOT MET: logits: max_abs" in proc.stderr, "the figures are printed"
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.kiln"], "no temporary left"
    # --accept none: no gate, the plan is written.
    proc = kiln(kiln_bin, "compile", CLASSIFIER, "-o", out, "--profile", PROFILE,
                "--precision", "int8", "--accept", "none")
    assert proc.returncode == 0 and "gates:" not in proc.stderr, proc.stderr
    assert out.read_bytes() != before


@pytest.mark.parametrize("args,code,message", [
    (["--precision", "fp16"], 3, "precision 'fp16' is not supported by the cpu target"),
    (["--precision", "int8", "--target", "cuda", "--head-precision", "int8"], 2,
     "--head-precision applies to cpu int8 and bf16 plans"),
    (["--precision", "int8", "--accept", "angle>=0.9"], 2, "unknown metric 'angle'"),
    (["--precision", "int8", "--accept", "scores:cosine>=0.9"], 2, "no output 'scores'"),
    (["--calib", "/nonexistent"], 2, "nothing to calibrate or gate"),
    (["--precision", "bf16", "--int8-activations", "static"], 2,
     "static int8 activations apply to int8 plans only"),
    (["--precision", "int8", "--int8-activations", "fixed"], 2, "want dynamic or static"),
    (["--precision", "int8", "--int8-activations", "static", "--observer", "kl"], 2,
     "want minmax, percentile or entropy"),
    (["--precision", "int8", "--percentile", "0"], 2, "percentile 0 is not in (0, 100]"),
    (["--precision", "int8", "--percentile", "high"], 2, "--percentile: bad value 'high'"),
])
def test_bad_precision_options(kiln_bin, tmp_path, args, code, message):
    proc = kiln(kiln_bin, "compile", CLASSIFIER, "-o", tmp_path / "p.kiln", "--profile", PROFILE,
                *args)
    assert proc.returncode == code, proc.stderr
    assert message in proc.stderr
    assert not (tmp_path / "p.kiln").exists()


@pytest.fixture(scope="module")
def int8_plan(kiln_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("verify") / "int8.kiln"
    assert kiln(kiln_bin, "compile", CLASSIFIER, "-o", out, "--profile", PROFILE,
                "--precision", "int8", "--quiet").returncode == 0
    return out


def test_verify_text_and_json(kiln_bin, int8_plan):
    proc = kiln(kiln_bin, "verify", CLASSIFIER, int8_plan)
    assert proc.returncode == 0, proc.stderr
    assert "accuracy of the int8 plan against fp32, 4 seeded random input sets" in proc.stdout
    assert "gates: cosine>=0.99 (all met)" in proc.stdout
    report = json.loads(kiln(kiln_bin, "verify", CLASSIFIER, int8_plan, "--json", "--samples",
                             "3", "--accept", "logits:rank_agreement>=0.9").stdout)
    assert report["ok"] and report["precision"] == "int8" and report["samples"] == 3
    (logits,) = report["outputs"]
    assert logits["name"] == "logits" and logits["scores"]
    assert 0 < logits["max_abs"] < 0.1 and logits["rank_agreement"] >= 0.9
    proc = kiln(kiln_bin, "verify", CLASSIFIER, int8_plan, "--accept", "cosine>=1.5")
    assert proc.returncode == 4 and "NOT MET: logits: cosine" in proc.stdout


def test_verify_calib_folder_and_its_errors(kiln_bin, int8_plan, tmp_path):
    rng = np.random.default_rng(0)

    def save_set(path, **arrays):
        np.savez(path, **arrays)

    ids = rng.integers(0, 1000, (2, 16)).astype(np.int64)
    mask = np.ones((2, 16), np.int64)
    mask[1, 9:] = 0
    good = tmp_path / "good"
    good.mkdir()
    save_set(good / "a.npz", input_ids=ids, attention_mask=mask, token_type_ids=0 * ids)
    (good / "b").mkdir()
    for name, a in (("input_ids", ids[:1]), ("attention_mask", mask[:1]),
                    ("token_type_ids", 0 * ids[:1])):
        np.save(good / "b" / f"{name}.npy", a)
    report = json.loads(kiln(kiln_bin, "verify", CLASSIFIER, int8_plan, "--calib", good,
                             "--json").stdout)
    assert report["samples"] == 2 and report["ok"], report

    cases = {
        "empty": ({}, "holds no .npz file"),
        "names": ({"input_ids": ids, "attention_mask": mask, "types": 0 * ids},
                  "array 'types' is not an input of the model"),
        "dtype": ({"input_ids": ids.astype(np.int32), "attention_mask": mask,
                   "token_type_ids": 0 * ids}, "input 'input_ids' is i32, the model takes i64"),
        "missing": ({"input_ids": ids, "attention_mask": mask},
                    "input 'token_type_ids' is missing"),
        "shape": ({"input_ids": ids, "attention_mask": mask[:, :8], "token_type_ids": 0 * ids},
                  "input 'input_ids' is 2x16, its 'sequence' is 16 where input 'attention_mask' "
                  "has 8"),
    }
    for name, (arrays, message) in cases.items():
        d = tmp_path / name
        d.mkdir()
        if arrays:
            save_set(d / "set.npz", **arrays)
        proc = kiln(kiln_bin, "verify", CLASSIFIER, int8_plan, "--calib", d)
        assert proc.returncode == 2, (name, proc.stderr)
        assert message in proc.stderr, (name, proc.stderr)
        if arrays:
            assert "set.npz" in proc.stderr, "the error names the file"
    compressed = tmp_path / "compressed"
    compressed.mkdir()
    np.savez_compressed(compressed / "set.npz", input_ids=ids, attention_mask=mask,
                        token_type_ids=0 * ids)
    proc = kiln(kiln_bin, "verify", CLASSIFIER, int8_plan, "--calib", compressed)
    assert proc.returncode == 3 and "savez_compressed" in proc.stderr, proc.stderr


def test_nan_in_a_float_input_set_is_refused(kiln_bin, tmp_path):
    """A float-input model (an MLP: two Linears and a LayerNorm) with a NaN in its set."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(1)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 16)).astype(np.float32), "w2")
    g = numpy_helper.from_array(np.ones(16, np.float32), "g")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["z"]),
         helper.make_node("LayerNormalization", ["z", "g"], ["y"], axis=-1)],
        "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16])], [w1, w2, g])
    model = tmp_path / "mlp.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    plan = tmp_path / "mlp.kiln"
    proc = kiln(kiln_bin, "compile", model, "-o", plan, "--profile", "batch=4", "--precision",
                "int8")
    assert proc.returncode == 0, proc.stderr
    calib = tmp_path / "calib"
    calib.mkdir()
    x = rng.standard_normal((4, 16)).astype(np.float32)
    x[2, 3] = np.nan
    np.savez(calib / "nan.npz", x=x)
    proc = kiln(kiln_bin, "verify", model, plan, "--calib", calib)
    assert proc.returncode == 2 and "nan.npz: input 'x' holds NaN (element 35)" in proc.stderr


# ---------------------------------------------------------------------------------------
# Real weights, real text.

SENTENCES = [
    "A man is eating food.",
    "The quick brown fox jumps over the lazy dog near the riverbank at dawn.",
    "Stocks fell sharply on Monday.",
    "How many planets are in the solar system?",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "The train to Berlin leaves at half past nine from platform four.",
    "Machine learning models need large amounts of labelled training data.",
    "Water boils at one hundred degrees Celsius at sea level.",
]
QUERY = "How do I bake bread?"
PASSAGES = [
    "The Federal Reserve raised interest rates by a quarter point to fight inflation.",
    "Mix flour, water, yeast and salt, knead the dough, let it rise, then bake it in a hot "
    "oven until the crust is golden.",
    "The goalkeeper saved a penalty in the final minute of the match.",
    "Jupiter is the largest planet in our solar system.",
    "To change a flat tyre, loosen the nuts, jack up the car and swap in the spare wheel.",
]


@pytest.fixture(scope="module")
def minilm_embeddings(kiln_bin, tmp_path_factory):
    """{precision: [texts, 384]} for SENTENCES + QUERY + PASSAGES, padded to 64 tokens."""
    tokenizers = pytest.importorskip("tokenizers", reason="requirements-test.txt has it")
    try:
        proto = pretrained.build_model()
    except RuntimeError as err:
        pytest.fail(f"{err}\nThe real-weights test needs {pretrained.PIP_NAME}: run "
                    "scripts/setup.sh")
    d = tmp_path_factory.mktemp("minilm_precision")
    model = d / "minilm.onnx"
    gen_bert.save(proto, str(model))
    spec = importlib.util.find_spec(pretrained.PACKAGE)
    tok = tokenizers.Tokenizer.from_file(
        str(pathlib.Path(list(spec.submodule_search_locations)[0]) / "model" / "tokenizer.json"))
    tok.enable_truncation(64)
    tok.enable_padding(length=64)
    texts = SENTENCES + [QUERY] + PASSAGES
    enc = tok.encode_batch(texts)
    feeds = {"input_ids": np.array([e.ids for e in enc], np.int64),
             "attention_mask": np.array([e.attention_mask for e in enc], np.int64)}
    feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
    args = []
    for name, a in feeds.items():
        np.save(d / f"{name}.npy", a)
        args += ["--input", f"{name}={d / name}.npy"]
    out = {}
    for precision in ("fp32", "bf16", "int8"):
        plan = d / f"{precision}.kiln"
        proc = kiln(kiln_bin, "compile", model, "-o", plan, "--shape",
                    f"batch={len(texts)},sequence=64", "--precision", precision, "--quiet")
        assert proc.returncode == 0, proc.stderr
        proc = kiln(kiln_bin, "run", plan, *args, "--output-dir", d / precision)
        assert proc.returncode == 0, proc.stderr
        out[precision] = np.load(d / precision / f"{pretrained.OUTPUT_NAME}.npy")
    return out


@pytest.mark.parametrize("precision,min_cosine", [("bf16", 0.9999), ("int8", 0.99)])
def test_real_minilm_embeddings_and_rankings(minilm_embeddings, precision, min_cosine):
    a, b = minilm_embeddings["fp32"], minilm_embeddings[precision]
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cos.min() >= min_cosine, cos
    q = len(SENTENCES)
    fp32_scores = a[q + 1:] @ a[q]
    low_scores = b[q + 1:] @ b[q]
    assert list(np.argsort(-low_scores)) == list(np.argsort(-fp32_scores)), \
        (fp32_scores, low_scores)
    assert int(np.argmax(low_scores)) == 1, "the bread passage answers the bread query"


# ---------------------------------------------------------------------------------------
# Static int8 activations: one calibrated range per GEMM input.

@pytest.mark.parametrize("observer", ["minmax", "percentile", "entropy"])
def test_static_int8_activations(kiln_bin, observer, tmp_path):
    out = tmp_path / "static.kiln"
    proc = kiln(kiln_bin, "compile", CLASSIFIER, "-o", out, "--profile", PROFILE, "--precision",
                "int8", "--int8-activations", "static", "--observer", observer)
    assert proc.returncode == 0, proc.stderr
    assert "(all met)" in proc.stderr and "int8 activations: 9 static" in proc.stderr
    info = json.loads(kiln(kiln_bin, "plan-info", out, "--json").stdout)
    assert f"int8_activations=static observer={observer}" in info["compile_options"]
    ranges = [n.get("x_absmax") for n in info["precision_notes"] if n["precision"] == "int8"]
    assert len(ranges) == 9 and all(r and r > 0 for r in ranges), info["precision_notes"]
    assert "int8 activations: 9 static" in kiln(kiln_bin, "plan-info", out).stdout


def test_static_int8_on_real_minilm_is_refused_by_the_gate(kiln_bin, tmp_path):
    """Per-tensor static ranges cannot follow BERT's outlier activations: on the real MiniLM
    (seeded random valid inputs) the embeddings' worst-row cosine to fp32 measured 0.82-0.92
    for the three observers, against 0.9976 for dynamic per-row int8. The default gate
    (cosine >= 0.99) refuses the static plan: exit 4, nothing written."""
    model = tmp_path / "minilm.onnx"
    gen_bert.save(pretrained.build_model(), str(model))
    out = tmp_path / "static.kiln"
    proc = kiln(kiln_bin, "compile", model, "-o", out, "--shape", "batch=2,sequence=32",
                "--precision", "int8", "--int8-activations", "static")
    assert proc.returncode == 4, proc.stderr
    assert "gate not met" in proc.stderr or "fails" in proc.stderr, proc.stderr
    assert not out.exists()


# ---------------------------------------------------------------------------------------
# fp16's numeric-safety pass (cuda plans; checked here on the reference executor).

def outlier_model(path):
    """x [batch, 16] -> MatMul -> + 4e4 in channel 3 -> x 2 (8e4: past fp16's 65504) ->
    LayerNormalization -> MatMul -> y [batch, 8]: a residual stream with an outlier
    feature, as real Transformers carry."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(5)
    bias = np.zeros(16, np.float32)
    bias[3] = 4e4
    inits = [numpy_helper.from_array((0.3 * rng.standard_normal((16, 16))).astype(np.float32), "w1"),
             numpy_helper.from_array(bias, "outlier"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two"),
             numpy_helper.from_array(np.ones(16, np.float32), "gamma"),
             numpy_helper.from_array((0.3 * rng.standard_normal((16, 8))).astype(np.float32), "w2")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("Add", ["h", "outlier"], ["s"]),
             helper.make_node("Mul", ["s", "two"], ["r"]),
             helper.make_node("LayerNormalization", ["r", "gamma"], ["n"], axis=-1),
             helper.make_node("MatMul", ["n", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "outlier",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
                              inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_numeric_safety_keeps_an_fp16_overflow_in_fp32(kiln_bin, tmp_path):
    from conftest import run_kiln, run_onnxruntime
    model = tmp_path / "outlier.onnx"
    outlier_model(model)
    x = np.random.default_rng(6).uniform(-1, 1, (4, 16)).astype(np.float32)
    want = run_onnxruntime(model, {"x": x})["y"]
    errors = {}
    for disabled in (False, True):
        extra = ["--disable-pass", "numeric-safety"] if disabled else []
        lowered = tmp_path / f"fp16_{disabled}.onnx"
        proc = kiln(kiln_bin, "opt", model, "-O2", "--precision", "fp16", "--shape", "batch=4",
                    "--emit-onnx", lowered, "--pass-stats", *extra)
        assert proc.returncode == 0, proc.stderr
        assert ("numeric-safety: its" in proc.stderr) != disabled, proc.stderr
        proc, out = run_kiln(kiln_bin, lowered, {"x": x}, tmp_path / f"run_{disabled}")
        assert proc.returncode == 0, proc.stderr
        got = np.load(out / "y.npy").astype(np.float64)
        errors[disabled] = (np.abs(got - want).max() / np.abs(want).max()
                            if np.isfinite(got).all() else np.inf)
    assert errors[False] < 1e-2, errors  # fp16 GEMMs: ~1e-3
    assert errors[True] > 0.1, errors  # the LayerNorm read inf: NaN rows
    # The plan says so: the cuda fp16 plan's notes keep the LayerNorm fp32 for its range.
    plan = tmp_path / "outlier.kiln"
    proc = kiln(kiln_bin, "compile", model, "-o", plan, "--target", "cuda", "--precision", "fp16",
                "--profile", "batch=1:4")
    assert proc.returncode == 0, proc.stderr
    text = kiln(kiln_bin, "plan-info", plan).stdout
    assert "fp32: 1 LayerNormalization (numeric-safety: its input 0 reaches |x| = 8" in text, text


def test_precision_auto_falls_back_group_by_group(kiln_bin, tmp_path):
    out = tmp_path / "auto.kiln"
    proc = kiln(kiln_bin, "compile", CLASSIFIER, "-o", out, "--profile", PROFILE,
                "--precision", "auto", "-v")
    assert proc.returncode == 0, proc.stderr
    assert "precision auto: int8 (gates met)" in proc.stderr, proc.stderr
    assert "precision=int8" in kiln(kiln_bin, "plan-info", out).stdout
    # A gate only fp32 meets: every attempt is tried, in order, and fp32 is kept.
    proc = kiln(kiln_bin, "compile", CLASSIFIER, "-o", out, "--profile", PROFILE,
                "--precision", "auto", "--accept", "cosine>=0.9999999", "-v")
    assert proc.returncode == 0, proc.stderr
    chain = [line for line in proc.stderr.splitlines() if line.startswith("precision auto:")]
    assert [c.split(":")[1].split("(")[0].split(" fails")[0].strip() for c in chain] == [
        "int8", "int8 with the attention GEMMs in bf16", "bf16", "fp32"], chain
    info = json.loads(kiln(kiln_bin, "plan-info", out, "--json").stdout)
    assert "precision=fp32" in info["compile_options"], info["compile_options"]
    # The middle attempt is a mixed plan: the attention GEMMs bf16, the FFN int8.
    assert "bf16: 4 kiln.Linear (--precision auto: the attention GEMMs at bf16)" in proc.stderr
    proc = kiln(kiln_bin, "compile", CLASSIFIER, "-o", out, "--profile", PROFILE,
                "--precision", "auto", "--target", "cuda")
    assert proc.returncode == 3 and "runs cpu plans" in proc.stderr, proc.stderr
