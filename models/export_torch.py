#!/usr/bin/env python3
"""Exports tiny HuggingFace transformers models through torch.onnx as kiln test fixtures.

Why: models/gen_bert.py reproduces what the TorchScript exporter writes for BERT, but only
as far as its author knew it. These fixtures are the real thing: transformers models built
from small configs with seeded random weights (no hub download), exported by torch.onnx's
TorchScript exporter (dynamo=False) and by its dynamo exporter (dynamo=True), with the
"eager" and "sdpa" attention implementations: encoders (BERT, DistilBERT, RoBERTa), GPT-2
and RoPE decoders (Llama, Qwen2 with grouped-query attention, Mistral with a sliding
window), the causal LMs with use_cache=False (no KV-cache inputs or outputs). kiln must
import, run and fuse what they contain; tests/e2e/test_torch_fixtures.py compares
`kiln run` with onnxruntime on them.

Each fixture is checked here with onnx.checker (full check) and by running it in
onnxruntime against torch's own output (max abs error <= 1e-4) on batch 2 x sequence 16
and batch 1 x sequence 7, with trailing padding in the attention mask. Trailing padding
suits the decoders too: they compute position ids as arange(sequence) (no position_ids
input), right for right-padded rows only, and under a causal mask every query still sees
key 0, a real token, so no softmax row is fully masked (verify checks this, sliding
window included, so no NaN or meaningless row enters a comparison).

Limits: needs torch, transformers, onnx, onnxscript and onnxruntime (see
models/fixtures/torch/README.md for the versions used); CI does not run this script, it
only runs the committed files. Only the module-level helpers (FAMILIES, random_inputs,
parse_fixture_name) are used by the tests, and they need numpy only: torch is imported
inside the export functions. Outputs are meaningless; the graph structure is the point.
Exporter output changes between torch releases, so re-running with other versions gives
other (equally valid) graphs.

Usage:
  /opt/torchenv/bin/python models/export_torch.py            # all fixtures
  /opt/torchenv/bin/python models/export_torch.py --only bert gpt2 --out /tmp/x
"""

import argparse
import dataclasses
import os
import sys

import numpy as np

FIXTURE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "torch")

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
    """One exported model kind: its inputs, outputs and the token id used for padding."""

    inputs: tuple
    outputs: tuple
    vocab: int
    pad_id: int


# Tiny sizes of the encoders and GPT-2 (the decoders' are below): 2 layers, hidden 32,
# 4 heads (head dim 8), FFN 128, vocab 512, 64 positions. Every file stays under 1 MB.
LAYERS, HIDDEN, HEADS, FFN, VOCAB, MAX_POS = 2, 32, 4, 128, 512, 64
# Weight init std (transformers' `initializer_range`, default 0.02). At 0.02 a model this
# small has near-uniform attention and a pooler output of ~0.1, so ignoring the padding
# mask would move the pooler output by only ~5e-4; at INIT_STD the attention is peaked
# like a trained model's and every output moves by > 1e-3 (see the e2e test).
INIT_STD = 0.1

FAMILIES = {
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
# Families whose every output is per token ([batch, sequence, ...]).
CAUSAL_LMS = ("gpt2",) + DECODERS


def fixture_name(family, exporter, attention):
    return f"{family}_{exporter}_{attention}.onnx"


def parse_fixture_name(name):
    """'bert_dynamo_sdpa.onnx' -> ('bert', 'dynamo', 'sdpa'); raises ValueError otherwise."""
    stem = name[:-len(".onnx")] if name.endswith(".onnx") else name
    parts = stem.split("_")
    if (len(parts) != 3 or parts[0] not in FAMILIES or parts[1] not in EXPORTERS
            or parts[2] not in ATTENTIONS):
        raise ValueError(f"not a torch fixture name: {name}")
    return tuple(parts)


def random_inputs(family, batch, seq, seed=0):
    """Seeded int64 [batch, seq] inputs with trailing padding.

    Real tokens are uniform in [2, vocab) (never the pad id); padded positions hold the
    family's pad id and mask 0. With several rows, row 0 is unpadded and every other row
    pads 1..seq/2 trailing positions; a single row pads 1..seq/2 as well, so every shape
    exercises the mask while every row keeps real tokens.
    """
    fam = FAMILIES[family]
    rng = np.random.default_rng(seed)
    ids = rng.integers(2, fam.vocab, size=(batch, seq), dtype=np.int64)
    mask = np.ones((batch, seq), dtype=np.int64)
    for row in range(batch):
        if (row > 0 or batch == 1) and seq > 1:
            pad = int(rng.integers(1, seq // 2 + 1))
            mask[row, seq - pad:] = 0
    ids[mask == 0] = fam.pad_id
    feeds = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in fam.inputs:
        feeds["token_type_ids"] = rng.integers(0, 2, size=(batch, seq), dtype=np.int64)
    return feeds


def allowed_keys(family, attention_mask):
    """bool [batch, query, key]: which keys each query may attend to, the padding mask
    combined with causality for the causal LMs and with the sliding window for mistral
    (transformers' rule: key > query - window)."""
    keys = attention_mask.astype(bool)[:, None, :]
    seq = attention_mask.shape[1]
    q, k = np.arange(seq)[:, None], np.arange(seq)[None, :]
    allowed = np.ones((seq, seq), dtype=bool)
    if family in CAUSAL_LMS:
        allowed &= k <= q
    if family == "mistral":
        allowed &= k > q - SLIDING_WINDOW
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
    elif family in DECODERS:
        sizes = dict(vocab_size=DEC_VOCAB, hidden_size=DEC_HIDDEN,
                     num_hidden_layers=DEC_LAYERS, num_attention_heads=DEC_HEADS,
                     num_key_value_heads=DEC_KV_HEADS[family], intermediate_size=DEC_FFN,
                     max_position_embeddings=DEC_MAX_POS, use_cache=False, pad_token_id=0,
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
        with torch.no_grad():
            torch.onnx.export(wrapper, args, path, dynamo=False, opset_version=TORCHSCRIPT_OPSET,
                              input_names=list(fam.inputs), output_names=list(fam.outputs),
                              dynamic_axes=dynamic_axes, do_constant_folding=True)
        return f"opset {TORCHSCRIPT_OPSET}"
    batch = torch.export.Dim("batch", min=1, max=64)
    seq = torch.export.Dim("sequence", min=1,
                           max=(DEC_MAX_POS if family in DECODERS else MAX_POS) - 2)
    dynamic_shapes = {name: {0: batch, 1: seq} for name in fam.inputs}
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
    """onnx.checker full check, then onnxruntime vs torch on CHECK_SHAPES; returns the
    largest error seen."""
    import onnx
    import onnxruntime as ort

    onnx.checker.check_model(path, full_check=True)
    wrapper = make_wrapper(build_model(family, attention), family)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    if tuple(names) != FAMILIES[family].outputs:
        raise RuntimeError(f"{path}: outputs {names}, expected {FAMILIES[family].outputs}")
    worst = 0.0
    runs = []
    for batch, seq in CHECK_SHAPES:
        feeds = random_inputs(family, batch, seq, seed=batch * 100 + seq)
        # A query with no key left (e.g. a padded tail >= the sliding window) would make
        # softmax average padding (eager's finfo.min fill) or NaN (sdpa's -inf in ONNX,
        # 0 in torch): the comparison would be meaningless, so refuse such inputs.
        if not allowed_keys(family, feeds["attention_mask"]).any(axis=-1).all():
            raise RuntimeError(f"{family} at {batch}x{seq}: a query row is fully masked")
        got = session.run(names, feeds)
        runs.append((feeds, got))
        want = torch_outputs(wrapper, feeds, family)
        for name, g, w in zip(names, got, want):
            if g.shape != w.shape:
                raise RuntimeError(f"{path}: {name} shape {g.shape} vs torch {w.shape}")
            err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64))))
            worst = max(worst, err)
            if not err <= TOLERANCE:
                raise RuntimeError(f"{path}: {name} at {batch}x{seq}: max abs error {err:.3g}")
    if getattr(wrapper.model.config, "sliding_window", None) is not None:
        # The export must implement the window: torch without it differs from ORT.
        wrapper.model.config.sliding_window = None
        moved = max(float(np.max(np.abs(got[0] - torch_outputs(wrapper, feeds, family)[0])))
                    for feeds, got in runs)
        if not moved > 10 * TOLERANCE:
            raise RuntimeError(f"{path}: the sliding window changes the output by {moved:.3g}")
    return worst


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=FIXTURE_DIR, help="output folder")
    parser.add_argument("--only", nargs="*", choices=sorted(FAMILIES), help="families")
    parser.add_argument("--exporters", nargs="*", choices=EXPORTERS, default=list(EXPORTERS))
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    import transformers

    torch.set_num_threads(1)  # deterministic reductions
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    os.makedirs(args.out, exist_ok=True)
    failures = []
    for family in args.only or FAMILIES:
        for exporter in args.exporters:
            for attention in ATTENTIONS:
                path = os.path.join(args.out, fixture_name(family, exporter, attention))
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
