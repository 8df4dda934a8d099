#!/usr/bin/env python3
"""Exports tiny HuggingFace transformers models through torch.onnx as kiln test fixtures.

Why: models/gen_bert.py reproduces what the TorchScript exporter writes for BERT, but only
as far as its author knew it. These fixtures are the real thing: transformers models built
from small configs with seeded random weights (no hub download), exported by torch.onnx's
TorchScript exporter (dynamo=False) and by its dynamo exporter (dynamo=True), with the
"eager" and "sdpa" attention implementations: encoders (BERT, DistilBERT, RoBERTa,
ModernBERT with rotary embeddings, GeGLU and alternating global / sliding-window
attention), GPT-2 and RoPE decoders (Llama, Qwen2 with grouped-query attention, Mistral
with a sliding window, GPT-J with interleaved partial rotary), the causal LMs with use_cache=False (no KV-cache inputs or
outputs), and Llama and Qwen2 once more in the KV-cache form a generation loop runs
(use_cache=True: past key/value inputs, present key/value outputs, optimum's names).
kiln must import, run and fuse what they contain; tests/e2e/test_torch_fixtures.py
compares `kiln run` with onnxruntime on them.

Each fixture is checked here with onnx.checker (full check) and by running it in
onnxruntime against torch's own output (max abs error <= 1e-4) on batch 2 x sequence 16
and batch 1 x sequence 7, with trailing padding in the attention mask. Trailing padding
suits the decoders too: they compute position ids as arange(sequence) (no position_ids
input), right for right-padded rows only, and under a causal mask every query still sees
key 0, a real token, so no softmax row is fully masked (verify checks this, sliding
window included, so no NaN or meaningless row enters a comparison; ModernBERT's local
window is why its padding is capped). The KV-cache decoders take position_ids and pad
in the cache instead (see kv_inputs): they are checked at KV_PAST cached positions on
the same two shapes, and at the KV_CHECKS shapes (a 3-token chunk and a 1-token decode
step after 5 cached tokens, and an empty past, which onnxruntime accepts).

Limits: needs torch, transformers, onnx, onnxscript and onnxruntime (see
models/fixtures/torch/README.md for the versions used); CI does not run this script, it
only runs the committed files. Only the module-level helpers (FAMILIES, random_inputs,
parse_fixture_name) are used by the tests, and they need numpy only: torch is imported
inside the export functions (kv_names, kv_inputs and allowed_keys are numpy-only too).
Outputs are meaningless; the graph structure is the point.
Exporter output changes between torch releases, so re-running with other versions gives
other (equally valid) graphs.

Usage:
  /opt/torchenv/bin/python models/export_torch.py            # all fixtures
  /opt/torchenv/bin/python models/export_torch.py --only bert gpt2 --out /tmp/x
  /opt/torchenv/bin/python models/export_torch.py --only modernbert llama_kv qwen2_kv
"""

import argparse
import dataclasses
import os
import sys

import numpy as np

FIXTURE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "torch")
# The KV-cache forms live apart: their inputs (past_key_values.*, position_ids, a mask of
# past + sequence) are not the [batch, sequence] ids + mask every fixture in FIXTURE_DIR
# takes, which the tests that sweep that folder feed.
KV_FIXTURE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "kv")

# The TorchScript exporter's opset: 14 is what optimum writes for BERT/GPT-2 and so what
# most published ONNX encoders use (LayerNorm decomposed; no LayerNormalization op).
TORCHSCRIPT_OPSET = 14
# The dynamo exporter's opsets to try in order: its default (None; it writes opset 20 with
# torch 2.15), then explicit ones inside kiln's accepted range 13..21 should the default
# ever exceed 21.
DYNAMO_OPSETS = (None, 18, 19, 20, 21)
KILN_MAX_OPSET = 21
EXPORTERS = ("torchscript", "dynamo")
ATTENTIONS = ("eager", "sdpa")
# Verification tolerance against torch (fp32 both sides; errors seen are <= 1.2e-6).
TOLERANCE = 1e-4
SEED = 0
# (batch, sequence) shapes checked here and in the e2e test.
CHECK_SHAPES = ((2, 16), (1, 7))


@dataclasses.dataclass(frozen=True)
class Family:
    """One exported model kind: its inputs, outputs and the token id used for padding;
    max_pad caps the padding random_inputs draws (None: seq/2); attentions are the
    attention implementations transformers has for it (MPNet and DeBERTa: eager only)."""

    inputs: tuple
    outputs: tuple
    vocab: int
    pad_id: int
    max_pad: int = None
    attentions: tuple = ATTENTIONS


# Tiny sizes of the encoders and GPT-2 (the decoders' are below): 2 layers, hidden 32,
# 4 heads (head dim 8), FFN 128, vocab 512, 64 positions. Every file stays under 1 MB.
LAYERS, HIDDEN, HEADS, FFN, VOCAB, MAX_POS = 2, 32, 4, 128, 512, 64
# Weight init std (transformers' `initializer_range`, default 0.02). At 0.02 a model this
# small has near-uniform attention and a pooler output of ~0.1, so ignoring the padding
# mask would move the pooler output by only ~5e-4; at INIT_STD the attention is peaked
# like a trained model's and every output moves by > 1e-3 (see the e2e test).
INIT_STD = 0.1

FAMILIES = {
    # The encoder families beyond BERT (same tiny sizes): XLMRobertaModel (RoBERTa's
    # CumSum position ids, pad id 1), ElectraModel (embedding size 16 projected to the
    # hidden 32, no pooler), MPNetModel (relative position bias added to every layer's
    # scores, pad id 1) and DebertaV2Model (disentangled attention: content-to-position and
    # position-to-content terms from relative position embeddings).
    "xlmr": Family(("input_ids", "attention_mask"), ("last_hidden_state", "pooler_output"),
                   VOCAB, 1),
    "electra": Family(("input_ids", "attention_mask", "token_type_ids"),
                      ("last_hidden_state",), VOCAB, 0),
    "mpnet": Family(("input_ids", "attention_mask"), ("last_hidden_state", "pooler_output"),
                    VOCAB, 1, attentions=("eager",)),
    "deberta": Family(("input_ids", "attention_mask", "token_type_ids"),
                      ("last_hidden_state",), VOCAB, 0, attentions=("eager",)),
    # BertModel: a bi-encoder body with pooler.
    "bert": Family(("input_ids", "attention_mask", "token_type_ids"),
                   ("last_hidden_state", "pooler_output"), VOCAB, 0),
    # BertForSequenceClassification with one label: a cross-encoder / re-ranker.
    "bertcls": Family(("input_ids", "attention_mask", "token_type_ids"), ("logits",),
                      VOCAB, 0),
    "distilbert": Family(("input_ids", "attention_mask"), ("last_hidden_state",), VOCAB, 0),
    # RobertaModel: position ids computed from input_ids != padding_idx (CumSum).
    "roberta": Family(("input_ids", "attention_mask"), ("last_hidden_state", "pooler_output"),
                      VOCAB, 1),
    # GPT2LMHeadModel, use_cache=False: causal mask combined with the padding mask.
    "gpt2": Family(("input_ids", "attention_mask"), ("logits",), VOCAB, 0),
}

# The RoPE decoders, *ForCausalLM with use_cache=False: logits [batch, sequence, vocab].
# Their sizes: 2 layers, hidden 64, 4 heads of dim 16, FFN (SwiGLU) 128, vocab 256, 128
# positions. qwen2 has 2 key/value heads (grouped-query attention, repeat_kv) and q/k/v
# biases; mistral has a sliding window shorter than the longest checked sequence, which
# the mask must implement (verify checks that it changes the output).
DEC_LAYERS, DEC_HIDDEN, DEC_HEADS, DEC_HEAD_DIM, DEC_FFN = 2, 64, 4, 16, 128
DEC_VOCAB, DEC_MAX_POS = 256, 128
DEC_KV_HEADS = {"llama": DEC_HEADS, "qwen2": 2, "mistral": DEC_HEADS}
SLIDING_WINDOW = 8  # mistral; < CHECK_SHAPES' 16, and > the padding random_inputs draws there
DECODERS = tuple(DEC_KV_HEADS)
FAMILIES.update({name: Family(("input_ids", "attention_mask"), ("logits",), DEC_VOCAB, 0)
                 for name in DECODERS})

# GPTJForCausalLM (logits): the decoder sizes above with LayerNorm, a parallel attention +
# GELU MLP block, and GPT-J's interleaved rotary (rotate_every_two, cos/sin repeated per
# pair) over the first GPTJ_ROTARY_DIM of each head's 16 elements (partial rotary, applied
# on the [batch, sequence, heads, head_dim] split before the head transpose).
GPTJ_ROTARY_DIM = 8
FAMILIES["gptj"] = Family(("input_ids", "attention_mask"), ("logits",), DEC_VOCAB, 0)

# ModernBertModel (last_hidden_state): 2 layers, hidden 64, 4 heads of dim 16, GeGLU FFN
# 128 (Wi: 64 -> 2 x 128), vocab 256, no biases, LayerNorm without beta (ModernBERT's
# defaults), rotary θ 160000 in global and 10000 in local layers. Layer 0 attends
# globally, layer 1 locally (global_attn_every_n_layers=2): key k is kept for query q iff
# |q - k| <= MB_LOCAL_ATTENTION / 2 = 4, so at sequence 16 the window matters (verify
# checks that it changes the output). A padded query in a local layer sees only its
# window: padding longer than the half window would leave the last padded queries no key
# at all, so random_inputs pads at most 4 positions (max_pad) to keep every row defined.
MB_LAYERS, MB_HIDDEN, MB_HEADS, MB_FFN, MB_VOCAB, MB_MAX_POS = 2, 64, 4, 128, 256, 128
MB_GLOBAL_EVERY, MB_LOCAL_ATTENTION = 2, 8
FAMILIES["modernbert"] = Family(("input_ids", "attention_mask"), ("last_hidden_state",),
                                MB_VOCAB, 0, max_pad=MB_LOCAL_ATTENTION // 2)

# The KV-cache forms of llama and qwen2 (same configs and, with the same seed, the same
# weights as those fixtures), use_cache=True, with optimum's input and output names:
# input_ids, position_ids [batch, sequence]; attention_mask [batch, past + sequence];
# past_key_values.{i}.key / .value [batch, kv_heads, past, head_dim] in, logits and
# present.{i}.key / .value [batch, kv_heads, past + sequence, head_dim] out (present =
# Concat(past, this step's rotated key / value) on axis 2, before repeat_kv).
KV_DECODERS = {"llama_kv": "llama", "qwen2_kv": "qwen2"}
KV_PAST = 5  # random_inputs' default past length
# (batch, sequence, past) checked by verify besides CHECK_SHAPES at KV_PAST: a 3-token
# chunk and a 1-token decode step after KV_PAST cached tokens, and an empty past.
KV_CHECKS = ((2, 3, KV_PAST), (2, 1, KV_PAST), (2, 3, 0))


def kv_names(prefix, layers=DEC_LAYERS):
    return tuple(f"{prefix}.{i}.{kind}" for i in range(layers) for kind in ("key", "value"))


FAMILIES.update({name: Family(("input_ids", "attention_mask", "position_ids")
                              + kv_names("past_key_values"),
                              ("logits",) + kv_names("present"), DEC_VOCAB, 0)
                 for name in KV_DECODERS})
# Families whose every output is per token ([batch, sequence, ...]).
CAUSAL_LMS = ("gpt2", "gptj") + DECODERS + tuple(KV_DECODERS)


def fixture_dir(family):
    """The folder a family's fixtures are committed in."""
    return KV_FIXTURE_DIR if family in KV_DECODERS else FIXTURE_DIR


def fixture_name(family, exporter, attention):
    return f"{family}_{exporter}_{attention}.onnx"


def parse_fixture_name(name):
    """'bert_dynamo_sdpa.onnx' -> ('bert', 'dynamo', 'sdpa'), 'llama_kv_dynamo_sdpa.onnx'
    -> ('llama_kv', 'dynamo', 'sdpa'); raises ValueError otherwise."""
    stem = name[:-len(".onnx")] if name.endswith(".onnx") else name
    parts = stem.rsplit("_", 2)
    if (len(parts) != 3 or parts[0] not in FAMILIES or parts[1] not in EXPORTERS
            or parts[2] not in FAMILIES[parts[0]].attentions):
        raise ValueError(f"not a torch fixture name: {name}")
    return tuple(parts)


def random_inputs(family, batch, seq, seed=0, past=None):
    """Seeded int64 [batch, seq] inputs with trailing padding.

    Real tokens are uniform in [2, vocab) (never the pad id); padded positions hold the
    family's pad id and mask 0. With several rows, row 0 is unpadded and every other row
    pads 1..seq/2 trailing positions (1..min(seq/2, max_pad) where the family caps it); a
    single row pads as well, so every shape exercises the mask while every row keeps real
    tokens. The KV-cache families take `past` cached positions (default KV_PAST) and pad
    in the cache instead (see kv_inputs).
    """
    fam = FAMILIES[family]
    rng = np.random.default_rng(seed)
    if family in KV_DECODERS:
        return kv_inputs(family, batch, seq, KV_PAST if past is None else past, rng)
    ids = rng.integers(2, fam.vocab, size=(batch, seq), dtype=np.int64)
    mask = np.ones((batch, seq), dtype=np.int64)
    most = seq // 2 if fam.max_pad is None else min(seq // 2, fam.max_pad)
    for row in range(batch):
        if (row > 0 or batch == 1) and seq > 1:
            pad = int(rng.integers(1, most + 1))
            mask[row, seq - pad:] = 0
    ids[mask == 0] = fam.pad_id
    feeds = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in fam.inputs:
        feeds["token_type_ids"] = rng.integers(0, 2, size=(batch, seq), dtype=np.int64)
    return feeds


def kv_inputs(family, batch, seq, past, rng):
    """A KV-cache family's seeded inputs: `seq` new tokens after `past` cached ones.

    The cache is right-padded, as a batch of right-padded prompts leaves it after the
    prefill: with several rows row 0's cache is all real and every other row's cache ends
    in 1..max(past/2, 1) padded slots (mask 0), a single row's too; the new tokens are
    real and sit at columns past..past+seq-1 of attention_mask for every row. Cached
    keys / values are standard normal (the padded slots too: only the mask hides them).
    position_ids follow the mask as transformers' generate derives them (cumsum - 1, 1
    where masked), so a row's new tokens continue right after its real cached tokens.
    With past 0 (the prefill) the new tokens are trailing-padded as random_inputs pads.
    """
    fam = FAMILIES[family]
    kv_heads = DEC_KV_HEADS[KV_DECODERS[family]]
    ids = rng.integers(2, fam.vocab, size=(batch, seq), dtype=np.int64)
    mask = np.ones((batch, past + seq), dtype=np.int64)
    for row in range(batch):
        if row > 0 or batch == 1:
            if past > 0:
                pad = int(rng.integers(1, max(past // 2, 1) + 1))
                mask[row, past - pad:past] = 0
            elif seq > 1:
                pad = int(rng.integers(1, seq // 2 + 1))
                mask[row, seq - pad:] = 0
    ids[mask[:, past:] == 0] = fam.pad_id
    positions = np.cumsum(mask, axis=1) - 1
    positions[mask == 0] = 1
    feeds = {"input_ids": ids, "attention_mask": mask,
             "position_ids": np.ascontiguousarray(positions[:, past:])}
    for name in fam.inputs[3:]:
        feeds[name] = rng.standard_normal((batch, kv_heads, past, DEC_HEAD_DIM),
                                          dtype=np.float32)
    return feeds


def allowed_keys(family, attention_mask, seq=None):
    """bool [batch, query, key]: which keys each query may attend to, the padding mask
    combined with causality for the causal LMs, with the sliding window for mistral
    (transformers' rule: key > query - window) and with modernbert's local window
    (|query - key| <= MB_LOCAL_ATTENTION / 2; the stricter of its two layer kinds). The
    `seq` queries are the last positions of the mask (KV-cache: after the past)."""
    keys = attention_mask.astype(bool)[:, None, :]
    total = attention_mask.shape[1]
    seq = total if seq is None else seq
    q, k = np.arange(total - seq, total)[:, None], np.arange(total)[None, :]
    allowed = np.ones((seq, total), dtype=bool)
    if family in CAUSAL_LMS:
        allowed &= k <= q
    if family == "mistral":
        allowed &= k > q - SLIDING_WINDOW
    if family == "modernbert":
        allowed &= np.abs(q - k) <= MB_LOCAL_ATTENTION // 2
    return keys & allowed[None]


# --------------------------------------------------------------------------------------
# Everything below needs torch and transformers.


def build_model(family, attention):
    """The transformers model of `family`, seeded random weights, eval mode."""
    import torch
    import transformers as tf

    common = dict(attn_implementation=attention)
    if family in ("bert", "bertcls"):
        config = tf.BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                               num_attention_heads=HEADS, intermediate_size=FFN,
                               max_position_embeddings=MAX_POS, type_vocab_size=2,
                               pad_token_id=0, num_labels=1, initializer_range=INIT_STD)
        cls = tf.BertModel if family == "bert" else tf.BertForSequenceClassification
    elif family == "distilbert":
        config = tf.DistilBertConfig(vocab_size=VOCAB, dim=HIDDEN, n_layers=LAYERS,
                                     n_heads=HEADS, hidden_dim=FFN,
                                     max_position_embeddings=MAX_POS, pad_token_id=0,
                                     initializer_range=INIT_STD)
        cls = tf.DistilBertModel
    elif family == "xlmr":
        config = tf.XLMRobertaConfig(vocab_size=VOCAB, hidden_size=HIDDEN,
                                     num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                     intermediate_size=FFN, max_position_embeddings=MAX_POS,
                                     type_vocab_size=1, pad_token_id=1, bos_token_id=0,
                                     eos_token_id=2, initializer_range=INIT_STD)
        cls = tf.XLMRobertaModel
    elif family == "electra":
        config = tf.ElectraConfig(vocab_size=VOCAB, embedding_size=HIDDEN // 2,
                                  hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                  num_attention_heads=HEADS, intermediate_size=FFN,
                                  max_position_embeddings=MAX_POS, type_vocab_size=2,
                                  pad_token_id=0, initializer_range=INIT_STD)
        cls = tf.ElectraModel
    elif family == "mpnet":
        config = tf.MPNetConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                num_attention_heads=HEADS, intermediate_size=FFN,
                                max_position_embeddings=MAX_POS, pad_token_id=1,
                                bos_token_id=0, eos_token_id=2, initializer_range=INIT_STD)
        cls = tf.MPNetModel
    elif family == "deberta":
        config = tf.DebertaV2Config(vocab_size=VOCAB, hidden_size=HIDDEN,
                                    num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                    intermediate_size=FFN, max_position_embeddings=MAX_POS,
                                    type_vocab_size=2, pad_token_id=0, relative_attention=True,
                                    position_buckets=16, max_relative_positions=MAX_POS,
                                    pos_att_type=["p2c", "c2p"], position_biased_input=False,
                                    initializer_range=INIT_STD)
        cls = tf.DebertaV2Model
    elif family == "roberta":
        config = tf.RobertaConfig(vocab_size=VOCAB, hidden_size=HIDDEN,
                                  num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                  intermediate_size=FFN, max_position_embeddings=MAX_POS,
                                  type_vocab_size=1, pad_token_id=1, bos_token_id=0,
                                  eos_token_id=2, initializer_range=INIT_STD)
        cls = tf.RobertaModel
    elif family == "gpt2":
        config = tf.GPT2Config(vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS,
                               n_inner=FFN, n_positions=MAX_POS, use_cache=False,
                               bos_token_id=0, eos_token_id=0, initializer_range=INIT_STD)
        cls = tf.GPT2LMHeadModel
    elif family == "modernbert":
        # transformers 5 runs ModernBERT padded (no unpadding; that was v4's flash path):
        # attention gets [batch, heads, sequence, head_dim] and a 4-D mask per layer kind.
        config = tf.ModernBertConfig(
            vocab_size=MB_VOCAB, hidden_size=MB_HIDDEN, num_hidden_layers=MB_LAYERS,
            num_attention_heads=MB_HEADS, intermediate_size=MB_FFN,
            max_position_embeddings=MB_MAX_POS, global_attn_every_n_layers=MB_GLOBAL_EVERY,
            local_attention=MB_LOCAL_ATTENTION, pad_token_id=0, bos_token_id=1,
            eos_token_id=2, cls_token_id=1, sep_token_id=2, initializer_range=INIT_STD)
        cls = tf.ModernBertModel
    elif family in DECODERS or family in KV_DECODERS:
        kv = family in KV_DECODERS
        family = KV_DECODERS.get(family, family)  # same config and weights as the base
        sizes = dict(vocab_size=DEC_VOCAB, hidden_size=DEC_HIDDEN,
                     num_hidden_layers=DEC_LAYERS, num_attention_heads=DEC_HEADS,
                     num_key_value_heads=DEC_KV_HEADS[family], intermediate_size=DEC_FFN,
                     max_position_embeddings=DEC_MAX_POS, use_cache=kv, pad_token_id=0,
                     bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
                     initializer_range=INIT_STD)
        if family == "llama":
            config = tf.LlamaConfig(head_dim=DEC_HEAD_DIM, **sizes)
            cls = tf.LlamaForCausalLM
        elif family == "qwen2":
            # Qwen2Config has no head_dim: hidden / heads = 16.
            config = tf.Qwen2Config(use_sliding_window=False, **sizes)
            cls = tf.Qwen2ForCausalLM
        else:
            config = tf.MistralConfig(head_dim=DEC_HEAD_DIM, sliding_window=SLIDING_WINDOW,
                                      **sizes)
            cls = tf.MistralForCausalLM
    elif family == "gptj":
        config = tf.GPTJConfig(vocab_size=DEC_VOCAB, n_positions=DEC_MAX_POS, n_embd=DEC_HIDDEN,
                               n_layer=DEC_LAYERS, n_head=DEC_HEADS, rotary_dim=GPTJ_ROTARY_DIM,
                               n_inner=DEC_FFN, use_cache=False, bos_token_id=1, eos_token_id=2,
                               tie_word_embeddings=False, initializer_range=INIT_STD)
        cls = tf.GPTJForCausalLM
    else:
        raise ValueError(f"unknown family {family}")
    torch.manual_seed(SEED)
    model = cls._from_config(config, **common)
    # transformers initializes every bias to 0 and LayerNorm to gamma 1, beta 0. Identical
    # initializers are then shared by the exporters (one zero vector for every bias), and
    # a fusion that dropped a bias or the LayerNorm affine would go unnoticed. Trained
    # models have neither property, so draw them too (gen_bert.py does the same).
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() == 1:
                offset = 1.0 if name.endswith("weight") else 0.0  # 1-D weights: LN gamma
                param.copy_(offset + torch.randn(param.shape) * INIT_STD)
    if family == "bertcls":
        # Like gen_bert.py: at the default init (std 0.02) the logits are ~0.02, small
        # enough for a masking bug to hide under the test tolerance; trained re-rankers
        # give O(1) logits.
        with torch.no_grad():
            torch.nn.init.normal_(model.classifier.weight, std=1.0)
    model.eval()
    got = model.config._attn_implementation
    if got != attention:
        raise RuntimeError(f"{family}: asked for attention {attention}, model uses {got}")
    return model


def make_wrapper(model, family):
    """An nn.Module taking the family's inputs positionally and returning its outputs as a
    tuple, so both exporters see the same explicit signature and output order."""
    import torch

    fam = FAMILIES[family]

    if family in KV_DECODERS:
        return make_kv_wrapper(model, family)
    if len(fam.inputs) == 3:
        class Wrapper(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, input_ids, attention_mask, token_type_ids):
                out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                 token_type_ids=token_type_ids, return_dict=True)
                return tuple(out[name] for name in fam.outputs)
    else:
        class Wrapper(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, input_ids, attention_mask):
                out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                 return_dict=True)
                return tuple(out[name] for name in fam.outputs)

    return Wrapper().eval()


def make_kv_wrapper(model, family):
    """The KV-cache form: flat past tensors in, logits and flat present tensors out.

    transformers 5 takes the cache as a DynamicCache object (`cache=`), which neither
    exporter accepts as a graph input; the wrapper builds one from the flat past tensors
    and flattens what the model leaves in it. Its layers are filled directly rather than
    through DynamicCache(ddp_cache_data), whose update concatenates the past onto an
    empty placeholder (the TorchScript export keeps that as a one-input Concat per past
    tensor); lazy_initialization's placeholders are dropped unused (a TracerWarning).
    """
    import torch
    from transformers import DynamicCache

    layers = model.config.num_hidden_layers

    class KVWrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, *past):
            cache = DynamicCache(config=self.model.config)
            for i, layer in enumerate(cache.layers):
                key, value = past[2 * i], past[2 * i + 1]
                layer.lazy_initialization(key, value)
                layer.keys, layer.values = key, value
            out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             position_ids=position_ids, cache=cache, use_cache=True,
                             return_dict=True)
            present = []
            for layer in out.cache.layers[:layers]:
                present += [layer.keys, layer.values]
            return (out.logits, *present)

    return KVWrapper().eval()


def torch_outputs(wrapper, feeds, family):
    import torch

    args = tuple(torch.from_numpy(feeds[name]) for name in FAMILIES[family].inputs)
    with torch.no_grad():
        return [t.numpy() for t in wrapper(*args)]


def export_one(family, exporter, attention, path):
    """Exports one fixture to `path`; returns a note on the opset used."""
    import torch

    fam = FAMILIES[family]
    wrapper = make_wrapper(build_model(family, attention), family)
    feeds = random_inputs(family, 2, 16, seed=SEED)
    args = tuple(torch.from_numpy(feeds[name]) for name in fam.inputs)
    if exporter == "torchscript":
        dynamic_axes = {name: {0: "batch", 1: "sequence"} for name in fam.inputs}
        for name in fam.outputs:
            # pooler_output and a classifier's logits are [batch, ...]; the rest per token.
            per_token = name == "last_hidden_state" or family in CAUSAL_LMS
            dynamic_axes[name] = {0: "batch", 1: "sequence"} if per_token else {0: "batch"}
        if family in KV_DECODERS:
            # The symbols the dynamo exporter writes (present: its sum expression).
            dynamic_axes["attention_mask"] = {0: "batch", 1: "total_sequence"}
            for name in kv_names("past_key_values"):
                dynamic_axes[name] = {0: "batch", 2: "past_sequence"}
            for name in kv_names("present"):
                dynamic_axes[name] = {0: "batch", 2: "past_sequence + sequence"}
        with torch.no_grad():
            torch.onnx.export(wrapper, args, path, dynamo=False, opset_version=TORCHSCRIPT_OPSET,
                              input_names=list(fam.inputs), output_names=list(fam.outputs),
                              dynamic_axes=dynamic_axes, do_constant_folding=True)
        return f"opset {TORCHSCRIPT_OPSET}"
    batch = torch.export.Dim("batch", min=1, max=64)
    max_pos = {"modernbert": MB_MAX_POS}.get(
        family,
        DEC_MAX_POS if family in DECODERS or family in KV_DECODERS or family == "gptj" else MAX_POS)
    seq = torch.export.Dim("sequence", min=1, max=max_pos - 2)
    dynamic_shapes = {name: {0: batch, 1: seq} for name in fam.inputs}
    if family in KV_DECODERS:
        # torch.export has no sum of two Dims: the mask's length is a Dim of its own.
        # forward(input_ids, attention_mask, position_ids, *past) takes the past as one
        # tuple argument, so dynamic_shapes is positional.
        past = torch.export.Dim("past_sequence", min=0, max=max_pos - 2)
        total = torch.export.Dim("total_sequence", min=1, max=max_pos - 2)
        dynamic_shapes = ({0: batch, 1: seq}, {0: batch, 1: total}, {0: batch, 1: seq},
                          tuple({0: batch, 2: past} for _ in fam.inputs[3:]))
    errors = []
    for opset in DYNAMO_OPSETS:
        try:
            with torch.no_grad():
                program = torch.onnx.export(wrapper, args, dynamo=True, opset_version=opset,
                                            input_names=list(fam.inputs),
                                            output_names=list(fam.outputs),
                                            dynamic_shapes=dynamic_shapes,
                                            external_data=False)
            program.save(path, external_data=False)
        except Exception as err:  # noqa: BLE001 (record and try the next opset)
            errors.append(f"opset {opset}: {type(err).__name__}: {str(err)[:300]}")
            continue
        written = default_opset(path)
        if written <= KILN_MAX_OPSET:
            return f"opset {written}" + (f" (after: {'; '.join(errors)})" if errors else "")
        errors.append(f"opset {opset} wrote opset {written} > {KILN_MAX_OPSET}")
    raise RuntimeError(f"{family} dynamo {attention}: " + " | ".join(errors))


def default_opset(path):
    import onnx

    model = onnx.load(path, load_external_data=False)
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def verify(family, attention, path):
    """onnx.checker full check, then onnxruntime vs torch on CHECK_SHAPES (and KV_CHECKS
    for the KV-cache families); returns the largest error seen."""
    import onnx
    import onnxruntime as ort

    onnx.checker.check_model(path, full_check=True)
    wrapper = make_wrapper(build_model(family, attention), family)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    if tuple(names) != FAMILIES[family].outputs:
        raise RuntimeError(f"{path}: outputs {names}, expected {FAMILIES[family].outputs}")
    cases = [(batch, seq, None) for batch, seq in CHECK_SHAPES]
    if family in KV_DECODERS:
        cases += list(KV_CHECKS)
    worst = 0.0
    runs = []
    for batch, seq, past in cases:
        seed = batch * 100 + seq + (0 if past is None else 1000 * (past + 1))
        feeds = random_inputs(family, batch, seq, seed=seed, past=past)
        where = f"{batch}x{seq}" + ("" if past is None else f" after {past}")
        # A query with no key left (e.g. a padded tail >= the sliding window) would make
        # softmax average padding (eager's finfo.min fill) or NaN (sdpa's -inf in ONNX,
        # 0 in torch): the comparison would be meaningless, so refuse such inputs.
        if not allowed_keys(family, feeds["attention_mask"], seq).any(axis=-1).all():
            raise RuntimeError(f"{family} at {where}: a query row is fully masked")
        got = session.run(names, feeds)
        runs.append((feeds, got))
        want = torch_outputs(wrapper, feeds, family)
        for name, g, w in zip(names, got, want):
            if g.shape != w.shape:
                raise RuntimeError(f"{path}: {name} shape {g.shape} vs torch {w.shape}")
            err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64))))
            worst = max(worst, err)
            if not err <= TOLERANCE:
                raise RuntimeError(f"{path}: {name} at {where}: max abs error {err:.3g}")
    config = wrapper.model.config
    windowed = family == "modernbert" or getattr(config, "sliding_window", None) is not None
    if windowed:
        # The export must implement the window: torch without it differs from ORT.
        if family == "modernbert":
            config.local_attention = 4 * MB_MAX_POS  # every key within the half window
        else:
            config.sliding_window = None
        moved = max(float(np.max(np.abs(got[0] - torch_outputs(wrapper, feeds, family)[0])))
                    for feeds, got in runs)
        if not moved > 10 * TOLERANCE:
            raise RuntimeError(f"{path}: the sliding window changes the output by {moved:.3g}")
    return worst


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None,
                        help="output folder (default: fixtures/torch, fixtures/kv for the "
                             "KV-cache families)")
    parser.add_argument("--only", nargs="*", choices=sorted(FAMILIES), help="families")
    parser.add_argument("--exporters", nargs="*", choices=EXPORTERS, default=list(EXPORTERS))
    args = parser.parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") != "0":
        # ModernBertModel.forward computes its rotary tables in set(layer_types) order,
        # which string hashing randomizes per process: fix it so exports are identical.
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), *argv])
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    import transformers

    torch.set_num_threads(1)  # deterministic reductions
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    failures = []
    for family in args.only or FAMILIES:
        out = args.out or fixture_dir(family)
        os.makedirs(out, exist_ok=True)
        for exporter in args.exporters:
            for attention in FAMILIES[family].attentions:
                path = os.path.join(out, fixture_name(family, exporter, attention))
                try:
                    note = export_one(family, exporter, attention, path)
                    err = verify(family, attention, path)
                except Exception as error:  # noqa: BLE001 (report every failure, go on)
                    failures.append(f"{os.path.basename(path)}: {error}")
                    print(f"FAILED {os.path.basename(path)}: {error}", file=sys.stderr)
                    continue
                size = os.path.getsize(path)
                print(f"{os.path.basename(path)}: {size} bytes, {note}, "
                      f"max |ORT - torch| = {err:.2g}")
    if failures:
        print(f"{len(failures)} failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
