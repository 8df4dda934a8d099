#!/usr/bin/env python3
"""GPU benchmark: kiln's CUDA plans against PyTorch eager and torch.compile on the same models.

Runs on the GPU machine (bench/gpu/check.sh): builds MiniLM-L6 (384 hidden, 6 layers, 12
heads, 1536 FFN) and BERT-base (768, 12, 12, 3072) as transformers BertModel from config
with seeded random weights (no hub download), exports each with torch.onnx (TorchScript
exporter, opset 17, fp32, batch/sequence dynamic), compiles it with `kiln compile --target
cuda --precision fp16`, and measures on the same shapes:
  - kiln: kiln_gpu_bench (inputs and outputs in device memory, CUDA events around Run —
    copies excluded — and the same with host memory, copies included);
  - PyTorch eager fp16 and torch.compile(mode="max-autotune") fp16 (CUDA graphs), inputs on
    the device, CUDA events, copies excluded;
medians of --runs after --warmup; on every shape the model's `--precision int8` cuda plan
too (int8 GEMMs on cuBLASLt, the rest fp16: "int8 / fp16 plan"); for the shapes in
SIMPLE_COMPARE the same plan compiled
with --no-flash-attention (simple attention kernel) too. Also: kiln's fp16 output against torch fp32 on the device
(cosine on the real tokens), launches per encoder layer from the plan, the 9-bucket MiniLM
plan's load + Create time, and the roofline references from `kiln_gpu_bench kernels` (D2D
copy bandwidth, fp16 SkipLayerNorm against it, dense fp16 GEMM rate).
onnxruntime's CUDA provider is not measured: the machine's onnxruntime wheel is CPU-only.
Writes --json and prints a table. Env KILN_GPU_QUICK=1 skips torch.compile.
"""

import argparse
import copy
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import transformers

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from gpu_timing import time_cuda  # noqa: E402

MODELS = {
    "minilm": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                   intermediate_size=1536),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072),
}
# (model, batch, sequence, compare with torch.compile)
CONFIGS = [("minilm", 1, 128, True), ("minilm", 32, 128, False), ("minilm", 32, 256, False),
           ("base", 1, 128, False), ("base", 32, 128, True)]
# Shapes also run on a plan compiled with --no-flash-attention (the simple attention kernel):
# the fused kernel's end-to-end effect (issue 10).
SIMPLE_COMPARE = {("base", 32, 128), ("minilm", 32, 256)}


def log(msg):
    print(f"[torch_bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def build(name):
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=30522, max_position_embeddings=512,
                                  **MODELS[name])
    return transformers.BertModel(cfg).eval()


def inputs(batch, seq, device, pad=False):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 30522, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    if pad:
        for b in range(batch):
            mask[b, seq - (b * 7) % (seq // 2):] = 0
    types = torch.zeros(batch, seq, dtype=torch.int64)
    return ids.to(device), mask.to(device), types.to(device)


def export(model, path):
    ids, mask, types = inputs(2, 16, "cpu")
    dyn = {n: {0: "batch", 1: "sequence"} for n in ("input_ids", "attention_mask", "token_type_ids")}
    dyn["last_hidden_state"] = {0: "batch", 1: "sequence"}
    dyn["pooler_output"] = {0: "batch"}
    kwargs = dict(input_names=["input_ids", "attention_mask", "token_type_ids"],
                  output_names=["last_hidden_state", "pooler_output"], dynamic_axes=dyn,
                  opset_version=17)
    try:
        torch.onnx.export(model, (ids, mask, types), path, dynamo=False, **kwargs)
    except TypeError:  # older torch without the dynamo argument
        torch.onnx.export(model, (ids, mask, types), path, **kwargs)



def run(cmd, timeout=600):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))}: {proc.stderr.strip()[-2000:]}")
    return proc.stdout


def layer_launches(kiln, plan):
    """Steps (and kernel launches: erf-GELU and tanh Linears add one) of encoder layer 0."""
    info = json.loads(run([kiln, "inspect", plan, "--json", "--full"]))
    steps = launches = 0
    for s in info["buckets"][0]["step_list"]:
        prov = s.get("provenance", [])
        if prov and all("layer.0/" in p or "layer.0." in p for p in prov):
            steps += 1
            launches += 1
            params = dict(p.split("=", 1) for p in s.get("params", []) if "=" in p)
            if s["kernel"] == "linear" and params.get("activation") in ("gelu", "tanh"):
                launches += 1
    return steps, launches


def encoder_flops(name, batch, seq):
    m = MODELS[name]
    h, f, layers = m["hidden_size"], m["intermediate_size"], m["num_hidden_layers"]
    t = batch * seq
    return layers * (2 * t * (4 * h * h + 2 * h * f) + 4 * batch * seq * seq * h)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--gpu-bench", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args()
    quick = os.environ.get("KILN_GPU_QUICK") == "1"
    results = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "transformers": transformers.__version__, "rows": [], "notes": []}
    work = pathlib.Path(tempfile.mkdtemp(prefix="kiln-gpu-"))
    kernels = json.loads(run([args.gpu_bench, "kernels", "--rows", "8192", "--hidden", "768"]))
    results["kernels"] = kernels
    log(f"kernels: {kernels}")
    for name in MODELS:
        model = build(name)
        onnx_path = work / f"{name}.onnx"
        log(f"exporting {name}")
        export(model, onnx_path)
        plan = work / f"{name}.kiln"
        shapes = sorted({(b, s) for (m, b, s, _) in CONFIGS if m == name})
        prof = (f"batch={':'.join(str(b) for b in sorted({b for b, _ in shapes}))},"
                f"sequence={':'.join(str(s) for s in sorted({s for _, s in shapes}))}")
        t0 = time.time()
        compile_log = subprocess.run([args.kiln, "compile", str(onnx_path), "-o", str(plan),
                                      "--target", "cuda", "--precision", "fp16", "--profile",
                                      prof, "--verbose"], capture_output=True, text=True)
        if compile_log.returncode != 0:
            raise RuntimeError(compile_log.stderr)
        fused = [ln for ln in compile_log.stderr.splitlines() if "fused:" in ln]
        results["notes"].append(f"{name}: compile {time.time() - t0:.1f} s; {fused[:1]}")
        simple_plan = None
        if any(m == name for (m, _, _) in SIMPLE_COMPARE):
            simple_plan = work / f"{name}_simple.kiln"
            run([args.kiln, "compile", str(onnx_path), "-o", str(simple_plan), "--target",
                 "cuda", "--precision", "fp16", "--profile", prof, "--quiet",
                 "--no-flash-attention"])
        # The int8 plan of the same shapes (int8 GEMMs on cuBLASLt, the rest fp16).
        int8_plan = work / f"{name}_int8.kiln"
        run([args.kiln, "compile", str(onnx_path), "-o", str(int8_plan), "--target", "cuda",
             "--precision", "int8", "--profile", prof, "--quiet"])
        steps, launches = layer_launches(args.kiln, plan)
        results[f"{name}_layer_steps"], results[f"{name}_layer_launches"] = steps, launches
        m16 = copy.deepcopy(model).half().cuda()
        for (mname, batch, seq, with_compile) in CONFIGS:
            if mname != name:
                continue
            row = {"model": name, "batch": batch, "sequence": seq}
            kb = json.loads(run([args.gpu_bench, "plan", str(plan), "--shape",
                                 f"batch={batch},sequence={seq}", "--runs", str(args.runs),
                                 "--warmup", str(args.warmup)]))
            row["kiln_ms"] = kb["device_io"]["p50_ms"]
            row["kiln_host_io_ms"] = kb["host_io"]["p50_ms"]
            ki = json.loads(run([args.gpu_bench, "plan", str(int8_plan), "--shape",
                                 f"batch={batch},sequence={seq}", "--runs", str(args.runs),
                                 "--warmup", str(args.warmup)]))
            row["kiln_int8_ms"] = ki["device_io"]["p50_ms"]
            if (name, batch, seq) in SIMPLE_COMPARE:
                ks = json.loads(run([args.gpu_bench, "plan", str(simple_plan), "--shape",
                                     f"batch={batch},sequence={seq}", "--runs", str(args.runs),
                                     "--warmup", str(args.warmup)]))
                row["kiln_simple_attention_ms"] = ks["device_io"]["p50_ms"]
                for key, res in (("flash", kb), ("simple", ks)):
                    row[f"{key}_attention_share"] = (res["traced_attention_ms"] /
                                                     max(res["traced_steps_ms"], 1e-9))
            ids, mask, types = inputs(batch, seq, "cuda")
            row["eager_ms"] = time_cuda(lambda: m16(ids, attention_mask=mask,
                                                    token_type_ids=types),
                                        args.warmup, args.runs)
            if with_compile and not quick:
                log(f"torch.compile max-autotune {name} b{batch} s{seq}")
                c = torch.compile(m16, mode="max-autotune")
                t0 = time.time()
                with torch.inference_mode():
                    c(ids, attention_mask=mask, token_type_ids=types)
                row["compile_s"] = time.time() - t0
                row["compiled_ms"] = time_cuda(lambda: c(ids, attention_mask=mask,
                                                         token_type_ids=types),
                                               args.warmup, args.runs)
            row["kiln_tflops"] = encoder_flops(name, batch, seq) / (row["kiln_ms"] * 1e-3) / 1e12
            results["rows"].append(row)
            log(f"{row}")
        # Numbers: kiln fp16 against torch fp32 on the device, padded batch, real tokens.
        ids, mask, types = inputs(8, 128, "cpu", pad=True)
        with torch.inference_mode():
            ref = model.cuda()(ids.cuda(), attention_mask=mask.cuda(),
                               token_type_ids=types.cuda()).last_hidden_state.cpu()
        chk = work / f"{name}_check.kiln"
        run([args.kiln, "compile", str(onnx_path), "-o", str(chk), "--target", "cuda",
             "--precision", "fp16", "--shape", "batch=8,sequence=128", "--quiet"])
        for n, t in (("input_ids", ids), ("attention_mask", mask), ("token_type_ids", types)):
            np.save(work / f"{n}.npy", t.numpy())
        out = work / f"{name}_out"
        run([args.kiln, "run", str(chk), "--quiet", "--output-dir", str(out)] +
            [a for n in ("input_ids", "attention_mask", "token_type_ids")
             for a in ("--input", f"{n}={work / (n + '.npy')}")])
        got = np.load(out / "last_hidden_state.npy").astype(np.float64)
        keep = mask.numpy().astype(bool)
        g, r = got[keep], ref.numpy().astype(np.float64)[keep]
        cos = np.sum(g * r, -1) / (np.linalg.norm(g, axis=-1) * np.linalg.norm(r, axis=-1))
        results[f"{name}_fp16_vs_torch_fp32"] = {"min_token_cosine": float(cos.min()),
                                                 "max_abs": float(np.max(np.abs(g - r)))}
        del m16, model
        torch.cuda.empty_cache()
    # Create time of a 9-bucket MiniLM plan (upload + graph capture of every bucket).
    nine = work / "minilm9.kiln"
    run([args.kiln, "compile", str(work / "minilm.onnx"), "-o", str(nine), "--target", "cuda",
         "--precision", "fp16", "--profile", "batch=1:8:32,sequence=32:128:512", "--quiet"])
    results["create_9_buckets"] = json.loads(run([args.gpu_bench, "create", str(nine)]))
    pathlib.Path(args.json).write_text(json.dumps(results, indent=1))
    log(f"results in {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
