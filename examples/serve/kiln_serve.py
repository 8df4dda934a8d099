#!/usr/bin/env python3
"""kiln behind Ray Serve: HTTP /embed (kiln.Encoder) and /rerank (kiln.Reranker).

What: two Serve applications, one deployment each, whose replicas each load the plan and
the tokenizer in __init__ and keep their own kiln session:
  POST /embed   {"texts": [str, ...]}                          -> {"embeddings": [[float]]}
  POST /rerank  {"query": str, "passages": [str], "top_k": int|null}
                                                 -> {"results": [{"index": i, "score": s}]}
/embed goes through Serve's own dynamic batching (@serve.batch): requests that arrive
within `batch_wait_timeout_s` of each other, up to `max_batch_size` requests, run as one
Encoder.encode call. /rerank is not batched across requests: one request is already a batch
of (query, passage) pairs.
Why: Serve gives replicas, placement across nodes, routing, health checks and replacement
of dead replicas; kiln gives a fast CPU session per replica. Each replica runs its model on
a single worker thread (`threads` kiln threads), so replicas x threads is the core budget
the deployment takes, and `num_cpus` (default = threads) tells Ray the same.
Limits: no authentication or TLS (put Serve behind your own gateway); requests in flight
on a replica that dies fail with HTTP 500 and are the client's to retry (README.md).

Run it:
  * from Python: serve.run(build_embed_app(EmbedArgs(plan=..., tokenizer=...)),
                           name="embed", route_prefix="/embed")
  * from the CLI: serve run examples/serve/serve_config.yaml (or serve deploy it)
  * locally, in one command (single node, everything on 127.0.0.1):
      python3 examples/serve/kiln_serve.py --embed-plan e.kiln --rerank-plan r.kiln \
          --tokenizer tokenizer.json --port 8000
"""

import argparse
import asyncio
import concurrent.futures
import os
import sys
import time
from typing import List, Optional, Tuple

if __name__ == "__main__":
    # A local single-node run: node address 127.0.0.1, so every Ray server listens on
    # loopback only (Ray picks the machine's address otherwise), and no usage report.
    # Both are read when ray is imported, hence before the import below.
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import numpy as np
from pydantic import BaseModel, Field
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

# Serve's HTTP address when this file starts Serve itself; a cluster config sets its own.
HOST = "127.0.0.1"
# Response header of /embed: how many requests @serve.batch put into the same encode() call.
BATCH_HEADER = "x-kiln-batch-requests"


class EmbedArgs(BaseModel):
    """Arguments of build_embed_app (`args:` of a Serve config, or key=value on the CLI)."""

    plan: str = Field(description="kiln plan of a sentence encoder (path on every node)")
    tokenizer: str = Field(description="the model's tokenizer.json")
    num_replicas: int = Field(2, ge=1)
    threads: int = Field(1, ge=1, description="kiln threads per replica")
    num_cpus: Optional[float] = Field(None, gt=0, description="Ray CPUs per replica; "
                                      "default: threads")
    encode_batch_size: int = Field(32, ge=1, description="texts per kiln run")
    max_batch_size: int = Field(16, ge=1, description="requests per @serve.batch call")
    batch_wait_timeout_s: float = Field(0.005, ge=0)
    max_texts_per_request: int = Field(256, ge=1)
    max_ongoing_requests: Optional[int] = Field(None, ge=1, description="per replica; "
                                                "default: 2 x max_batch_size")


class RerankArgs(BaseModel):
    """Arguments of build_rerank_app."""

    plan: str = Field(description="kiln plan of a cross-encoder (one logit per pair)")
    tokenizer: str
    num_replicas: int = Field(2, ge=1)
    threads: int = Field(1, ge=1)
    num_cpus: Optional[float] = Field(None, gt=0)
    pair_batch_size: int = Field(32, ge=1, description="(query, passage) pairs per kiln run")
    max_passages_per_request: int = Field(256, ge=1)
    max_ongoing_requests: int = Field(4, ge=1)


class BadRequest(ValueError):
    pass


def _error(status, message):
    return JSONResponse({"error": message}, status_code=status)


async def _json_body(request: Request) -> dict:
    try:
        body = await request.json()
    except ValueError as e:
        raise BadRequest(f"body is not JSON: {e}") from None
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object")
    return body


def _string_list(body, key, limit):
    value = body.get(key)
    if not isinstance(value, list) or not value:
        raise BadRequest(f'"{key}" must be a non-empty list of strings')
    if len(value) > limit:
        raise BadRequest(f'"{key}" has {len(value)} entries; this server takes at most {limit}')
    if not all(isinstance(s, str) for s in value):
        raise BadRequest(f'"{key}" must contain strings only')
    return value


class _Worker:
    """One thread per replica runs the model: the replica's event loop stays free to take
    requests (and health checks) while a batch runs, and the replica never uses more than
    its `threads` cores however many requests it holds (kiln releases the GIL)."""

    def __init__(self):
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1,
                                                           thread_name_prefix="kiln")

    async def run(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)


async def _guarded(handler):
    """Maps input errors to 400 and kiln's InvalidArgument to 400; anything else is a 500
    that Serve logs."""
    import kiln

    try:
        return await handler()
    except BadRequest as e:
        return _error(400, str(e))
    except kiln.InvalidArgument as e:
        return _error(400, str(e))


@serve.deployment
class Embedder:
    def __init__(self, args: EmbedArgs):
        import kiln

        self._encoder = kiln.Encoder(args.plan, args.tokenizer, threads=args.threads,
                                     batch_size=args.encode_batch_size)
        self._max_texts = args.max_texts_per_request
        self._worker = _Worker()
        self.embed_batch.set_max_batch_size(args.max_batch_size)
        self.embed_batch.set_batch_wait_timeout_s(args.batch_wait_timeout_s)

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.005)
    async def embed_batch(self, requests: List[List[str]]) -> List[Tuple[np.ndarray, int]]:
        """Several requests' texts in one encode() call; each request gets its rows back,
        and how many requests shared the call."""
        flat = [text for texts in requests for text in texts]
        vectors = await self._worker.run(self._encoder.encode, flat)
        out, start = [], 0
        for texts in requests:
            out.append((vectors[start:start + len(texts)], len(requests)))
            start += len(texts)
        return out

    async def __call__(self, request: Request):
        async def handle():
            texts = _string_list(await _json_body(request), "texts", self._max_texts)
            vectors, shared = await self.embed_batch(texts)
            return JSONResponse({"embeddings": vectors.tolist()},
                                headers={BATCH_HEADER: str(shared)})

        return await _guarded(handle)


@serve.deployment
class Reranker:
    def __init__(self, args: RerankArgs):
        import kiln

        self._reranker = kiln.Reranker(args.plan, args.tokenizer, threads=args.threads,
                                       batch_size=args.pair_batch_size)
        self._max_passages = args.max_passages_per_request
        self._worker = _Worker()

    async def __call__(self, request: Request):
        async def handle():
            body = await _json_body(request)
            query = body.get("query")
            if not isinstance(query, str):
                raise BadRequest('"query" must be a string')
            passages = _string_list(body, "passages", self._max_passages)
            top_k = body.get("top_k")
            if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool)
                                      or top_k < 1):
                raise BadRequest('"top_k" must be a positive integer or null')
            ranked = await self._worker.run(self._reranker.rerank, query, passages, top_k)
            return JSONResponse({"results": [{"index": int(i), "score": float(s)}
                                             for i, s in ranked]})

        return await _guarded(handle)


def _options(args, max_ongoing_requests):
    return dict(num_replicas=args.num_replicas,
                ray_actor_options={"num_cpus": args.num_cpus or args.threads},
                max_ongoing_requests=max_ongoing_requests)


def build_embed_app(args: EmbedArgs):
    """Serve application builder: `import_path: kiln_serve:build_embed_app`."""
    ongoing = args.max_ongoing_requests or 2 * args.max_batch_size
    return Embedder.options(**_options(args, ongoing)).bind(args)


def build_rerank_app(args: RerankArgs):
    """Serve application builder: `import_path: kiln_serve:build_rerank_app`."""
    return Reranker.options(**_options(args, args.max_ongoing_requests)).bind(args)


def loopback_replica_grpc():
    """Ray worker setup hook for single-node, loopback-only runs
    (ray.init(runtime_env={"worker_process_setup_hook": loopback_replica_grpc})): Serve 2.60
    replicas open their inter-deployment gRPC server on [::]:0, all interfaces, whatever the
    node address; this binds it to 127.0.0.1 instead. HTTP requests reach replicas through
    Ray actor calls, not through that server. A no-op where the hook point is missing."""
    try:
        import ray.serve._private.replica as replica
    except ImportError:
        return
    bind = getattr(replica, "add_port_to_grpc_server", None)
    if bind is None or getattr(bind, "_kiln_loopback", False):
        return

    def loopback(server, address):
        return bind(server, address.replace("[::]", "127.0.0.1", 1))

    loopback._kiln_loopback = True
    replica.add_port_to_grpc_server = loopback


def run_local(embed: Optional[EmbedArgs], rerank: Optional[RerankArgs], port: int):
    """Starts Serve's HTTP proxy on 127.0.0.1:`port` in the connected Ray cluster and runs
    the two applications at /embed and /rerank (either may be None)."""
    serve.start(http_options={"host": HOST, "port": port})
    if embed is not None:
        serve.run(build_embed_app(embed), name="embed", route_prefix="/embed")
    if rerank is not None:
        serve.run(build_rerank_app(rerank), name="rerank", route_prefix="/rerank")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embed-plan", help="kiln plan of the sentence encoder")
    parser.add_argument("--rerank-plan", help="kiln plan of the cross-encoder")
    parser.add_argument("--tokenizer", required=True, help="tokenizer.json of both models")
    parser.add_argument("--rerank-tokenizer", help="the cross-encoder's, if it differs")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--num-replicas", type=int, default=1, help="per deployment")
    parser.add_argument("--threads", type=int, default=1, help="kiln threads per replica")
    parser.add_argument("--num-cpus-per-replica", type=float, default=None,
                        help="Ray CPUs per replica (default: --threads)")
    parser.add_argument("--max-batch-size", type=int, default=16)
    parser.add_argument("--batch-wait-timeout-s", type=float, default=0.005)
    parser.add_argument("--num-cpus", type=int, default=None,
                        help="CPUs of the local Ray node (default: all cores)")
    args = parser.parse_args(argv)
    if not args.embed_plan and not args.rerank_plan:
        parser.error("give --embed-plan and/or --rerank-plan")
    import ray

    common = dict(num_replicas=args.num_replicas, threads=args.threads,
                  num_cpus=args.num_cpus_per_replica)
    embed = (EmbedArgs(plan=args.embed_plan, tokenizer=args.tokenizer,
                       max_batch_size=args.max_batch_size,
                       batch_wait_timeout_s=args.batch_wait_timeout_s, **common)
             if args.embed_plan else None)
    rerank = (RerankArgs(plan=args.rerank_plan,
                         tokenizer=args.rerank_tokenizer or args.tokenizer, **common)
              if args.rerank_plan else None)
    here = os.path.dirname(os.path.abspath(__file__))
    # Replicas import this file by module name, and kiln from the same place as here.
    import kiln

    paths = [here, os.path.dirname(os.path.dirname(os.path.abspath(kiln.__file__)))]
    os.environ["PYTHONPATH"] = os.pathsep.join(
        paths + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    ray.init(num_cpus=args.num_cpus, include_dashboard=False,
             runtime_env={"worker_process_setup_hook": loopback_replica_grpc})
    need = sum(a.num_replicas * (a.num_cpus or a.threads) for a in (embed, rerank) if a)
    have = ray.cluster_resources().get("CPU", 0)
    if need > have:
        ray.shutdown()
        parser.error(f"the replicas ask for {need:g} CPUs, the local Ray node has {have:g}: "
                     "lower --num-replicas/--threads or set --num-cpus-per-replica")
    run_local(embed, rerank, args.port)
    print(f"serving on http://{HOST}:{args.port}/embed and /rerank; Ctrl-C stops",
          flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        serve.shutdown()
        ray.shutdown()
    return 0


if __name__ == "__main__":
    # Run main() from the module imported by name, so that the replicas find the
    # deployment classes by reference (kiln_serve.Embedder), not pickled from __main__.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import kiln_serve

    sys.exit(kiln_serve.main())
