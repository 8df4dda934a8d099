#!/usr/bin/env python3
"""GPU generation (docs/generation.md): `kiln generate` on a cuda plan (paged cache in device
memory, split-KV decode attention, one CUDA graph per decode bucket) vs PyTorch greedy
generation of the same weights, and the memory-bandwidth floor of a decode step.

The model: a Qwen2ForCausalLM with Qwen2-0.5B's layers (24 layers, hidden 896, 14/2 heads,
FFN 4864; seeded random weights) and a 32000-token vocabulary (the real 151936 puts the
fp32 export at the 2 GB protobuf limit), exported with torch.onnx in the KV-cache form
(bench/kv_decode_bench.py's exporter) and compiled by `kiln compile --target cuda
--decode-context 256 --profile batch=1:8,sequence=128` at fp32 and at fp16 (the cache
stays f32 in the fp16 plan). Per precision and case (batch x prompt x new tokens):
  kiln          `kiln generate --json --warmup 1`: TTFT (prefill + first token) and decode
                tokens/s (all sequences), host I/O for ids and logits;
  torch eager   transformers' generate (greedy, its dynamic cache) on the same weights at
                the same precision on the GPU: TTFT = generate(1 token), decode tokens/s
                from generate(N) - generate(1);
  torch static  fp16: the same with cache_implementation="static" and the forward under
                torch.compile(mode="reduce-overhead") (skipped with --quick);
  floor         a decode step reads every weight once: tokens/s <= batch x bandwidth /
                weight bytes at that precision, the bandwidth measured here (torch
                device-to-device copy).
Medians of --repeats. The batch-1 tokens of kiln and torch eager are compared: at fp32 they
must agree; at fp16 both round differently, so the count of leading equal tokens is
information.
--target cpu --device cpu --layers 2 runs the harness on the CPU (a check of the script,
not a GPU figure).
Usage (bench/gpu/check.sh): generate_gpu.py --kiln KILN [--json F] [--quick]
"""

import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import time

import numpy as np
import torch
import transformers

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent.parent / "models"))
import kv_decode_bench  # noqa: E402
from gpu_timing import run  # noqa: E402


def log(msg):
    print(f"[generate_gpu {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def hf_model(args, device):
    """The exported model's weights: kv_decode_bench.export builds it after the same seed."""
    torch.manual_seed(0)
    config = transformers.Qwen2Config(
        vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
        num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        intermediate_size=args.ffn, max_position_embeddings=args.max_pos, use_cache=True,
        tie_word_embeddings=False, attn_implementation="eager")
    return transformers.Qwen2ForCausalLM(config).eval().to(device)


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def torch_generate(model, ids, new_tokens, device, static):
    kw = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
              pad_token_id=0)
    if static:
        kw["cache_implementation"] = "static"
    with torch.no_grad():
        sync(device)
        t0 = time.perf_counter()
        out = model.generate(ids, attention_mask=torch.ones_like(ids), **kw)
        sync(device)
    return time.perf_counter() - t0, out[:, ids.shape[1]:].cpu().numpy()


def torch_case(model, prompt, new_tokens, device, static, repeats):
    ids = torch.from_numpy(prompt).to(device)
    torch_generate(model, ids, 2, device, static)  # warm-up (and compile)
    firsts, fulls = [], []
    tokens = None
    for _ in range(repeats):
        firsts.append(torch_generate(model, ids, 1, device, static)[0])
        t, tokens = torch_generate(model, ids, new_tokens, device, static)
        fulls.append(t)
    ttft, full = statistics.median(firsts), statistics.median(fulls)
    tps = prompt.shape[0] * (new_tokens - 1) / max(full - ttft, 1e-9)
    return {"ttft_ms": 1e3 * ttft, "decode_tokens_per_s": tps, "tokens": tokens.tolist()}


def bandwidth(device):
    if device != "cuda":
        return 0.0
    x = torch.empty(256 << 20, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    y.copy_(x)
    times = []
    for _ in range(10):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        y.copy_(x)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return 2 * x.numel() * 4 / min(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--json")
    ap.add_argument("--cases", default="1x128x64,8x128x64", help="batch x prompt x new tokens")
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="skip torch.compile")
    ap.add_argument("--precisions", default="fp32,fp16")
    ap.add_argument("--target", default="cuda")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--workdir")
    kv_decode_bench.add_model_args(ap)
    ap.set_defaults(layers=24, vocab=32000)
    args = ap.parse_args(argv)
    cases = [tuple(int(v) for v in c.split("x")) for c in args.cases.split(",")]
    work = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="kiln_gen_gpu_"))
    work.mkdir(parents=True, exist_ok=True)
    onnx_path = work / "qwen2_kv.onnx"
    log(f"exporting the Qwen2-shaped decoder ({args.layers} layers, vocab {args.vocab})")
    kv_decode_bench.export(args, str(onnx_path))
    batches = sorted({b for b, _, _ in cases})
    prompts = sorted({p for _, p, _ in cases})
    bw = bandwidth(args.device)
    rows = []
    for precision in args.precisions.split(","):
        plan = work / f"qwen2_kv_{precision}.kiln"
        t0 = time.perf_counter()
        run([args.kiln, "compile", str(onnx_path), "-o", str(plan), "--target", args.target,
             "--precision", precision, "--profile",
             f"batch={':'.join(map(str, batches))},sequence={':'.join(map(str, prompts))}",
             "--decode-context", str(args.context)])
        log(f"compiled {precision} in {time.perf_counter() - t0:.1f} s")
        dtype = torch.float16 if precision == "fp16" else torch.float32
        model = hf_model(args, args.device).to(dtype)
        weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        static_model = None
        if not args.quick and args.device == "cuda" and precision == "fp16":
            static_model = hf_model(args, args.device).to(dtype)
            static_model.forward = torch.compile(static_model.forward, mode="reduce-overhead")
        for batch, prompt_len, new_tokens in cases:
            rng = np.random.default_rng(batch * 1000 + prompt_len)
            prompt = rng.integers(1, args.vocab, (batch, prompt_len), dtype=np.int64)
            ids_file = work / f"prompt_{batch}x{prompt_len}.npy"
            np.save(ids_file, prompt)
            ks = [json.loads(run([args.kiln, "generate", str(plan), "--prompt-ids", str(ids_file),
                                  "--max-new-tokens", str(new_tokens), "--json", "--warmup", "1"]))
                  for _ in range(args.repeats)]
            kiln = {"ttft_ms": statistics.median(k["ttft_ms"] for k in ks),
                    "decode_tokens_per_s": statistics.median(k["decode_tokens_per_s"] for k in ks),
                    "cache_bytes": ks[-1]["cache_bytes"]}
            kiln_tokens = ks[-1]["tokens"]
            if kiln_tokens and not isinstance(kiln_tokens[0], list):
                kiln_tokens = [kiln_tokens]
            eager = torch_case(model, prompt, new_tokens, args.device, False, args.repeats)
            row = {"precision": precision, "case": f"{precision} {batch}x{prompt_len}x{new_tokens}",
                   "batch": batch, "kiln": kiln,
                   "torch_eager": {k: v for k, v in eager.items() if k != "tokens"},
                   "weight_bytes": weight_bytes,
                   "floor_tokens_per_s": batch * bw / weight_bytes if bw else 0.0}
            if static_model is not None:
                try:
                    st = torch_case(static_model, prompt, new_tokens, args.device, True,
                                    args.repeats)
                    row["torch_static_compiled"] = {k: v for k, v in st.items() if k != "tokens"}
                except Exception as e:  # noqa: BLE001 - a peer that fails is reported, not fatal
                    row["torch_static_compiled"] = {"error": str(e)[:300]}
            same = 0
            for a, b in zip(kiln_tokens[0], eager["tokens"][0]):
                if a != b:
                    break
                same += 1
            row["leading_tokens_equal"] = f"{same}/{new_tokens}"
            rows.append(row)
            log(f"{row['case']}: kiln ttft {kiln['ttft_ms']:.2f} ms, "
                f"{kiln['decode_tokens_per_s']:.0f} tok/s; torch eager "
                f"{eager['decode_tokens_per_s']:.0f} tok/s; floor {row['floor_tokens_per_s']:.0f}; "
                f"tokens equal {row['leading_tokens_equal']}")
        del model, static_model
    result = {"model": {"layers": args.layers, "hidden": args.hidden, "heads": args.heads,
                        "kv_heads": args.kv_heads, "ffn": args.ffn, "vocab": args.vocab},
              "bandwidth_bytes_per_s": bw, "target": args.target, "device": args.device,
              "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else "",
              "rows": rows}
    text = json.dumps(result, indent=1)
    if args.json:
        pathlib.Path(args.json).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
