"""Compiled plans end to end: `kiln compile` -> `kiln run PLAN.kiln` against onnxruntime,
plus the plan commands' contracts (`bench --json`, `plan-info`, `inspect`, `--trace`) and
their behaviour on bad input.

What is checked:
- every committed fixture (models/fixtures/*.onnx, variants/, torch/, decoder/) compiles
  with a static shape (batch 2 x sequence 16) and the plan's outputs match onnxruntime on
  the original model (UNSUPPORTED lists the fixtures that cannot compile yet, with why;
  they are xfail(strict=True), so the mark must go as soon as they work);
- determinism: compiling the same model twice gives byte-identical plans;
- a --profile plan (batch 1:2 x sequence 16:32, 4 buckets) run at sequence 20 is padded
  into the sequence-32 bucket and still matches onnxruntime at sequence 20;
- a shape outside every bucket, and damaged plans (truncated, a flipped weights byte, bad
  magic), exit 2 with one line on stderr and no crash;
- bench --json prints exactly one JSON object with the documented keys;
- plan-info reads header + metadata only: it still works on a plan whose weights are
  damaged, but not on one truncated inside the weights (the header records the file's
  exact size, so ReadPlanInfo refuses a short file before reading anything else);
- --trace writes valid Chrome-trace JSON with one "X" event per executed step, each with
  the ONNX nodes it came from.

Tolerance: max |kiln - onnxruntime| <= 1e-4 per output, as in test_bert.py. The plan's CPU
kernels compute in fp32 (oneDNN GEMMs, vectorized LayerNorm/softmax/GELU) in a different
summation order than ORT's MLAS, and exp/erf/tanh come from different implementations;
the outputs are O(1) (hidden states, logits) with 16..512-wide reductions, where fp32
reordering gives errors ~1e-6, so 1e-4 leaves margin while an indexing, masking or
padding bug moves outputs by >1e-3 (test_variants/test_torch_fixtures check that the
inputs discriminate masking).
"""

import hashlib
import json
import os
import pathlib
import subprocess

import numpy as np
import onnx
import pytest

from conftest import KILN_TIMEOUT_S, SOURCE_DIR, gen_bert, run_kiln, run_onnxruntime

import export_torch  # noqa: E402  (models/ is put on sys.path by conftest)
import gen_decoder  # noqa: E402
import gen_variants  # noqa: E402

TOLERANCE = 1e-4
FIXTURE_ROOT = SOURCE_DIR / "models" / "fixtures"
MODELS = (sorted(FIXTURE_ROOT.glob("*.onnx")) + sorted((FIXTURE_ROOT / "variants").glob("*.onnx"))
          + sorted((FIXTURE_ROOT / "torch").glob("*.onnx"))
          + sorted((FIXTURE_ROOT / "decoder").glob("*.onnx")))
STATIC = (2, 16)
# Fixture name -> why it cannot be compiled yet. Empty: every fixture compiles.
UNSUPPORTED = {}
# The models the slower checks (determinism, profile/padding) run on: one per generator
# family, so every input convention (token types, roberta padding ids, causal decoders) is
# covered without compiling every fixture four times.
REPRESENTATIVE = ["default.onnx", "st_mean_tiny_opset14.onnx", "roberta_tiny_opset17.onnx",
                  "distilbert_dynamo_sdpa.onnx", "gpt2_torchscript_eager.onnx",
                  "llama_tiny_opset17.onnx"]


def model_id(path):
    return f"{path.parent.name}/{path.stem}" if path.parent != FIXTURE_ROOT else path.stem


def model_by_name(name):
    matches = [p for p in MODELS if p.name == name]
    assert len(matches) == 1, name
    return matches[0]


def feeds_for(model, batch, seq, seed):
    """The generator's seeded inputs for `model`: trailing padding in the mask."""
    folder = model.parent.name
    if folder == "variants":
        variant = next(v for v in gen_variants.VARIANTS
                       if pathlib.Path(gen_variants.fixture_path(v)).name == model.name)
        return gen_variants.random_inputs(variant, "tiny", batch, seq, seed)
    if folder == "torch":
        family = export_torch.parse_fixture_name(model.name)[0]
        return export_torch.random_inputs(family, batch, seq, seed)
    if folder == "decoder":
        return gen_decoder.random_inputs(gen_decoder.TINY, batch, seq, seed, padding="right")
    return gen_bert.random_inputs(gen_bert.SIZES["tiny"], batch, seq, seed)


def kiln(kiln_bin, *args):
    return subprocess.run([kiln_bin, *map(str, args)], capture_output=True, text=True,
                          timeout=KILN_TIMEOUT_S, check=False)


def compile_plan(kiln_bin, model, out, *flags):
    proc = kiln(kiln_bin, "compile", model, "-o", out, "--quiet", *flags)
    assert proc.returncode == 0, f"kiln compile failed ({proc.returncode}):\n{proc.stderr}"
    assert proc.stderr == "", f"--quiet compile printed:\n{proc.stderr}"
    return out


def assert_matches_ort(kiln_bin, plan, model, feeds, workdir, *extra):
    proc, outdir = run_kiln(kiln_bin, plan, feeds, workdir, *extra)
    assert proc.returncode == 0, f"kiln run {plan.name} failed ({proc.returncode}):\n{proc.stderr}"
    expected = run_onnxruntime(model, feeds)
    assert expected
    for name, want in expected.items():
        got = np.load(outdir / f"{name}.npy")
        assert got.dtype == want.dtype, f"{name}: dtype {got.dtype}, expected {want.dtype}"
        assert got.shape == want.shape, f"{name}: shape {got.shape}, expected {want.shape}"
        err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
        assert err <= TOLERANCE, f"{name}: max abs error {err:.3g} > {TOLERANCE}"
    return proc


def assert_one_line_error(proc, code):
    assert proc.returncode == code, (
        f"exit code {proc.returncode}, expected {code}; stderr:\n{proc.stderr}")
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{proc.stderr}"
    assert lines[0].startswith("kiln: "), lines[0]
    return lines[0]


def model_params():
    params = []
    for path in MODELS:
        marks = []
        if path.name in UNSUPPORTED:
            marks.append(pytest.mark.xfail(strict=True, raises=AssertionError,
                                           reason=UNSUPPORTED[path.name]))
        params.append(pytest.param(path, id=model_id(path), marks=marks))
    return params


def test_fixture_list_is_complete():
    """The globs found every fixture folder (an empty glob would test nothing)."""
    folders = {p.parent.name for p in MODELS}
    assert folders == {"fixtures", "variants", "torch", "decoder"}, folders
    assert len(MODELS) >= 31, len(MODELS)
    for name in REPRESENTATIVE:
        model_by_name(name)
    assert set(UNSUPPORTED) <= {p.name for p in MODELS}


@pytest.fixture(scope="module")
def plans(kiln_bin, tmp_path_factory):
    """Static (batch 2 x sequence 16) plans, compiled once per model on first use."""
    root = tmp_path_factory.mktemp("plans")
    cache = {}

    def get(model):
        if model not in cache:
            out = root / f"{model.parent.name}_{model.stem}.kiln"
            compile_plan(kiln_bin, model, out, "--shape", f"batch={STATIC[0]},sequence={STATIC[1]}")
            cache[model] = out
        return cache[model]
    return get


@pytest.mark.parametrize("model", model_params())
def test_static_plan_matches_onnxruntime(kiln_bin, plans, model, tmp_path):
    plan = plans(model)
    feeds = feeds_for(model, *STATIC, seed=216)
    proc = assert_matches_ort(kiln_bin, plan, model, feeds, tmp_path)
    assert "padded" not in proc.stdout, proc.stdout  # exact bucket


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_compile_is_deterministic(kiln_bin, plans, name, tmp_path):
    model = model_by_name(name)
    first = plans(model)
    second = compile_plan(kiln_bin, model, tmp_path / "again.kiln", "--shape",
                          f"batch={STATIC[0]},sequence={STATIC[1]}")
    assert first.read_bytes() == second.read_bytes()


PROFILE = "batch=1:2,sequence=16:32"


@pytest.fixture(scope="module")
def profile_plans(kiln_bin, tmp_path_factory):
    root = tmp_path_factory.mktemp("profile")
    cache = {}

    def get(model):
        if model not in cache:
            cache[model] = compile_plan(kiln_bin, model, root / f"{model.stem}.kiln",
                                        "--profile", PROFILE)
        return cache[model]
    return get


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_profile_plan_pads_sequence(kiln_bin, profile_plans, name, tmp_path):
    """Sequence 20 runs in the batch-2 x sequence-32 bucket (padded) and matches ORT at 20."""
    model = model_by_name(name)
    plan = profile_plans(model)
    info = json.loads(kiln(kiln_bin, "plan-info", plan, "--json").stdout)
    assert [b["bindings"] for b in info["buckets"]] == [
        {"batch": 1, "sequence": 16}, {"batch": 1, "sequence": 32},
        {"batch": 2, "sequence": 16}, {"batch": 2, "sequence": 32}]
    feeds = feeds_for(model, 2, 20, seed=220)
    assert "sequence" in info["paddable_symbols"], info["paddable_symbols"]
    proc = assert_matches_ort(kiln_bin, plan, model, feeds, tmp_path)
    assert "bucket 3 [batch=2,sequence=32], padded" in proc.stdout, proc.stdout


def test_shape_outside_every_bucket_exits_2(kiln_bin, profile_plans, plans, tmp_path):
    model = model_by_name("default.onnx")
    feeds = feeds_for(model, 1, 40, seed=1)  # sequence 40 > the largest bucket (32)
    proc, outdir = run_kiln(kiln_bin, profile_plans(model), feeds, tmp_path / "a")
    line = assert_one_line_error(proc, 2)
    assert any(name in line for name in feeds), f"the error should name an input: {line}"
    assert not outdir.exists() or not list(outdir.glob("*.npy")), "no outputs on error"
    # A static plan accepts nothing but its own shape (batch is paddable: 3 > 2 is not).
    proc, _ = run_kiln(kiln_bin, plans(model), feeds_for(model, 3, 16, seed=1), tmp_path / "b")
    line = assert_one_line_error(proc, 2)
    assert any(name in line for name in feeds), f"the error should name an input: {line}"


@pytest.fixture(scope="module")
def damaged(kiln_bin, plans, tmp_path_factory):
    """Damaged copies of the default model's static plan: name -> path, plus the info."""
    good = plans(model_by_name("default.onnx"))
    info = json.loads(kiln(kiln_bin, "plan-info", good, "--json").stdout)
    data = good.read_bytes()
    assert info["weights_bytes"] > 0 and info["weights_offset"] + info["weights_bytes"] == len(data)
    root = tmp_path_factory.mktemp("damaged")
    files = {}
    mid_weights = info["weights_offset"] + info["weights_bytes"] // 2
    files["truncated"] = data[:mid_weights]
    flipped = bytearray(data)
    flipped[mid_weights] ^= 0x01
    files["flipped_weight"] = bytes(flipped)
    files["bad_magic"] = b"KILNPLAX" + data[8:]
    files["empty"] = b""
    paths = {}
    for name, content in files.items():
        paths[name] = root / f"{name}.kiln"
        paths[name].write_bytes(content)
    return good, info, paths


@pytest.mark.parametrize("damage", ["truncated", "flipped_weight", "bad_magic", "empty"])
def test_damaged_plan_exits_2(kiln_bin, damaged, damage, tmp_path):
    _, _, paths = damaged
    model = model_by_name("default.onnx")
    proc, outdir = run_kiln(kiln_bin, paths[damage], feeds_for(model, *STATIC, seed=3), tmp_path)
    line = assert_one_line_error(proc, 2)
    assert str(paths[damage]) in line, f"the error should name the file: {line}"
    assert not outdir.exists() or not list(outdir.glob("*.npy"))
    if damage == "flipped_weight":
        assert "weights" in line, f"the error should name the damaged section: {line}"
    proc = kiln(kiln_bin, "bench", paths[damage], "--runs", "1", "--json")
    assert_one_line_error(proc, 2)
    assert proc.stdout == ""


def test_plan_info_does_not_read_weights(kiln_bin, damaged):
    good, info, paths = damaged
    # A flipped weights byte is invisible to plan-info (the weights CRC is not checked)...
    flipped = json.loads(kiln(kiln_bin, "plan-info", paths["flipped_weight"], "--json").stdout)
    assert {k: v for k, v in flipped.items() if k != "plan"} == \
        {k: v for k, v in info.items() if k != "plan"}
    # ...but a truncated file is refused: the header pins the file size.
    for name in ("truncated", "bad_magic", "empty"):
        assert_one_line_error(kiln(kiln_bin, "plan-info", paths[name]), 2)


def test_plan_info_describes_the_plan(kiln_bin, profile_plans):
    model = model_by_name("default.onnx")
    plan = profile_plans(model)
    proc = kiln(kiln_bin, "plan-info", plan, "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["format_version"] == 1 and info["target"] == "cpu"
    assert info["model_sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert info["compatible"] is True, info["compatibility"]
    assert info["file_bytes"] == plan.stat().st_size
    assert [i["name"] for i in info["inputs"]] == ["input_ids", "attention_mask", "token_type_ids"]
    assert info["inputs"][0]["dims"] == ["batch", "sequence"]
    assert [o["name"] for o in info["outputs"]] == ["last_hidden_state", "pooler_output"]
    assert info["compile_options"], "compile options are recorded"
    for b in info["buckets"]:
        assert b["steps"] > 0
        assert 0 < b["peak_live_bytes"] <= b["arena_bytes"] <= b["no_reuse_bytes"], b
    text = kiln(kiln_bin, "plan-info", plan)
    assert text.returncode == 0, text.stderr
    assert "compatible: yes (" in text.stdout, text.stdout
    assert info["model_sha256"] in text.stdout


def test_inspect_plan(kiln_bin, profile_plans):
    plan = profile_plans(model_by_name("default.onnx"))
    proc = kiln(kiln_bin, "inspect", plan, "--json", "--full")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert len(data["buckets"]) == 4
    for b in data["buckets"]:
        assert sum(b["steps_by_kernel"].values()) == b["steps"] == len(b["step_list"])
        assert b["arena_over_no_reuse"] <= 1.0
    text = kiln(kiln_bin, "inspect", plan)
    assert text.returncode == 0 and "arena/peak-live" in text.stdout, text.stderr


def test_bench_json(kiln_bin, plans):
    plan = plans(model_by_name("default.onnx"))
    proc = kiln(kiln_bin, "bench", plan, "--shape", "batch=2,sequence=16", "--warmup", "1",
                "--runs", "5", "--threads", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # the whole of stdout is one JSON object
    assert isinstance(data, dict)
    for key in ("p50_ms", "p90_ms", "min_ms", "throughput_per_s", "peak_rss_mb", "load_ms",
                "first_run_ms", "runs", "threads", "bucket", "inputs"):
        assert key in data, key
    assert data["runs"] == 5 and data["threads"] == 1 and data["bucket"] == 0
    assert 0 < data["min_ms"] <= data["p50_ms"] <= data["p90_ms"]
    assert data["throughput_per_s"] == pytest.approx(2 / (data["mean_ms"] / 1e3), rel=1e-6)
    assert data["peak_rss_mb"] > 1 and data["inputs"]["input_ids"] == [2, 16]


def test_bench_steps(kiln_bin, plans):
    """--steps: every kernel of the bucket with its exact step count (from inspect), and
    times that are non-negative (between_steps_ms is a run's wall time minus its steps')."""
    plan = plans(model_by_name("default.onnx"))
    proc = kiln(kiln_bin, "bench", plan, "--shape", "batch=2,sequence=16", "--warmup", "1",
                "--runs", "5", "--threads", "1", "--json", "--steps")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    bucket = json.loads(kiln(kiln_bin, "inspect", plan, "--json", "--full").stdout)["buckets"][0]
    assert {k: v["count"] for k, v in data["steps"].items()} == bucket["steps_by_kernel"]
    assert all(v["median_ms"] >= 0 for v in data["steps"].values())
    assert data["between_steps_ms"] >= 0  # wall time minus the steps it contains
    text = kiln(kiln_bin, "bench", plan, "--shape", "batch=2,sequence=16", "--warmup", "1",
                "--runs", "3", "--steps")
    assert text.returncode == 0 and "between steps" in text.stdout, text.stderr
    assert "steps" not in json.loads(kiln(kiln_bin, "bench", plan, "--shape",
                                          "batch=2,sequence=16", "--runs", "1",
                                          "--json").stdout)


def test_trace_has_one_event_per_step(kiln_bin, plans, tmp_path):
    model = model_by_name("default.onnx")
    plan = plans(model)
    trace = tmp_path / "trace.json"
    proc, _ = run_kiln(kiln_bin, plan, feeds_for(model, *STATIC, seed=5), tmp_path,
                       "--trace", str(trace))
    assert proc.returncode == 0, proc.stderr
    events = json.loads(trace.read_text())["traceEvents"]
    steps = json.loads(kiln(kiln_bin, "inspect", plan, "--json", "--full").stdout)["buckets"][0]
    assert len(events) == steps["steps"]
    assert [e["name"] for e in events] == [s["kernel"] for s in steps["step_list"]]
    onnx_nodes = {n.name for n in onnx.load(str(model)).graph.node}
    covered = set()
    for e in events:
        assert e["ph"] == "X" and e["ts"] >= 0 and e["dur"] >= 0, e
        assert set(e["args"]["provenance"]) <= onnx_nodes, e
        covered |= set(e["args"]["provenance"])
    assert covered, "no event names its ONNX nodes"


def test_compile_errors(kiln_bin, tmp_path):
    model = model_by_name("default.onnx")
    out = tmp_path / "x.kiln"
    line = assert_one_line_error(kiln(kiln_bin, "compile", model, "-o", out), 2)
    assert "batch" in line or "sequence" in line, f"should name the unbound symbol: {line}"
    assert_one_line_error(
        kiln(kiln_bin, "compile", model, "-o", out, "--profile", "sequence=8..4"), 2)
    assert_one_line_error(kiln(kiln_bin, "compile", model, "-o", out, "--target", "tpu"), 2)
    assert_one_line_error(kiln(kiln_bin, "compile", model, "--shape", "batch=1,sequence=8"), 2)
    assert_one_line_error(kiln(kiln_bin, "compile", model, "-o", out, "--target", "cuda", "-O0",
                               "--shape", "batch=1,sequence=8"), 2)
    assert_one_line_error(kiln(kiln_bin, "compile", model, "-o", out, "--precision", "fp16",
                               "--shape", "batch=1,sequence=8"), 3)
    assert_one_line_error(kiln(kiln_bin, "compile", model, "-o", out, "--target", "cuda",
                               "--cuda-arch", "sm_x", "--shape", "batch=1,sequence=8"), 2)
    assert not out.exists()


def test_compile_summary(kiln_bin, tmp_path):
    out = tmp_path / "s.kiln"
    proc = kiln(kiln_bin, "compile", model_by_name("default.onnx"), "-o", out, "--profile",
                "batch=1,sequence=8..32")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    # A compile this small takes ~0.02 s: the progress lines of its first second are held
    # back and dropped, so stderr is the summary alone.
    assert proc.stderr.startswith("kiln compile: "), proc.stderr
    assert "3 buckets" in proc.stderr and "steps by kernel" in proc.stderr, proc.stderr
    for seq in (8, 16, 32):
        assert f"[batch=1,sequence={seq}]" in proc.stderr, proc.stderr


def test_help_lists_the_plan_commands(kiln_bin):
    proc = kiln(kiln_bin, "--help")
    assert proc.returncode == 0
    for cmd in ("compile MODEL.onnx", "run PLAN.kiln", "bench PLAN.kiln", "plan-info PLAN.kiln",
                "inspect PLAN.kiln"):
        assert cmd in proc.stdout, cmd
    for cmd in ("compile", "run", "bench", "plan-info", "inspect"):
        sub = kiln(kiln_bin, cmd, "--help")
        assert sub.returncode == 0 and sub.stdout.startswith(f"usage: kiln {cmd} "), cmd


def test_run_plan_refuses_onnx_only_flags(kiln_bin, plans, tmp_path):
    model = model_by_name("default.onnx")
    proc, _ = run_kiln(kiln_bin, plans(model), feeds_for(model, *STATIC, seed=4), tmp_path, "-O2")
    assert "-O2 applies to ONNX models" in assert_one_line_error(proc, 2)
    proc, _ = run_kiln(kiln_bin, model, feeds_for(model, *STATIC, seed=4), tmp_path,
                       "--trace", str(tmp_path / "t.json"))
    assert "compiled plans" in assert_one_line_error(proc, 2)


def test_cpu_work_does_not_load_cublaslt(kiln_bin, tmp_path):
    """cuBLASLt is loaded on first CUDA use, not at start-up (linked, it cost every process
    0.1-0.3 s and ~200 MB resident): a CPU compile and run never load it; the CUDA query of
    `kiln --version` does, where kiln has its CUDA backend. The dynamic loader's own log
    (LD_DEBUG=files) is the witness."""
    plan = tmp_path / "d.kiln"
    compile_plan(kiln_bin, model_by_name("default.onnx"), plan, "--shape", "batch=1,sequence=8")
    env = dict(os.environ, LD_DEBUG="files")
    def loads(*args):
        proc = subprocess.run([kiln_bin, *map(str, args)], capture_output=True, text=True,
                              timeout=KILN_TIMEOUT_S, check=False, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return "file=libcublasLt" in proc.stderr
    assert not loads("run", plan, "--random-inputs", "--vocab", "100")
    assert not loads("--help")
    version = kiln(kiln_bin, "--version").stdout
    if "cuBLASLt " in version and "not loadable" not in version:
        assert loads("--version")


def test_cuda_plans_from_the_cli(kiln_bin, tmp_path):
    """A cuda plan compiles on any machine; where no GPU answers, plan-info says why it is
    not compatible and run/bench refuse it with one line (exit 2); where one does, it runs
    and agrees with onnxruntime (the GPU check script covers the numbers in depth)."""
    model = model_by_name("default.onnx")
    plan = tmp_path / "d.kiln"
    compile_plan(kiln_bin, model, plan, "--target", "cuda", "--precision", "fp16",
                 "--cuda-arch", "sm_90,sm_80", "--shape", "batch=2,sequence=16")
    info = json.loads(kiln(kiln_bin, "plan-info", plan, "--json").stdout)
    assert info["target"] == "cuda" and info["cuda_sms"] == [80, 90], info
    assert "precision=fp16" in info["compile_options"]
    version = kiln(kiln_bin, "--version").stdout
    assert version.startswith("kiln ") and "\ncuda: " in version, version
    gpu = "no usable CUDA device" not in version and "without" not in version
    if gpu:
        assert info["compatible"] is True, info["compatibility"]
        proc = kiln(kiln_bin, "run", plan, "--random-inputs", "--vocab", "100")
        assert proc.returncode == 0, proc.stderr
    else:
        assert info["compatible"] is False
        assert any("target cuda" in r for r in info["compatibility"]), info["compatibility"]
        line = assert_one_line_error(kiln(kiln_bin, "run", plan, "--random-inputs"), 2)
        if "without its CUDA backend" in version:  # a -DKILN_CUDA=OFF build
            assert "built without its CUDA backend" in line, line
        else:
            assert "cannot run a cuda plan here" in line, line
        assert_one_line_error(kiln(kiln_bin, "bench", plan), 2)
    # A node no device kernel takes fails the compile naming it (exit 3); the kernel list
    # the message points to exists.
    kernels = kiln(kiln_bin, "kernels", "--target", "cuda")
    assert kernels.returncode == 0 and "| `attention` |" in kernels.stdout
