#!/usr/bin/env python3
"""Generates BERT-family encoder ONNX models shaped the way torch.onnx writes them.

Why: kiln's importer, passes and fusions must handle what real exporters emit, but real
checkpoints are large and need the network. These models reproduce the graph structure of
a TorchScript-exporter BERT (HuggingFace BertModel / BertForSequenceClassification) with
seeded random weights, so tests are hermetic and byte-reproducible.

What is reproduced (per style):
  * opset14: LayerNorm decomposed into ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add
    (ReduceMean `axes` as an attribute), Erf GELU, MatMul with a pre-transposed [in, out]
    weight plus a separate bias Add (bias first, as torch writes it), Q/K/V head splits
    through Shape->Gather->Unsqueeze->Concat->Reshape chains and Transpose (K transposed
    straight to [0,2,3,1]), scores divided by sqrt(head_dim), the additive mask built from
    attention_mask (Unsqueeze/Unsqueeze/Cast/Sub/Mul), Softmax(axis=-1), inference Dropout
    nodes with a ratio input, Identity nodes sharing constants, and embeddings with position
    ids sliced from a constant arange initializer by the Shape of input_ids.
  * opset17: the same graph with LayerNormalization ops.
  * opset11: the opset14 graph in the spellings of opsets before 13, as older model zoos
    ship it: Unsqueeze `axes` and Dropout `ratio` as attributes, Softmax with the positive
    axis 3 (before opset 13 Softmax flattens its input at `axis`; the last axis gives the
    same result).
Heads: none (last_hidden_state), pooler (+ pooler_output: CLS Gather, Gemm, Tanh),
classifier (logits of a one-label cross-encoder: pooler, Dropout, Gemm).

Limits: weights are random (normal * 0.02; the classifier head 1.0), so the outputs mean
nothing; only the graph shape and numerics path match real models. No external-data files
are written, so a model must stay under protobuf's 2 GB limit (BERT-base is ~0.44 GB).

Usage:
  python3 models/gen_bert.py --size tiny --style opset14 --head none -o out.onnx --check
  python3 models/gen_bert.py --fixtures   # rewrites models/fixtures/*.onnx
"""

import argparse
import dataclasses
import math
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """Hyper-parameters of one encoder size."""

    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int
    max_pos: int
    type_vocab: int = 2
    layer_norm_eps: float = 1e-12
    num_labels: int = 1


SIZES = {
    "tiny": BertConfig(layers=2, hidden=64, heads=4, ffn=256, vocab=1000, max_pos=128),
    "minilm": BertConfig(layers=6, hidden=384, heads=12, ffn=1536, vocab=30522, max_pos=512),
    "base": BertConfig(layers=12, hidden=768, heads=12, ffn=3072, vocab=30522, max_pos=512),
}
STYLES = {"opset11": 11, "opset14": 14, "opset17": 17}
HEADS = ("none", "pooler", "classifier")
# Additive-mask fill values used by transformers over the years: -10000.0 (older releases)
# and torch.finfo(float32).min (current releases).
MASK_VALUES = {"min": float(np.finfo(np.float32).min), "-10000": -10000.0}

# Weight scale of the classifier head (see build_model).
CLASSIFIER_STD = 1.0

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
FIXTURE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
# The committed fixtures: (style, head) pairs of the tiny size.
FIXTURES = (("opset14", "none"), ("opset14", "classifier"), ("opset14", "pooler"),
            ("opset17", "none"), ("opset17", "classifier"))
DEFAULT_FIXTURE = ("opset14", "pooler")


class GraphBuilder:
    """Accumulates nodes and initializers with torch.onnx-like names.

    Node names follow the exporter's "/module/path/Op" scheme (with _1, _2 ... suffixes on
    repeats) and outputs are "<node name>_output_<i>".
    """

    def __init__(self, rng, weights=None, opset=14):
        self.rng = rng
        # The default-domain opset the nodes are spelled for (see dropout, unsqueeze).
        self.opset = opset
        # Optional real checkpoint: {HF parameter name: array}; see param().
        self.weights = weights
        self.nodes = []
        self.initializers = []
        self._names = {}
        self._anon = 0

    def _unique(self, scope, op):
        base = f"{scope}/{op}"
        count = self._names.get(base, 0)
        self._names[base] = count + 1
        return base if count == 0 else f"{base}_{count}"

    def node(self, op, inputs, scope, num_outputs=1, **attrs):
        """Adds one node; returns its output name (or the list when num_outputs > 1)."""
        name = self._unique(scope, op)
        outputs = [f"{name}_output_{i}" for i in range(num_outputs)]
        self.nodes.append(helper.make_node(op, list(inputs), outputs, name=name, **attrs))
        return outputs[0] if num_outputs == 1 else outputs

    def const(self, scope, value, dtype=np.int64):
        """A Constant node, the way the exporter writes Python scalars and shape lists."""
        array = np.array(value, dtype=dtype)
        name = self._unique(scope, "Constant")
        output = f"{name}_output_0"
        self.nodes.append(helper.make_node(
            "Constant", [], [output], name=name,
            value=numpy_helper.from_array(array, name="")))
        return output

    def initializer(self, name, array):
        """Adds an initializer and returns its name."""
        self.initializers.append(numpy_helper.from_array(array, name=name))
        return name

    def anonymous_initializer(self, prefix, array):
        """An initializer named like the exporter's "onnx::MatMul_1234" temporaries."""
        self._anon += 1
        return self.initializer(f"onnx::{prefix}_{1000 + self._anon}", array)

    def param(self, name, default, transpose=False):
        """`default` (already drawn, so the RNG sequence is the same either way), or, when
        real weights were given, weights[name] as float32 (transposed when `transpose`: HF
        Linear weights are [out, in], MatMul wants [in, out]); its shape must match."""
        if self.weights is None:
            return default
        if name not in self.weights:
            raise KeyError(f"checkpoint has no parameter {name!r}")
        value = np.asarray(self.weights[name], dtype=np.float32)
        value = np.ascontiguousarray(value.T if transpose else value)
        if value.shape != default.shape:
            raise ValueError(f"parameter {name!r} has shape {list(value.shape)}, "
                             f"the graph needs {list(default.shape)}")
        return value

    def weight(self, *shape, std=0.02):
        """Random weight: normal * 0.02 (BERT's initializer range) by default, float32."""
        return (self.rng.standard_normal(shape) * std).astype(np.float32)


def layer_norm(b, x, prefix, scope, cfg, opset):
    """LayerNorm over the last axis: decomposed at opset 14, LayerNormalization at 17."""
    gamma = b.initializer(f"{prefix}.weight", b.param(
        f"{prefix}.weight",
        (1.0 + b.rng.standard_normal(cfg.hidden) * 0.02).astype(np.float32)))
    beta = b.initializer(f"{prefix}.bias", b.param(f"{prefix}.bias", b.weight(cfg.hidden)))
    if opset >= 17:
        return b.node("LayerNormalization", [x, gamma, beta], scope, axis=-1,
                      epsilon=cfg.layer_norm_eps)
    mean = b.node("ReduceMean", [x], scope, axes=[-1])
    centered = b.node("Sub", [x, mean], scope)
    squared = b.node("Pow", [centered, b.const(scope, 2.0, np.float32)], scope)
    var = b.node("ReduceMean", [squared], scope, axes=[-1])
    var_eps = b.node("Add", [var, b.const(scope, cfg.layer_norm_eps, np.float32)], scope)
    std = b.node("Sqrt", [var_eps], scope)
    normed = b.node("Div", [centered, std], scope)
    scaled = b.node("Mul", [normed, gamma], scope)
    return b.node("Add", [scaled, beta], scope)


def linear3d(b, x, prefix, scope, in_dim, out_dim):
    """nn.Linear on a 3-D input: MatMul with a pre-transposed weight, then bias Add."""
    weight_t = b.anonymous_initializer(
        "MatMul", b.param(f"{prefix}.weight", b.weight(in_dim, out_dim), transpose=True))
    bias = b.initializer(f"{prefix}.bias", b.param(f"{prefix}.bias", b.weight(out_dim)))
    product = b.node("MatMul", [x, weight_t], scope)
    return b.node("Add", [bias, product], scope)


def linear2d(b, x, prefix, scope, in_dim, out_dim, std=0.02):
    """nn.Linear on a 2-D input: the exporter writes Gemm with transB=1."""
    weight = b.initializer(f"{prefix}.weight",
                           b.param(f"{prefix}.weight", b.weight(out_dim, in_dim, std=std)))
    bias = b.initializer(f"{prefix}.bias", b.param(f"{prefix}.bias", b.weight(out_dim)))
    return b.node("Gemm", [x, weight, bias], scope, alpha=1.0, beta=1.0, transB=1)


def dropout(b, x, scope, with_mask=False):
    """Inference Dropout with an explicit ratio (an identity at run time): an input from
    opset 12, an attribute before."""
    outputs = 2 if with_mask else 1
    if b.opset < 12:
        out = b.node("Dropout", [x], scope, num_outputs=outputs, ratio=0.1)
    else:
        ratio = b.const(scope, 0.1, np.float32)
        out = b.node("Dropout", [x, ratio], scope, num_outputs=outputs)
    return out[0] if with_mask else out


def unsqueeze(b, x, axes, scope):
    """Unsqueeze: `axes` a constant input from opset 13, an attribute before."""
    if b.opset < 13:
        return b.node("Unsqueeze", [x], scope, axes=axes)
    return b.node("Unsqueeze", [x, b.const(scope, axes)], scope)


def batch_seq_shape(b, x, scope, tail):
    """Concat(Unsqueeze(Gather(Shape(x), 0)), Unsqueeze(Gather(Shape(x), 1)), *tail)."""
    parts = []
    for axis in (0, 1):
        shape = b.node("Shape", [x], scope)
        dim = b.node("Gather", [shape, b.const(scope, axis)], scope, axis=0)
        parts.append(unsqueeze(b, dim, [0], scope))
    return b.node("Concat", parts + list(tail), scope, axis=0)


def self_attention(b, h, mask, layer, cfg, shared):
    """BertSelfAttention: Q/K/V projections, head split, scaled scores, softmax, merge."""
    prefix = f"encoder.layer.{layer}.attention.self"
    scope = f"/encoder/layer.{layer}/attention/self"
    head_dim = cfg.hidden // cfg.heads
    split = {}
    for part in ("query", "key", "value"):
        proj = linear3d(b, h, f"{prefix}.{part}", f"{scope}/{part}", cfg.hidden, cfg.hidden)
        # Constant dedup in real exports leaves Identity nodes re-exposing shared constants.
        heads = b.node("Identity", [shared["heads"]], scope)
        dims = b.node("Identity", [shared["head_dim"]], scope)
        shape = batch_seq_shape(b, proj, scope, [heads, dims])
        split[part] = b.node("Reshape", [proj, shape], scope)
    q = b.node("Transpose", [split["query"]], scope, perm=[0, 2, 1, 3])
    k_t = b.node("Transpose", [split["key"]], scope, perm=[0, 2, 3, 1])
    v = b.node("Transpose", [split["value"]], scope, perm=[0, 2, 1, 3])
    scores = b.node("MatMul", [q, k_t], scope)
    scores = b.node("Div", [scores, b.const(scope, math.sqrt(head_dim), np.float32)], scope)
    scores = b.node("Add", [scores, mask], scope)
    # The exporter writes the last axis as -1 from opset 13, as 3 before.
    probs = b.node("Softmax", [scores], scope, axis=-1 if b.opset >= 13 else 3)
    probs = dropout(b, probs, f"{scope}/dropout")
    context = b.node("MatMul", [probs, v], scope)
    context = b.node("Transpose", [context], scope, perm=[0, 2, 1, 3])
    shape = batch_seq_shape(b, context, scope, [b.const(scope, [cfg.hidden])])
    return b.node("Reshape", [context, shape], scope)


def gelu_erf(b, x, scope):
    """transformers' exact GELU as traced: x * 0.5 * (1 + erf(x / sqrt(2)))."""
    half = b.node("Mul", [x, b.const(scope, 0.5, np.float32)], scope)
    scaled = b.node("Div", [x, b.const(scope, 1.4142135381698608, np.float32)], scope)
    erf = b.node("Erf", [scaled], scope)
    one_plus = b.node("Add", [erf, b.const(scope, 1.0, np.float32)], scope)
    return b.node("Mul", [half, one_plus], scope)


def encoder_layer(b, h, mask, layer, cfg, opset, shared):
    """One BertLayer: attention block and feed-forward block, each residual + LayerNorm."""
    prefix = f"encoder.layer.{layer}"
    scope = f"/encoder/layer.{layer}"
    attn = self_attention(b, h, mask, layer, cfg, shared)
    out = linear3d(b, attn, f"{prefix}.attention.output.dense",
                   f"{scope}/attention/output/dense", cfg.hidden, cfg.hidden)
    out = dropout(b, out, f"{scope}/attention/output/dropout")
    out = b.node("Add", [out, h], f"{scope}/attention/output")
    attn_out = layer_norm(b, out, f"{prefix}.attention.output.LayerNorm",
                          f"{scope}/attention/output/LayerNorm", cfg, opset)
    inter = linear3d(b, attn_out, f"{prefix}.intermediate.dense",
                     f"{scope}/intermediate/dense", cfg.hidden, cfg.ffn)
    inter = gelu_erf(b, inter, f"{scope}/intermediate/intermediate_act_fn")
    out = linear3d(b, inter, f"{prefix}.output.dense", f"{scope}/output/dense",
                   cfg.ffn, cfg.hidden)
    out = dropout(b, out, f"{scope}/output/dropout")
    out = b.node("Add", [out, attn_out], f"{scope}/output")
    return layer_norm(b, out, f"{prefix}.output.LayerNorm", f"{scope}/output/LayerNorm",
                      cfg, opset)


def embeddings(b, cfg, opset):
    """BertEmbeddings: word + token-type + position embeddings, LayerNorm, Dropout."""
    scope = "/embeddings"
    word_table = b.initializer("embeddings.word_embeddings.weight", b.param(
        "embeddings.word_embeddings.weight", b.weight(cfg.vocab, cfg.hidden)))
    pos_table = b.initializer("embeddings.position_embeddings.weight", b.param(
        "embeddings.position_embeddings.weight", b.weight(cfg.max_pos, cfg.hidden)))
    type_table = b.initializer("embeddings.token_type_embeddings.weight", b.param(
        "embeddings.token_type_embeddings.weight", b.weight(cfg.type_vocab, cfg.hidden)))
    position_ids = b.initializer("embeddings.position_ids",
                                 np.arange(cfg.max_pos, dtype=np.int64)[None, :])
    # position_ids[:, 0:seq_len], seq_len read from the Shape of input_ids.
    shape = b.node("Shape", ["input_ids"], scope)
    seq = b.node("Gather", [shape, b.const(scope, 1)], scope, axis=0)
    seq = unsqueeze(b, seq, [0], scope)
    pos_ids = b.node("Slice", [position_ids, b.const(scope, [0]), seq, b.const(scope, [1]),
                               b.const(scope, [1])], scope)
    words = b.node("Gather", [word_table, "input_ids"], f"{scope}/word_embeddings")
    types = b.node("Gather", [type_table, "token_type_ids"], f"{scope}/token_type_embeddings")
    summed = b.node("Add", [words, types], scope)
    positions = b.node("Gather", [pos_table, pos_ids], f"{scope}/position_embeddings")
    summed = b.node("Add", [summed, positions], scope)
    normed = layer_norm(b, summed, "embeddings.LayerNorm", f"{scope}/LayerNorm", cfg, opset)
    return dropout(b, normed, f"{scope}/dropout", with_mask=True)


def additive_mask(b, mask_value):
    """(1 - attention_mask[:, None, None, :].float()) * mask_value."""
    m = unsqueeze(b, "attention_mask", [1], "")
    m = unsqueeze(b, m, [2], "")
    m = b.node("Cast", [m], "", to=TensorProto.FLOAT)
    m = b.node("Sub", [b.const("", 1.0, np.float32), m], "")
    return b.node("Mul", [m, b.const("", mask_value, np.float32)], "")


def build_model(size="tiny", style="opset14", head="none", seed=0, mask="min", weights=None):
    """Returns the onnx.ModelProto of one encoder; same arguments give identical bytes.

    `weights` ({HF parameter name: array}, e.g. a BertModel checkpoint) replaces the random
    weights by real ones (models/pretrained.py); the doc string still says "random"."""
    cfg = SIZES[size]
    opset = STYLES[style]
    if head not in HEADS:
        raise ValueError(f"unknown head {head!r}")
    b = GraphBuilder(np.random.default_rng(seed), weights, opset)
    hidden = embeddings(b, cfg, opset)
    mask_add = additive_mask(b, MASK_VALUES[mask])
    shared = {
        "heads": b.anonymous_initializer("Concat", np.array([cfg.heads], np.int64)),
        "head_dim": b.anonymous_initializer("Concat",
                                            np.array([cfg.hidden // cfg.heads], np.int64)),
    }
    for layer in range(cfg.layers):
        hidden = encoder_layer(b, hidden, mask_add, layer, cfg, opset, shared)
    # Name the encoder output as the exporter does: an Identity onto the graph output name.
    outputs = []
    dynamic = ["batch", "sequence"]
    if head in ("none", "pooler"):
        b.nodes.append(helper.make_node("Identity", [hidden], ["last_hidden_state"],
                                        name="/Identity_last_hidden_state"))
        outputs.append(helper.make_tensor_value_info(
            "last_hidden_state", TensorProto.FLOAT, dynamic + [cfg.hidden]))
    if head in ("pooler", "classifier"):
        cls = b.node("Gather", [hidden, b.const("/pooler", 0)], "/pooler", axis=1)
        pooled = linear2d(b, cls, "pooler.dense", "/pooler/dense", cfg.hidden, cfg.hidden)
        pooled = b.node("Tanh", [pooled], "/pooler/activation")
        if head == "pooler":
            b.nodes.append(helper.make_node("Identity", [pooled], ["pooler_output"],
                                            name="/Identity_pooler_output"))
            outputs.append(helper.make_tensor_value_info(
                "pooler_output", TensorProto.FLOAT, ["batch", cfg.hidden]))
        else:
            pooled = dropout(b, pooled, "/dropout")
            # std 1.0, not 0.02: logits come out O(1) like a trained cross-encoder's; at
            # 0.02 they are ~0.02 and masking errors would hide below test tolerances.
            logits = linear2d(b, pooled, "classifier", "/classifier", cfg.hidden,
                              cfg.num_labels, std=CLASSIFIER_STD)
            b.nodes.append(helper.make_node("Identity", [logits], ["logits"],
                                            name="/Identity_logits"))
            outputs.append(helper.make_tensor_value_info(
                "logits", TensorProto.FLOAT, ["batch", cfg.num_labels]))
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, dynamic)
              for n in INPUT_NAMES]
    graph = helper.make_graph(b.nodes, f"bert_{size}_{style}_{head}", inputs, outputs,
                              initializer=b.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="kiln-gen_bert", producer_version="1",
                              ir_version=7 if opset < 17 else 8)
    model.doc_string = (f"Synthetic BERT encoder (size={size}, style={style}, head={head}, "
                        f"seed={seed}, mask={mask}) with random weights; generated by "
                        "models/gen_bert.py in torch.onnx TorchScript-exporter style.")
    return model


def random_inputs(cfg, batch, seq, seed=0):
    """Seeded inputs: ids in [0, vocab), per-row trailing padding (mask 0), types 0/1.

    With several rows, row 0 is unpadded; every other row pads 1..seq/2 trailing positions,
    so padded and unpadded rows are both exercised and every row keeps real tokens.
    """
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, cfg.vocab, size=(batch, seq), dtype=np.int64)
    mask = np.ones((batch, seq), dtype=np.int64)
    for row in range(batch):
        if (row > 0 or batch == 1) and seq > 1:
            pad = int(rng.integers(1, seq // 2 + 1))
            mask[row, seq - pad:] = 0
    types = rng.integers(0, 2, size=(batch, seq), dtype=np.int64)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def check_model(path, size):
    """Validates with onnx.checker (full check) and runs the model once in onnxruntime."""
    import onnxruntime as ort  # only the self-check needs it

    onnx.checker.check_model(path, full_check=True)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = random_inputs(SIZES[size], batch=2, seq=16)
    outputs = session.run(None, feeds)
    for meta, value in zip(session.get_outputs(), outputs):
        if not np.all(np.isfinite(value)):
            raise RuntimeError(f"{path}: output {meta.name} has non-finite values")
        print(f"  {meta.name}: {value.dtype}{list(value.shape)} "
              f"mean={float(value.mean()):.6f} std={float(value.std()):.6f}")


def save(model, path):
    """Writes the model, creating the parent folder."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    onnx.save_model(model, path)


def fixture_path(style, head):
    """models/fixtures/bert_tiny_<style>_<head>.onnx"""
    return os.path.join(FIXTURE_DIR, f"bert_tiny_{style}_{head}.onnx")


def write_fixtures(check):
    """Regenerates every committed fixture and default.onnx (a copy of the pooler one)."""
    for style, head in FIXTURES:
        path = fixture_path(style, head)
        save(build_model("tiny", style, head), path)
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")
        if check:
            check_model(path, "tiny")
    default = os.path.join(FIXTURE_DIR, "default.onnx")
    shutil.copyfile(fixture_path(*DEFAULT_FIXTURE), default)
    print(f"wrote {default}")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--style", choices=sorted(STYLES), default="opset14")
    parser.add_argument("--head", choices=HEADS, default="none")
    parser.add_argument("--seed", type=int, default=0, help="weight RNG seed")
    parser.add_argument("--mask", choices=sorted(MASK_VALUES), default="min",
                        help="additive mask fill: float32 min (current transformers) "
                             "or -10000 (older releases)")
    parser.add_argument("-o", "--output", help="output .onnx path")
    parser.add_argument("--check", action="store_true",
                        help="validate with onnx.checker and run once in onnxruntime")
    parser.add_argument("--fixtures", action="store_true",
                        help="regenerate models/fixtures/ instead of writing -o")
    args = parser.parse_args(argv)
    if not args.fixtures and not args.output:
        parser.error("give -o OUTPUT or --fixtures")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.fixtures:
        write_fixtures(args.check)
        return 0
    save(build_model(args.size, args.style, args.head, args.seed, args.mask), args.output)
    print(f"wrote {args.output} ({os.path.getsize(args.output)} bytes)")
    if args.check:
        check_model(args.output, args.size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
