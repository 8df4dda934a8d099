#!/usr/bin/env python3
"""GPU re-ranking with realistic lengths (docs/packing.md): kiln packed vs kiln padded vs PyTorch.

The workload of bench/rerank_bench.py (its pair_lengths: a query of 8-16 tokens, passages
log-normal with mean 70 tokens, sigma 0.6, the pair capped at 256; seeded), batches of 32
candidates in the order given, each padded to its own longest pair. The model: a MiniLM-L6
cross-encoder (transformers BertForSequenceClassification, one label, 384 hidden, 6 layers,
12 heads, 1536 FFN; --arch xlmr: XLMRobertaForSequenceClassification of the same size, the
bge-reranker family) from config with seeded random weights, exported with torch.onnx
(TorchScript exporter, opset 17) and compiled by `kiln compile --target cuda --precision
fp16 --profile batch=4:8:16:32,sequence=16:32:64:128:256,tokens=256:512:1024:2048:4096`.
  kiln packed   kiln_gpu_bench rerank: every batch through Executor::Run with host I/O
                (copies included), packed by the mask;
  kiln padded   the same plan and batches, RunOptions::pack = false;
  torch padded  PyTorch eager fp16, the same batches (ids copied to the device per batch,
                scores back to the host);
  torch sorted  the same with the candidates sorted by length before batching (the best a
                careful user of a padded runtime can do).
Wall milliseconds per pass over all N candidates, medians of --runs after a warm-up pass.
--target cpu --precision fp32 --device cpu runs the same harness on the CPU (a check of the
script, not a GPU figure).
Usage (bench/gpu/check.sh): rerank_gpu.py --kiln KILN --gpu-bench KILN_GPU_BENCH [--json F]
"""

import argparse
import json
import pathlib
import sys
import tempfile
import time

import numpy as np
import torch
import transformers

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from gpu_timing import run  # noqa: E402
from rerank_bench import BATCH, PROFILE, pair_lengths  # noqa: E402

MINILM = dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
              intermediate_size=1536)


def log(msg):
    print(f"[rerank_gpu {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def build_and_export(path, arch):
    """bert: BertForSequenceClassification (token types 0/1); xlmr: XLMRobertaForSequenceClassification
    (the bge-reranker family: position ids counted from the ids, no token types), both MiniLM-L6
    sized with a 30522-token vocabulary."""
    torch.manual_seed(0)
    if arch == "bert":
        cfg = transformers.BertConfig(vocab_size=30522, max_position_embeddings=512, num_labels=1,
                                      **MINILM)
        model = transformers.BertForSequenceClassification(cfg).eval()
        names = ["input_ids", "attention_mask", "token_type_ids"]
    else:
        cfg = transformers.XLMRobertaConfig(vocab_size=30522, max_position_embeddings=514,
                                            type_vocab_size=1, pad_token_id=1, num_labels=1,
                                            **MINILM)
        model = transformers.XLMRobertaForSequenceClassification(cfg).eval()
        names = ["input_ids", "attention_mask"]
    ids = torch.randint(2, 1000, (2, 16))
    example = (ids, torch.ones(2, 16, dtype=torch.int64), torch.zeros(2, 16, dtype=torch.int64))
    example = example[:len(names)]
    dyn = {n: {0: "batch", 1: "sequence"} for n in names}
    dyn["logits"] = {0: "batch"}
    kwargs = dict(input_names=names, output_names=["logits"], dynamic_axes=dyn, opset_version=17)
    try:
        torch.onnx.export(model, example, path, dynamo=False, **kwargs)
    except TypeError:  # older torch without the dynamo argument
        torch.onnx.export(model, example, path, **kwargs)
    return model


def torch_pass(model, device, lengths, queries, order, rng_seed, with_types):
    """Wall ms of scoring every candidate in `order`, batches of 32 padded to their longest."""
    gen = np.random.default_rng(rng_seed)
    feeds = []
    for start in range(0, len(order), BATCH):
        rows = order[start:start + BATCH]
        s = int(lengths[rows].max())
        cols = np.arange(s)[None, :]
        mask = (cols < lengths[rows][:, None]).astype(np.int64)
        types = ((cols >= queries[rows][:, None]) & (mask == 1)).astype(np.int64)
        ids = gen.integers(2, 100, (len(rows), s)) * mask + (1 - mask)  # pad id 1 (XLM-R's)
        feeds.append(tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in (ids, mask, types)))

    def once():
        t0 = time.perf_counter()
        with torch.inference_mode():
            for ids, mask, types in feeds:
                out = model(input_ids=ids.to(device), attention_mask=mask.to(device),
                            token_type_ids=types.to(device) if with_types else None).logits
                out.float().cpu()
        if device == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3
    return once


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--gpu-bench", required=True)
    ap.add_argument("--candidates", default="100,1000")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--target", default="cuda")
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--arch", default="bert", choices=["bert", "xlmr"])
    ap.add_argument("--json")
    args = ap.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="kiln_rerank_gpu_"))
    onnx_path, plan = work / "cross.onnx", work / "cross.kiln"
    model = build_and_export(str(onnx_path), args.arch)
    dtype = torch.float16 if args.precision == "fp16" else (
        torch.bfloat16 if args.precision == "bf16" else torch.float32)
    model = model.to(args.device, dtype)
    profile = ",".join(f"{k}={':'.join(map(str, v))}" for k, v in PROFILE.items())
    t0 = time.perf_counter()
    run([args.kiln, "compile", onnx_path, "-o", plan, "--target", args.target, "--precision",
         args.precision, "--profile", profile])
    log(f"compiled {args.target} {args.precision} plan in {time.perf_counter() - t0:.1f} s")
    rows = []
    for n in (int(c) for c in args.candidates.split(",")):
        q, lengths = pair_lengths(n, np.random.default_rng(n))
        queries = np.full(n, q + 2, np.int64)  # [CLS] query [SEP] are segment 0
        lfile = work / f"lengths_{n}.txt"
        lfile.write_text("".join(f"{int(L)} {int(q + 2)}\n" for L in lengths))
        k = json.loads(run([args.gpu_bench, "rerank", plan, "--lengths", lfile, "--runs",
                            args.runs, "--warmup", 1]).strip().splitlines()[-1])
        given = np.arange(n)
        by_len = np.argsort(lengths, kind="stable")
        types = args.arch == "bert"
        padded = torch_pass(model, args.device, lengths, queries, given, 7, types)
        sorted_ = torch_pass(model, args.device, lengths, queries, by_len, 7, types)
        padded(), sorted_()  # warm-up
        tp, ts = [], []
        for _ in range(args.runs):
            tp.append(padded())
            ts.append(sorted_())
        row = dict(candidates=n, tokens=int(lengths.sum()), padded_tokens=int(sum(
            len(given[s:s + BATCH]) * lengths[given[s:s + BATCH]].max()
            for s in range(0, n, BATCH))),
            kiln_packed_ms=k["packed_p50_ms"], kiln_padded_ms=k["padded_p50_ms"],
            packed_batches=k["packed_batches"], batches=k["batches"],
            torch_padded_ms=float(np.median(tp)), torch_sorted_ms=float(np.median(ts)))
        row["packed_vs_padded"] = row["kiln_padded_ms"] / row["kiln_packed_ms"]
        row["packed_vs_torch_sorted"] = row["kiln_packed_ms"] / row["torch_sorted_ms"]
        rows.append(row)
        log(json.dumps(row))
    hdr = (f"{'N':>5} {'tokens':>7} {'padded tok':>10} {'kiln packed':>11} {'kiln padded':>11} "
           f"{'torch padded':>12} {'torch sorted':>12} {'packed gain':>11} {'vs sorted':>9}")
    print(f"re-ranking, MiniLM-L6 {args.arch} cross-encoder, {args.target} {args.precision} "
          f"(ms per N candidates, median of {args.runs})")
    print(hdr)
    for r in rows:
        print(f"{r['candidates']:>5} {r['tokens']:>7} {r['padded_tokens']:>10} "
              f"{r['kiln_packed_ms']:>11.2f} {r['kiln_padded_ms']:>11.2f} "
              f"{r['torch_padded_ms']:>12.2f} {r['torch_sorted_ms']:>12.2f} "
              f"{r['packed_vs_padded']:>10.2f}x {r['packed_vs_torch_sorted']:>8.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(target=args.target, precision=args.precision, arch=args.arch, rows=rows,
                           device=torch.cuda.get_device_name() if args.device == "cuda"
                           else "cpu"), f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
