"""Each com.microsoft op kiln imports (docs/importer.md "onnxruntime-optimized graphs"),
alone in a model built here, against onnxruntime running the same file: the forms the
transformer optimizer writes (tests/e2e/test_ort_optimized.py) and the ones it did not
write for the fixtures — Attention with a 0/1 mask, unidirectional, an attention bias and
uneven qkv_hidden_sizes, the simplified norms, QuickGelu, FastGelu without bias,
RotaryEmbedding (3-D and 4-D, halves and interleaved), MultiHeadAttention (bias, both mask
formats, an attention bias, causal, cross-attention, heads-form K/V, a past cache with
masks and causality), GroupQueryAttention (separate and
packed QKV, with and without a past cache, ragged batches, rotary halves / interleaved /
partial, local window, softcap, scale, attention bias, causal=0), MatMulNBits (2, 4 and 8
bits, f32 and f16, zero points absent, packed or float, a padded last block; also
compiled), FusedMatMul (alpha, transposes), MatMulIntegerToFloat and DynamicQuantizeMatMul
(per-tensor and per-column scales, u8 and s8 weights), GatherBlockQuantized (u8 data at 4
and 8 bits, uint4 / int4 data, with and without zero points) (and
BiasAdd, which onnxruntime runs on CUDA only, against numpy) — and the forms kiln refuses,
each with its message.

Bound: 2e-5 absolute on O(1) values (fp32 on both sides; onnxruntime's contrib kernels
use tanh/erf approximations and fused sums: measured <= 4e-6)."""

import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import KILN_TIMEOUT_S, run_kiln, run_onnxruntime

TOLERANCE = 2e-5
MS = "com.microsoft"


def model(nodes, inputs, outputs, inits=(), opset=14):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    return m


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def check(kiln_bin, tmp_path, m, feeds):
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    want = run_onnxruntime(path, feeds)
    proc, out = run_kiln(kiln_bin, path, feeds, tmp_path / "run")
    assert proc.returncode == 0, proc.stderr
    for name, expected in want.items():
        got = np.load(out / f"{name}.npy")
        assert got.shape == expected.shape, name
        assert float(np.abs(got - expected).max()) <= TOLERANCE, name


RNG = np.random.default_rng(7)


def compile_with_steps(kiln_bin, model_path, plan, steps, *flags):
    """`kiln compile` of `model_path` to `plan`; asserts it succeeds and that its summary's
    steps by kernel are exactly `steps` (e.g. "block_quant_linear 1"). Returns `plan`."""
    compiled = subprocess.run([kiln_bin, "compile", str(model_path), "-o", str(plan), *flags],
                              capture_output=True, text=True, timeout=KILN_TIMEOUT_S, check=False)
    assert compiled.returncode == 0, compiled.stderr
    assert f"steps by kernel (all buckets): {steps}\n" in compiled.stderr, compiled.stderr
    return plan


def rand(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


@pytest.mark.parametrize("mask", ["none", "2d", "1d"])
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_attention(kiln_bin, tmp_path, mask, unidirectional):
    b, s, h, heads, v_hidden = 2, 5, 8, 2, 12  # V wider than Q/K: uneven qkv_hidden_sizes
    inits = [numpy_helper.from_array(rand(h, 2 * h + v_hidden, scale=0.5), "w"),
             numpy_helper.from_array(rand(2 * h + v_hidden, scale=0.5), "bias"),
             numpy_helper.from_array(rand(1, heads, s, s, scale=0.5), "attn_bias")]
    inputs = [f32("x", [b, s, h])]
    ins = ["x", "w", "bias", "", "", "attn_bias"]
    feeds = {"x": rand(b, s, h)}
    if mask == "2d":
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.INT32, [b, s]))
        feeds["mask"] = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.int32)
        ins[3] = "mask"
    elif mask == "1d":
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.INT32, [b]))
        feeds["mask"] = np.array([5, 3], np.int32)
        ins[3] = "mask"
    node = helper.make_node("Attention", ins, ["y"], domain=MS, num_heads=heads,
                            qkv_hidden_sizes=[h, h, v_hidden], unidirectional=unidirectional,
                            scale=0.3)
    check(kiln_bin, tmp_path, model([node], inputs, [f32("y", [b, s, v_hidden])], inits), feeds)


def test_norms_and_activations(kiln_bin, tmp_path):
    h = 8
    inits = [numpy_helper.from_array(rand(h), name) for name in ("gamma", "bias")]
    nodes = [
        helper.make_node("SkipSimplifiedLayerNormalization", ["x", "skip", "gamma", "bias"],
                         ["ssln", "", "", "sum"], domain=MS, epsilon=1e-5),
        helper.make_node("SimplifiedLayerNormalization", ["x", "gamma"], ["sln"],
                         epsilon=1e-6),
        helper.make_node("QuickGelu", ["x"], ["qg"], domain=MS, alpha=1.5),
        helper.make_node("FastGelu", ["x"], ["fg"], domain=MS),
        helper.make_node("FastGelu", ["x", "bias"], ["fgb"], domain=MS),
        helper.make_node("Gelu", ["skip"], ["g"], domain=MS),
        helper.make_node("SkipLayerNormalization", ["x", "skip", "gamma"], ["sln_plain"],
                         domain=MS, epsilon=1e-5),
    ]
    outs = ["ssln", "sum", "sln", "qg", "fg", "fgb", "g", "sln_plain"]
    m = model(nodes, [f32("x", [2, 3, h]), f32("skip", [2, 3, h])],
              [f32(o, [2, 3, h]) for o in outs], inits)
    check(kiln_bin, tmp_path, m, {"x": rand(2, 3, h), "skip": rand(2, 3, h)})


def test_bias_add(kiln_bin, tmp_path):
    """onnxruntime has BiasAdd on CUDA only: checked against numpy, (x + bias) + skip."""
    bias = rand(8)
    node = helper.make_node("BiasAdd", ["x", "bias", "skip"], ["y"], domain=MS)
    m = model([node], [f32("x", [2, 3, 8]), f32("skip", [2, 3, 8])], [f32("y", [2, 3, 8])],
              [numpy_helper.from_array(bias, "bias")])
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    feeds = {"x": rand(2, 3, 8), "skip": rand(2, 3, 8)}
    proc, out = run_kiln(kiln_bin, path, feeds, tmp_path / "run")
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(np.load(out / "y.npy"), (feeds["x"] + bias) + feeds["skip"])


@pytest.mark.parametrize("case,message", [
    ("past", "the past state input is not supported"),
    ("rotary", "do_rotary is not supported"),
    ("stats", "output 1 (a normalization statistic) is not supported"),
    ("other", "unsupported ops: com.microsoft.DecoderMaskedMultiHeadAttention"),
])
def test_refused_forms(kiln_bin, tmp_path, case, message):
    h = 8
    inits = [numpy_helper.from_array(rand(h, 3 * h), "w"), numpy_helper.from_array(rand(h), "g"),
             numpy_helper.from_array(rand(2, 2, 2, 0, 4), "past")]
    if case in ("past", "rotary"):
        ins = ["x", "w", "", "", "past"] if case == "past" else ["x", "w"]
        node = helper.make_node("Attention", ins, ["y"], domain=MS, num_heads=2,
                                do_rotary=int(case == "rotary"))
    elif case == "stats":
        node = helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y", "inv"])
    else:
        node = helper.make_node("DecoderMaskedMultiHeadAttention", ["x", "x", "x"], ["y"],
                                domain=MS, num_heads=2)
    outputs = [f32("y", None)] + ([f32("inv", None)] if case == "stats" else [])
    path = tmp_path / "m.onnx"
    onnx.save(model([node], [f32("x", [1, 3, h])], outputs, inits), str(path))
    p = subprocess.run([kiln_bin, "compile", str(path), "-o", str(tmp_path / "m.kiln")],
                       capture_output=True, text=True, timeout=KILN_TIMEOUT_S, check=False)
    assert p.returncode != 0
    assert message in p.stderr, p.stderr


@pytest.mark.parametrize("rank", [3, 4])
@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding(kiln_bin, tmp_path, rank, interleaved):
    """com.microsoft.RotaryEmbedding imports as ONNX's RotaryEmbedding (inputs reordered)."""
    b, s, heads, d, max_pos = 2, 3, 2, 8, 16
    shape = [b, s, heads * d] if rank == 3 else [b, heads, s, d]
    angles = RNG.standard_normal((max_pos, d // 2))
    inits = [numpy_helper.from_array(np.cos(angles).astype(np.float32), "cos"),
             numpy_helper.from_array(np.sin(angles).astype(np.float32), "sin")]
    inputs = [f32("x", shape),
              helper.make_tensor_value_info("pos", TensorProto.INT64, [b, s])]
    attrs = {"interleaved": interleaved}
    if rank == 3:
        attrs["num_heads"] = heads
    node = helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=MS,
                            **attrs)
    feeds = {"x": rand(*shape), "pos": np.array([[0, 1, 2], [5, 9, 15]], np.int64)}
    check(kiln_bin, tmp_path, model([node], inputs, [f32("y", shape)], inits), feeds)


@pytest.mark.parametrize("case", ["plain", "bias_mask2d", "bias_attn_bias", "mask1d", "causal",
                                  "cross", "heads_kv_bias"])
def test_multi_head_attention(kiln_bin, tmp_path, case):
    """com.microsoft.MultiHeadAttention with separate Q, K, V: the shared heads' attention
    (heads_kv_bias: K and V given as heads [B, N, L, D], where only Q's bias applies)."""
    b, s, heads, d = 2, 5, 2, 4
    h = heads * d
    t = 3 if case in ("cross", "heads_kv_bias") else s
    kv_shape = [b, heads, t, d] if case == "heads_kv_bias" else [b, t, h]
    inputs = [f32("q", [b, s, h]), f32("k", kv_shape), f32("v", kv_shape)]
    feeds = {"q": rand(b, s, h), "k": rand(*kv_shape), "v": rand(*kv_shape)}
    ins, inits, attrs = ["q", "k", "v"], [], {"num_heads": heads}
    if case == "heads_kv_bias":
        inits.append(numpy_helper.from_array(rand(3 * h, scale=0.5), "bias"))
        ins.append("bias")
    if case == "mask1d":
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.INT32, [b]))
        feeds["mask"] = np.array([5, 3], np.int32)
        ins += ["", "mask"]
    if case in ("bias_mask2d", "bias_attn_bias"):
        inits.append(numpy_helper.from_array(rand(3 * h, scale=0.5), "bias"))
        ins.append("bias")
        if case == "bias_mask2d":
            inputs.append(helper.make_tensor_value_info("mask", TensorProto.INT32, [b, t]))
            feeds["mask"] = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.int32)
            ins.append("mask")
        else:
            inits.append(numpy_helper.from_array(rand(1, heads, s, t, scale=0.5), "attn_bias"))
            ins += ["", "attn_bias"]
    if case == "causal":
        attrs["unidirectional"] = 1
    if case == "cross":
        attrs["scale"] = 0.3
    node = helper.make_node("MultiHeadAttention", ins, ["y"], domain=MS, **attrs)
    check(kiln_bin, tmp_path, model([node], inputs, [f32("y", [b, s, h])], inits), feeds)


# GroupQueryAttention: (batch, heads, kv heads, head size, sequence, past cache length or
# None for no past inputs, seqlens_k, total_sequence_length, options). seqlens_k + 1 is
# each row's length after the step: rows shorter than past + sequence are the ragged
# batch onnxruntime supports (decode: the new token lands at each row's own position;
# prefill: right padding), past longer than total is the static-cache form.
GQA_CASES = {
    "decode_ragged": (2, 4, 2, 8, 1, 5, [5, 3], 6, {}),
    "decode_static_cache": (2, 4, 2, 8, 1, 10, [5, 5], 6, {}),
    "prefill_padded": (2, 4, 2, 8, 4, 0, [3, 1], 4, {}),
    "prefill_no_past": (2, 4, 2, 8, 4, None, [3, 1], 4, {}),
    "chunk": (1, 4, 2, 8, 3, 5, [7], 8, {}),
    "packed_mqa": (1, 4, 1, 8, 3, 5, [7], 8, {"packed": True}),
    "rotary": (2, 4, 2, 16, 1, 5, [5, 3], 6, {"rotary": 16}),
    "rotary_interleaved": (2, 4, 2, 16, 4, 0, [3, 1], 4, {"rotary": 16,
                                                           "rotary_interleaved": 1}),
    "rotary_partial": (1, 4, 2, 32, 3, 5, [7], 8, {"rotary": 16}),
    "packed_rotary": (1, 4, 2, 16, 3, 5, [7], 8, {"packed": True, "rotary": 16}),
    "window_prefill": (1, 4, 2, 8, 6, 0, [5], 6, {"local_window_size": 2}),
    "window_decode": (2, 4, 2, 8, 1, 9, [9, 4], 10, {"local_window_size": 3}),
    "softcap_scale": (2, 4, 2, 8, 1, 5, [5, 3], 6, {"softcap": 1.5, "scale": 0.3}),
    "attention_bias": (2, 4, 4, 8, 1, 8, [5, 3], 6, {"bias": True, "softcap": 1.5}),
    "bidirectional": (2, 4, 2, 8, 4, None, [3, 1], 4, {"causal": 0}),
}


@pytest.mark.parametrize("case", list(GQA_CASES))
def test_group_query_attention(kiln_bin, tmp_path, case):
    """com.microsoft.GroupQueryAttention: output rows s < min(S, seqlens_k + 1) and present
    K/V rows t < seqlens_k + 1 (the rest are padding, unspecified by onnxruntime)."""
    b, heads, kv, d, s, past, seqlens, total, opt = GQA_CASES[case]
    opt = dict(opt)
    packed, rotary, bias = opt.pop("packed", False), opt.pop("rotary", 0), opt.pop("bias", False)
    feeds, inputs, ins = {}, [], []

    def add(name, array):
        feeds[name] = array
        dtype = TensorProto.INT32 if array.dtype == np.int32 else TensorProto.FLOAT
        inputs.append(helper.make_tensor_value_info(name, dtype, list(array.shape)))
        ins.append(name)

    add("q", rand(b, s, (heads + 2 * kv) * d if packed else heads * d))
    if packed:
        ins += ["", ""]
    else:
        add("k", rand(b, s, kv * d))
        add("v", rand(b, s, kv * d))
    if past is None:
        ins += ["", ""]
    else:
        add("past_k", rand(b, kv, past, d))
        add("past_v", rand(b, kv, past, d))
    add("seqlens_k", np.array(seqlens, np.int32))
    add("total", np.array(total, np.int32))
    if rotary:
        angles = RNG.uniform(0, 6, (64, rotary // 2))
        add("cos", np.cos(angles).astype(np.float32))
        add("sin", np.sin(angles).astype(np.float32))
    if bias:
        ins += ["", "", ""] if not rotary else [""]
        add("attention_bias", rand(b, heads, s, total))
    node = helper.make_node("GroupQueryAttention", ins, ["y", "present_k", "present_v"],
                            domain=MS, num_heads=heads, kv_num_heads=kv,
                            do_rotary=int(bool(rotary)), **opt)
    m = model([node], inputs, [f32("y", None), f32("present_k", None), f32("present_v", None)])
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    want = run_onnxruntime(path, feeds)
    proc, out = run_kiln(kiln_bin, path, feeds, tmp_path / "run")
    assert proc.returncode == 0, proc.stderr
    rows = np.minimum(s, np.array(seqlens) + 1)
    y = np.load(out / "y.npy")
    assert y.shape == want["y"].shape
    for row in range(b):
        assert float(np.abs(y[row, :rows[row]] - want["y"][row, :rows[row]]).max()) <= TOLERANCE
    for name in ("present_k", "present_v"):
        got = np.load(out / f"{name}.npy")
        assert got.shape == want[name].shape, name
        for row, length in enumerate(np.array(seqlens) + 1):
            err = np.abs(got[row, :, :length] - want[name][row, :, :length]).max()
            assert float(err) <= TOLERANCE, f"{name} row {row}"


@pytest.mark.parametrize("case,message", [
    ("position_ids", "the position_ids input is not supported"),
    ("head_sink", "the head_sink input is not supported"),
    ("qk_output", "qk_output is not supported"),
    ("quantized", "k_quant_type=PER_TENSOR (a quantized KV cache) is not supported"),
    ("lone_key", "key and value must both be given, or neither (packed QKV)"),
    ("heads", "num_heads (4) must be a positive multiple of kv_num_heads (3)"),
])
def test_group_query_attention_refused(kiln_bin, tmp_path, case, message):
    ins = ["q", "kv", "kv", "", "", "seqlens_k", "total"]
    attrs = {"num_heads": 4, "kv_num_heads": 2}
    inputs = [f32("q", [1, 3, 32]), f32("kv", [1, 3, 16]),
              helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, [1]),
              helper.make_tensor_value_info("total", TensorProto.INT32, [])]
    if case == "position_ids":
        ins += ["", "", "kv"]
    elif case == "head_sink":
        ins += ["", "", "", "", "kv"]
    elif case == "qk_output":
        attrs["qk_output"] = 1
    elif case == "quantized":
        attrs["k_quant_type"] = "PER_TENSOR"
    elif case == "lone_key":
        ins[2] = ""
    else:
        attrs["kv_num_heads"] = 3
    node = helper.make_node("GroupQueryAttention", ins, ["y"], domain=MS, **attrs)
    path = tmp_path / "m.onnx"
    onnx.save(model([node], inputs, [f32("y", None)]), str(path))
    p = subprocess.run([kiln_bin, "compile", str(path), "-o", str(tmp_path / "m.kiln")],
                       capture_output=True, text=True, timeout=KILN_TIMEOUT_S, check=False)
    assert p.returncode != 0
    assert message in p.stderr, p.stderr


@pytest.mark.parametrize("case", ["past", "past_causal", "past_mask", "past_bias_counts"])
def test_multi_head_attention_with_past(kiln_bin, tmp_path, case):
    """MultiHeadAttention with past_key/past_value [B, N, P, D]: K/V = Concat(past, this
    step's heads), the present outputs; the masks cover past + new keys, and a causal query
    i sits at position P + i."""
    b, s, heads, d, past = 2, 3, 2, 4, 5
    h, total = heads * d, past + s
    inputs = [f32("q", [b, s, h]), f32("k", [b, s, h]), f32("v", [b, s, h]),
              f32("past_k", [b, heads, past, d]), f32("past_v", [b, heads, past, d])]
    feeds = {"q": rand(b, s, h), "k": rand(b, s, h), "v": rand(b, s, h),
             "past_k": rand(b, heads, past, d), "past_v": rand(b, heads, past, d)}
    ins, inits, attrs = ["q", "k", "v", "", "", ""], [], {"num_heads": heads}
    if case == "past_causal":
        attrs["unidirectional"] = 1
    if case == "past_mask":
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.INT32, [b, total]))
        feeds["mask"] = np.array([[1] * total, [0, 1, 1, 1, 1, 1, 0, 1]], np.int32)
        ins[4] = "mask"
    if case == "past_bias_counts":
        inits.append(numpy_helper.from_array(rand(3 * h, scale=0.5), "bias"))
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.INT32, [b]))
        feeds["mask"] = np.array([total, 6], np.int32)
        ins[3], ins[4] = "bias", "mask"
        attrs["unidirectional"] = 1
    ins += ["past_k", "past_v"]
    node = helper.make_node("MultiHeadAttention", ins, ["y", "present_k", "present_v"],
                            domain=MS, **attrs)
    outs = [f32("y", [b, s, h]), f32("present_k", [b, heads, total, d]),
            f32("present_v", [b, heads, total, d])]
    check(kiln_bin, tmp_path, model([node], inputs, outs, inits), feeds)


@pytest.mark.parametrize("case,message", [
    ("packed", "packed QKV or KV (key or value omitted) is not supported"),
    ("shared_buffer", "the past_sequence_length (shared cache buffer) and cache_indirection "
                      "inputs are not supported"),
    ("qk", "the qk output is not supported"),
    ("lone_past", "past_key and past_value must both be given, or neither"),
])
def test_multi_head_attention_refused(kiln_bin, tmp_path, case, message):
    ins, outs = ["x", "x", "x"], ["y"]
    inputs = [f32("x", [1, 3, 8]), f32("past", [1, 2, 4, 4]),
              helper.make_tensor_value_info("len", TensorProto.INT32, [1])]
    if case == "packed":
        ins = ["x"]
    elif case == "shared_buffer":
        ins += ["", "", "", "past", "past", "len"]
    elif case == "qk":
        outs = ["y", "", "", "qk"]
    else:
        ins += ["", "", "", "past"]
    node = helper.make_node("MultiHeadAttention", ins, outs, domain=MS, num_heads=2)
    path = tmp_path / "m.onnx"
    outputs = [f32(o, None) for o in outs if o]
    onnx.save(model([node], inputs, outputs), str(path))
    p = subprocess.run([kiln_bin, "compile", str(path), "-o", str(tmp_path / "m.kiln")],
                       capture_output=True, text=True, timeout=KILN_TIMEOUT_S, check=False)
    assert p.returncode != 0
    assert message in p.stderr, p.stderr


def pack_low_first(codes, bits):
    """Codes (uint8, last axis) packed 8 / bits per byte, the first in the low bits."""
    per = 8 // bits
    pad = (-codes.shape[-1]) % per
    codes = np.concatenate([codes, np.zeros(codes.shape[:-1] + (pad,), np.uint8)], axis=-1)
    codes = codes.reshape(codes.shape[:-1] + (-1, per)).astype(np.uint32)
    out = np.zeros(codes.shape[:-1], np.uint32)
    for j in range(per):
        out |= codes[..., j] << (bits * j)
    return out.astype(np.uint8)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("zero_points", ["none", "packed", "float"])
@pytest.mark.parametrize("k", [64, 40])
def test_matmul_nbits(kiln_bin, tmp_path, zero_points, k, bits, dtype):
    """com.microsoft.MatMulNBits (block 32; K = 40 pads its last block): 4 and 8 bits import
    as kiln.BlockQuantLinear (f16 scales widened, an f16 A cast to f32 and the result back,
    as onnxruntime's CPU kernel computes it) and compile to a block_quant_linear step; 2 bits
    as a blocked DequantizeLinear feeding a MatMul, which compiles to an f32 linear. Zero
    points absent, packed like B, or floats of A's dtype (fractional, as HQQ writes them;
    4 and 8 bits only: 2 bits with them is refused, naming the node; onnxruntime's CPU
    kernel refuses 8 bits with them, so there numpy computes its 4-bit formula). Both the
    reference run and the plan match onnxruntime: f32 within TOLERANCE (the scales shrink
    with more bits, so values stay O(1)); f16 within one f16 ulp of the value (|d| <=
    2^-10 |y|: both round an f32 result to f16 once; measured within 2^-11 |y|)."""
    n, bs = 6, 32
    kb = (k + bs - 1) // bs
    np_type, onnx_type = ((np.float32, TensorProto.FLOAT) if dtype == "f32" else
                          (np.float16, TensorProto.FLOAT16))
    codes = RNG.integers(0, 2**bits, (n, kb * bs)).astype(np.uint8)
    b = pack_low_first(codes, bits).reshape(n, kb, bs * bits // 8)
    scales = RNG.uniform(0.01, 0.1, n * kb) * 2.0**(4 - bits)
    inits = [numpy_helper.from_array(b, "B"),
             numpy_helper.from_array(scales.astype(np_type), "scales"),
             numpy_helper.from_array(rand(n).astype(np_type), "bias")]
    ins = ["a", "B", "scales", "", "", "bias"]
    if zero_points == "packed":
        zp = RNG.integers(0, 2**bits, (n, kb)).astype(np.uint8)
        inits.append(numpy_helper.from_array(pack_low_first(zp, bits).reshape(-1), "zp"))
        ins[3] = "zp"
    elif zero_points == "float":
        zp = RNG.uniform(-1, 2**bits, n * kb).astype(np_type)
        inits.append(numpy_helper.from_array(zp, "zp"))
        ins[3] = "zp"
    node = helper.make_node("MatMulNBits", ins, ["y"], domain=MS, K=k, N=n, bits=bits,
                            block_size=bs)
    feeds = {"a": rand(2, 3, k).astype(np_type)}
    path = tmp_path / "m.onnx"
    onnx.save(model([node], [helper.make_tensor_value_info("a", onnx_type, [2, 3, k])],
                    [helper.make_tensor_value_info("y", onnx_type, [2, 3, n])], inits), str(path))
    if zero_points == "float" and bits == 8:
        # onnxruntime's CPU kernel refuses 8-bit codes with float zero points; its 4-bit
        # formula (w = (code − z) · s in f32, checked by the 4-bit cases) computed by numpy.
        w = ((codes[:, :k].astype(np.float32) - np.repeat(zp.astype(np.float32).reshape(n, kb),
                                                          bs, axis=1)[:, :k])
             * np.repeat(scales.astype(np_type).astype(np.float32).reshape(n, kb), bs,
                         axis=1)[:, :k])
        y = (feeds["a"].astype(np.float64) @ w.astype(np.float64).T
             + numpy_helper.to_array(inits[2]).astype(np.float64))
        want = y.astype(np_type).astype(np.float64)
    else:
        want = run_onnxruntime(path, feeds)["y"].astype(np.float64)
    bound = TOLERANCE if dtype == "f32" else np.abs(want) * 2.0**-10 + 2.0**-24
    proc, out = run_kiln(kiln_bin, path, feeds, tmp_path / "ref")
    if zero_points == "float" and bits == 2:
        assert proc.returncode != 0
        assert "float zero points need 4 or 8 bits" in proc.stderr, proc.stderr
        assert "MatMulNBits" in proc.stderr, proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    # f16 I/O: widen-fp16's two Casts at the edges (eltwise steps) around the f32 GEMM.
    want_steps = "linear 1" if bits == 2 else "block_quant_linear 1"
    if dtype == "f16":
        want_steps = ", ".join(sorted([want_steps, "eltwise 2"]))
    plan = compile_with_steps(kiln_bin, path, tmp_path / "m.kiln", want_steps, "--accept", "none")
    proc, plan_out = run_kiln(kiln_bin, plan, feeds, tmp_path / "plan")
    assert proc.returncode == 0, proc.stderr
    for name, got in (("reference", np.load(out / "y.npy")), ("plan", np.load(plan_out / "y.npy"))):
        assert got.dtype == np_type, name
        assert np.all(np.abs(got.astype(np.float64) - want) <= bound), name


def bf16_values(x):
    """x (f32) truncated to values bf16 holds exactly (the low 16 bits cleared)."""
    bits = np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


def bf16_tensor(name, values):
    """A BFLOAT16 initializer holding `values` (bf16-exact f32 values), as raw bits."""
    bits = (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return helper.make_tensor(name, TensorProto.BFLOAT16, list(values.shape), bits.tobytes(),
                              raw=True)


@pytest.mark.parametrize("bits", [4, 8])
def test_bf16_matmul_nbits_runs_on_the_int_kernel(kiln_bin, tmp_path, bits):
    """A bf16 MatMulNBits (onnxruntime-genai's bf16 files; onnxruntime runs them on CUDA
    only) behind f32 I/O: Cast(a, bf16) -> MatMulNBits (bf16 scales and bias) -> Cast(f32).
    widen-fp16 widens the bf16 graph on the cpu, so the GEMM is a block_quant_linear step
    (before: a ref step on bf16 values) and the plan has no other step (the Casts become
    identities). a is fed bf16-exact, so the only roundings are the result's: the reference
    run rounds it to bf16 once, the plan keeps the f32 sum; both within one bf16 ulp
    (2^-7 |y|) of numpy's f64 result on the same values."""
    n, k, bs = 6, 64, 32
    kb = k // bs
    codes = RNG.integers(0, 2**bits, (n, k)).astype(np.uint8)
    b = pack_low_first(codes, bits).reshape(n, kb, bs * bits // 8)
    scales = bf16_values(RNG.uniform(0.01, 0.1, n * kb) * 2.0**(4 - bits))
    bias = bf16_values(rand(n))
    inits = [numpy_helper.from_array(b, "B"), bf16_tensor("scales", scales),
             bf16_tensor("bias", bias)]
    nodes = [helper.make_node("Cast", ["a"], ["a16"], to=TensorProto.BFLOAT16),
             helper.make_node("MatMulNBits", ["a16", "B", "scales", "", "", "bias"], ["y16"],
                              domain=MS, K=k, N=n, bits=bits, block_size=bs),
             helper.make_node("Cast", ["y16"], ["y"], to=TensorProto.FLOAT)]
    path = tmp_path / "m.onnx"
    onnx.save(model(nodes, [f32("a", [2, 3, k])], [f32("y", [2, 3, n])], inits), str(path))
    feeds = {"a": bf16_values(rand(2, 3, k))}
    zero = 2 ** (bits - 1)
    w = ((codes.astype(np.float64) - zero)
         * np.repeat(scales.astype(np.float64).reshape(n, kb), bs, axis=1))
    want = feeds["a"].astype(np.float64) @ w.T + bias.astype(np.float64)
    plan = compile_with_steps(kiln_bin, path, tmp_path / "m.kiln", "block_quant_linear 1",
                              "--accept", "none")
    proc, ref_out = run_kiln(kiln_bin, path, feeds, tmp_path / "ref")
    assert proc.returncode == 0, proc.stderr
    proc, plan_out = run_kiln(kiln_bin, plan, feeds, tmp_path / "plan")
    assert proc.returncode == 0, proc.stderr
    for name, out in (("reference", ref_out), ("plan", plan_out)):
        got = np.load(out / "y.npy").astype(np.float64)
        assert np.all(np.abs(got - want) <= np.abs(want) * 2.0**-7 + 1e-6), name


@pytest.mark.parametrize("trans", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_fused_matmul(kiln_bin, tmp_path, trans):
    """com.microsoft.FusedMatMul (onnxruntime's MatMul with the scale and the transposes of
    its last two axes folded in, as it saves optimized files): MatMul of the transposed
    operands times alpha, against onnxruntime within TOLERANCE."""
    ta, tb = trans
    a_shape = [2, 3, 6, 5] if ta else [2, 3, 5, 6]
    b_shape = [2, 3, 4, 6] if tb else [2, 3, 6, 4]
    node = helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain=MS, alpha=0.125, transA=ta,
                            transB=tb)
    m = model([node], [f32("a", a_shape), f32("b", b_shape)], [f32("y", [2, 3, 5, 4])])
    check(kiln_bin, tmp_path, m, {"a": rand(*a_shape), "b": rand(*b_shape)})


@pytest.mark.parametrize("form", ["to_float", "to_float_per_column", "dynamic", "dynamic_s8"])
def test_integer_matmuls(kiln_bin, tmp_path, form):
    """com.microsoft.MatMulIntegerToFloat and DynamicQuantizeMatMul (what onnxruntime makes of
    quantize_dynamic's pattern in the files it saves): expanded back into that pattern
    (DynamicQuantizeLinear, MatMulInteger, Cast, Mul by the scales' product, Add), so the
    reference run matches onnxruntime within TOLERANCE; per-tensor and per-column weight
    scales, u8 and s8 weights, zero points and bias."""
    k, n = 6, 4
    b_type = np.int8 if form == "dynamic_s8" else np.uint8
    lo, hi = (-128, 128) if b_type == np.int8 else (0, 256)
    w = RNG.integers(lo, hi, (k, n)).astype(b_type)
    per_column = form == "to_float_per_column"
    b_scale = RNG.uniform(0.01, 0.05, n if per_column else 1).astype(np.float32)
    b_zero = RNG.integers(lo, hi, n if per_column else 1).astype(b_type)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b_scale, "b_scale"),
             numpy_helper.from_array(b_zero, "b_zero"), numpy_helper.from_array(rand(n), "bias")]
    if form.startswith("dynamic"):
        node = helper.make_node("DynamicQuantizeMatMul", ["a", "w", "b_scale", "b_zero", "bias"],
                                ["y"], domain=MS)
        inputs, feeds = [f32("a", [2, 3, k])], {"a": rand(2, 3, k)}
    else:
        inits += [numpy_helper.from_array(np.array(0.02, np.float32), "a_scale"),
                  numpy_helper.from_array(np.array(7, np.uint8), "a_zero")]
        node = helper.make_node("MatMulIntegerToFloat",
                                ["a", "w", "a_scale", "b_scale", "a_zero", "b_zero", "bias"],
                                ["y"], domain=MS)
        inputs = [helper.make_tensor_value_info("a", TensorProto.UINT8, [2, 3, k])]
        feeds = {"a": RNG.integers(0, 256, (2, 3, k)).astype(np.uint8)}
    check(kiln_bin, tmp_path, model([node], inputs, [f32("y", [2, 3, n])], inits), feeds)


def test_fused_matmul_batch_transposes_are_refused(kiln_bin, tmp_path):
    node = helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain=MS, transBatchA=1)
    path = tmp_path / "m.onnx"
    onnx.save(model([node], [f32("a", [2, 3, 4]), f32("b", [3, 4, 5])], [f32("y", None)]),
              str(path))
    p = subprocess.run([kiln_bin, "compile", str(path), "-o", str(tmp_path / "m.kiln")],
                       capture_output=True, text=True, timeout=KILN_TIMEOUT_S, check=False)
    assert p.returncode != 0
    assert "(com.microsoft.FusedMatMul" in p.stderr, p.stderr
    assert "transBatchA / transBatchB are not supported" in p.stderr, p.stderr


@pytest.mark.parametrize("data", ["u8_4bit", "u8_8bit", "uint4", "int4"])
@pytest.mark.parametrize("zero_points", [False, True])
def test_gather_block_quantized(kiln_bin, tmp_path, data, zero_points):
    """com.microsoft.GatherBlockQuantized (onnxruntime-genai's shared int4 embeddings): rows of
    a block-quantized [rows, hidden] table, w = (code − zero) · scale (zero 2^(bits−1) for
    u8 data, 0 for int4 data when absent); u8 data packs two 4-bit codes per byte, zero
    points packed like it; also uint4 / int4 data; a negative id counts from the end. The
    reference run and the plan (kiln.BlockQuantGather: a block_quant_gather step on the
    codes) against onnxruntime within TOLERANCE."""
    rows, hidden, bs = 10, 64, 32
    blocks = hidden // bs
    bits = 8 if data == "u8_8bit" else 4
    lo, hi = (-8, 8) if data == "int4" else (0, 2**bits)
    codes = RNG.integers(lo, hi, (rows, hidden))
    zps = RNG.integers(lo, hi, (rows, blocks))
    if data.startswith("u8"):
        table = codes.astype(np.uint8) if bits == 8 else pack_low_first(codes.astype(np.uint8), 4)
        zp = zps.astype(np.uint8) if bits == 8 else pack_low_first(zps.astype(np.uint8), 4)
        inits = [numpy_helper.from_array(table, "data"), numpy_helper.from_array(zp, "zp")]
    else:
        t = TensorProto.UINT4 if data == "uint4" else TensorProto.INT4
        inits = [helper.make_tensor("data", t, [rows, hidden], codes.reshape(-1).tolist()),
                 helper.make_tensor("zp", t, [rows, blocks], zps.reshape(-1).tolist())]
    inits.append(numpy_helper.from_array(RNG.uniform(0.01, 0.1, (rows, blocks)).astype(np.float32),
                                         "scales"))
    ins = ["data", "ids", "scales"] + (["zp"] if zero_points else [])
    node = helper.make_node("GatherBlockQuantized", ins, ["y"], domain=MS, bits=bits,
                            block_size=bs, gather_axis=0, quantize_axis=1)
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])
    m = model([node], [ids], [f32("y", [2, 3, hidden])], inits, opset=21)
    feeds = {"ids": np.array([[1, 3, 9], [0, -1, 5]], np.int64)}
    check(kiln_bin, tmp_path, m, feeds)
    # The plan gathers from the codes themselves: one block_quant_gather step (4-bit codes
    # packed two per byte in the plan), against onnxruntime within TOLERANCE too.
    plan = compile_with_steps(kiln_bin, tmp_path / "m.onnx", tmp_path / "m.kiln",
                              "block_quant_gather 1")
    proc, out = run_kiln(kiln_bin, plan, feeds, tmp_path / "plan")
    assert proc.returncode == 0, proc.stderr
    want = run_onnxruntime(tmp_path / "m.onnx", feeds)["y"]
    assert float(np.abs(np.load(out / "y.npy") - want).max()) <= TOLERANCE
