#!/usr/bin/env python3
"""CUDA plans of every committed fixture against onnxruntime (CPU) on the original model.

For each fixture (models/fixtures/**.onnx) and precision (fp32, fp16, bf16, int8): `kiln compile
--target cuda` at batch 2 x sequence 16, `kiln run PLAN --input ... --output-dir` on the
generator's seeded inputs (trailing padding in the attention mask), onnxruntime on the same
feeds, and per output:
  fp32:       max |kiln - ort| <= 1e-4 (the CPU plans' tolerance: fp32 reordering only);
  fp16, bf16: cosine >= 0.9999 and max |kiln - ort| <= 3e-2 (fp16) / 2e-1 (bf16)
              — 16-bit weights and activations with fp32 statistics; the reference-
              executor test of the precision pass measured ~5e-3 / 3e-2 on these models;
  int8:       cosine >= 0.999 and max |kiln - ort| <= 0.5 — the cpu int8 plans measured
              at worst 0.162 and 0.99940 here (`--target cpu --precisions int8`), and a
              cuda int8 plan adds its fp16 rest; on cuda also against the cpu int8 plan of
              the same model (INT8_VS_CPU: same weights and integer sums, "vs cpu int8" rows).
At fp16/bf16 on cuda the plan's attention runs on the flash kernel; the same model compiled
with --no-flash-attention (the simple kernel) is run too and the two are compared with
the same bounds ("flash vs simple" rows), so a flash-kernel error shows apart from the
precision pass's.
Then files made here from the BERT fixture the way users get them (skipped with the reason
where this onnxruntime lacks the tool): its fp16 export (onnxruntime's converter, f32 I/O
kept: on cuda the plan keeps the file's fp16, its own fp16 mask cast for the attention),
that export weight-only quantized at 4 bits ("q4f16": block_quant_linear on f16
activations) and the float file at 8 bits (block_quant_linear with bits = 8), each at the
plan's default precision against onnxruntime on the same file: the fp16 files with the
fp16 bounds (onnxruntime computes them in fp16 too), the 8-bit one with fp32's.
Prints one line per (fixture, precision) and a summary; writes --json. Exit 1 on a miss.
Runs on the GPU machine from bench/gpu/check.sh (any python3 with numpy, onnx, onnxruntime).
"""

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "models"))

import export_torch  # noqa: E402
import gen_bert  # noqa: E402
import gen_decoder  # noqa: E402
import gen_variants  # noqa: E402
import onnx_reference  # noqa: E402

BOUNDS = {"fp32": (1e-4, None), "fp16": (3e-2, 0.9999), "bf16": (2e-1, 0.9999),
          "int8": (0.5, 0.999)}
# A cuda int8 plan against the cpu int8 plan of the same model: the same quantized weights and
# integer sums, the rest fp16 instead of fp32 (fp16's own bound is 3e-2 against fp32; a row
# whose fp16 input rounds across a quantization step moves one code).
INT8_VS_CPU = (0.2, 0.9995)
BATCH, SEQ = 2, 16
KV_PAST = 5  # the KV-cache decoders (models/fixtures/kv/): cached positions
# Fixture folders a cuda compile refuses by design, naming the node
# (tests/compiler/compile_cuda_test.cc checks each refusal): skipped, with the reason.
REFUSED = {"vision": "no cuda conv kernel yet"}
# The onnxruntime-genai fixtures (models/fixtures/genai/<name>/model.onnx): 2 layers, 2 KV
# heads of 16, vocab 256; their dims have names of their own. A prefill (no past: with one,
# onnxruntime's GroupQueryAttention takes only batch 1 at sequence > 1).
GENAI_LAYERS, GENAI_KV_HEADS, GENAI_HEAD, GENAI_VOCAB = 2, 2, 16, 256


def refused(model):
    """Why a cuda compile of `model` is refused by design, or None."""
    return REFUSED.get(folder_of(model))


def genai_feeds(seed):
    rng = np.random.default_rng(seed)
    feeds = {"input_ids": rng.integers(0, GENAI_VOCAB, (BATCH, SEQ)).astype(np.int64),
             "attention_mask": np.ones((BATCH, SEQ), np.int64)}
    for layer in range(GENAI_LAYERS):
        for kind in ("key", "value"):
            feeds[f"past_key_values.{layer}.{kind}"] = rng.standard_normal(
                (BATCH, GENAI_KV_HEADS, 0, GENAI_HEAD)).astype(np.float32)
    return feeds


def folder_of(model):
    """The fixture's folder under models/fixtures ("" for the top level)."""
    parts = model.relative_to(ROOT / "models" / "fixtures").parts
    return parts[0] if len(parts) > 1 else ""


def feeds_for(model):
    folder = folder_of(model)
    if folder == "variants":
        v = next(v for v in gen_variants.VARIANTS
                 if pathlib.Path(gen_variants.fixture_path(v)).name == model.name)
        return gen_variants.random_inputs(v, "tiny", BATCH, SEQ, 0)
    if folder in ("torch", "kv"):
        return export_torch.random_inputs(export_torch.parse_fixture_name(model.name)[0],
                                          BATCH, SEQ, 0,
                                          **({"past": KV_PAST} if folder == "kv" else {}))
    if folder == "genai":
        return genai_feeds(0)
    if folder == "decoder":
        return gen_decoder.random_inputs(gen_decoder.TINY, BATCH, SEQ, 0, padding="right")
    return gen_bert.random_inputs(gen_bert.SIZES["tiny"], BATCH, SEQ, 0)


def run_kiln(kiln, plan, feeds, work):
    args = [kiln, "run", str(plan), "--quiet", "--output-dir", str(work / "out")]
    for name, value in feeds.items():
        path = work / f"{name}.npy"
        np.save(path, value)
        args += ["--input", f"{name}={path}"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"kiln run: {proc.stderr.strip()}")
    return work / "out"


def compare(out_a, out_b, names, max_abs, min_cos):
    """Worst max |a - b| and cosine over the outputs, each output read from two folders
    (out_b may be a dict of arrays)."""
    worst_abs, worst_cos = 0.0, 1.0
    for name in names:
        got = np.load(out_a / f"{name}.npy").astype(np.float64)
        ref = (out_b[name] if isinstance(out_b, dict) else np.load(out_b / f"{name}.npy"))
        ref = ref.astype(np.float64)
        worst_abs = max(worst_abs, float(np.max(np.abs(got - ref))))
        denom = np.linalg.norm(got) * np.linalg.norm(ref)
        if denom > 0:
            worst_cos = min(worst_cos, float(np.sum(got * ref) / denom))
    ok = worst_abs <= max_abs and (min_cos is None or worst_cos >= min_cos)
    return worst_abs, worst_cos, ok


def print_row(row, label):
    """One result line: ok/MISS, the label, the worst differences or the error."""
    detail = (f"max |diff| {row['max_abs']:.3g}, cosine {row['min_cosine']:.7f}"
              if "max_abs" in row else row["error"])
    if "vs_cpu_int8_max_abs" in row:
        detail += (f"; vs cpu int8 {row['vs_cpu_int8_max_abs']:.3g}, "
                   f"{row['vs_cpu_int8_min_cosine']:.7f}")
    if "flash_vs_simple_max_abs" in row:
        detail += (f"; flash vs simple {row['flash_vs_simple_max_abs']:.3g}, "
                   f"{row['flash_vs_simple_min_cosine']:.7f}")
    print(f"{'ok  ' if row['ok'] else 'MISS'} {label:55s} {detail}", flush=True)


def derived_models(work):
    """(label, path, bounds) of the files made from the BERT fixture, or (label, None, why)."""
    import onnx

    source = ROOT / "models" / "fixtures" / "bert_tiny_opset17_none.onnx"
    out = []
    try:
        from onnxruntime.transformers.float16 import convert_float_to_float16
        fp16 = work / "fp16.onnx"
        onnx.save(convert_float_to_float16(onnx.load(str(source)), keep_io_types=True), str(fp16))
        out.append(("derived fp16 export", fp16, BOUNDS["fp16"]))
    except Exception as e:  # noqa: BLE001  (an older onnxruntime: say so, go on)
        return [("derived fp16 export", None, f"onnxruntime's fp16 converter: {e}")]
    try:
        import logging
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
        logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(
            logging.WARNING)
        for label, src, bits, bounds in (("derived q4f16", fp16, 4, BOUNDS["fp16"]),
                                         ("derived 8-bit MatMulNBits", source, 8,
                                          BOUNDS["fp32"])):
            q = MatMulNBitsQuantizer(onnx.load(str(src)), bits=bits, block_size=32,
                                     is_symmetric=False)
            q.process()
            path = work / f"{label.split()[-1]}.onnx"
            onnx.save(q.model.model, str(path))
            out.append((label, path, bounds))
    except Exception as e:  # noqa: BLE001
        out.append(("derived MatMulNBits files", None, f"onnxruntime's quantizer: {e}"))
    return out


def check_derived(args, rows):
    """The derived files' rows (appended to rows); the number of misses."""
    misses = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        feeds = gen_bert.random_inputs(gen_bert.SIZES["tiny"], BATCH, SEQ, 0)
        for label, path, bounds in derived_models(work):
            if path is None:
                print(f"skip {label}: {bounds}", flush=True)
                continue
            row = {"model": label, "precision": "default"}
            sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            names = [o.name for o in sess.get_outputs()]
            want = dict(zip(names, sess.run(None, feeds)))
            plan = work / f"{path.stem}.kiln"
            c = subprocess.run([args.kiln, "compile", str(path), "--quiet", "--target",
                                args.target, "--shape", f"batch={BATCH},sequence={SEQ}", "-o",
                                str(plan)], capture_output=True, text=True, timeout=300)
            try:
                if c.returncode != 0:
                    raise RuntimeError(f"kiln compile: {c.stderr.strip()}")
                run_work = work / path.stem
                run_work.mkdir()
                out = run_kiln(args.kiln, plan, feeds, run_work)
                worst_abs, worst_cos, ok = compare(out, want, names, *bounds)
                row.update(max_abs=worst_abs, min_cosine=worst_cos, ok=ok)
            except RuntimeError as e:
                row.update(error=str(e), ok=False)
            misses += not row["ok"]
            rows.append(row)
            print_row(row, label)
    return misses


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--json", default=None)
    ap.add_argument("--target", default="cuda",
                    help="cuda (default); cpu checks this script itself on any machine")
    ap.add_argument("--precisions", default="fp32,fp16,bf16,int8")
    args = ap.parse_args()
    precisions = args.precisions.split(",")
    models = sorted((ROOT / "models" / "fixtures").rglob("*.onnx"))
    rows, misses = [], 0
    for model in models:
        if refused(model):
            print(f"skip {model.relative_to(ROOT / 'models' / 'fixtures')}: {refused(model)}",
                  flush=True)
            continue
        feeds = feeds_for(model)
        shape = f"batch={BATCH},sequence={SEQ}"
        if folder_of(model) == "kv":
            shape += f",past_sequence={KV_PAST},total_sequence={KV_PAST + SEQ}"
        if folder_of(model) == "genai":
            shape = (f"batch_size={BATCH},sequence_length={SEQ},past_sequence_length=0,"
                     f"total_sequence_length={SEQ},kv_cache_dim={GENAI_HEAD}")
        with tempfile.TemporaryDirectory() as tmp:
            sess = ort.InferenceSession(str(onnx_reference.accuracy_level_zero(model, tmp)),
                                        providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        want = dict(zip(names, sess.run(None, feeds)))
        for precision in precisions:
            max_abs, min_cos = BOUNDS[precision]
            label = f"{model.relative_to(ROOT / 'models' / 'fixtures')} {precision}"
            row = {"model": str(model.relative_to(ROOT)), "precision": precision}
            with tempfile.TemporaryDirectory() as tmp:
                work = pathlib.Path(tmp)
                plan = work / "p.kiln"
                base = [args.kiln, "compile", str(model), "--quiet", "--target", args.target,
                        "--precision", precision, "--shape", shape]
                c = subprocess.run(base + ["-o", str(plan)], capture_output=True, text=True,
                                   timeout=300)
                try:
                    if c.returncode != 0:
                        raise RuntimeError(f"kiln compile: {c.stderr.strip()}")
                    out = run_kiln(args.kiln, plan, feeds, work)
                    worst_abs, worst_cos, ok = compare(out, want, names, max_abs, min_cos)
                    row.update(max_abs=worst_abs, min_cosine=worst_cos, ok=ok)
                    if args.target == "cuda" and precision == "int8":
                        cpu_plan, cpu_work = work / "cpu.kiln", work / "cpu"
                        cpu_work.mkdir()
                        cpu = [a if a != "cuda" else "cpu" for a in base]
                        c = subprocess.run(cpu + ["-o", str(cpu_plan), "--accept", "none"],
                                           capture_output=True, text=True, timeout=300)
                        if c.returncode != 0:
                            raise RuntimeError(f"kiln compile --target cpu: {c.stderr.strip()}")
                        ca, cc, cok = compare(out, run_kiln(args.kiln, cpu_plan, feeds, cpu_work),
                                              names, *INT8_VS_CPU)
                        row.update(vs_cpu_int8_max_abs=ca, vs_cpu_int8_min_cosine=cc,
                                   ok=row["ok"] and cok)
                    if args.target == "cuda" and precision != "fp32":
                        simple_plan, simple_work = work / "simple.kiln", work / "simple"
                        simple_work.mkdir()
                        c = subprocess.run(base + ["-o", str(simple_plan), "--no-flash-attention"],
                                           capture_output=True, text=True, timeout=300)
                        if c.returncode != 0:
                            raise RuntimeError(f"kiln compile --no-flash-attention: {c.stderr.strip()}")
                        simple = run_kiln(args.kiln, simple_plan, feeds, simple_work)
                        fa, fc, fok = compare(out, simple, names, max_abs, min_cos)
                        row.update(flash_vs_simple_max_abs=fa, flash_vs_simple_min_cosine=fc,
                                   ok=ok and fok)
                except RuntimeError as e:
                    row.update(error=str(e), ok=False)
            misses += not row["ok"]
            rows.append(row)
            print_row(row, label)
    misses += check_derived(args, rows)
    summary = {"checked": len(rows), "missed": misses, "rows": rows}
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(summary, indent=1))
    print(f"e2e: {len(rows) - misses} of {len(rows)} (fixture, precision) pairs within bounds")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
