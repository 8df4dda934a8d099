#!/usr/bin/env python3
"""A ModernBERT-base-shaped encoder on the CPU: kiln plans vs onnxruntime, same inputs,
same run.

What it measures: a transformers ModernBertModel with ModernBERT-base's sizes by default
(22 layers, hidden 768, 12 heads, GeGLU FFN 1152, vocab 50368, a global layer every 3rd,
the others a 128-token sliding window), seeded random weights, exported by torch.onnx
(TorchScript, models/export_torch.py's wrapper: last_hidden_state); for each batch x
sequence `kiln compile --shape`, then `kiln bench --json --threads T` with the inputs as
.npy files against an onnxruntime session (benchlib.ort_session) on the same arrays. Prints
one markdown row per (shape, kiln variant): p50 ms, the ratio to onnxruntime (< 1: kiln
faster) and the plan's steps per kernel.
Limits: random weights; the mask pads batch row b by 8·b positions (row 0 unpadded);
timings are meaningful on an idle machine only.

Usage (the torch venv):
  /opt/torchenv/bin/python bench/modernbert_bench.py --shapes 8x512 --threads 2 --runs 3
"""

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import benchlib  # noqa: E402
import export_torch  # noqa: E402


def export(args, path):
    import torch
    import transformers as tf

    torch.manual_seed(0)
    config = tf.ModernBertConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
        num_attention_heads=args.heads, intermediate_size=args.ffn,
        max_position_embeddings=args.max_pos, global_attn_every_n_layers=args.global_every,
        local_attention=args.local_attention, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, cls_token_id=1, sep_token_id=2, attn_implementation="eager")
    wrapper = export_torch.make_wrapper(tf.ModernBertModel(config).eval(), "modernbert")
    feeds = inputs(args, 2, 16)
    names = ["input_ids", "attention_mask"]
    axes = {n: {0: "batch", 1: "sequence"} for n in names + ["last_hidden_state"]}
    with torch.no_grad():
        torch.onnx.export(wrapper, tuple(torch.from_numpy(feeds[n]) for n in names), path,
                          dynamo=False, opset_version=export_torch.TORCHSCRIPT_OPSET,
                          input_names=names, output_names=["last_hidden_state"],
                          dynamic_axes=axes, do_constant_folding=True)


def inputs(args, batch, seq, seed=0):
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, seq), dtype=np.int64)
    for b in range(batch):
        mask[b, seq - min(seq - 1, 8 * b):] = 0
    return {"input_ids": rng.integers(3, args.vocab, (batch, seq), dtype=np.int64),
            "attention_mask": mask}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=22)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--ffn", type=int, default=1152)
    ap.add_argument("--vocab", type=int, default=50368)
    ap.add_argument("--max-pos", type=int, default=8192)
    ap.add_argument("--global-every", type=int, default=3)
    ap.add_argument("--local-attention", type=int, default=128)
    ap.add_argument("--shapes", default="8x512", help="BxS,...")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--kiln", action="append", help="kiln binary (repeatable; default "
                    "build/kiln)")
    ap.add_argument("--unfused", action="store_true",
                    help="also run the first binary with issue 12's fusions disabled")
    ap.add_argument("--workdir", help="where the model and plans go (default: a temp dir)")
    args = ap.parse_args(argv)
    kilns = args.kiln or [os.path.join(benchlib.ROOT, "build", "kiln")]
    work = args.workdir or tempfile.mkdtemp(prefix="kiln_modernbert_bench_")
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "modernbert.onnx")
    if not os.path.exists(model):
        export(args, model)
    sess = benchlib.ort_session(model, args.threads)
    print(f"ModernBERT-shaped encoder: layers {args.layers}, hidden {args.hidden}, heads "
          f"{args.heads}, ffn {args.ffn} (GeGLU), vocab {args.vocab}, global every "
          f"{args.global_every}, window {args.local_attention}; threads {args.threads}, "
          f"runs {args.runs}")
    print("| shape | kiln | kiln p50 ms | onnxruntime p50 ms | kiln / ort | steps by kernel |")
    print("|---|---|---:|---:|---:|---|")
    for i, shape in enumerate(args.shapes.split(",")):
        b, s = (int(v) for v in shape.split("x"))
        feeds = inputs(args, b, s, seed=i + 1)
        rows, ort = benchlib.compare_shape(model, kilns, args.unfused, f"batch={b},sequence={s}",
                                           feeds, b, sess, work, shape, args, i % 2 == 0)
        for name, p50, steps in rows:
            print(f"| {shape} | {name} | {p50:.3f} | {ort['p50_ms']:.3f} | "
                  f"{p50 / ort['p50_ms']:.2f} | {steps} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
