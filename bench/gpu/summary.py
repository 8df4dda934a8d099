#!/usr/bin/env python3
"""The short table bench/gpu/check.sh prints last, from the files it wrote to OUT:
cuda_tests.json (GoogleTest), e2e.json (e2e_check.py), attention.json (attn_bench.py),
bench.json (torch_bench.py), rerank_bert.json / rerank_xlmr.json (rerank_gpu.py) and
generate.json (generate_gpu.py).
Each line: what, the measurement, the issue's target, and whether it is met. Missing files
(a stage that failed early) show as 'not measured'."""

import json
import pathlib
import sys


def load(path):
    try:
        return json.loads(pathlib.Path(path).read_text())
    except (OSError, ValueError):
        return None


def main():
    out = pathlib.Path(sys.argv[1])
    lines = []

    def row(what, value, target="", ok=None):
        mark = "" if ok is None else ("met" if ok else "MISSED")
        lines.append(f"{what:44s} {value:>26s}  {target:>18s}  {mark}")

    tests = load(out / "cuda_tests.json")
    if tests:
        failed = tests.get("failures", 0)
        skipped = sum(1 for suite in tests.get("testsuites", []) for t in suite.get("testsuite", [])
                      if t.get("result") == "SKIPPED")
        total = tests.get("tests", 0)
        row("CUDA tests", f"{total - failed - skipped} of {total} pass, {skipped} skipped",
            "all, none skipped", failed == 0 and skipped == 0)
    else:
        row("CUDA tests", "not measured")
    e2e = load(out / "e2e.json")
    if e2e:
        row("fixtures x precisions vs onnxruntime",
            f"{e2e['checked'] - e2e['missed']} of {e2e['checked']} in bounds", "all",
            e2e["missed"] == 0)
    else:
        row("fixtures vs onnxruntime", "not measured")
    att = load(out / "attention.json")
    if not att:
        row("attention vs SDPA", "not measured")
    else:
        sdpa = {(r["attention"], r["mask"], r["kernel"]): r for r in att["sdpa"] if "p50_ms" in r}
        for case in sorted({(r["attention"], r["mask"]) for r in att["kiln"]}):
            ks = [r for r in att["kiln"] if (r["attention"], r["mask"]) == case]
            chosen = next((r for r in ks if r["kernel"] == "flash (chosen)"), None)
            best = min((r for r in ks if r["kernel"].startswith("flash")),
                       key=lambda r: r["p50_ms"], default=None)
            simple = next((r for r in ks if r["kernel"] == "simple"), None)
            if not chosen:
                continue
            peer_kind = "sdpa_auto" if case[1] == "keypad" else "sdpa_flash"
            peer = sdpa.get((case[0], case[1], peer_kind)) or sdpa.get((case[0], case[1], "sdpa_auto"))
            what = f"attn {case[0]} {case[1]}"
            row(f"{what} ms (TFLOP/s)",
                f"{chosen['p50_ms']:.3f} ({chosen['tflops']:.0f})"
                + (f", best {best['launch']}" if best and best is not chosen else "")
                + (f", simple {simple['p50_ms']:.3f}" if simple else ""))
            agree = next((r for r in att.get("agreement", [])
                          if (r["attention"], r["mask"]) == case), None)
            if agree:
                row(f"{what} max |flash - simple|", f"{agree['flash_vs_simple_max_abs']:.2g}",
                    "<= 4e-3", agree["flash_vs_simple_max_abs"] <= 4e-3)
            if peer:
                ratio = peer["p50_ms"] / chosen["p50_ms"]
                want = 1.2 if case[1] == "keypad" else 0.9
                row(f"{what} speed vs {peer['kernel']}", f"{ratio:.2f}x ({peer['p50_ms']:.3f} ms)",
                    f">= {want}x", ratio >= want)
    b = load(out / "bench.json")
    if not b:
        row("benchmarks", "not measured")
    else:
        rows = {(r["model"], r["batch"], r["sequence"]): r for r in b["rows"]}
        k = b.get("kernels", {})
        for (m, bt, s), r in sorted(rows.items()):
            comp = f", compile {r['compiled_ms']:.3f}" if "compiled_ms" in r else ""
            row(f"{m} b{bt} s{s} fp16 p50 ms (kiln)",
                f"{r['kiln_ms']:.3f} (eager {r['eager_ms']:.3f}{comp})")
            if "kiln_int8_ms" in r:
                row(f"{m} b{bt} s{s} int8 / fp16 plan", f"{r['kiln_int8_ms'] / r['kiln_ms']:.2f}x "
                    f"({r['kiln_int8_ms']:.3f} ms)")
            if "kiln_simple_attention_ms" in r:
                row(f"{m} b{bt} s{s} flash / simple attention plan",
                    f"{r['kiln_ms']:.3f} / {r['kiln_simple_attention_ms']:.3f} ms",
                    "flash faster", r["kiln_ms"] < r["kiln_simple_attention_ms"])
                if "flash_attention_share" in r:
                    row(f"{m} b{bt} s{s} attention share of step time",
                        f"{r['flash_attention_share']:.0%} (simple {r['simple_attention_share']:.0%})")
        r = rows.get(("minilm", 1, 128))
        if r and "compiled_ms" in r:
            ratio = r["kiln_ms"] / r["compiled_ms"]
            row("MiniLM b1 s128 kiln / torch.compile", f"{ratio:.2f}x", "<= 0.5x", ratio <= 0.5)
        r = rows.get(("base", 32, 128))
        if r and "compiled_ms" in r:
            ratio = r["compiled_ms"] / r["kiln_ms"]
            row("BERT-base b32 s128 throughput vs compile", f"{ratio:.2f}x", ">= 1.3x",
                ratio >= 1.3)
        if r and k.get("gemm_fp16_8192_tflops"):
            frac = r["kiln_tflops"] / k["gemm_fp16_8192_tflops"]
            row("BERT-base b32 s128 / dense fp16 GEMM",
                f"{r['kiln_tflops']:.0f} / {k['gemm_fp16_8192_tflops']:.0f} TFLOP/s = {frac:.2f}",
                ">= 0.65", frac >= 0.65)
        if k:
            row("SkipLayerNorm 8192x768 fp16 / D2D copy",
                f"{k['skip_layer_norm_gbs']:.0f} / {k['d2d_copy_gbs']:.0f} GB/s = "
                f"{k['skip_layer_norm_over_copy']:.2f}", ">= 0.8 (0.9)",
                k["skip_layer_norm_over_copy"] >= 0.8)
        for m in ("minilm", "base"):
            if f"{m}_layer_launches" in b:
                n = b[f"{m}_layer_launches"]
                row(f"{m} kernels per encoder layer", f"{n} ({b[f'{m}_layer_steps']} steps)",
                    "<= 7 (5)", n <= 7)
            c = b.get(f"{m}_fp16_vs_torch_fp32")
            if c:
                row(f"{m} fp16 vs torch fp32, min token cosine", f"{c['min_token_cosine']:.6f}",
                    ">= 0.9999", c["min_token_cosine"] >= 0.9999)
        c9 = b.get("create_9_buckets")
        if c9:
            row("9-bucket MiniLM load + Create", f"{c9['load_and_create_ms']:.0f} ms", "<= 500 ms",
                c9["load_and_create_ms"] <= 500)
    for arch in ("bert", "xlmr"):
        rr = load(out / f"rerank_{arch}.json")
        if not rr:
            row(f"re-ranking {arch} packed vs padded", "not measured")
            continue
        for r in rr["rows"]:
            n = f"{arch} N={r['candidates']}"
            row(f"rerank {n} kiln packed / padded ms",
                f"{r['kiln_packed_ms']:.1f} / {r['kiln_padded_ms']:.1f} "
                f"= {r['packed_vs_padded']:.2f}x", ">= 1.6x", r["packed_vs_padded"] >= 1.6)
            row(f"rerank {n} packed / torch sorted",
                f"{r['kiln_packed_ms']:.1f} / {r['torch_sorted_ms']:.1f} ms"
                f" (torch padded {r['torch_padded_ms']:.1f})", "< 1", r["packed_vs_torch_sorted"] < 1)
    gen = load(out / "generate.json")
    if not gen:
        row("generation (cuda plan) vs torch", "not measured")
    else:
        for r in gen["rows"]:
            k, e = r["kiln"], r["torch_eager"]
            floor = r["floor_tokens_per_s"]
            row(f"generate {r['case']} kiln decode tok/s / floor",
                f"{k['decode_tokens_per_s']:.0f} / {floor:.0f}", ">= 0.8 of floor",
                floor > 0 and k["decode_tokens_per_s"] >= 0.8 * floor)
            peer = r.get("torch_static_compiled") or {}
            best = max(e["decode_tokens_per_s"], peer.get("decode_tokens_per_s", 0.0))
            row(f"generate {r['case']} kiln / best torch tok/s",
                f"{k['decode_tokens_per_s']:.0f} / {best:.0f}", ">= 1", k["decode_tokens_per_s"] >= best)
            row(f"generate {r['case']} TTFT kiln / torch eager",
                f"{k['ttft_ms']:.1f} / {e['ttft_ms']:.1f} ms", "")
            same, n = (int(v) for v in r["leading_tokens_equal"].split("/"))
            fp32 = r.get("precision", "fp32") == "fp32"  # 16-bit: both round, information
            row(f"generate {r['case']} tokens = torch eager", r["leading_tokens_equal"],
                "all" if fp32 else "", same == n if fp32 else None)
    print(f"{'':44s} {'measured':>26s}  {'target':>18s}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
