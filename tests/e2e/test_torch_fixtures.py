"""`kiln run` vs onnxruntime on the real torch.onnx exports in models/fixtures/torch/.

The fixtures are tiny transformers models (BERT, a BERT cross-encoder, DistilBERT,
RoBERTa, XLM-RoBERTa, ELECTRA, MPNet, DeBERTa-v2, ModernBERT, GPT-2, and the decoders
Llama, Qwen2 with grouped-query attention and Mistral with a sliding window; and in
models/fixtures/kv/ Llama and Qwen2 in the KV-cache form) exported by torch.onnx's TorchScript and dynamo exporters with eager and
sdpa attention (models/export_torch.py; the versions used are in the folder's README).
Each runs at batch 2 x sequence 16 and batch 1 x sequence 7 on seeded inputs whose
attention mask has trailing padding. torch is not needed: only the committed files and
export_torch's numpy-only helpers are used.

Tolerance: max |kiln - onnxruntime| <= 1e-4 per output. Both compute in fp32, but kiln's
reference kernels accumulate in double while ORT accumulates fp32 in MLAS's blocking
order, and Erf/Tanh/Exp come from different libraries. The outputs are O(1) (LayerNorm'd
hidden states, logits of a std-1 classifier head); the errors seen are ~1e-6 or less, so
1e-4 leaves margin without hiding real bugs: ignoring the padding mask moves every output
of every fixture by more than 1e-3 (test_inputs_are_discriminating checks that).

Fixtures kiln cannot run yet are xfail(strict=True) with the missing op named, so the
test fails (XPASS) as soon as support lands and the mark must be removed.
"""

import collections
import os
import pathlib

import numpy as np
import pytest

from conftest import run_kiln, run_onnxruntime

import export_torch  # noqa: E402  (models/ is put on sys.path by conftest)

TOLERANCE = 1e-4
SHAPES = [(2, 16), (1, 7)]
FIXTURE_DIR = pathlib.Path(export_torch.FIXTURE_DIR)
FIXTURES = sorted(FIXTURE_DIR.glob("*.onnx"))
MAX_FIXTURE_BYTES = 5 * 1024 * 1024

# Why kiln cannot run a fixture yet, by fixture name (reason string). Empty: every fixture
# runs. (The dynamo exports, which index the padding mask with GatherND, were listed here
# until kiln gained GatherND.)
UNSUPPORTED = {}


def fixture_params():
    params = []
    for path in FIXTURES:
        marks = []
        if path.name in UNSUPPORTED:
            marks.append(pytest.mark.xfail(strict=True, raises=AssertionError,
                                           reason=UNSUPPORTED[path.name]))
        params.append(pytest.param(path, id=path.stem, marks=marks))
    return params


def family_of(path):
    return export_torch.parse_fixture_name(path.name)[0]


def test_fixtures_present():
    """Every family x exporter x attention fixture is committed, nothing else is in the
    folder, and each file is within the size budget (a missing glob would test nothing)."""
    wanted = {export_torch.fixture_name(f, e, a) for f in export_torch.FAMILIES
              if export_torch.fixture_dir(f) == export_torch.FIXTURE_DIR
              for e in export_torch.EXPORTERS for a in export_torch.FAMILIES[f].attentions}
    names = {p.name for p in FIXTURES}
    assert names == wanted, f"missing {sorted(wanted - names)}, extra {sorted(names - wanted)}"
    for path in FIXTURES:
        assert path.stat().st_size <= MAX_FIXTURE_BYTES, f"{path.name} is too large"
    assert set(UNSUPPORTED) <= wanted


@pytest.mark.parametrize("batch,seq", SHAPES, ids=[f"b{b}s{s}" for b, s in SHAPES])
@pytest.mark.parametrize("model", fixture_params())
def test_fixture_matches_onnxruntime(kiln_bin, model, batch, seq, tmp_path):
    feeds = export_torch.random_inputs(family_of(model), batch, seq, seed=batch * 100 + seq)
    proc, outdir = run_kiln(kiln_bin, model, feeds, tmp_path)
    assert proc.returncode == 0, f"kiln run failed ({proc.returncode}):\n{proc.stderr}"
    expected = run_onnxruntime(model, feeds)
    assert list(expected) == list(export_torch.FAMILIES[family_of(model)].outputs)
    for name, want in expected.items():
        path = outdir / f"{name}.npy"
        assert path.is_file(), f"kiln wrote no {path.name}; wrote {sorted(os.listdir(outdir))}"
        got = np.load(path)
        assert got.dtype == want.dtype, f"{name}: dtype {got.dtype}, expected {want.dtype}"
        assert got.shape == want.shape, f"{name}: shape {got.shape}, expected {want.shape}"
        err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
        assert err <= TOLERANCE, f"{name}: max abs error {err:.3g} > {TOLERANCE}"


@pytest.mark.parametrize("model", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_inputs_are_discriminating(model):
    """In ORT, ignoring the padding (mask all ones) moves every output by far more than
    TOLERANCE, at both shapes, so a kiln masking bug cannot pass the comparison."""
    for batch, seq in SHAPES:
        feeds = export_torch.random_inputs(family_of(model), batch, seq, seed=batch * 100 + seq)
        assert (feeds["attention_mask"] == 0).any(), "inputs have no padding"
        unmasked = dict(feeds, attention_mask=np.ones_like(feeds["attention_mask"]))
        with_mask = run_onnxruntime(model, feeds)
        without = run_onnxruntime(model, unmasked)
        for name in with_mask:
            delta = float(np.max(np.abs(with_mask[name] - without[name])))
            assert delta > 10 * TOLERANCE, f"{name} at {batch}x{seq}: mask moves it {delta}"


# ---------------------------------------------------------------------------------------
# GPT-2 through -O2: the fused graph (--emit-onnx, kiln domain) read back by `kiln run`
# matches onnxruntime on the original export, at batch 2 x 16 with trailing padding, and
# the fusions cover every block: per layer QKV / attention-out / FFN-in (+ tanh GELU) /
# FFN-out Linears with Conv1D's Reshape pairs gone, 2 SkipLayerNorm, 1 MultiHeadAttention;
# plus the LM head Linear. Same tolerance as above (fusion changes only the float
# evaluation order). What is left besides the fused ops is the padding/causal mask chain
# (its one bool Reshape in TorchScript exports).
GPT2_FIXTURES = sorted(FIXTURE_DIR.glob("gpt2_*.onnx"))
GPT2_LAYERS = 2


@pytest.mark.parametrize("model", GPT2_FIXTURES, ids=[p.stem for p in GPT2_FIXTURES])
def test_gpt2_o2_fused_matches_onnxruntime(kiln_bin, model, tmp_path):
    import json
    import subprocess
    from conftest import KILN_TIMEOUT_S

    batch, seq = 2, 16
    fused, report = tmp_path / "fused.onnx", tmp_path / "report.json"
    proc = subprocess.run(
        [kiln_bin, "opt", str(model), "-O2", "--verify-each", "--shape",
         f"batch={batch},sequence={seq}", "--emit-onnx", str(fused), "--fusion-report",
         str(report), "--quiet"],
        capture_output=True, text=True, timeout=KILN_TIMEOUT_S, check=False)
    assert proc.returncode == 0, f"kiln opt failed ({proc.returncode}):\n{proc.stderr}"
    inspect = subprocess.run([kiln_bin, "inspect", str(fused), "--json"], capture_output=True,
                             text=True, timeout=KILN_TIMEOUT_S, check=True)
    ops = json.loads(inspect.stdout)["op_histogram"]
    assert ops.get("kiln.Linear") == 4 * GPT2_LAYERS + 1, ops
    assert ops.get("kiln.MultiHeadAttention") == GPT2_LAYERS, ops
    # ln_2 of every layer and ln_1 of every later layer, then ln_f: 2 per layer.
    assert ops.get("kiln.SkipLayerNorm") == 2 * GPT2_LAYERS, ops
    for gone in ("Gelu", "Gemm", "MatMul", "Softmax", "Transpose", "ReduceMean", "Tanh"):
        assert gone not in ops, ops
    exporter = export_torch.parse_fixture_name(model.name)[1]
    assert ops.get("Reshape", 0) == (1 if exporter == "torchscript" else 0), ops
    fusions = json.loads(report.read_text())["fusions"]
    misses = {k: [m["reason"] for m in v["missed"]] for k, v in fusions.items() if v["missed"]}
    assert misses == {}, misses
    # wte + wpe -> ln_1 is one EmbedLayerNorm whose Sum output (the embedding sum) is also
    # the first residual, read by layer 0's SkipLayerNorm.
    assert ops.get("kiln.EmbedLayerNorm") == 1, ops
    assert "LayerNormalization" not in ops and "Add" not in ops, ops

    feeds = export_torch.random_inputs("gpt2", batch, seq, seed=batch * 100 + seq)
    assert (feeds["attention_mask"] == 0).any(), "inputs have no padding"
    proc, outdir = run_kiln(kiln_bin, fused, feeds, tmp_path)
    assert proc.returncode == 0, f"kiln run on the fused model failed:\n{proc.stderr}"
    for name, want in run_onnxruntime(model, feeds).items():
        got = np.load(outdir / f"{name}.npy")
        assert got.shape == want.shape, name
        err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
        assert err <= TOLERANCE, f"{name}: max abs error {err:.3g} > {TOLERANCE}"


# ---------------------------------------------------------------------------------------
# The decoders (Llama; Qwen2: 4 query heads over 2 K/V heads; Mistral: sliding window 8)
# through -O2, static and symbolic: every attention block fuses — the rotary of Q and K
# and Qwen2's repeat_kv inside it — with no near-miss of any kind; Q, K, V become one
# Linear, gate and up another feeding one kiln.Glu (SwiGLU); the fused graph read back by `kiln run` matches onnxruntime on the original
# (2 x 16 with trailing padding, where Mistral's window changes the logits by ~3.6, and
# 1 x 7). Same tolerance as above. A compiled cpu plan of each matches too (sequence 7
# padded into the 16 bucket: the fused attention's mask covers the padded keys).
DECODER_FIXTURES = sorted(p for p in FIXTURES if family_of(p) in ("llama", "qwen2", "mistral"))
DECODER_LAYERS = 2
KV_HEADS = {"llama": 4, "qwen2": 2, "mistral": 4}


def kiln_json(kiln_bin, *args):
    import json
    import subprocess
    from conftest import KILN_TIMEOUT_S

    proc = subprocess.run([kiln_bin, *map(str, args)], capture_output=True, text=True,
                          timeout=KILN_TIMEOUT_S, check=False)
    assert proc.returncode == 0, f"kiln {args[0]} failed ({proc.returncode}):\n{proc.stderr}"
    return proc


def assert_outputs_match(outdir, model, feeds):
    for name, want in run_onnxruntime(model, feeds).items():
        got = np.load(outdir / f"{name}.npy")
        assert got.shape == want.shape, name
        err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
        assert err <= TOLERANCE, f"{name}: max abs error {err:.3g} > {TOLERANCE}"


def opt_without_misses(kiln_bin, model, static, tmp_path):
    """`kiln opt -O2 --verify-each` (at 2 x 16 when static) to fused.onnx; asserts the fusion
    report has no near-miss of any kind. Returns (fused path, fusions, op histogram)."""
    import json

    fused, report = tmp_path / "fused.onnx", tmp_path / "report.json"
    shape = ["--shape", "batch=2,sequence=16"] if static else []
    kiln_json(kiln_bin, "opt", model, "-O2", "--verify-each", *shape, "--emit-onnx", fused,
              "--fusion-report", report, "--quiet")
    fusions = json.loads(report.read_text())["fusions"]
    misses = {k: [m["reason"] for m in v["missed"]] for k, v in fusions.items() if v["missed"]}
    assert misses == {}, misses
    ops = json.loads(kiln_json(kiln_bin, "inspect", fused, "--json").stdout)["op_histogram"]
    return fused, fusions, ops


@pytest.mark.parametrize("static", [True, False], ids=["static", "symbolic"])
@pytest.mark.parametrize("model", DECODER_FIXTURES, ids=[p.stem for p in DECODER_FIXTURES])
def test_decoder_o2_fuses_attention(kiln_bin, model, static, tmp_path):
    import onnx

    family = family_of(model)
    fused, fusions, ops = opt_without_misses(kiln_bin, model, static, tmp_path)
    assert fusions["attention"]["fused"] == DECODER_LAYERS, fusions["attention"]
    assert fusions["qkv"]["fused"] == DECODER_LAYERS, fusions["qkv"]
    assert ops.get("kiln.MultiHeadAttention") == DECODER_LAYERS, ops
    # Per layer qkv, o, gate+up (one Linear feeding the SwiGLU), down; the LM head.
    assert fusions["glu"]["fused"] == DECODER_LAYERS, fusions["glu"]
    assert ops.get("kiln.Glu") == DECODER_LAYERS, ops
    assert ops.get("kiln.Linear") == 4 * DECODER_LAYERS + 1, ops
    assert "Sigmoid" not in ops, ops
    assert not {"Softmax", "Neg", "kiln.Rotary", "Transpose"} & set(ops), ops
    if static:  # symbolic, the dynamo mask construction keeps its index Expands
        assert "Expand" not in ops, ops
    for node in onnx.load(str(fused)).graph.node:
        if node.op_type == "MultiHeadAttention":
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            assert attrs.get("num_kv_heads", attrs["num_heads"]) == KV_HEADS[family], attrs
            assert len(node.input) == 4 and all(node.input), list(node.input)  # cos, sin
    for batch, seq in SHAPES if not static else SHAPES[:1]:
        feeds = export_torch.random_inputs(family, batch, seq, seed=batch * 100 + seq)
        proc, outdir = run_kiln(kiln_bin, fused, feeds, tmp_path / f"run_{batch}x{seq}")
        assert proc.returncode == 0, f"kiln run on the fused model failed:\n{proc.stderr}"
        assert_outputs_match(outdir, model, feeds)


@pytest.mark.parametrize("model", DECODER_FIXTURES, ids=[p.stem for p in DECODER_FIXTURES])
def test_decoder_plan_matches_onnxruntime(kiln_bin, model, tmp_path):
    plan = tmp_path / "plan.kiln"
    kiln_json(kiln_bin, "compile", model, "-o", plan, "--profile", "batch=1:2,sequence=16")
    family = family_of(model)
    for batch, seq in SHAPES:
        feeds = export_torch.random_inputs(family, batch, seq, seed=batch * 100 + seq)
        proc, outdir = run_kiln(kiln_bin, plan, feeds, tmp_path / f"run_{batch}x{seq}")
        assert proc.returncode == 0, f"kiln run on the plan failed:\n{proc.stderr}"
        assert_outputs_match(outdir, model, feeds)


# ---------------------------------------------------------------------------------------
# GPT-J (interleaved rotary over the first 8 of each head's 16 elements, applied to the
# [B, S, N, D] split before the head transpose) through -O2, static and symbolic: fuse-rotary
# turns each rotate_every_two into kiln.Rotary{interleaved}, which the attention takes in
# (rotary_interleaved = 1 with [1, S, 8] tables); no rotary, Q/K/V or attention near-miss
# (GPT-J's parallel block leaves an embed-layernorm miss, its sum is not an embedding's);
# the fused graph and a compiled cpu plan match onnxruntime (same tolerance).
GPTJ_FIXTURES = sorted(p for p in FIXTURES if family_of(p) == "gptj")


@pytest.mark.parametrize("static", [True, False], ids=["static", "symbolic"])
@pytest.mark.parametrize("model", GPTJ_FIXTURES, ids=[p.stem for p in GPTJ_FIXTURES])
def test_gptj_interleaved_rotary_fuses(kiln_bin, model, static, tmp_path):
    import json

    import onnx

    fused, report = tmp_path / "fused.onnx", tmp_path / "report.json"
    shape = ["--shape", "batch=2,sequence=16"] if static else []
    kiln_json(kiln_bin, "opt", model, "-O2", "--verify-each", *shape, "--emit-onnx", fused,
              "--fusion-report", report, "--quiet")
    fusions = json.loads(report.read_text())["fusions"]
    for kind in ("rotary", "qkv", "attention"):
        assert fusions[kind]["missed"] == [], fusions[kind]
    assert fusions["rotary"]["fused"] == 2 * DECODER_LAYERS, fusions["rotary"]
    assert fusions["attention"]["fused"] == DECODER_LAYERS, fusions["attention"]
    ops = collections.Counter(n.op_type for n in onnx.load(str(fused)).graph.node)
    assert ops.get("MultiHeadAttention") == DECODER_LAYERS and "Softmax" not in ops, ops
    assert "Rotary" not in ops and "Neg" not in ops, ops
    for node in onnx.load(str(fused)).graph.node:
        if node.op_type == "MultiHeadAttention":
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            assert attrs.get("rotary_interleaved") == 1, attrs
            assert len(node.input) == 4 and all(node.input), list(node.input)
    for batch, seq in SHAPES if not static else SHAPES[:1]:
        feeds = export_torch.random_inputs("gptj", batch, seq, seed=batch * 100 + seq)
        proc, outdir = run_kiln(kiln_bin, fused, feeds, tmp_path / f"run_{batch}x{seq}")
        assert proc.returncode == 0, f"kiln run on the fused model failed:\n{proc.stderr}"
        assert_outputs_match(outdir, model, feeds)
    if static:
        plan = tmp_path / "plan.kiln"
        kiln_json(kiln_bin, "compile", model, "-o", plan, "--shape", "batch=2,sequence=16")
        feeds = export_torch.random_inputs("gptj", 2, 16, seed=216)
        proc, outdir = run_kiln(kiln_bin, plan, feeds, tmp_path / "plan_run")
        assert proc.returncode == 0, f"kiln run on the plan failed:\n{proc.stderr}"
        assert_outputs_match(outdir, model, feeds)


# ---------------------------------------------------------------------------------------
# The KV-cache forms (models/fixtures/kv/): `kiln run` vs onnxruntime at a prefill (empty
# past, trailing padding), at the script's 3-token chunk and 1-token decode step after 5
# cached positions (right-padded cache), and at 2 x 16 after 5. Same tolerance. The mask
# really matters at each (the padded cache slots hold random keys/values).
KV_DIR = pathlib.Path(export_torch.KV_FIXTURE_DIR)
KV_FIXTURES = sorted(KV_DIR.glob("*.onnx"))
KV_SHAPES = [(2, 3, 0), (2, 3, 5), (2, 1, 5), (2, 16, 5)]  # batch, sequence, past


def test_kv_fixtures_present():
    wanted = {export_torch.fixture_name(f, e, a) for f in export_torch.KV_DECODERS
              for e in export_torch.EXPORTERS for a in export_torch.FAMILIES[f].attentions}
    names = {p.name for p in KV_FIXTURES}
    assert names == wanted, f"missing {sorted(wanted - names)}, extra {sorted(names - wanted)}"
    for path in KV_FIXTURES:
        assert path.stat().st_size <= MAX_FIXTURE_BYTES, f"{path.name} is too large"


@pytest.mark.parametrize("batch,seq,past", KV_SHAPES,
                         ids=[f"b{b}s{s}p{p}" for b, s, p in KV_SHAPES])
@pytest.mark.parametrize("model", KV_FIXTURES, ids=[p.stem for p in KV_FIXTURES])
def test_kv_fixture_matches_onnxruntime(kiln_bin, model, batch, seq, past, tmp_path):
    family = family_of(model)
    feeds = export_torch.random_inputs(family, batch, seq, seed=batch * 100 + seq + past,
                                       past=past)
    assert (feeds["attention_mask"] == 0).any(), "inputs have no padding"
    proc, outdir = run_kiln(kiln_bin, model, feeds, tmp_path)
    assert proc.returncode == 0, f"kiln run failed ({proc.returncode}):\n{proc.stderr}"
    want = run_onnxruntime(model, feeds)
    assert list(want) == list(export_torch.FAMILIES[family].outputs)
    assert_outputs_match(outdir, model, feeds)
    unmasked = dict(feeds, attention_mask=np.ones_like(feeds["attention_mask"]))
    delta = float(np.max(np.abs(run_onnxruntime(model, unmasked)["logits"] - want["logits"])))
    assert delta > 10 * TOLERANCE, f"the mask moves the logits by only {delta}"


# Their attention fuses into kiln.Attention over the heads (q the rotated query heads, k/v
# the present K/V = past ++ this step's, HF's repeat_kv absorbed as num_kv_heads), the
# exporters' [B, 1, S, past + S] mask as it is; no Softmax is left. The fused graph on the
# reference executor and a plan compiled for each KV shape (cpu head_attention kernel)
# match onnxruntime, present.* included (same tolerance).
@pytest.mark.parametrize("model", KV_FIXTURES, ids=[p.stem for p in KV_FIXTURES])
def test_kv_attention_fuses(kiln_bin, model, tmp_path):
    import json

    import onnx

    report, fused = tmp_path / "report.json", tmp_path / "fused.onnx"
    kiln_json(kiln_bin, "opt", model, "-O2", "--quiet", "--fusion-report", report,
              "--emit-onnx", fused)
    attention = json.loads(report.read_text())["fusions"]["attention"]
    assert attention["missed"] == [] and attention["fused"] == DECODER_LAYERS, attention
    ops = collections.Counter(n.op_type for n in onnx.load(str(fused)).graph.node)
    assert ops.get("Attention") == DECODER_LAYERS and "Softmax" not in ops, ops
    family = family_of(model)
    for batch, seq, past in KV_SHAPES:
        feeds = export_torch.random_inputs(family, batch, seq, seed=batch * 100 + seq + past,
                                           past=past)
        proc, outdir = run_kiln(kiln_bin, fused, feeds, tmp_path / f"ref_{batch}x{seq}p{past}")
        assert proc.returncode == 0, f"kiln run on the fused model failed:\n{proc.stderr}"
        assert_outputs_match(outdir, model, feeds)
        plan = tmp_path / f"plan_{batch}x{seq}p{past}.kiln"
        kiln_json(kiln_bin, "compile", model, "-o", plan, "--shape",
                  f"batch={batch},sequence={seq},past_sequence={past},"
                  f"total_sequence={past + seq}")
        proc, outdir = run_kiln(kiln_bin, plan, feeds, tmp_path / f"plan_{batch}x{seq}p{past}")
        assert proc.returncode == 0, f"kiln run on the plan failed:\n{proc.stderr}"
        assert_outputs_match(outdir, model, feeds)


# ---------------------------------------------------------------------------------------
# ModernBERT (layer 0 global, layer 1 sliding-window 8; rotary; GeGLU; Wqkv packed and
# split by Reshape [B, S, 3, N, D] + Split/Slice + Squeeze) through -O2, static and
# symbolic: both attention blocks fuse (rotary inside, qkv the packed projection as it
# is), both GeGLUs become kiln.Glu, no near-miss of any kind; the fused graph and a
# compiled cpu plan match onnxruntime (same tolerance; the window and the padding each
# move the output far more, test_inputs_are_discriminating and export_torch's verify).
MODERNBERT_FIXTURES = sorted(p for p in FIXTURES if family_of(p) == "modernbert")


@pytest.mark.parametrize("static", [True, False], ids=["static", "symbolic"])
@pytest.mark.parametrize("model", MODERNBERT_FIXTURES, ids=[p.stem for p in MODERNBERT_FIXTURES])
def test_modernbert_o2_fuses(kiln_bin, model, static, tmp_path):
    import onnx

    fused, fusions, ops = opt_without_misses(kiln_bin, model, static, tmp_path)
    assert fusions["attention"]["fused"] == 2 and fusions["glu"]["fused"] == 2, fusions
    assert ops.get("kiln.MultiHeadAttention") == 2 and ops.get("kiln.Glu") == 2, ops
    assert ops.get("kiln.Linear") == 8, ops  # per layer Wqkv, Wo, Wi, mlp.Wo
    for gone in ("Softmax", "Neg", "Gelu", "Erf", "Transpose"):
        assert gone not in ops, ops
    if static:  # symbolic, the dynamo exports' shape arithmetic keeps Shape/Squeeze pairs
        assert "Squeeze" not in ops and "Shape" not in ops, ops
    for node in onnx.load(str(fused)).graph.node:
        if node.op_type == "MultiHeadAttention":
            assert len(node.input) == 4 and all(node.input), list(node.input)  # cos, sin
    for batch, seq in SHAPES if not static else SHAPES[:1]:
        feeds = export_torch.random_inputs("modernbert", batch, seq, seed=batch * 100 + seq)
        proc, outdir = run_kiln(kiln_bin, fused, feeds, tmp_path / f"run_{batch}x{seq}")
        assert proc.returncode == 0, f"kiln run on the fused model failed:\n{proc.stderr}"
        assert_outputs_match(outdir, model, feeds)
    if static:
        plan = tmp_path / "plan.kiln"
        kiln_json(kiln_bin, "compile", model, "-o", plan, "--shape", "batch=2,sequence=16")
        feeds = export_torch.random_inputs("modernbert", 2, 16, seed=216)
        proc, outdir = run_kiln(kiln_bin, plan, feeds, tmp_path / "plan_run")
        assert proc.returncode == 0, f"kiln run on the plan failed:\n{proc.stderr}"
        assert_outputs_match(outdir, model, feeds)


# ---------------------------------------------------------------------------------------
# The fusion report is never silent about attention: in every fixture (2 layers each) each
# attention block either fuses or is listed as a miss with its reason. All fuse (MPNet's
# relative position bias is summed into the fused op's mask) but DeBERTa's, whose
# disentangled content-to-position and position-to-content score terms have no fused
# kernel: both its blocks are misses that say so.
@pytest.mark.parametrize("model", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_every_attention_block_fuses_or_is_reported(kiln_bin, model, tmp_path):
    import json
    import subprocess
    from conftest import KILN_TIMEOUT_S

    report = tmp_path / "report.json"
    proc = subprocess.run([kiln_bin, "opt", str(model), "-O2", "--shape", "batch=2,sequence=16",
                           "--fusion-report", str(report), "--quiet"], capture_output=True,
                          text=True, timeout=KILN_TIMEOUT_S, check=False)
    assert proc.returncode == 0, proc.stderr
    attention = json.loads(report.read_text())["fusions"]["attention"]
    fused, missed = attention["fused"], attention["missed"]
    assert fused + len(missed) == 2, attention
    if family_of(model) == "deberta":
        assert fused == 0 and all("disentangled" in m["reason"] for m in missed), missed
    else:
        assert fused == 2, missed
