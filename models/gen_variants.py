#!/usr/bin/env python3
"""Generates the non-BERT encoder variants kiln's fusions must also recognise.

Why: models/gen_bert.py covers HuggingFace BERT as the torch.onnx TorchScript exporter
writes it. The models a RAG system actually serves also come as DistilBERT, RoBERTa /
XLM-R and sentence-transformers bi-encoders (BERT + pooling + Normalize), whose embedding
and pooling subgraphs differ. These generators reuse gen_bert's builder and layers and
change only what those architectures change, mirroring the traced forward code:

  * distilbert: no token_type_ids input and no token-type embedding; position ids from
    torch.arange(seq_length) (Range -> Unsqueeze -> Expand(Shape(input_ids))); attention
    with q / sqrt(head_dim) before MatMul(q, k^T) (two Transposes for k), and the mask as
    Equal(mask, 0) -> Reshape([bs, 1, 1, S]) -> Expand(Shape(scores)) ->
    Where(mask, finfo.min, scores) (masked_fill); sa/output LayerNorms after each residual.
  * roberta (XLM-R style): inputs input_ids and attention_mask only; position ids from
    create_position_ids_from_input_ids (Not(Equal(ids, padding_idx)) -> Cast(int32) ->
    CumSum(axis 1) -> Cast(int32) -> Add(0) -> Mul(mask) -> Cast(int64) -> Add(padding_idx)),
    padding_idx 1, max positions 128 + 2; token types from the zero buffer
    `embeddings.token_type_ids` sliced to the sequence and Expanded to the batch (type
    vocabulary 1); opset 17 LayerNormalization; BERT encoder layers.
  * st_mean: a sentence-transformers bi-encoder: BERT (opset 14) + mean pooling
    (Unsqueeze(mask, -1) -> Expand(Shape(hidden)) -> Cast(float); ReduceSum(hidden * m, 1) /
    Clip(ReduceSum(m, 1), min=1e-9)) + Normalize (F.normalize: ReduceL2(axes=[1],
    keepdims=1) -> Clip(min=1e-12) -> Expand(Shape(x)) -> Div). Output sentence_embedding.
  * st_cls: BERT (opset 17) + CLS pooling (Gather(hidden, 0, axis=1)) + Normalize.

Limits: random weights (outputs mean nothing); tiny sizes only are committed, under
models/fixtures/variants/ (not models/fixtures/, whose *.onnx tests/e2e/test_bert.py feeds
BERT's three inputs). Decoders (GPT-2) and SDPA-style attention are not generated yet.

Usage:
  python3 models/gen_variants.py --fixtures --check   # rewrites models/fixtures/variants/
  python3 models/gen_variants.py --variant roberta --size minilm -o out.onnx --check
"""

import argparse
import dataclasses
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

import gen_bert
from gen_bert import GraphBuilder, dropout, encoder_layer, gelu_erf, layer_norm, linear3d

FIXTURE_DIR = os.path.join(gen_bert.FIXTURE_DIR, "variants")
# variant -> (opset, input names, output names)
VARIANTS = {
    "distilbert": (14, ("input_ids", "attention_mask"), ("last_hidden_state",)),
    "roberta": (17, ("input_ids", "attention_mask"), ("last_hidden_state",)),
    "st_mean": (14, gen_bert.INPUT_NAMES, ("sentence_embedding",)),
    "st_cls": (17, gen_bert.INPUT_NAMES, ("sentence_embedding",)),
}
ROBERTA_PADDING_IDX = 1
FLOAT_MIN = float(np.finfo(np.float32).min)


def fixture_path(variant):
    """models/fixtures/variants/<variant>_tiny_opset<N>.onnx"""
    return os.path.join(FIXTURE_DIR, f"{variant}_tiny_opset{VARIANTS[variant][0]}.onnx")


def config(variant, size):
    cfg = gen_bert.SIZES[size]
    if variant == "roberta":  # RoBERTa reserves positions 0..padding_idx: max_pos + 2
        return dataclasses.replace(cfg, max_pos=cfg.max_pos + 2, type_vocab=1)
    return cfg


def shape_dim(b, x, axis, scope):
    """Gather(Shape(x), axis): a scalar dim, as the exporter reads x.size(axis)."""
    shape = b.node("Shape", [x], scope)
    return b.node("Gather", [shape, b.const(scope, axis)], scope, axis=0)


def unsqueeze0(b, x, scope):
    return b.node("Unsqueeze", [x, b.const(scope, [0])], scope)


# ------------------------------------------------------------------------------- DistilBERT

def distil_embeddings(b, cfg, opset):
    """DistilBERT Embeddings: word + arange positions, LayerNorm, Dropout."""
    scope = "/embeddings"
    word_table = b.initializer("embeddings.word_embeddings.weight",
                               b.weight(cfg.vocab, cfg.hidden))
    pos_table = b.initializer("embeddings.position_embeddings.weight",
                              b.weight(cfg.max_pos, cfg.hidden))
    words = b.node("Gather", [word_table, "input_ids"], f"{scope}/word_embeddings")
    seq = shape_dim(b, words, 1, scope)
    positions = b.node("Range", [b.const(scope, 0), seq, b.const(scope, 1)], scope)
    positions = unsqueeze0(b, positions, scope)
    positions = b.node("Expand", [positions, b.node("Shape", ["input_ids"], scope)], scope)
    pos_emb = b.node("Gather", [pos_table, positions], f"{scope}/position_embeddings")
    summed = b.node("Add", [words, pos_emb], scope)
    normed = layer_norm(b, summed, "embeddings.LayerNorm", f"{scope}/LayerNorm", cfg, opset)
    return dropout(b, normed, f"{scope}/dropout")


def distil_attention(b, x, layer, cfg):
    """MultiHeadSelfAttention (eager): q scaled first, masked_fill with finfo.min."""
    prefix = f"transformer.layer.{layer}.attention"
    scope = f"/transformer/layer.{layer}/attention"
    head_dim = cfg.hidden // cfg.heads
    bs = shape_dim(b, x, 0, scope)
    k_length = shape_dim(b, x, 1, scope)

    def shape(t):  # view(bs, -1, n_heads, head_dim).transpose(1, 2)
        dims = b.node("Concat", [unsqueeze0(b, bs, scope), b.const(scope, [-1]),
                                 b.const(scope, [cfg.heads]), b.const(scope, [head_dim])],
                      scope, axis=0)
        return b.node("Transpose", [b.node("Reshape", [t, dims], scope)], scope,
                      perm=[0, 2, 1, 3])

    q = shape(linear3d(b, x, f"{prefix}.q_lin", f"{scope}/q_lin", cfg.hidden, cfg.hidden))
    k = shape(linear3d(b, x, f"{prefix}.k_lin", f"{scope}/k_lin", cfg.hidden, cfg.hidden))
    v = shape(linear3d(b, x, f"{prefix}.v_lin", f"{scope}/v_lin", cfg.hidden, cfg.hidden))
    q = b.node("Div", [q, b.const(scope, math.sqrt(head_dim), np.float32)], scope)
    k_t = b.node("Transpose", [k], scope, perm=[0, 1, 3, 2])
    scores = b.node("MatMul", [q, k_t], scope)
    mask = b.node("Equal", ["attention_mask", b.const(scope, 0)], scope)
    mask_shape = b.node("Concat", [unsqueeze0(b, bs, scope), b.const(scope, [1]),
                                   b.const(scope, [1]), unsqueeze0(b, k_length, scope)],
                        scope, axis=0)
    mask = b.node("Reshape", [mask, mask_shape], scope)
    mask = b.node("Expand", [mask, b.node("Shape", [scores], scope)], scope)
    scores = b.node("Where", [mask, b.const(scope, FLOAT_MIN, np.float32), scores], scope)
    weights = b.node("Softmax", [scores], scope, axis=-1)
    weights = dropout(b, weights, f"{scope}/dropout")
    context = b.node("MatMul", [weights, v], scope)
    context = b.node("Transpose", [context], scope, perm=[0, 2, 1, 3])
    dims = b.node("Concat", [unsqueeze0(b, bs, scope), b.const(scope, [-1]),
                             b.const(scope, [cfg.hidden])], scope, axis=0)
    context = b.node("Reshape", [context, dims], scope)
    return linear3d(b, context, f"{prefix}.out_lin", f"{scope}/out_lin", cfg.hidden,
                    cfg.hidden)


def distil_block(b, x, layer, cfg, opset):
    """TransformerBlock: post-LN attention and FFN blocks."""
    prefix = f"transformer.layer.{layer}"
    scope = f"/transformer/layer.{layer}"
    sa = distil_attention(b, x, layer, cfg)
    sa = layer_norm(b, b.node("Add", [sa, x], scope), f"{prefix}.sa_layer_norm",
                    f"{scope}/sa_layer_norm", cfg, opset)
    ffn = linear3d(b, sa, f"{prefix}.ffn.lin1", f"{scope}/ffn/lin1", cfg.hidden, cfg.ffn)
    ffn = gelu_erf(b, ffn, f"{scope}/ffn/activation")
    ffn = linear3d(b, ffn, f"{prefix}.ffn.lin2", f"{scope}/ffn/lin2", cfg.ffn, cfg.hidden)
    ffn = dropout(b, ffn, f"{scope}/ffn/dropout")
    return layer_norm(b, b.node("Add", [ffn, sa], scope), f"{prefix}.output_layer_norm",
                      f"{scope}/output_layer_norm", cfg, opset)


def distilbert_body(b, cfg, opset):
    hidden = distil_embeddings(b, cfg, opset)
    for layer in range(cfg.layers):
        hidden = distil_block(b, hidden, layer, cfg, opset)
    return hidden


# ------------------------------------------------------------------------------ RoBERTa

def roberta_embeddings(b, cfg, opset):
    """RobertaEmbeddings: word + buffered token types + mask-derived positions, LN."""
    scope = "/embeddings"
    word_table = b.initializer("embeddings.word_embeddings.weight",
                               b.weight(cfg.vocab, cfg.hidden))
    pos_table = b.initializer("embeddings.position_embeddings.weight",
                              b.weight(cfg.max_pos, cfg.hidden))
    type_table = b.initializer("embeddings.token_type_embeddings.weight",
                               b.weight(cfg.type_vocab, cfg.hidden))
    type_buffer = b.initializer("embeddings.token_type_ids",
                                np.zeros((1, cfg.max_pos), np.int64))
    # create_position_ids_from_input_ids(input_ids, padding_idx, 0)
    pad = b.const(scope, ROBERTA_PADDING_IDX)
    mask = b.node("Not", [b.node("Equal", ["input_ids", pad], scope)], scope)
    mask = b.node("Cast", [mask], scope, to=TensorProto.INT32)
    incremental = b.node("CumSum", [mask, b.const(scope, 1)], scope)
    incremental = b.node("Cast", [incremental], scope, to=TensorProto.INT32)  # type_as
    incremental = b.node("Add", [incremental, b.const(scope, 0, np.int32)], scope)
    incremental = b.node("Mul", [incremental, mask], scope)
    incremental = b.node("Cast", [incremental], scope, to=TensorProto.INT64)
    position_ids = b.node("Add", [incremental, b.const(scope, ROBERTA_PADDING_IDX)], scope)
    # token_type_ids = self.token_type_ids[:, :seq_length].expand(batch, seq_length)
    seq = unsqueeze0(b, shape_dim(b, "input_ids", 1, scope), scope)
    types = b.node("Slice", [type_buffer, b.const(scope, [0]), seq, b.const(scope, [1]),
                             b.const(scope, [1])], scope)
    batch = unsqueeze0(b, shape_dim(b, "input_ids", 0, scope), scope)
    expand_to = b.node("Concat", [batch, seq], scope, axis=0)
    types = b.node("Expand", [types, expand_to], scope)
    words = b.node("Gather", [word_table, "input_ids"], f"{scope}/word_embeddings")
    type_emb = b.node("Gather", [type_table, types], f"{scope}/token_type_embeddings")
    summed = b.node("Add", [words, type_emb], scope)
    pos_emb = b.node("Gather", [pos_table, position_ids], f"{scope}/position_embeddings")
    summed = b.node("Add", [summed, pos_emb], scope)
    normed = layer_norm(b, summed, "embeddings.LayerNorm", f"{scope}/LayerNorm", cfg, opset)
    return dropout(b, normed, f"{scope}/dropout")


def bert_encoder(b, hidden, cfg, opset):
    mask_add = gen_bert.additive_mask(b, gen_bert.MASK_VALUES["min"])
    shared = {
        "heads": b.anonymous_initializer("Concat", np.array([cfg.heads], np.int64)),
        "head_dim": b.anonymous_initializer("Concat",
                                            np.array([cfg.hidden // cfg.heads], np.int64)),
    }
    for layer in range(cfg.layers):
        hidden = encoder_layer(b, hidden, mask_add, layer, cfg, opset, shared)
    return hidden


# --------------------------------------------------------------------- sentence-transformers

def normalize(b, x):
    """F.normalize(x, p=2, dim=1): x / norm(x, dim=1, keepdim).clamp_min(1e-12).expand_as(x)."""
    scope = "/2/Normalize"
    norm = b.node("ReduceL2", [x], scope, axes=[1], keepdims=1)
    norm = b.node("Clip", [norm, b.const(scope, 1e-12, np.float32), ""], scope)
    norm = b.node("Expand", [norm, b.node("Shape", [x], scope)], scope)
    return b.node("Div", [x, norm], scope)


def mean_pooling(b, hidden):
    """sentence-transformers Pooling(mode='mean') on attention_mask."""
    scope = "/1/Pooling"
    m = b.node("Unsqueeze", ["attention_mask", b.const(scope, [-1])], scope)
    m = b.node("Expand", [m, b.node("Shape", [hidden], scope)], scope)
    m = b.node("Cast", [m], scope, to=TensorProto.FLOAT)
    summed = b.node("ReduceSum", [b.node("Mul", [hidden, m], scope), b.const(scope, [1])],
                    scope, keepdims=0)
    count = b.node("ReduceSum", [m, b.const(scope, [1])], scope, keepdims=0)
    count = b.node("Clip", [count, b.const(scope, 1e-9, np.float32), ""], scope)
    return b.node("Div", [summed, count], scope)


def cls_pooling(b, hidden):
    """sentence-transformers Pooling(mode='cls'): token_embeddings[:, 0]."""
    return b.node("Gather", [hidden, b.const("/1/Pooling", 0)], "/1/Pooling", axis=1)


# ------------------------------------------------------------------------------- models

def build_model(variant, size="tiny", seed=0):
    """Returns the onnx.ModelProto of one variant; same arguments give identical bytes."""
    opset, input_names, output_names = VARIANTS[variant]
    cfg = config(variant, size)
    b = GraphBuilder(np.random.default_rng(seed))
    dynamic = ["batch", "sequence"]
    if variant == "distilbert":
        out = distilbert_body(b, cfg, opset)
        out_shape = dynamic + [cfg.hidden]
    elif variant == "roberta":
        out = bert_encoder(b, roberta_embeddings(b, cfg, opset), cfg, opset)
        out_shape = dynamic + [cfg.hidden]
    else:
        hidden = bert_encoder(b, gen_bert.embeddings(b, cfg, opset), cfg, opset)
        pooled = mean_pooling(b, hidden) if variant == "st_mean" else cls_pooling(b, hidden)
        out = normalize(b, pooled)
        out_shape = ["batch", cfg.hidden]
    (out_name,) = output_names
    b.nodes.append(helper.make_node("Identity", [out], [out_name], name=f"/Identity_{out_name}"))
    outputs = [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, out_shape)]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, dynamic) for n in input_names]
    graph = helper.make_graph(b.nodes, f"{variant}_{size}_opset{opset}", inputs, outputs,
                              initializer=b.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="kiln-gen_variants", producer_version="1",
                              ir_version=7 if opset < 17 else 8)
    model.doc_string = (f"Synthetic {variant} encoder (size={size}, opset={opset}, seed={seed}) "
                        "with random weights; generated by models/gen_variants.py in "
                        "torch.onnx TorchScript-exporter style.")
    return model


def random_inputs(variant, size, batch, seq, seed=0):
    """gen_bert.random_inputs restricted to the variant's inputs. For roberta the padded
    positions hold padding_idx and real tokens avoid it, as a tokenizer writes them, so the
    mask-derived position ids differ between padded and unpadded rows."""
    feeds = gen_bert.random_inputs(config(variant, size), batch, seq, seed)
    if variant == "roberta":
        ids = feeds["input_ids"]
        ids = np.where(ids <= ROBERTA_PADDING_IDX, ids + 2, ids)
        feeds["input_ids"] = np.where(feeds["attention_mask"] == 0, ROBERTA_PADDING_IDX, ids)
    return {name: feeds[name] for name in VARIANTS[variant][1]}


def check_model(path, variant, size):
    """Validates with onnx.checker (full check) and runs the model once in onnxruntime."""
    import onnxruntime as ort

    onnx.checker.check_model(path, full_check=True)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    outputs = session.run(None, random_inputs(variant, size, 2, 16))
    for meta, value in zip(session.get_outputs(), outputs):
        if not np.all(np.isfinite(value)):
            raise RuntimeError(f"{path}: output {meta.name} has non-finite values")
        print(f"  {meta.name}: {value.dtype}{list(value.shape)} "
              f"mean={float(value.mean()):.6f} std={float(value.std()):.6f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="st_mean")
    parser.add_argument("--size", choices=sorted(gen_bert.SIZES), default="tiny")
    parser.add_argument("--seed", type=int, default=0, help="weight RNG seed")
    parser.add_argument("-o", "--output", help="output .onnx path")
    parser.add_argument("--check", action="store_true",
                        help="validate with onnx.checker and run once in onnxruntime")
    parser.add_argument("--fixtures", action="store_true",
                        help="regenerate models/fixtures/variants/ instead of writing -o")
    args = parser.parse_args(argv)
    if not args.fixtures and not args.output:
        parser.error("give -o OUTPUT or --fixtures")
    jobs = ([(v, "tiny", fixture_path(v)) for v in VARIANTS] if args.fixtures
            else [(args.variant, args.size, args.output)])
    for variant, size, path in jobs:
        gen_bert.save(build_model(variant, size, 0 if args.fixtures else args.seed), path)
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")
        if args.check:
            check_model(path, variant, size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
