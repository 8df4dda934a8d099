#!/usr/bin/env python3
"""Builds kiln's onnxruntime-genai fixtures: tiny HuggingFace decoders (seeded random
weights, no hub download) converted by onnxruntime-genai's model builder, the tool that
writes the ONNX LLMs published for onnxruntime-genai (Phi, Llama, Qwen ... `*-onnx`
repositories): com.microsoft GroupQueryAttention with packed QKV, rotary and the KV
cache (past_key_values.* in, present.* out, seqlens_k and total_sequence_length computed
from the attention mask), SkipSimplifiedLayerNormalization, and for int4 MatMulNBits.

Fixtures (models/fixtures/genai/<name>/: model.onnx, model.onnx.data, genai_config.json):
  llama_fp32   LlamaForCausalLM, 2 layers, hidden 64, 4 query / 2 KV heads of 16, fp32
  qwen2_int4   Qwen2ForCausalLM (QKV bias), same sizes, `-p int4`: MatMulNBits (block 32,
               accuracy_level 4) for every projection and the LM head

Each is checked here by running it in onnxruntime against torch's own logits on a
5-token prompt (fp32: max abs error <= 1e-4; int4: the quantized weights make it
approximate, so only finiteness). Not with onnx.checker: the builder writes onnxruntime's
SimplifiedLayerNormalization into the default domain, which onnx does not define. tests/e2e/test_genai_fixtures.py runs the committed
files against onnxruntime with `kiln run` and as compiled plans.

Needs (see models/fixtures/genai/README.md for the versions used): torch, transformers,
tokenizers (the builder insists on writing a tokenizer: a 256-word WordLevel one is made
here), onnx, onnxruntime and onnxruntime-genai, in /opt/torchenv. CI does not run this.

Usage:
  /opt/torchenv/bin/python models/export_genai.py [--out DIR]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

FIXTURE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "genai")
VOCAB = 256
FIXTURES = {"llama_fp32": ("llama", "fp32"), "qwen2_int4": ("qwen2", "int4")}
KEPT = ("model.onnx", "model.onnx.data", "genai_config.json")


def hf_model(family, out):
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(0)
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    if family == "llama":
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(head_dim=16, **common))
    else:
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**common))
    model.eval()
    model.save_pretrained(out)
    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(VOCAB)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0", bos_token="t1",
                                         eos_token="t2").save_pretrained(out)
    return model


def check(model, path, precision):
    import numpy as np
    import onnxruntime as ort
    import torch

    ids = np.array([[5, 17, 33, 200, 9]], np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for i in session.get_inputs():
        if i.name.startswith("past_key_values."):
            feeds[i.name] = np.zeros((1, 2, 0, 16), np.float32)
    logits = session.run(["logits"], feeds)[0]
    with torch.no_grad():
        want = model(torch.from_numpy(ids)).logits.numpy()
    err = float(np.abs(logits - want).max())
    if precision == "fp32" and err > 1e-4:
        raise SystemExit(f"{path}: onnxruntime vs torch max abs error {err:.2e} > 1e-4")
    if not np.isfinite(logits).all():
        raise SystemExit(f"{path}: non-finite logits")
    print(f"  checked: onnxruntime vs torch max abs error {err:.2e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=FIXTURE_DIR)
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    for name, (family, precision) in FIXTURES.items():
        print(name)
        with tempfile.TemporaryDirectory() as work:
            src, built = os.path.join(work, "hf"), os.path.join(work, "onnx")
            model = hf_model(family, src)
            subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-m", src,
                            "-i", src, "-o", built, "-p", precision, "-e", "cpu", "-c",
                            os.path.join(work, "cache")], check=True,
                           stdout=subprocess.DEVNULL)
            check(model, os.path.join(built, "model.onnx"), precision)
            dest = os.path.join(args.out, name)
            os.makedirs(dest, exist_ok=True)
            for f in KEPT:
                shutil.copyfile(os.path.join(built, f), os.path.join(dest, f))


if __name__ == "__main__":
    main()
