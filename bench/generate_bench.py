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
faster), kiln without the cache (batch-1 cases: every token a prefill of the whole
prefix through kiln.Generator, over --nocache-tokens tokens) and the floor of a decode step
(every weight and the K/V of the sequence's mean length read once at the machine's read
bandwidth, measured in the same run by kiln_kernels_bench's BM_DramRead at the same thread
count unless --bandwidth is given: a decode step is bound by memory) as a tokens/s roof.
Both sides must generate the same tokens (checked; a mismatch is reported in the row).
--onnx takes an existing KV export instead (e.g. models/fixtures/kv/llama_kv_*.onnx);
--arch gpt2-small exports a GPT-2-small-shaped GPT2LMHeadModel instead of the Qwen2.
onnxruntime runs twice: with numpy I/O and with IO binding (present OrtValues bound as the
next past without a numpy round trip); kiln's decode ratio is against the faster.
Limits: random weights (seeded); timings mean something on an idle machine only.

Usage (the torch venv: transformers, torch, onnx, onnxruntime):
  /opt/torchenv/bin/python bench/generate_bench.py --layers 24 --cases 1x128x128,8x128x128 \
      --context 1024 --threads 2 [--onnx FILE.onnx] [--kiln build/kiln]
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


def export_gpt2_small(path):
    """A GPT2LMHeadModel of GPT-2-small's shape (12 layers, 768 wide, 12 heads, vocab
    50257, 1024 positions; seeded random weights, tied embedding) in the KV-cache form."""
    import torch
    import transformers as tf

    torch.manual_seed(0)
    config = tf.GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=50257,
                           n_positions=1024, use_cache=True, attn_implementation="eager")
    model = tf.GPT2LMHeadModel(config).eval()
    wrapper = export_torch.make_kv_wrapper(model, "gpt2_kv")
    past_names = export_torch.kv_names("past_key_values", 12)
    present_names = export_torch.kv_names("present", 12)
    names = ["input_ids", "attention_mask", "position_ids", *past_names]
    feeds = [torch.randint(0, 50257, (1, 4)), torch.ones((1, 7), dtype=torch.int64),
             torch.arange(3, 7)[None, :]] + [torch.randn(1, 12, 3, 64) for _ in past_names]
    dynamic = kv_decode_bench.kv_dynamic_axes(past_names, present_names)
    with torch.no_grad():
        torch.onnx.export(wrapper, tuple(feeds), path, dynamo=False,
                          opset_version=export_torch.TORCHSCRIPT_OPSET, input_names=names,
                          output_names=["logits", *present_names], dynamic_axes=dynamic,
                          do_constant_folding=True)


def measure_bandwidth(threads):
    """The DRAM read bandwidth (GB/s) at `threads` threads: BM_DramRead of
    kiln_kernels_bench (sums a 256 MiB buffer in per-thread ranges), the best of 3."""
    binary = os.path.join(benchlib.ROOT, "build", "bench", "kiln_kernels_bench")
    out = subprocess.run([binary, "--benchmark_filter=BM_DramRead", "--benchmark_format=json",
                          "--benchmark_repetitions=3"], capture_output=True, text=True,
                         check=True, env=dict(os.environ, KILN_BENCH_THREADS=str(threads)))
    runs = [b["bytes_per_second"] for b in json.loads(out.stdout)["benchmarks"]
            if b.get("run_type") == "iteration"]
    return max(runs) / 1e9


def kv_geometry(model):
    """(layers, kv heads, head dim, vocab) from a KV export's past inputs and logits."""
    import onnx

    g = onnx.load(model, load_external_data=False).graph
    pasts = [i for i in g.input if i.name.startswith("past_key_values.")]
    dims = [d.dim_value for d in pasts[0].type.tensor_type.shape.dim]
    logits = next(o for o in g.output if o.name == "logits")
    vocab = logits.type.tensor_type.shape.dim[2].dim_value
    return len(pasts) // 2, dims[1], dims[3], vocab


def nocache_tps(plan, prompt, tokens, threads):
    """Greedy tokens/s of kiln without the cache: each token a prefill of the whole prefix
    (kiln.Generator.prefill, a fresh sequence every time)."""
    sys.path.insert(0, os.path.join(benchlib.ROOT, "build", "python"))
    import kiln

    gen = kiln.Plan.load(plan).generator(threads=threads)
    prefix = list(prompt)
    gen.prefill([prefix])  # warm-up
    t0 = time.perf_counter()
    for _ in range(tokens):
        prefix.append(int(np.argmax(gen.prefill([prefix])[0])))
    return tokens / (time.perf_counter() - t0)


def pad_prompts(prompts):
    """Right-padded batch of prompts: (batch, lengths, ids [b, s], mask [b, s])."""
    b = len(prompts)
    lens = np.array([len(p) for p in prompts])
    ids = np.zeros((b, int(lens.max())), np.int64)
    mask = np.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, :len(p)] = p
        mask[i, :len(p)] = 1
    return b, lens, ids, mask


def bound_step(sess, feeds, pasts):
    """One onnxruntime run through IO binding: the numpy `feeds` and the OrtValues `pasts`
    bound as they are, every output left on the CPU as onnxruntime allocates it; returns
    {output name: OrtValue} (a present to bind as the next step's past, no numpy copy)."""
    io = sess.io_binding()
    for name, array in feeds.items():
        io.bind_cpu_input(name, array)
    for name, value in pasts.items():
        io.bind_ortvalue_input(name, value)
    for o in sess.get_outputs():
        io.bind_output(o.name, "cpu")
    sess.run_with_iobinding(io)
    return dict(zip([o.name for o in sess.get_outputs()], io.get_outputs()))


def ort_generate_bound(sess, args, prompts, new_tokens):
    """ort_generate through IO binding: each step's present.* OrtValues are bound as the next
    step's past inputs as they are (no numpy round trip), the other outputs allocated by
    onnxruntime; the same tokens. Returns (tokens per sequence, ttft s, decode s)."""
    import onnxruntime as ort

    past_names = export_torch.kv_names("past_key_values", args.layers)
    b, lens, ids, mask = pad_prompts(prompts)
    s = ids.shape[1]

    def step(feeds, pasts):
        return bound_step(sess, feeds, pasts)

    empty = {n: ort.OrtValue.ortvalue_from_numpy(
        np.zeros((b, args.kv_heads, 0, args.head_dim), np.float32)) for n in past_names}
    t0 = time.perf_counter()
    out = step({"input_ids": ids, "attention_mask": mask,
                "position_ids": np.tile(np.arange(s, dtype=np.int64), (b, 1))}, empty)
    logits = out["logits"].numpy()
    nxt = np.array([int(np.argmax(logits[i, lens[i] - 1])) for i in range(b)])
    ttft = time.perf_counter() - t0
    tokens = [[int(t)] for t in nxt]
    pos = lens.copy()
    t1 = time.perf_counter()
    for _ in range(new_tokens - 1):
        mask = np.concatenate([mask, np.ones((b, 1), np.int64)], axis=1)
        out = step({"input_ids": nxt[:, None].astype(np.int64), "attention_mask": mask,
                    "position_ids": pos[:, None].astype(np.int64)},
                   {n: out[n.replace("past_key_values.", "present.")] for n in past_names})
        nxt = np.argmax(out["logits"].numpy()[:, -1], axis=-1)
        for i in range(b):
            tokens[i].append(int(nxt[i]))
        pos += 1
    return tokens, ttft, time.perf_counter() - t1


def ort_generate(sess, args, prompts, new_tokens):
    """Greedy generation: prefill with an empty past, then present fed back. Right-padded
    batched prompts (mask 0 on the padding, positions 0..), each sequence decoding at its
    own position, as kiln's session does. Returns (tokens per sequence, ttft s, decode s)."""
    head_dim = args.head_dim
    past_names = export_torch.kv_names("past_key_values", args.layers)
    out_names = [o.name for o in sess.get_outputs()]
    b, lens, ids, mask = pad_prompts(prompts)
    s = ids.shape[1]
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
    ap.add_argument("--bandwidth", type=float, default=0.0,
                    help="memory read bandwidth for the floor, GB/s (default: measured)")
    ap.add_argument("--nocache-tokens", type=int, default=8,
                    help="tokens for the kiln-without-cache column (0: skip it)")
    ap.add_argument("--prefill-logits", choices=["last", "all"], default="last",
                    help="kiln compile --prefill-logits (all: the LM head over every prompt "
                         "row, as before last-token logits)")
    ap.add_argument("--onnx", help="an existing KV-cache export instead of the Qwen2 one")
    ap.add_argument("--arch", choices=["qwen2", "gpt2-small"], default="qwen2",
                    help="the model to export (gpt2-small ignores the size flags)")
    ap.add_argument("--kiln", default=os.path.join(benchlib.ROOT, "build", "kiln"))
    ap.add_argument("--workdir", help="where the model and plans go (default: a temp dir)")
    args = ap.parse_args(argv)
    work = args.workdir or tempfile.mkdtemp(prefix="kiln_generate_bench_")
    os.makedirs(work, exist_ok=True)
    model = args.onnx or os.path.join(work, f"{args.arch}_kv.onnx")
    if not os.path.exists(model):
        if args.arch == "gpt2-small":
            export_gpt2_small(model)
        else:
            kv_decode_bench.export(args, model)
    import onnx

    args.layers, args.kv_heads, args.head_dim, args.vocab = kv_geometry(model)
    weight_bytes = sum(t.ByteSize() for t in onnx.load(model).graph.initializer)
    if not args.bandwidth:
        args.bandwidth = measure_bandwidth(args.threads)
    cases = [tuple(int(v) for v in c.split("x")) for c in args.cases.split(",") if c]
    batches = sorted({c[0] for c in cases})
    lengths = {c[1] for c in cases}
    if args.nocache_tokens:  # a prefill bucket per prefix of the no-cache column (unpadded)
        lengths |= {c[1] + i for c in cases if c[0] == 1 for i in range(args.nocache_tokens)}
    plan = os.path.join(work, os.path.splitext(os.path.basename(model))[0] +
                        f"_{args.prefill_logits}.kiln")
    t0 = time.perf_counter()
    subprocess.run([args.kiln, "compile", model, "-o", plan, "--quiet", "--profile",
                    f"batch={':'.join(map(str, batches))},"
                    f"sequence={':'.join(map(str, sorted(lengths)))}",
                    "--decode-context", args.context, "--prefill-logits", args.prefill_logits],
                   check=True)
    compile_s = time.perf_counter() - t0
    sess = benchlib.ort_session(model, args.threads)
    head_dim = args.head_dim
    print(f"{os.path.basename(model)}: layers {args.layers}, kv heads {args.kv_heads}, head "
          f"{head_dim}, vocab {args.vocab}, weights {weight_bytes / 2**20:.1f} MiB; threads "
          f"{args.threads}; read bandwidth {args.bandwidth:.1f} GB/s; --decode-context "
          f"{args.context}, --prefill-logits {args.prefill_logits} (compile {compile_s:.1f} s); "
          f"medians of {args.repeats}")
    print("| batch x prompt, new | kiln TTFT ms | ort TTFT ms | kiln/ort | kiln tok/s | "
          "ort tok/s | ort bound tok/s | kiln/best ort | kiln no-cache tok/s | floor tok/s | "
          "kiln/floor | kiln cache MiB | same tokens |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
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
        ort_generate_bound(sess, args, prompt_ids, 2)
        ob_tps, ob_tokens = [], None
        for _ in range(args.repeats):
            ob_tokens, _, dec = ort_generate_bound(sess, args, prompt_ids, new)
            ob_tps.append(b * (new - 1) / dec)
        k_tokens = k_out["tokens"] if b > 1 else [k_out["tokens"]]
        kt, ot = statistics.median(k_ttft), statistics.median(o_ttft)
        ks, os_ = statistics.median(k_tps), statistics.median(o_tps)
        mean_len = p + new / 2
        step_bytes = weight_bytes + 2 * args.layers * b * args.kv_heads * mean_len * head_dim * 4
        floor_tps = b / (step_bytes / (args.bandwidth * 1e9))
        obs = statistics.median(ob_tps)
        same = "yes" if k_tokens == o_tokens == ob_tokens else "NO"
        nc = (f"{nocache_tps(plan, prompt_ids[0], args.nocache_tokens, args.threads):.1f}"
              if b == 1 and args.nocache_tokens else "—")
        print(f"| {b} x {p}, {new} | {kt:.1f} | {ot:.1f} | {kt / ot:.2f} | {ks:.1f} | "
              f"{os_:.1f} | {obs:.1f} | {ks / max(os_, obs):.2f} | {nc} | {floor_tps:.1f} | "
              f"{ks / floor_tps:.2f} | {k_out['cache_bytes'] / 2**20:.2f} | {same} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
