#!/usr/bin/env python3
"""KV-cache decode steps on the CPU: kiln plans (one or more kiln binaries) vs onnxruntime
on a Qwen2-shaped decoder exported by torch.onnx (TorchScript) in the KV-cache form, same
inputs, same run.

What it measures: for each batch x past, one decode step (sequence 1 after `past` cached
positions; a `--prefill` shape BxS runs sequence S after an empty past instead): `kiln
compile --shape batch=B,sequence=S,past_sequence=P,total_sequence=P+S`, then `kiln bench
--json --threads T` with the inputs as .npy files, against an onnxruntime session
(benchlib.ort_session: ORT_ENABLE_ALL, T intra-op threads) on the same arrays. Prints one
markdown row per (shape, kiln binary): p50 ms, the ratio to onnxruntime (< 1: kiln
faster), the floor (every weight and the K/V cache read once at --bandwidth GB/s: a
decode step is bound by memory) and the plan's steps per kernel.
Limits: each step is a separate plan run with the past passed in and the present copied
out (the caller-owned cache both sides pay; kiln's in-place cache session is issue 13's
work); random weights (seeded), a mask of all ones; timings are meaningful on an idle
machine only.

Usage (the torch venv: transformers, torch, onnx, onnxruntime):
  /opt/torchenv/bin/python bench/kv_decode_bench.py --layers 4 --hidden 896 --heads 14 \
      --kv-heads 2 --ffn 4864 --vocab 8192 --decode 1x128,1x512,1x2048,4x512 \
      --prefill 1x128 --threads 2 [--kiln OLD/kiln --kiln build/kiln]
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


def kv_dynamic_axes(past_names, present_names):
    """torch.onnx dynamic_axes of a KV-cache export (shared with bench/generate_bench.py)."""
    dynamic = {"input_ids": {0: "batch", 1: "sequence"},
               "position_ids": {0: "batch", 1: "sequence"},
               "attention_mask": {0: "batch", 1: "total_sequence"},
               "logits": {0: "batch", 1: "sequence"}}
    dynamic.update({n: {0: "batch", 2: "past_sequence"} for n in past_names})
    dynamic.update({n: {0: "batch", 2: "past_sequence + sequence"} for n in present_names})
    return dynamic


def export(args, path):
    """A Qwen2ForCausalLM of the given sizes, seeded weights, in the KV-cache form."""
    import torch
    import transformers as tf

    torch.manual_seed(0)
    config = tf.Qwen2Config(vocab_size=args.vocab, hidden_size=args.hidden,
                            num_hidden_layers=args.layers, num_attention_heads=args.heads,
                            num_key_value_heads=args.kv_heads, intermediate_size=args.ffn,
                            max_position_embeddings=args.max_pos, use_cache=True,
                            tie_word_embeddings=False, attn_implementation="eager")
    model = tf.Qwen2ForCausalLM(config).eval()
    wrapper = export_torch.make_kv_wrapper(model, "qwen2_kv")
    past_names = export_torch.kv_names("past_key_values", args.layers)
    present_names = export_torch.kv_names("present", args.layers)
    feeds = inputs(args, 1, 4, 3, seed=0)
    names = ["input_ids", "attention_mask", "position_ids", *past_names]
    dynamic = kv_dynamic_axes(past_names, present_names)
    with torch.no_grad():
        torch.onnx.export(wrapper, tuple(torch.from_numpy(feeds[n]) for n in names), path,
                          dynamo=False, opset_version=export_torch.TORCHSCRIPT_OPSET,
                          input_names=names, output_names=["logits", *present_names],
                          dynamic_axes=dynamic, do_constant_folding=True)


def inputs(args, batch, seq, past, seed):
    rng = np.random.default_rng(seed)
    head_dim = args.hidden // args.heads
    feeds = {"input_ids": rng.integers(0, args.vocab, (batch, seq), dtype=np.int64),
             "attention_mask": np.ones((batch, past + seq), dtype=np.int64),
             "position_ids": np.tile(np.arange(past, past + seq, dtype=np.int64), (batch, 1))}
    for name in export_torch.kv_names("past_key_values", args.layers):
        feeds[name] = rng.standard_normal((batch, args.kv_heads, past, head_dim),
                                          dtype=np.float32)
    return feeds


def add_model_args(ap):
    """The exported model's sizes (export), shared with bench/generate_bench.py."""
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=896)
    ap.add_argument("--heads", type=int, default=14)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=4864)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--max-pos", type=int, default=4096)


def floor_ms(args, batch, seq, past, weight_bytes):
    head_dim = args.hidden // args.heads
    cache = 2 * args.layers * batch * args.kv_heads * (past + seq) * head_dim * 4
    return (weight_bytes + cache) / (args.bandwidth * 1e9) * 1e3


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_args(ap)
    ap.add_argument("--decode", default="1x128,1x512", help="BxPAST,... (sequence 1)")
    ap.add_argument("--prefill", default="", help="BxS,... (empty past)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--bandwidth", type=float, default=20.0,
                    help="memory read bandwidth for the floor, GB/s")
    ap.add_argument("--kiln", action="append", help="kiln binary (repeatable; default "
                    "build/kiln)")
    ap.add_argument("--unfused", action="store_true",
                    help="also run the first binary with issue 12's fusions disabled "
                    f"({' '.join(benchlib.UNFUSED_FLAGS)}): the 'before' row")
    ap.add_argument("--workdir", help="where the model and plans go (default: a temp dir)")
    args = ap.parse_args(argv)
    kilns = args.kiln or [os.path.join(benchlib.ROOT, "build", "kiln")]
    work = args.workdir or tempfile.mkdtemp(prefix="kiln_kv_bench_")
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "qwen2_kv.onnx")
    if not os.path.exists(model):
        export(args, model)
    import onnx

    weight_bytes = sum(t.ByteSize() for t in onnx.load(model).graph.initializer)
    sess = benchlib.ort_session(model, args.threads)
    print(f"qwen2-shaped KV decoder: layers {args.layers}, hidden {args.hidden}, heads "
          f"{args.heads}/{args.kv_heads}, ffn {args.ffn}, vocab {args.vocab}, weights "
          f"{weight_bytes / 2**20:.1f} MiB; threads {args.threads}, runs {args.runs}")
    print("| step | kiln | kiln p50 ms | onnxruntime p50 ms | kiln / ort | floor ms | "
          "steps by kernel |")
    print("|---|---|---:|---:|---:|---:|---|")
    shapes = [("decode", s) for s in args.decode.split(",") if s]
    shapes += [("prefill", s) for s in args.prefill.split(",") if s]
    for i, (kind, shape) in enumerate(shapes):
        b, n = (int(v) for v in shape.split("x"))
        seq, past = (1, n) if kind == "decode" else (n, 0)
        feeds = inputs(args, b, seq, past, seed=i + 1)
        spec = f"batch={b},sequence={seq},past_sequence={past},total_sequence={past + seq}"
        rows, ort = benchlib.compare_shape(model, kilns, args.unfused, spec, feeds, b, sess, work,
                                           f"{kind}_{shape}", args, i % 2 == 0)
        floor = floor_ms(args, b, seq, past, weight_bytes)
        label = f"{kind} {b}x{seq} past {past}"
        for name, p50, steps in rows:
            print(f"| {label} | {name} | {p50:.3f} | {ort['p50_ms']:.3f} | "
                  f"{p50 / ort['p50_ms']:.2f} | {floor:.3f} | {steps} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
