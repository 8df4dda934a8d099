#!/usr/bin/env python3
"""onnxruntime's side of `kiln bench`, for one model and one shape: the peer number that
scripts/demo.sh prints beside kiln's.

Same session settings (bench/benchlib.ort_session: all graph optimizations, N intra-op
threads, sequential), timing loop (benchlib.time_ort) and statistics (benchlib.stats) and the same input policy as the
end-to-end benchmark, so the two lines are comparable.
Limits: BERT-style inputs (input_ids / attention_mask / token_type_ids, int64 [batch, seq]),
ids drawn below --vocab.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    a = p.parse_args()
    t0 = time.perf_counter()
    sess = benchlib.ort_session(a.model, a.threads)
    create_ms = (time.perf_counter() - t0) * 1e3
    rng = np.random.default_rng(0)
    names = {i.name for i in sess.get_inputs()}
    feeds = {"input_ids": rng.integers(0, a.vocab, (a.batch, a.seq), dtype=np.int64),
             "attention_mask": np.ones((a.batch, a.seq), np.int64),
             "token_type_ids": np.zeros((a.batch, a.seq), np.int64)}
    feeds = {k: v for k, v in feeds.items() if k in names}
    t0 = time.perf_counter()
    sess.run(None, feeds)
    first_ms = (time.perf_counter() - t0) * 1e3
    s = benchlib.stats(benchlib.time_ort(sess, feeds, a.warmup, a.runs), a.batch)
    s.update(session_create_ms=create_ms, first_run_ms=first_ms, threads=a.threads)
    if a.json:
        print(json.dumps(s))
    else:
        print(f"onnxruntime: {s['runs']} runs (after {a.warmup} warm-up): p50 {s['p50_ms']:.3f} ms"
              f"  p90 {s['p90_ms']:.3f} ms  min {s['min_ms']:.3f} ms  ({a.threads} threads;"
              f" session {create_ms:.0f} ms, first run {first_ms:.1f} ms)")


if __name__ == "__main__":
    main()
