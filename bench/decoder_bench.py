#!/usr/bin/env python3
"""Decoder prefill on the CPU: kiln plans (one or more kiln binaries) vs onnxruntime on a
LLaMA-style decoder from models/gen_decoder.py, same inputs, same run.

What it measures: for each batch x sequence, `kiln compile --shape` then `kiln bench --json
--threads T` with the inputs given as .npy files, against an onnxruntime session
(benchlib.ort_session: ORT_ENABLE_ALL, T intra-op threads) on the same arrays; the order of
the sides alternates per shape. Prints one markdown row per (shape, kiln binary): p50 ms,
p50 ratio to onnxruntime (< 1: kiln faster), and the plan's steps per kernel id (from
`kiln inspect`), so a before/after pair of binaries shows what a kernel change moved.
Limits: timings are meaningful on an otherwise idle machine only; random weights (the
generator's), inputs from its random_inputs (right padding on the batch's rows but the
first, a single row pads too), no KV cache (a prefill, not decode).

Usage:
  python3 bench/decoder_bench.py --layers 4 --hidden 512 --heads 8 --ffn 1376 \
      --vocab 4096 --shapes 1x32,1x128 --threads 2 [--kiln OLD/kiln --kiln build/kiln]
"""

import argparse
import dataclasses
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import benchlib  # noqa: E402
import gen_decoder  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for f in dataclasses.fields(gen_decoder.DecoderConfig):
        ap.add_argument("--" + f.name.replace("_", "-"), type=f.type, default=f.default)
    ap.add_argument("--shapes", default="1x32,1x128", help="BxS,BxS,...")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--kiln", action="append", help="kiln binary (repeatable; default "
                    "build/kiln)")
    ap.add_argument("--unfused", action="store_true",
                    help="also run the first binary with issue 12's fusions disabled "
                    f"({' '.join(benchlib.UNFUSED_FLAGS)}): the 'before' row")
    ap.add_argument("--workdir", help="where models and plans go (default: a temp dir)")
    ap.add_argument("--model", help="benchmark this ONNX decoder (inputs input_ids and "
                    "attention_mask [B, S], e.g. a models/fixtures/torch/llama_* file; give "
                    "its --vocab) instead of generating one")
    args = ap.parse_args(argv)
    kilns = args.kiln or [os.path.join(benchlib.ROOT, "build", "kiln")]
    cfg = gen_decoder.DecoderConfig(
        **{f.name: getattr(args, f.name) for f in dataclasses.fields(gen_decoder.DecoderConfig)})
    work = args.workdir or tempfile.mkdtemp(prefix="kiln_decoder_bench_")
    os.makedirs(work, exist_ok=True)
    model = args.model or os.path.join(work, "decoder.onnx")
    if not args.model:
        gen_decoder.save(gen_decoder.build_model(cfg, 0), model)
    sess = benchlib.ort_session(model, args.threads)
    print(f"decoder {args.model or cfg}, threads {args.threads}, runs {args.runs}")
    print("| shape | kiln | kiln p50 ms | onnxruntime p50 ms | kiln / ort | steps by kernel |")
    print("|---|---|---:|---:|---:|---|")
    for i, shape in enumerate(args.shapes.split(",")):
        b, s = (int(v) for v in shape.split("x"))
        if s > cfg.max_pos:
            ap.error(f"sequence {s} exceeds --max-pos {cfg.max_pos}")
        feeds = gen_decoder.random_inputs(cfg, b, s, seed=b * 7 + s, padding="right")
        rows, ort = benchlib.compare_shape(model, kilns, args.unfused, f"batch={b},sequence={s}",
                                           feeds, b, sess, work, shape, args, i % 2 == 0)
        for name, p50, steps in rows:
            print(f"| {shape} | {name} | {p50:.3f} | {ort['p50_ms']:.3f} | "
                  f"{p50 / ort['p50_ms']:.2f} | {steps} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
