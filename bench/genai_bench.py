#!/usr/bin/env python3
"""onnxruntime-genai LLM files on the CPU: `kiln generate` (the file compiled into a
generation plan: GroupQueryAttention's cache write paged, appended in place) vs
onnxruntime looping the same file with present.* fed back as past_key_values.* through IO
binding (the loop onnxruntime-genai itself runs on the CPU, minus its sampling), greedy,
same prompt, same run.

The model: a Qwen2-shaped decoder from config with seeded random weights (no download),
converted by onnxruntime-genai's model builder at --precision fp32 or int4 (MatMulNBits,
block 32, accuracy_level 4 as the builder writes it for the CPU); --precision int8 is the
fp32 file through onnxruntime's MatMulNBitsQuantizer at 8 bits (block 32, symmetric,
--int8-accuracy-level, default 4 as the int4 file), the LM head included. kiln keeps an int4/int8
file's weights 4/8-bit (kiln.BlockQuantLinear: f32 activations, the weights dequantized in
the GEMM), onnxruntime runs its n-bit kernels (int8 activations at accuracy_level 4).
--kiln-precision int8 / bf16 lowers an fp32 file's GEMMs (the LM head stays fp32).

Per (batch, prompt, new tokens): TTFT (prefill + the first argmax, after one untimed
two-token warm-up on both sides) and decode tokens/s (the decode steps' wall time), medians
of --repeats, the ratios (TTFT < 1: kiln faster; tok/s > 1: kiln faster), and whether both
generated the same tokens (int4: onnxruntime's int8 activations may change a near tie; the
row says so). Limits: random weights; timings mean something on an idle machine only.

Usage (the torch venv with onnxruntime-genai, models/fixtures/genai/README.md):
  /opt/torchenv/bin/python bench/genai_bench.py --precision int4 --layers 24 \\
      --vocab 151936 --cases 1x128x64 --context 256 --threads 2   (Qwen2-0.5B's sizes)
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

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "models"))
import generate_bench  # noqa: E402  (prompt padding, the IO-bound step)
import kv_decode_bench  # noqa: E402  (the size flags)


def quantize_8bit(src, out, accuracy_level):
    """The fp32 file `src` with every MatMul weight 8-bit MatMulNBits, saved as out/model.onnx
    (external data beside it)."""
    import logging

    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(logging.WARNING)
    quantizer = MatMulNBitsQuantizer(onnx.load(src), bits=8, block_size=32, is_symmetric=True,
                                     accuracy_level=accuracy_level)
    quantizer.process()
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "model.onnx")
    onnx.save(quantizer.model.model, path, save_as_external_data=True,
              location="model.onnx.data")
    return path


def build_model(args, work):
    """The builder's model.onnx for a seeded Qwen2 of the given shape (cached in work)."""
    level = f"_acc{args.int8_accuracy_level}" if args.precision == "int8" else ""
    out = os.path.join(work, f"qwen2_{args.precision}{level}")
    path = os.path.join(out, "model.onnx")
    if os.path.exists(path):
        return path
    if args.precision == "int8":
        fp32 = argparse.Namespace(**{**vars(args), "precision": "fp32"})
        return quantize_8bit(build_model(fp32, work), out, args.int8_accuracy_level)
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    src = os.path.join(work, "hf")
    torch.manual_seed(0)
    config = transformers.Qwen2Config(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.ffn,
        num_hidden_layers=args.layers, num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads, max_position_embeddings=args.max_pos,
        tie_word_embeddings=False)
    transformers.Qwen2ForCausalLM(config).eval().save_pretrained(src)
    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(256)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0").save_pretrained(src)
    subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-m", src, "-i",
                    src, "-o", out, "-p", args.precision, "-e", "cpu", "-c",
                    os.path.join(work, "cache")], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return path


def ort_generate(sess, prompts, new_tokens, geometry):
    """Greedy generation through IO binding: right-padded prompts, then one token per step
    with the present OrtValues bound as the next past. Returns (tokens, ttft s, decode s)."""
    import onnxruntime as ort

    layers, kv_heads, head = geometry
    b, lens, ids, mask = generate_bench.pad_prompts(prompts)
    past_names = [f"past_key_values.{i}.{k}" for i in range(layers) for k in ("key", "value")]

    def step(feeds, pasts):
        return generate_bench.bound_step(sess, feeds, pasts)

    empty = {n: ort.OrtValue.ortvalue_from_numpy(np.zeros((b, kv_heads, 0, head), np.float32))
             for n in past_names}
    t0 = time.perf_counter()
    out = step({"input_ids": ids, "attention_mask": mask}, empty)
    logits = out["logits"].numpy()
    nxt = np.array([int(np.argmax(logits[i, lens[i] - 1])) for i in range(b)])
    ttft = time.perf_counter() - t0
    tokens = [[int(t)] for t in nxt]
    # Decode: each row's mask covers its own tokens (the padded prompt slots stay 0), so
    # seqlens_k is each row's length and the new token lands at its own slot.
    mask = np.concatenate([mask, np.zeros((b, new_tokens), np.int64)], axis=1)
    length = lens.copy()
    width = ids.shape[1]
    t1 = time.perf_counter()
    for _ in range(new_tokens - 1):
        width += 1
        for i in range(b):
            mask[i, length[i]] = 1
        length += 1
        out = step({"input_ids": nxt[:, None].astype(np.int64),
                    "attention_mask": np.ascontiguousarray(mask[:, :width])},
                   {n: out[n.replace("past_key_values.", "present.")] for n in past_names})
        nxt = np.argmax(out["logits"].numpy()[:, -1], axis=-1)
        for i in range(b):
            tokens[i].append(int(nxt[i]))
    return tokens, ttft, time.perf_counter() - t1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--precision", choices=["fp32", "int4", "int8"], default="int4")
    ap.add_argument("--int8-accuracy-level", type=int, choices=[0, 1, 2, 3, 4], default=4,
                    help="--precision int8: the MatMulNBits accuracy_level onnxruntime runs "
                         "(4: int8 activations; 0: f32; kiln computes f32 either way)")
    kv_decode_bench.add_model_args(ap)
    ap.add_argument("--kiln-precision", choices=["fp32", "bf16", "int8"], default="fp32",
                    help="kiln compile --precision for kiln's plan (the file stays as built)")
    ap.add_argument("--accept", help="kiln compile --accept (the accuracy gate; random "
                                     "weights can miss the default by a hair)")
    ap.add_argument("--prefill-logits", choices=["last", "all"], default="last",
                    help="kiln compile --prefill-logits (all: the LM head over every prompt "
                         "row, as before last-token logits)")
    ap.add_argument("--cases", default="1x128x64", help="BATCHxPROMPTxNEW,...")
    ap.add_argument("--context", default="256", help="--decode-context capacity")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    ap.add_argument("--workdir", help="where the model and plan go (default: a temp dir)")
    args = ap.parse_args(argv)
    work = args.workdir or tempfile.mkdtemp(prefix="kiln_genai_bench_")
    os.makedirs(work, exist_ok=True)
    model = build_model(args, work)
    head = args.hidden // args.heads
    geometry = (args.layers, args.kv_heads, head)
    cases = [tuple(int(v) for v in c.split("x")) for c in args.cases.split(",") if c]
    plan = os.path.join(work, f"qwen2_{args.precision}_{args.kiln_precision}_"
                              f"{args.prefill_logits}.kiln")
    batches = sorted({c[0] for c in cases})
    prompts = sorted({c[1] for c in cases})
    t0 = time.perf_counter()
    subprocess.run([args.kiln, "compile", model, "-o", plan, "--quiet", "--profile",
                    f"batch_size={':'.join(map(str, batches))},"
                    f"sequence_length={':'.join(map(str, prompts))}",
                    "--shape", f"kv_cache_dim={head}", "--decode-context", args.context,
                    "--precision", args.kiln_precision, "--prefill-logits", args.prefill_logits,
                    *(["--accept", args.accept] if args.accept else [])],
                   check=True)
    compile_s = time.perf_counter() - t0
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    sess = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    onnx_bytes = sum(os.path.getsize(os.path.join(os.path.dirname(model), f))
                     for f in os.listdir(os.path.dirname(model)) if f.startswith("model.onnx"))
    level = f" accuracy_level {args.int8_accuracy_level}" if args.precision == "int8" else ""
    print(f"qwen2 {args.precision}{level} (kiln plan {args.kiln_precision}): layers {args.layers}, "
          f"hidden {args.hidden}, heads "
          f"{args.heads}/{args.kv_heads}, ffn {args.ffn}, vocab {args.vocab}; "
          f"file {onnx_bytes / 2**20:.0f} MiB, plan {os.path.getsize(plan) / 2**20:.0f} MiB "
          f"(compile {compile_s:.1f} s, --prefill-logits {args.prefill_logits}); threads "
          f"{args.threads}; medians of {args.repeats}")
    print("| batch x prompt, new | kiln TTFT ms | ort TTFT ms | kiln/ort | kiln tok/s | "
          "ort tok/s | kiln/ort | same tokens |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    rng = np.random.default_rng(0)
    for b, p, new in cases:
        prompt_ids = [[int(t) for t in rng.integers(0, args.vocab, p)] for _ in range(b)]
        cmd = [args.kiln, "generate", plan, "--json", "--threads", str(args.threads),
               "--max-new-tokens", str(new), "--warmup", "1", "--greedy"]
        for ids in prompt_ids:
            cmd += ["--prompt-ids", ",".join(map(str, ids))]
        k_ttft, k_tps, k_out = [], [], None
        for _ in range(args.repeats):
            k_out = json.loads(subprocess.run(cmd, capture_output=True, text=True,
                                              check=True).stdout)
            k_ttft.append(k_out["ttft_ms"])
            k_tps.append(k_out["decode_tokens_per_s"])
        ort_generate(sess, prompt_ids, 2, geometry)  # warm-up, as kiln's --warmup 1
        o_ttft, o_tps, o_tokens = [], [], None
        for _ in range(args.repeats):
            o_tokens, ttft, dec = ort_generate(sess, prompt_ids, new, geometry)
            o_ttft.append(ttft * 1e3)
            o_tps.append(b * (new - 1) / dec)
        k_tokens = k_out["tokens"] if b > 1 else [k_out["tokens"]]
        kt, ot = statistics.median(k_ttft), statistics.median(o_ttft)
        ks, os_ = statistics.median(k_tps), statistics.median(o_tps)
        same = "yes" if k_tokens == o_tokens else "NO"
        print(f"| {b} x {p}, {new} | {kt:.1f} | {ot:.1f} | {kt / ot:.2f} | {ks:.1f} | "
              f"{os_:.1f} | {ks / os_:.2f} | {same} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
