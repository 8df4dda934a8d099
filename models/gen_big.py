#!/usr/bin/env python3
"""A ~2.46 GB external-data encoder for the compile-memory benchmark (issue 14).

gen_bert's TorchScript-style opset-14 BERT, scaled up until its weights pass protobuf's
2 GB limit: 20 layers, hidden 1536, 16 heads, FFN 6144, BERT's 30522-token vocabulary
(613.9 M fp32 parameters, 2.456 GB). The model is saved the way `onnx.save_model(...,
save_as_external_data=True)` writes large exports: one `<name>.onnx` graph of a few hundred
KB and one `<name>.onnx.data` file holding every tensor of 1 KiB or more, back to back.
Seeded, so the same arguments write the same bytes. Takes 1-2 minutes and ~7 GB of memory.
Write it under build/ (git-ignored); never commit it.

  python3 models/gen_big.py build/big/big.onnx [--layers 20] [--hidden 1536]
"""

import argparse
import os
import sys

import onnx

import gen_bert


def build(layers, hidden, heads, ffn):
    name = f"big{layers}x{hidden}"
    gen_bert.SIZES[name] = gen_bert.BertConfig(layers=layers, hidden=hidden, heads=heads,
                                               ffn=ffn, vocab=30522, max_pos=512)
    return gen_bert.build_model(size=name, style="opset14", head="none")


def weight_bytes(model):
    return sum(len(t.raw_data) for t in model.graph.initializer)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("output", help="the .onnx path; the data file is OUTPUT.data beside it")
    ap.add_argument("--layers", type=int, default=20)
    ap.add_argument("--hidden", type=int, default=1536)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--ffn", type=int, default=0, help="default 4 x hidden")
    args = ap.parse_args(argv)
    model = build(args.layers, args.hidden, args.heads, args.ffn or 4 * args.hidden)
    total = weight_bytes(model)
    out = os.path.abspath(args.output)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    data = os.path.basename(out) + ".data"
    if os.path.exists(out + ".data"):
        os.remove(out + ".data")  # onnx appends to an existing data file
    onnx.save_model(model, out, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data, size_threshold=1024)
    print(f"{out}: {len(model.graph.node)} nodes, {total} weight bytes "
          f"({total / 1e9:.3f} GB) in {data}")


if __name__ == "__main__":
    main(sys.argv[1:])
