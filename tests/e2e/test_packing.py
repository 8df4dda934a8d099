"""Packed-token plans (docs/packing.md): `kiln compile --profile tokens=...` on every
BERT-family fixture, then the same padded inputs run packed (the default) and padded
(`--no-pack`) from the one plan; the outputs must agree on the real positions.

Length mixes (sequence bucket 32, token buckets 16/64/128, sequences 1/8): lengths 1..32
mixed, a single sequence, all the same length, total tokens exactly at a token bucket (64)
and one past it (65), more tokens than the largest token bucket (chunked into several packed
calls), and the cases packing leaves to the padded buckets (an empty row, left padding, a
hole in the mask), which must say so and give the padded result. The packed program is also
run directly (`--program packed`: token ids [T], sequence_lengths [N]) and its errors
checked. Real weights: all-MiniLM-L6-v2 packed vs padded, lengths 1 ... 512.

Tolerance: 1e-5 max abs (the issue's bound for fp32). Packed and padded run the same
kernels on the same rows; what differs is the attention's key count (a sequence's own
length instead of the bucket's, masked keys contributing exact zeros) and GEMM blocking
over M, which changes fp32 summation order at most; outputs are O(1).
"""

import json
import pathlib
import subprocess

import numpy as np
import pytest

from conftest import KILN_TIMEOUT_S, SOURCE_DIR, run_kiln

TOLERANCE = 1e-5
PROFILE = "batch=1:8,sequence=8:32,tokens=16:64:128"
FIXTURES = SOURCE_DIR / "models" / "fixtures"
PACKABLE = sorted(
    [p.relative_to(FIXTURES).as_posix() for p in FIXTURES.glob("bert_tiny_*.onnx")] +
    ["default.onnx", "variants/distilbert_tiny_opset14.onnx", "variants/st_cls_tiny_opset17.onnx",
     "variants/st_mean_tiny_opset14.onnx"] +
    [p.relative_to(FIXTURES).as_posix() for p in (FIXTURES / "torch").glob("*.onnx")
     if p.name.split("_")[0] in ("bert", "bertcls", "distilbert", "electra", "roberta", "xlmr")] +
    ["variants/roberta_tiny_opset17.onnx"])
# name -> what the compile says instead of packing
REFUSED = {
    "torch/gpt2_torchscript_sdpa.onnx": "is not attention_mask's key padding",
    "torch/llama_dynamo_sdpa.onnx": "applies rotary tables",
}
MIXES = {
    "mixed_1_to_32": [32, 1, 5, 17, 32, 2, 9, 30],
    "single": [13],
    "same_length": [7, 7, 7, 7],
    "at_bucket_64": [32, 20, 12],
    "past_bucket_65": [32, 20, 13],
    "chunked_200_tokens": [32, 32, 32, 32, 32, 20, 10, 10],
}


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=KILN_TIMEOUT_S,
                          check=False, **kw)


@pytest.fixture(scope="module")
def plans(kiln_bin, tmp_path_factory):
    """Each packable fixture compiled once: name -> plan path."""
    out = {}
    work = tmp_path_factory.mktemp("packed_plans")
    for name in PACKABLE:
        plan = work / (name.replace("/", "_") + ".kiln")
        proc = run([kiln_bin, "compile", str(FIXTURES / name), "-o", str(plan), "--profile",
                    PROFILE])
        assert proc.returncode == 0, f"{name}: kiln compile failed:\n{proc.stderr}"
        assert "not packed" not in proc.stderr, f"{name}:\n{proc.stderr}"
        out[name] = plan
    return out


def feeds_for(plan_inputs, lengths, seq=32, seed=0, left=False):
    rng = np.random.default_rng(seed)
    b = len(lengths)
    mask = np.zeros((b, seq), np.int64)
    for i, n in enumerate(lengths):
        if left:
            mask[i, seq - n:] = 1
        else:
            mask[i, :n] = 1
    feeds = {"input_ids": rng.integers(0, 100, (b, seq)).astype(np.int64),
             "attention_mask": mask}
    if "token_type_ids" in plan_inputs:
        feeds["token_type_ids"] = rng.integers(0, 2, (b, seq)).astype(np.int64)
    return feeds


def plan_inputs(kiln_bin, plan):
    proc = run([kiln_bin, "plan-info", str(plan), "--json"])
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def outputs(outdir):
    return {p.stem: np.load(p) for p in pathlib.Path(outdir).glob("*.npy")}


def per_token_outputs(info):
    """The outputs the packed program gives per token ([tokens, ...])."""
    sig = {p["program"]: p for p in info["signatures"]}["packed"]
    return {o["name"] for o in sig["outputs"] if o["dims"][0] == "tokens"}


def compare(got, want, lengths, per_token):
    """Max |got - want| over the real positions of per-token outputs ([B, S, ...]) and over
    whole per-sequence outputs; per-token padding positions of `got` must be zeros."""
    worst = 0.0
    assert set(got) == set(want)
    for name, w in want.items():
        g = got[name]
        assert g.shape == w.shape and g.dtype == w.dtype, name
        if name in per_token:
            for i, n in enumerate(lengths):
                worst = max(worst, float(np.max(np.abs(g[i, :n] - w[i, :n]), initial=0)))
                assert not np.any(g[i, n:]), f"{name} row {i}: padding positions are not zero"
        else:
            worst = max(worst, float(np.max(np.abs(g - w))))
    return worst


@pytest.mark.parametrize("mix", sorted(MIXES))
@pytest.mark.parametrize("name", PACKABLE)
def test_packed_matches_padded(kiln_bin, plans, name, mix, tmp_path):
    lengths = MIXES[mix]
    info = plan_inputs(kiln_bin, plans[name])
    feeds = feeds_for([i["name"] for i in info["inputs"]], lengths)
    packed, out_p = run_kiln(kiln_bin, plans[name], feeds, tmp_path / "p")
    assert packed.returncode == 0, packed.stderr
    assert ", packed," in packed.stdout, packed.stdout
    padded, out_q = run_kiln(kiln_bin, plans[name], feeds, tmp_path / "q", "--no-pack")
    assert padded.returncode == 0, padded.stderr
    assert "packed" not in padded.stdout, padded.stdout
    err = compare(outputs(out_p), outputs(out_q), lengths, per_token_outputs(info))
    print(f"{name} {mix}: max abs {err:.3g}")
    assert err <= TOLERANCE


def test_token_buckets_are_chosen_by_total_tokens(kiln_bin, plans, tmp_path):
    """64 tokens run in one tokens=64 call; 65 (rows 32, 20, 13) cost less as rows 32+20 in
    tokens=64 and row 13 in tokens=16 than as one tokens=128 call (the last call is
    reported); 200 tokens need several calls."""
    plan = plans["bert_tiny_opset14_classifier.onnx"]
    info = plan_inputs(kiln_bin, plan)
    names = [i["name"] for i in info["inputs"]]
    for mix, bucket in (("at_bucket_64", "sequences=8,tokens=64"),
                        ("past_bucket_65", "sequences=1,tokens=16"),
                        ("chunked_200_tokens", "sequences=")):
        proc, _ = run_kiln(kiln_bin, plan, feeds_for(names, MIXES[mix]), tmp_path / mix)
        assert proc.returncode == 0, proc.stderr
        assert f"[packed {bucket}" in proc.stdout and ", packed," in proc.stdout, proc.stdout


@pytest.mark.parametrize("case", ["empty_row", "left_padding", "hole"])
def test_masks_packing_leaves_to_the_padded_buckets(kiln_bin, plans, case, tmp_path):
    """An empty row, left padding or a hole in the mask cannot be packed by prefix lengths:
    the run takes the padded buckets (and says nothing of packing) and gives their result."""
    plan = plans["variants/st_mean_tiny_opset14.onnx"]
    names = [i["name"] for i in plan_inputs(kiln_bin, plan)["inputs"]]
    feeds = feeds_for(names, [9, 4, 12], left=case == "left_padding")
    if case == "empty_row":
        feeds["attention_mask"][1] = 0
    if case == "hole":
        feeds["attention_mask"][0, 3] = 0
    auto, out_a = run_kiln(kiln_bin, plan, feeds, tmp_path / "a")
    assert auto.returncode == 0, auto.stderr
    assert "packed" not in auto.stdout, auto.stdout
    padded, out_b = run_kiln(kiln_bin, plan, feeds, tmp_path / "b", "--no-pack")
    assert padded.returncode == 0, padded.stderr
    for name, want in outputs(out_b).items():
        np.testing.assert_array_equal(outputs(out_a)[name], want)


def test_packed_program_runs_directly(kiln_bin, plans, tmp_path):
    """`kiln run --program packed` with token ids [T] and sequence_lengths [N] gives the
    padded run's rows; the plan-info JSON lists the packed signature."""
    plan = plans["bert_tiny_opset14_pooler.onnx"]
    info = plan_inputs(kiln_bin, plan)
    sig = {p["program"]: p for p in info["signatures"]}["packed"]
    # The model's inputs in order, the attention mask replaced by sequence_lengths.
    assert [i["name"] for i in sig["inputs"]] == ["input_ids", "sequence_lengths",
                                                  "token_type_ids"]
    assert {i["name"]: i["dims"] for i in sig["inputs"]} == {
        "input_ids": ["tokens"], "sequence_lengths": ["sequences"], "token_type_ids": ["tokens"]}
    assert {o["name"]: o["dims"] for o in sig["outputs"]} == {
        "last_hidden_state": ["tokens", 64], "pooler_output": ["sequences", 64]}
    lengths = [5, 11, 1]
    feeds = feeds_for(["input_ids", "attention_mask", "token_type_ids"], lengths)
    padded, out_q = run_kiln(kiln_bin, plan, feeds, tmp_path / "q", "--no-pack")
    assert padded.returncode == 0, padded.stderr
    mask = feeds["attention_mask"].astype(bool)
    direct = {"input_ids": feeds["input_ids"][mask], "token_type_ids": feeds["token_type_ids"][mask],
              "sequence_lengths": np.array(lengths, np.int64)}
    proc, out_d = run_kiln(kiln_bin, plan, direct, tmp_path / "d", "--program", "packed")
    assert proc.returncode == 0, proc.stderr
    got, want = outputs(out_d), outputs(out_q)
    assert got["last_hidden_state"].shape == (sum(lengths), 64)
    np.testing.assert_allclose(got["last_hidden_state"], want["last_hidden_state"][mask],
                               atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(got["pooler_output"], want["pooler_output"], atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("lengths,message", [
    ([5, 30, 2], "sequence_lengths add up to 37 tokens but input 'input_ids' holds 36"),
    ([5, 30, 0], "sequence_lengths add up to 35 tokens but input 'input_ids' holds 36"),
    ([5, -1, 32], "sequence_lengths[1] is -1"),
])
def test_packed_program_errors(kiln_bin, plans, lengths, message, tmp_path):
    plan = plans["bert_tiny_opset14_classifier.onnx"]
    rng = np.random.default_rng(3)
    direct = {"input_ids": rng.integers(0, 100, 36).astype(np.int64),
              "token_type_ids": np.zeros(36, np.int64),
              "sequence_lengths": np.array(lengths, np.int64)}
    proc, _ = run_kiln(kiln_bin, plan, direct, tmp_path, "--program", "packed")
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert message in proc.stderr, proc.stderr


def test_no_packed_program_error(kiln_bin, tmp_path):
    plan = tmp_path / "padded.kiln"
    proc = run([kiln_bin, "compile", str(FIXTURES / "bert_tiny_opset14_classifier.onnx"), "-o",
                str(plan), "--profile", "batch=1:4,sequence=8:16", "--quiet"])
    assert proc.returncode == 0, proc.stderr
    direct = {"input_ids": np.zeros(4, np.int64), "token_type_ids": np.zeros(4, np.int64),
              "sequence_lengths": np.array([4], np.int64)}
    proc, _ = run_kiln(kiln_bin, plan, direct, tmp_path, "--program", "packed")
    assert proc.returncode == 2
    assert "the plan has no packed program (compile an encoder with --profile tokens=..." \
        in proc.stderr, proc.stderr
    for cmd in (["run"], ["bench", "--runs", "1", "--warmup", "0"]):
        proc = run([kiln_bin, *cmd, str(plan), "--program", "packed"])
        assert proc.returncode == 2 and "has no packed program" in proc.stderr, proc.stderr


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_models_packing_refuses_keep_padded_execution(kiln_bin, name, tmp_path):
    """The proof fails with the reason printed (without --verbose); the plan has no packed
    program and still runs padded."""
    plan = tmp_path / "p.kiln"
    proc = run([kiln_bin, "compile", str(FIXTURES / name), "-o", str(plan), "--profile",
                PROFILE])
    assert proc.returncode == 0, proc.stderr
    assert "warning: not packed (padded execution only)" in proc.stderr, proc.stderr
    assert REFUSED[name] in proc.stderr, proc.stderr
    info = plan_inputs(kiln_bin, plan)
    assert info.get("signatures", []) == []
    assert all(b["program"] != "packed" for b in info["buckets"])


def test_position_ids_as_an_input_stay_per_token(kiln_bin, tmp_path):
    """A BERT whose position ids are a graph input [batch, sequence] (as some exporters
    write them): they are packed like the token ids, so any positions the caller gives
    (here random ones) reach each token as in the padded run."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(str(FIXTURES / "bert_tiny_opset17_none.onnx"))
    gather = next(n for n in model.graph.node if n.name.endswith("position_embeddings/Gather"))
    gather.input[1] = "position_ids"
    model.graph.input.append(helper.make_tensor_value_info(
        "position_ids", TensorProto.INT64, ["batch", "sequence"]))
    path = tmp_path / "bert_position_ids.onnx"
    onnx.save(model, str(path))
    plan = tmp_path / "p.kiln"
    proc = run([kiln_bin, "compile", str(path), "-o", str(plan), "--profile", PROFILE])
    assert proc.returncode == 0 and "not packed" not in proc.stderr, proc.stderr
    info = plan_inputs(kiln_bin, plan)
    packed_sig = {p["program"]: p for p in info["signatures"]}["packed"]
    assert {i["name"]: i["dims"] for i in packed_sig["inputs"]}["position_ids"] == ["tokens"]
    lengths = [32, 1, 5, 17]
    feeds = feeds_for([i["name"] for i in info["inputs"]], lengths, seed=4)
    feeds["position_ids"] = np.random.default_rng(9).integers(0, 128, (4, 32)).astype(np.int64)
    packed, out_p = run_kiln(kiln_bin, plan, feeds, tmp_path / "p")
    assert packed.returncode == 0 and ", packed," in packed.stdout, packed.stdout + packed.stderr
    padded, out_q = run_kiln(kiln_bin, plan, feeds, tmp_path / "q", "--no-pack")
    assert padded.returncode == 0, padded.stderr
    assert compare(outputs(out_p), outputs(out_q), lengths, per_token_outputs(info)) <= TOLERANCE


def test_int32_ids_with_an_int64_token_type_buffer(kiln_bin, tmp_path):
    """XLM-R with int32 token ids (as onnxruntime's optimizer writes them) and its int64 zero
    token-type buffer: the packed token types are computed in the ids' dtype and cast to the
    buffer's, so the packed run works and equals the padded one (before, packing built a
    Mul of i32 ids by an i64 zero, which failed at run time)."""
    import onnx
    from onnx import TensorProto, numpy_helper

    model = onnx.load(str(FIXTURES / "torch" / "xlmr_torchscript_eager.onnx"))
    ids = next(i for i in model.graph.input if i.name == "input_ids")
    ids.type.tensor_type.elem_type = TensorProto.INT32
    equal = next(n for n in model.graph.node if n.op_type == "Equal" and "input_ids" in n.input)
    pad = equal.input[1 - list(equal.input).index("input_ids")]
    for init in model.graph.initializer:
        if init.name == pad:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.int32), pad))
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output[0] == pad:
            t = node.attribute[0].t
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.int32), pad))
    path = tmp_path / "xlmr_int32_ids.onnx"
    onnx.save(model, str(path))
    plan = tmp_path / "p.kiln"
    proc = run([kiln_bin, "compile", str(path), "-o", str(plan), "--profile", PROFILE])
    assert proc.returncode == 0 and "not packed" not in proc.stderr, proc.stderr
    info = plan_inputs(kiln_bin, plan)
    lengths = [32, 1, 5, 17]
    feeds = feeds_for([i["name"] for i in info["inputs"]], lengths, seed=3)
    feeds["input_ids"] = feeds["input_ids"].astype(np.int32)
    packed, out_p = run_kiln(kiln_bin, plan, feeds, tmp_path / "p")
    assert packed.returncode == 0 and ", packed," in packed.stdout, packed.stdout + packed.stderr
    padded, out_q = run_kiln(kiln_bin, plan, feeds, tmp_path / "q", "--no-pack")
    assert padded.returncode == 0, padded.stderr
    assert compare(outputs(out_p), outputs(out_q), lengths, per_token_outputs(info)) <= TOLERANCE


def test_pretrained_minilm_packed_matches_padded(kiln_bin, tmp_path):
    """all-MiniLM-L6-v2 with its real weights: packed sentence embeddings vs padded."""
    import pretrained  # noqa: E402  (models/ is on sys.path via conftest)
    try:
        proto = pretrained.build_model()
    except RuntimeError as err:
        pytest.fail(f"{err}\nneeds {pretrained.PIP_NAME}: run scripts/setup.sh")
    model = tmp_path / "minilm.onnx"
    pretrained.gen_bert.save(proto, str(model))
    plan = tmp_path / "minilm.kiln"
    proc = run([kiln_bin, "compile", str(model), "-o", str(plan), "--profile",
                "batch=4,sequence=512,tokens=256:1024", "--quiet"])
    assert proc.returncode == 0, proc.stderr
    # Lengths 1 ... 512 (the model's whole position table): [CLS] ids [SEP], then padding.
    feeds = pretrained.token_ids(4, 512, seed=1)
    lengths = np.array([512, 1, 37, 300])
    for row, n in enumerate(lengths):
        feeds["attention_mask"][row] = np.arange(512) < n
        feeds["input_ids"][row, n:] = 0
        feeds["input_ids"][row, n - 1] = feeds["input_ids"][0, 511]  # [SEP]
    packed, out_p = run_kiln(kiln_bin, plan, feeds, tmp_path / "p")
    assert packed.returncode == 0 and ", packed," in packed.stdout, packed.stdout + packed.stderr
    padded, out_q = run_kiln(kiln_bin, plan, feeds, tmp_path / "q", "--no-pack")
    assert padded.returncode == 0, padded.stderr
    err = compare(outputs(out_p), outputs(out_q), list(lengths),
                  per_token_outputs(plan_inputs(kiln_bin, plan)))
    print(f"all-MiniLM-L6-v2 packed vs padded: max abs {err:.3g} (lengths {lengths.tolist()})")
    assert err <= TOLERANCE
