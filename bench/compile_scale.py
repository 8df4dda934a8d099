#!/usr/bin/env python3
"""Compile time and peak memory of `kiln compile` against graph size (issue 14).

Generates (models/gen_scale.py) elementwise chains of 10k..200k nodes and gen_bert-style
encoders of 100..800 layers (hidden 64: ~115 ONNX nodes per layer, every fusion firing),
compiles each once per kiln binary given (--kiln, repeatable: e.g. a build of the commit
before a change and one after), and prints a Markdown table: ONNX nodes, plan steps,
wall seconds and peak RSS (from /usr/bin/time-style wait4 accounting) per binary. The
compile runs single-threaded either way; run it on a quiet machine. --max-seconds: once a
size takes longer, the family's larger sizes are not run for that binary, and a compile
is killed after 4x that ("> N s").

  python3 bench/compile_scale.py --kiln build/kiln [--kiln /old/kiln] [--quick]
"""

import argparse
import os
import pathlib
import sys
import tempfile
import time

import onnx

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "models"))
import gen_scale  # noqa: E402


def peak_rss_mb(kiln, model, plan, flags, timeout):
    """Peak RSS of a compile in MiB, from the child's rusage."""
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.execv(kiln, [kiln, "compile", str(model), "-o", str(plan), "--quiet", *flags])
    t0 = time.monotonic()
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return usage.ru_maxrss / 1024, time.monotonic() - t0, os.waitstatus_to_exitcode(status)
        if time.monotonic() - t0 > timeout:
            os.kill(pid, 9)
            os.wait4(pid, 0)
            return None, None, None
        time.sleep(0.02)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", action="append", required=True)
    ap.add_argument("--quick", action="store_true", help="chains to 40k, encoders to 400 layers")
    ap.add_argument("--max-seconds", type=float, default=120)
    args = ap.parse_args()
    chains = [10000, 20000, 40000] + ([] if args.quick else [100000, 200000])
    encoders = [100, 200, 400] + ([] if args.quick else [800])
    work = pathlib.Path(tempfile.mkdtemp(prefix="kiln-scale-"))
    rows = []
    for family, sizes, make, flags in (
            ("chain", chains, gen_scale.chain, []),
            ("encoder", encoders, gen_scale.deep_bert, ["--shape", "batch=1,sequence=128"])):
        slow = set()
        for size in sizes:
            model = make(size)
            path = work / f"{family}{size}.onnx"
            onnx.save(model, path)
            row = {"what": f"{family} {size}" + (" layers" if family == "encoder" else ""),
                   "nodes": len(model.graph.node), "results": []}
            for kiln in args.kiln:
                if kiln in slow:
                    row["results"].append("not run")
                    continue
                timeout = args.max_seconds * 4
                rss, seconds, rc = peak_rss_mb(kiln, path, work / "p.kiln", flags, timeout)
                if rss is None or rc != 0:
                    row["results"].append(f"> {timeout:.0f} s" if rss is None else f"exit {rc}")
                    slow.add(kiln)
                    continue
                row["results"].append(f"{seconds:.2f} ({rss:.0f})")
                if seconds > args.max_seconds:
                    slow.add(kiln)
                print(f"{row['what']}: {kiln}: {seconds:.2f} s, {rss:.0f} MiB", file=sys.stderr,
                      flush=True)
            rows.append(row)
            path.unlink()
    head = "| graph | ONNX nodes | " + " | ".join(f"`{k}` s (peak MiB)" for k in args.kiln) + " |"
    print(head)
    print("|" + "---|" * (2 + len(args.kiln)))
    for r in rows:
        print(f"| {r['what']} | {r['nodes']} | " + " | ".join(r["results"]) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
