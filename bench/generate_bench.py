#!/usr/bin/env python3
"""KV-cached generation on the CPU: `kiln generate` (prefill + decode programs, the cache
appended in place) vs onnxruntime looping the same past-KV export with present fed back as
past (what a caller-owned cache costs: every step reads the past in and writes a new
present out), on a Qwen2-shaped decoder exported by torch.onnx (TorchScript, the model of
bench/kv_decode_bench.py), same prompt, same run, greedy.

What it measures, per (batch, prompt length, new tokens): TTFT (the prefill and the first
token's argmax; kiln's from `kiln generate --json --warmup 1`, after loading the plan and
one untimed two-token generation; onnxruntime's after the same warm-up) and decode
tokens/s (all sequences' tokens over the decode steps' wall time), each the median of
--repeats runs, the ratio to onnxruntime (TTFT: < 1 kiln faster; tokens/s: > 1 kiln
faster), and the floor of a decode step (every weight and the K/V of the sequence's mean
length read once at --bandwidth GB/s: a decode step is bound by memory) as a tokens/s
roof. Both sides must generate the same tokens (checked; a mismatch is reported in the
row).
Limits: random weights (seeded); timings mean something on an idle machine only.

Usage (the torch venv: transformers, torch, onnx, onnxruntime):
  /opt/torchenv/bin/python bench/generate_bench.py --layers 4 --cases 1x16x64,1x128x64 \
      --context 256 --threads 2 [--kiln build/kiln]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import benchlib  # noqa: E402
import export_torch  # noqa: E402
import kv_decode_bench  # noqa: E402


def ort_generate(sess, args, prompts, new_tokens):
    """Greedy generation: prefill with an empty past, then present fed back. Right-padded
    batched prompts (mask 0 on the padding, positions 0..), each sequence decoding at its
    own position, as kiln's session does. Returns (tokens per sequence, ttft s, decode s)."""
    head_dim = args.hidden // args.heads
    past_names = export_torch.kv_names("past_key_values", args.layers)
    out_names = [o.name for o in sess.get_outputs()]
    b = len(prompts)
    lens = np.array([len(p) for p in prompts])
    s = int(lens.max())
    ids = np.zeros((b, s), np.int64)
    mask = np.zeros((b, s), np.int64)
    for i, p in enumerate(prompts):
        ids[i, :len(p)] = p
        mask[i, :len(p)] = 1
    feeds = {"input_ids": ids, "attention_mask": mask,
             "position_ids": np.tile(np.arange(s, dtype=np.int64), (b, 1))}
    feeds.update({n: np.zeros((b, args.kv_heads, 0, head_dim), np.float32) for n in past_names})
    t0 = time.perf_counter()
    out = dict(zip(out_names, sess.run(out_names, feeds)))
    nxt = np.array([int(np.argmax(out["logits"][i, lens[i] - 1])) for i in range(b)])
    ttft = time.perf_counter() - t0
    tokens = [[int(t)] for t in nxt]
    pos = lens.copy()
    t1 = time.perf_counter()
    for _ in range(new_tokens - 1):
        mask = np.concatenate([mask, np.ones((b, 1), np.int64)], axis=1)
        feeds = {"input_ids": nxt[:, None].astype(np.int64), "attention_mask": mask,
                 "position_ids": pos[:, None].astype(np.int64)}
        feeds.update({n: out[n.replace("past_key_values.", "present.")] for n in past_names})
        out = dict(zip(out_names, sess.run(out_names, feeds)))
        nxt = np.argmax(out["logits"][:, -1], axis=-1)
        for i in range(b):
            tokens[i].append(int(nxt[i]))
        pos += 1
    return tokens, ttft, time.perf_counter() - t1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    kv_decode_bench.add_model_args(ap)
    ap.add_argument("--cases", default="1x16x64,1x128x64",
                    help="BATCHxPROMPTxNEW,... (prompts of that length, NEW tokens each)")
    ap.add_argument("--context", default="256", help="--decode-context capacities")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--bandwidth", type=float, default=20.0,
                    help="memory read bandwidth for the floor, GB/s")
    ap.add_argument("--kiln", default=os.path.join(benchlib.ROOT, "build", "kiln"))
    ap.add_argument("--workdir", help="where the model and plans go (default: a temp dir)")
    args = ap.parse_args(argv)
    work = args.workdir or tempfile.mkdtemp(prefix="kiln_generate_bench_")
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "qwen2_kv.onnx")
    if not os.path.exists(model):
        kv_decode_bench.export(args, model)
    import onnx

    weight_bytes = sum(t.ByteSize() for t in onnx.load(model).graph.initializer)
    cases = [tuple(int(v) for v in c.split("x")) for c in args.cases.split(",") if c]
    batches = sorted({c[0] for c in cases})
    prompts = sorted({c[1] for c in cases})
    plan = os.path.join(work, "qwen2_kv.kiln")
    t0 = time.perf_counter()
    subprocess.run([args.kiln, "compile", model, "-o", plan, "--quiet", "--profile",
                    f"batch={':'.join(map(str, batches))},sequence={':'.join(map(str, prompts))}",
                    "--decode-context", args.context], check=True)
    compile_s = time.perf_counter() - t0
    sess = benchlib.ort_session(model, args.threads)
    head_dim = args.hidden // args.heads
    print(f"qwen2-shaped KV decoder: layers {args.layers}, hidden {args.hidden}, heads "
          f"{args.heads}/{args.kv_heads}, ffn {args.ffn}, vocab {args.vocab}, weights "
          f"{weight_bytes / 2**20:.1f} MiB; threads {args.threads}; --decode-context "
          f"{args.context} (compile {compile_s:.1f} s); medians of {args.repeats}")
    print("| batch x prompt, new | kiln TTFT ms | ort TTFT ms | kiln/ort | kiln tok/s | "
          "ort tok/s | kiln/ort | floor tok/s | kiln cache MiB | same tokens |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    rng = np.random.default_rng(0)
    for b, p, new in cases:
        prompt_ids = [[int(t) for t in rng.integers(0, args.vocab, p)] for _ in range(b)]
        k_ttft, k_tps, k_out = [], [], None
        cmd = [args.kiln, "generate", plan, "--json", "--threads", str(args.threads),
               "--max-new-tokens", str(new), "--warmup", "1"]
        for ids in prompt_ids:
            cmd += ["--prompt-ids", ",".join(map(str, ids))]
        for _ in range(args.repeats):
            k_out = json.loads(subprocess.run(cmd, capture_output=True, text=True,
                                              check=True).stdout)
            k_ttft.append(k_out["ttft_ms"])
            k_tps.append(k_out["decode_tokens_per_s"])
        o_ttft, o_tps, o_tokens = [], [], None
        ort_generate(sess, args, prompt_ids, 2)  # warm-up, as kiln's --warmup 1
        for _ in range(args.repeats):
            o_tokens, ttft, dec = ort_generate(sess, args, prompt_ids, new)
            o_ttft.append(ttft * 1e3)
            o_tps.append(b * (new - 1) / dec)
        k_tokens = k_out["tokens"] if b > 1 else [k_out["tokens"]]
        kt, ot = statistics.median(k_ttft), statistics.median(o_ttft)
        ks, os_ = statistics.median(k_tps), statistics.median(o_tps)
        mean_len = p + new / 2
        step_bytes = weight_bytes + 2 * args.layers * b * args.kv_heads * mean_len * head_dim * 4
        floor_tps = b / (step_bytes / (args.bandwidth * 1e9))
        same = "yes" if k_tokens == o_tokens else "NO"
        print(f"| {b} x {p}, {new} | {kt:.1f} | {ot:.1f} | {kt / ot:.2f} | {ks:.1f} | "
              f"{os_:.1f} | {ks / os_:.2f} | {floor_tps:.1f} | "
              f"{k_out['cache_bytes'] / 2**20:.2f} | {same} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
