"""The onnxruntime-genai fixtures (models/fixtures/genai/, written by onnxruntime-genai's
model builder: com.microsoft GroupQueryAttention with packed QKV, rotary and the KV
cache; the int4 one with MatMulNBits) against onnxruntime: `kiln run` at a prefill, a
ragged (right-padded) prefill, a decode step, a ragged decode step (each row's new token
at its own position) and a 3-token continuation chunk; compiled cpu plans, whose
attention fuses into kiln.Attention over the present cache (a batch-3 decode runs in the
batch-4 bucket, padded); and generation plans driven by `kiln generate` (below).

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

import onnx_reference  # noqa: E402  (conftest puts models/ on the path)
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
    want = run_onnxruntime(onnx_reference.accuracy_level_zero(model, tmp_path), feeds)
    proc, outdir = run_kiln(kiln_bin, model, feeds, tmp_path / "run")
    assert proc.returncode == 0, f"kiln run failed ({proc.returncode}):\n{proc.stderr}"
    assert_match(outdir, want, feeds)


@pytest.mark.parametrize("model", FIXTURES, ids=[p.parent.name for p in FIXTURES])
def test_symbolic_opt_fuses_and_matches_onnxruntime(kiln_bin, model, tmp_path):
    """`kiln opt -O2` with every dim symbolic (kv_cache_dim too: the cache update gives the
    present the heads' size) fuses each layer's attention; the fused file runs like the
    original at a decode step and a ragged prefill."""
    import json

    report, fused = tmp_path / "report.json", tmp_path / "fused.onnx"
    proc = subprocess.run([kiln_bin, "opt", str(model), "-O2", "--fusion-report", str(report),
                           "--emit-onnx", str(fused), "--quiet"],
                          capture_output=True, text=True, timeout=KILN_TIMEOUT_S, check=False)
    assert proc.returncode == 0, proc.stderr
    attention = json.loads(report.read_text())["fusions"]["attention"]
    assert attention["fused"] == LAYERS and attention["missed"] == [], attention
    reference = onnx_reference.accuracy_level_zero(model, tmp_path)
    for shape in ("decode_ragged", "prefill_ragged"):
        batch, seq, past, lengths = SHAPES[shape]
        feeds = feeds_for(batch, seq, past, lengths, seed=7)
        proc, outdir = run_kiln(kiln_bin, fused, feeds, tmp_path / shape)
        assert proc.returncode == 0, f"kiln run on the fused file failed:\n{proc.stderr}"
        assert_match(outdir, run_onnxruntime(reference, feeds), feeds)


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
    reference = onnx_reference.accuracy_level_zero(model, tmp_path)
    for batch, lengths in ((1, None), (3, [6, 4, 2])):
        feeds = feeds_for(batch, 1, 5, lengths, seed=batch)
        proc, outdir = run_kiln(kiln_bin, plan, feeds, tmp_path / f"plan_{batch}")
        assert proc.returncode == 0, f"kiln run on the plan failed:\n{proc.stderr}"
        assert_match(outdir, run_onnxruntime(reference, feeds), feeds)


# Generation: each fixture compiled with --decode-context (prefill buckets batch 1, 2 x
# sequence 8, 16; decode at 64 slots; the GroupQueryAttention's cache update becomes the
# paged cache write); `kiln generate --greedy` against onnxruntime looping the file with
# present.* fed back as past_key_values.*: token-identical over 24 tokens, every step's
# logits within 1e-4 (test_generation.py's bound; measured <= 2e-7), and two prompts of
# different lengths batched give what each gives alone.
NEW_TOKENS = 24


@pytest.fixture(scope="module")
def generation_plans(kiln_bin, tmp_path_factory):
    root = tmp_path_factory.mktemp("genai_generation")
    plans = {}
    for model in FIXTURES:
        plan = root / f"{model.parent.name}.kiln"
        proc = subprocess.run(
            [kiln_bin, "compile", str(model), "-o", str(plan), "--quiet", "--profile",
             "batch_size=1:2,sequence_length=8:16", "--shape", f"kv_cache_dim={HEAD}",
             "--decode-context", "64"],
            capture_output=True, text=True, timeout=KILN_TIMEOUT_S, check=False)
        assert proc.returncode == 0, f"compile {model} failed:\n{proc.stderr}"
        plans[model.parent.name] = plan
    return plans


def ort_generate(path, prompt, steps, forced=None):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    past = {i.name: np.zeros((1, KV_HEADS, 0, HEAD), np.float32)
            for i in session.get_inputs() if i.name.startswith("past_key_values.")}
    ids, length, tokens, logits = np.asarray([prompt], np.int64), 0, [], []
    for step in range(steps):
        feeds = {"input_ids": ids,
                 "attention_mask": np.ones((1, length + ids.shape[1]), np.int64), **past}
        out = dict(zip(names, session.run(names, feeds)))
        logits.append(out["logits"][0, -1])
        token = int(np.argmax(logits[-1])) if forced is None else forced[step]
        tokens.append(token)
        length += ids.shape[1]
        past = {n: out[n.replace("past_key_values.", "present.")] for n in past}
        ids = np.asarray([[token]], np.int64)
    return tokens, np.stack(logits)


def kiln_generate(kiln_bin, plan, prompts, tmp_path, steps):
    import json

    tmp_path.mkdir(parents=True, exist_ok=True)
    args = [kiln_bin, "generate", str(plan), "--json", "--greedy", "--max-new-tokens",
            str(steps), "--logits-out", str(tmp_path / "logits.npy")]
    for p in prompts:
        args += ["--prompt-ids", ",".join(map(str, p))]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=KILN_TIMEOUT_S,
                          check=False)
    assert proc.returncode == 0, f"kiln generate failed ({proc.returncode}):\n{proc.stderr}"
    return json.loads(proc.stdout), np.load(tmp_path / "logits.npy")


@pytest.mark.parametrize("model", FIXTURES, ids=[p.parent.name for p in FIXTURES])
def test_generate_matches_onnxruntime(kiln_bin, generation_plans, model, tmp_path):
    prompt = [5, 17, 33, 200, 9]
    got, logits = kiln_generate(kiln_bin, generation_plans[model.parent.name], [prompt],
                                tmp_path, NEW_TOKENS)
    reference = onnx_reference.accuracy_level_zero(model, tmp_path)
    want, _ = ort_generate(reference, prompt, NEW_TOKENS)
    assert got["tokens"] == want
    assert len(set(want)) > 1, "the model repeats one token: a weak test"
    _, want_logits = ort_generate(reference, prompt, NEW_TOKENS, forced=got["tokens"])
    assert logits.shape == (NEW_TOKENS, 1, VOCAB)
    worst = float(np.max(np.abs(logits[:, 0] - want_logits)))
    assert worst <= 1e-4, f"logits differ by {worst}"


@pytest.mark.parametrize("model", FIXTURES, ids=[p.parent.name for p in FIXTURES])
def test_generate_batched_lengths_match_alone(kiln_bin, generation_plans, model, tmp_path):
    plan = generation_plans[model.parent.name]
    prompts = [[9, 8, 7], [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]]
    both, both_logits = kiln_generate(kiln_bin, plan, prompts, tmp_path / "both", 12)
    for b, prompt in enumerate(prompts):
        alone, alone_logits = kiln_generate(kiln_bin, plan, [prompt], tmp_path / f"alone{b}", 12)
        assert both["tokens"][b] == alone["tokens"]
        worst = float(np.max(np.abs(both_logits[:, b] - alone_logits[:, 0])))
        assert worst <= 1e-4, f"sequence {b}: logits differ by {worst}"


def f32_values(t):
    """An f16 or bf16 TensorProto's values as f32 (exact)."""
    from onnx import TensorProto, numpy_helper

    if t.data_type == TensorProto.FLOAT16:
        return numpy_helper.to_array(t).astype(np.float32)
    bits = (np.frombuffer(t.raw_data, np.uint16) if t.raw_data
            else np.array(t.int32_data, np.uint32).astype(np.uint16))
    return (bits.astype(np.uint32) << 16).view(np.float32).reshape(tuple(t.dims))


def widened_to_f32(m):
    """The f32 file a 16-bit (fp16 or bf16) file computes as on kiln's cpu (widen-fp16): 16-bit
    initializers, Constant values and I/O types widened exactly, Casts to 16 bits made Casts
    to f32, the intermediate types dropped, MatMulNBits at accuracy_level 0 (f32
    activations)."""
    from onnx import TensorProto, numpy_helper

    half, f32 = {TensorProto.FLOAT16, TensorProto.BFLOAT16}, TensorProto.FLOAT
    for i, t in enumerate(m.graph.initializer):
        if t.data_type in half:
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(f32_values(t), t.name))
    for node in m.graph.node:
        for a in node.attribute:
            if node.op_type == "Cast" and a.name == "to" and a.i in half:
                a.i = f32
            if node.op_type == "MatMulNBits" and a.name == "accuracy_level":
                a.i = 0
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type in half:
                a.t.CopyFrom(numpy_helper.from_array(f32_values(a.t), a.t.name))
    for v in list(m.graph.input) + list(m.graph.output):
        if v.type.tensor_type.elem_type in half:
            v.type.tensor_type.elem_type = f32
    del m.graph.value_info[:]
    return m


def fp16_to_bf16(m):
    """An fp16 file made bf16: its f16 initializers, Constant values, I/O types and Casts in
    bf16 (values rounded to nearest even), the intermediate types dropped."""
    from onnx import TensorProto, helper

    f16, bf16 = TensorProto.FLOAT16, TensorProto.BFLOAT16

    def to_bf16(t):
        bits = f32_values(t).astype(np.float32).reshape(-1).view(np.uint32).astype(np.uint64)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        return helper.make_tensor(t.name, bf16, list(t.dims), rounded.tobytes(), raw=True)

    for i, t in enumerate(m.graph.initializer):
        if t.data_type == f16:
            m.graph.initializer[i].CopyFrom(to_bf16(t))
    for node in m.graph.node:
        for a in node.attribute:
            if node.op_type == "Cast" and a.name == "to" and a.i == f16:
                a.i = bf16
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == f16:
                a.t.CopyFrom(to_bf16(a.t))
    for v in list(m.graph.input) + list(m.graph.output):
        if v.type.tensor_type.elem_type == f16:
            v.type.tensor_type.elem_type = bf16
    del m.graph.value_info[:]
    return m


def assert_generates_as(kiln_bin, plan, reference, tmp_path, distinct=True):
    """`kiln generate` on `plan` gives onnxruntime's greedy tokens on `reference` (at least
    two distinct ones when `distinct`) and, forced along them, its logits within 1e-4."""
    prompt = [5, 17, 33, 200, 9]
    got, logits = kiln_generate(kiln_bin, plan, [prompt], tmp_path / "gen", NEW_TOKENS)
    want, _ = ort_generate(reference, prompt, NEW_TOKENS)
    assert got["tokens"] == want
    if distinct:
        assert len(set(want)) > 1, "the model repeats one token: a weak test"
    _, want_logits = ort_generate(reference, prompt, NEW_TOKENS, forced=got["tokens"])
    worst = float(np.max(np.abs(logits[:, 0] - want_logits)))
    assert worst <= 1e-4, f"logits differ by {worst}"


def test_fp16_file_generates_as_its_f32_widening(kiln_bin, tmp_path):
    """A q4f16 LLM file — the int4 fixture through onnxruntime's fp16 converter: f16
    activations, KV cache (past/present f16) and logits, MatMulNBits with f16 scales —
    compiles to a generation plan on the cpu: widen-fp16 widens its I/O too, so the cache
    pages as f32 pools and the plan's logits are f32 (docs/generation.md). kiln computes
    the file in f32, so the reference is onnxruntime running the file widened to f32
    exactly (widened_to_f32): the same greedy tokens and logits within 1e-4, as the
    fixtures above (measured 5.4e-7); and the plan has the int4 fixture's steps."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    source = GENAI_DIR / "qwen2_int4" / "model.onnx"
    m16 = convert_float_to_float16(onnx.load(str(source)), keep_io_types=False)
    assert {i.type.tensor_type.elem_type for i in m16.graph.input
            if i.name.startswith("past_key_values.")} == {onnx.TensorProto.FLOAT16}
    fp16 = tmp_path / "q4f16.onnx"
    onnx.save(m16, str(fp16))
    reference = tmp_path / "widened.onnx"
    onnx.save(widened_to_f32(m16), str(reference))

    def compile_(model, plan):
        proc = subprocess.run(
            [kiln_bin, "compile", str(model), "-o", str(plan), "--profile",
             "batch_size=1:2,sequence_length=8:16", "--shape", f"kv_cache_dim={HEAD}",
             "--decode-context", "64"],
            capture_output=True, text=True, timeout=KILN_TIMEOUT_S, check=False)
        assert proc.returncode == 0, f"compile {model} failed:\n{proc.stderr}"
        return [line for line in proc.stderr.splitlines() if "steps by kernel" in line]

    assert compile_(fp16, tmp_path / "q4f16.kiln") == compile_(source, tmp_path / "int4.kiln")
    # cuda keeps the model's fp16, and its generation plans page f32 caches only: refused,
    # saying so (exit 3), rather than failing later on the logits' dtype.
    proc = subprocess.run(
        [kiln_bin, "compile", str(fp16), "-o", str(tmp_path / "cuda.kiln"), "--target", "cuda",
         "--profile", "batch_size=1:2,sequence_length=8:16", "--shape", f"kv_cache_dim={HEAD}",
         "--decode-context", "64"], capture_output=True, text=True, timeout=KILN_TIMEOUT_S,
        check=False)
    assert proc.returncode == 3, proc.stderr
    assert "the KV cache 'past_key_values.0.key' is f16" in proc.stderr, proc.stderr
    assert_generates_as(kiln_bin, tmp_path / "q4f16.kiln", reference, tmp_path)


def test_bf16_file_generates_as_its_f32_widening(kiln_bin, tmp_path):
    """The q4f16 file above made bf16 (fp16_to_bf16: bf16 activations, KV cache, logits and
    MatMulNBits scales, as onnxruntime-genai's bf16 files): widen-fp16 widens bf16 as it
    does f16, so it compiles to the int4 fixture's generation steps (before: its bf16
    values ran as ref steps) and generates the greedy tokens and logits of onnxruntime
    running the file widened to f32 exactly, within 1e-4 (as the fp16 file)."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    source = GENAI_DIR / "qwen2_int4" / "model.onnx"
    mb = fp16_to_bf16(convert_float_to_float16(onnx.load(str(source)), keep_io_types=False))
    assert {i.type.tensor_type.elem_type for i in mb.graph.input
            if i.name.startswith("past_key_values.")} == {onnx.TensorProto.BFLOAT16}
    bf16 = tmp_path / "q4bf16.onnx"
    onnx.save(mb, str(bf16))
    reference = tmp_path / "widened.onnx"
    onnx.save(widened_to_f32(mb), str(reference))
    steps = {}
    for name, model in (("bf16", bf16), ("int4", source)):
        proc = subprocess.run(
            [kiln_bin, "compile", str(model), "-o", str(tmp_path / f"{name}.kiln"), "--profile",
             "batch_size=1:2,sequence_length=8:16", "--shape", f"kv_cache_dim={HEAD}",
             "--decode-context", "64"],
            capture_output=True, text=True, timeout=KILN_TIMEOUT_S, check=False)
        assert proc.returncode == 0, f"compile {model} failed:\n{proc.stderr}"
        steps[name] = [line for line in proc.stderr.splitlines() if "steps by kernel" in line]
    assert steps["bf16"] == steps["int4"]
    assert_generates_as(kiln_bin, tmp_path / "bf16.kiln", reference, tmp_path)


def test_shared_int4_embeddings_generate(kiln_bin, tmp_path):
    """onnxruntime-genai's shared_embeddings: a tied model's embedding table is the LM head's
    int4 codes, read through com.microsoft.GatherBlockQuantized over a Reshape of the
    MatMulNBits weight (made here from the int4 fixture the way the builder writes it). kiln
    gathers the rows from the int4 codes themselves (kiln.BlockQuantGather on the LM head's
    constants), so the plan holds no f32 table; its greedy tokens and logits match onnxruntime at
    accuracy_level 0 within 1e-4, as the fixtures' (measured 7.2e-7; the LM head's random
    weights as embeddings make this model repeat one token, so the logits carry the check)."""
    from onnx import helper, numpy_helper

    source = GENAI_DIR / "qwen2_int4" / "model.onnx"
    m = onnx.load(str(source))
    (gather,) = [n for n in m.graph.node if n.name == "/model/embed_tokens/Gather"]
    codes, scales = "lm_head.MatMul.weight_Q4", "lm_head.MatMul.weight_scales"
    rows = [t for t in m.graph.initializer if t.name == codes][0].dims[0]
    shape = helper.make_node("Constant", [], ["table_shape"], value=numpy_helper.from_array(
        np.array([rows, -1], np.int64)))
    table = helper.make_node("Reshape", [codes, "table_shape"], ["table"])
    shared = helper.make_node("GatherBlockQuantized", [table.output[0], "input_ids", scales],
                              list(gather.output), domain="com.microsoft", bits=4, block_size=32,
                              gather_axis=0, quantize_axis=1)
    at = list(m.graph.node).index(gather)
    m.graph.node.remove(gather)
    for k, node in enumerate((shape, table, shared)):
        m.graph.node.insert(at + k, node)
    embed = [t for t in m.graph.initializer if t.name == gather.input[0]][0]
    m.graph.initializer.remove(embed)
    model = tmp_path / "shared.onnx"
    onnx.save(m, str(model))
    plans = {}
    for name, path in (("shared", model), ("fixture", source)):
        plans[name] = tmp_path / f"{name}.kiln"
        proc = subprocess.run(
            [kiln_bin, "compile", str(path), "-o", str(plans[name]), "--profile",
             "batch_size=1:2,sequence_length=8:16", "--shape", f"kv_cache_dim={HEAD}",
             "--decode-context", "64"],
            capture_output=True, text=True, timeout=KILN_TIMEOUT_S, check=False)
        assert proc.returncode == 0, f"compile {path} failed:\n{proc.stderr}"
        plans[name + "_steps"] = [ln for ln in proc.stderr.splitlines() if "steps by kernel" in ln]
    # The shared table is a block_quant_gather on the LM head's own codes and scales (cse
    # merges the constants): the fixture's steps with its embedding Gather replaced, and
    # none of its f32 table's bytes (the plan is smaller by them, within 16 KiB of metadata).
    want_steps = plans["fixture_steps"][0].replace(
        "block_quant_linear 54,", "block_quant_gather 6, block_quant_linear 54,").replace(
        "gather 18", "gather 12")
    assert plans["shared_steps"] == [want_steps]
    table_bytes = int(np.prod(embed.dims)) * 4
    shared_size, fixture_size = plans["shared"].stat().st_size, plans["fixture"].stat().st_size
    print(f"plan bytes: shared {shared_size}, fixture {fixture_size}, f32 table {table_bytes}")
    assert shared_size <= fixture_size - table_bytes + (16 << 10)
    # (The LM head's weights as embeddings repeat one token: the logits carry the check.)
    assert_generates_as(kiln_bin, plans["shared"],
                        onnx_reference.accuracy_level_zero(model, tmp_path), tmp_path,
                        distinct=False)
