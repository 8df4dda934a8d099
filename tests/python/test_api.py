"""The Python package's core API: compile, Plan, Session, errors, threads and memory.

Oracles: onnxruntime for the numbers (as tests/e2e does), and the kiln CLI for what the
package must agree with exactly — `kiln run` on the same plan writes the same bytes
(same executor, same kernels, one thread each) and `kiln plan-info --json` prints the
same description.

Tolerance against onnxruntime: 1e-4 max abs on the tiny BERT's LayerNorm outputs (values
O(1)): fp32 summation-order differences measure ~1e-6 here, while a wrong mask, bucket
or padding shows up at 1e-2 and more.
"""

import gc
import json
import pathlib
import subprocess
import sys
import threading

import numpy as np
import pytest

import kiln

MAX_ABS = 1e-4
PROFILE = {"batch": [1, 4, 16], "sequence": [16, 128]}


def feeds(batch, seq, seed=0, lengths=None):
    """BERT inputs: ids in [1, 1000), the mask 1 over each row's length then 0."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, 1000, size=(batch, seq), dtype=np.int64)
    mask = np.ones((batch, seq), np.int64)
    if lengths is not None:
        for row, length in enumerate(lengths):
            mask[row, length:] = 0
    return {"input_ids": ids, "attention_mask": mask,
            "token_type_ids": np.zeros((batch, seq), np.int64)}


def onnxruntime_outputs(model, inputs):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs)))


@pytest.fixture(scope="module")
def plan_file(tiny_bert, tmp_path_factory):
    path = tmp_path_factory.mktemp("plan") / "tiny.kiln"
    plan = kiln.compile(tiny_bert, path, profile=PROFILE)
    assert plan.path == str(path) and path.exists()
    return path


@pytest.fixture(scope="module")
def plan(plan_file):
    return kiln.Plan.load(plan_file)


@pytest.fixture(scope="module")
def session(plan):
    with plan.session(threads=1) as s:
        yield s


def test_version_matches_cli_and_pyproject(kiln_bin, source_dir):
    cli = subprocess.run([kiln_bin, "--version"], capture_output=True, text=True, check=True)
    assert kiln.__version__ in cli.stdout, (kiln.__version__, cli.stdout)
    pyproject = (source_dir / "pyproject.toml").read_text()
    assert f'version = "{kiln.__version__}"' in pyproject


def test_run_matches_onnxruntime(tiny_bert, session):
    inputs = feeds(3, 20, lengths=[20, 11, 5])  # runs padded in the 4 x 128 bucket
    got = session.run(inputs)
    want = onnxruntime_outputs(tiny_bert, inputs)
    assert got.keys() == want.keys() == {"last_hidden_state"}
    g, w = got["last_hidden_state"], want["last_hidden_state"]
    assert g.shape == w.shape == (3, 20, 64) and g.dtype == np.float32
    # Rows' padded positions are compared too: onnxruntime computes them as the model
    # says, and kiln must as well (padding by the executor adds positions, never changes
    # the real ones).
    err = float(np.max(np.abs(g.astype(np.float64) - w)))
    print(f"max abs vs onnxruntime: {err:.3g}")
    assert err <= MAX_ABS


def test_run_is_byte_identical_to_the_cli(kiln_bin, plan_file, session, tmp_path):
    inputs = feeds(2, 16, seed=3, lengths=[16, 9])
    args = [kiln_bin, "run", str(plan_file), "--threads", "1", "--quiet",
            "--output-dir", str(tmp_path / "out")]
    for name, array in inputs.items():
        np.save(tmp_path / f"{name}.npy", array)
        args += ["--input", f"{name}={tmp_path / (name + '.npy')}"]
    subprocess.run(args, check=True, capture_output=True, timeout=120)
    want = np.load(tmp_path / "out" / "last_hidden_state.npy")
    got = session.run(inputs)["last_hidden_state"]
    assert got.tobytes() == want.tobytes()


def test_compile_in_memory_equals_the_file(tiny_bert, plan_file, tmp_path):
    in_memory = kiln.compile(tiny_bert, profile=PROFILE)
    assert in_memory.path is None
    saved = tmp_path / "saved.kiln"
    in_memory.save(saved)
    assert saved.read_bytes() == plan_file.read_bytes()  # compiles are deterministic


def test_info_is_plan_info_json(kiln_bin, plan, plan_file):
    cli = subprocess.run([kiln_bin, "plan-info", str(plan_file), "--json"], capture_output=True,
                         text=True, check=True)
    assert plan.info() == json.loads(cli.stdout)
    info = plan.info()
    assert info["target"] == plan.target == "cpu"
    assert [b["bindings"] for b in info["buckets"]] == [
        {"batch": b, "sequence": s} for b in PROFILE["batch"] for s in PROFILE["sequence"]]
    assert all(b["arena_bytes"] > 0 for b in plan.buckets)
    assert plan.inputs == info["inputs"] and plan.outputs == info["outputs"]
    assert [i["name"] for i in plan.inputs] == ["input_ids", "attention_mask", "token_type_ids"]


def test_in_memory_info_has_no_file(tiny_bert):
    info = kiln.compile(tiny_bert, symbols={"batch": 1, "sequence": 8}).info()
    assert info["plan"] is None and info["file_bytes"] == 0 and info["weights_bytes"] > 0


def test_outputs_are_fresh_aligned_numpy_arrays(session):
    a = session.run(feeds(1, 8))["last_hidden_state"]
    b = session.run(feeds(1, 8))["last_hidden_state"]
    assert isinstance(a, np.ndarray) and a.flags.c_contiguous and a.flags.writeable
    assert a.ctypes.data % 64 == 0
    assert not np.shares_memory(a, b)
    np.testing.assert_array_equal(a, b)
    a[...] = 0  # the caller owns it: writing does not disturb later runs
    np.testing.assert_array_equal(session.run(feeds(1, 8))["last_hidden_state"], b)


def test_read_only_inputs_are_accepted(session):
    inputs = feeds(2, 8)
    want = session.run(inputs)["last_hidden_state"]
    for a in inputs.values():
        a.flags.writeable = False
    np.testing.assert_array_equal(session.run(inputs)["last_hidden_state"], want)


class DlpackOnly:
    """A tensor that offers nothing but the DLPack protocol (as a framework's would)."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_dlpack_inputs(session):
    inputs = feeds(2, 8, seed=5)
    want = session.run(inputs)["last_hidden_state"]
    got = session.run({k: DlpackOnly(v) for k, v in inputs.items()})["last_hidden_state"]
    np.testing.assert_array_equal(got, want)


def test_torch_tensors_in_and_out(session):
    torch = pytest.importorskip("torch", reason="torch is not installed here")
    inputs = feeds(2, 8, seed=6)
    want = session.run(inputs)["last_hidden_state"]
    out = session.run({k: torch.from_numpy(v) for k, v in inputs.items()})["last_hidden_state"]
    as_torch = torch.from_dlpack(out)  # the output crosses back without a copy too
    assert as_torch.data_ptr() == out.ctypes.data
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("bad, error, words", [
    ({"input_ids": lambda x: x.astype(np.int32)}, kiln.InvalidArgument,
     ["'input_ids'", "i32", "i64", "astype(np.int64)"]),
    ({"input_ids": lambda x: np.repeat(x, 2, axis=1)[:, ::2]}, kiln.InvalidArgument,
     ["'input_ids'", "not C-contiguous", "ascontiguousarray"]),
    ({"input_ids": lambda x: x.tolist()}, kiln.InvalidArgument,
     ["'input_ids'", "numpy array or a DLPack tensor", "list"]),
    ({"input_ids": lambda x: None}, kiln.InvalidArgument, ["'input_ids'", "NoneType"]),
    ({"attention_mask": lambda x: x[:, :-1].copy()}, kiln.InvalidArgument,
     ["attention_mask", "sequence"]),
    ({"input_ids": lambda x: x[0].copy()}, kiln.InvalidArgument, ["input_ids"]),
    ({"token_type_ids": lambda x: x.astype(np.float32)}, kiln.InvalidArgument,
     ["'token_type_ids'", "f32"]),
])
def test_bad_inputs_raise_and_name_the_input(session, bad, error, words):
    inputs = feeds(2, 8)
    for name, change in bad.items():
        inputs[name] = change(inputs[name])
    with pytest.raises(error) as info:
        session.run(inputs)
    for word in words:
        assert word in str(info.value), (word, str(info.value))
    assert isinstance(info.value, ValueError)  # InvalidArgument is a ValueError too


def test_shapes_outside_every_bucket_name_the_limit(session):
    with pytest.raises(kiln.InvalidArgument, match=r"batch.*16"):
        session.run(feeds(17, 8))
    with pytest.raises(kiln.InvalidArgument, match=r"sequence.*128"):
        session.run(feeds(1, 129))


def test_missing_and_unknown_inputs(session):
    inputs = feeds(1, 8)
    del inputs["token_type_ids"]
    with pytest.raises(kiln.InvalidArgument, match="'token_type_ids' is missing"):
        session.run(inputs)
    with pytest.raises(kiln.InvalidArgument, match="'extra' is not an input"):
        session.run({**feeds(1, 8), "extra": np.zeros(1)})
    with pytest.raises(TypeError):
        session.run([np.zeros(1)])  # not a dict: nanobind's own argument check


def test_closed_sessions_refuse_to_run(plan):
    s = plan.session(threads=1)
    s.run(feeds(1, 8))
    s.close()
    assert s.closed
    with pytest.raises(kiln.FailedPrecondition, match="closed"):
        s.run(feeds(1, 8))
    s.close()  # closing twice is fine
    with plan.session(threads=1) as t:
        t.run(feeds(1, 8))
    assert t.closed


def test_session_options(plan):
    s = plan.session(threads=2)
    assert (s.threads, s.device) == (2, "cpu")
    assert s.input_names == ["input_ids", "attention_mask", "token_type_ids"]
    assert s.output_names == ["last_hidden_state"]
    with pytest.raises(kiln.InvalidArgument, match="threads=-1"):
        plan.session(threads=-1)
    with pytest.raises(kiln.FailedPrecondition, match="target cpu"):
        plan.session(device="cuda")
    with pytest.raises(kiln.InvalidArgument, match="'gpu'"):
        plan.session(device="gpu")


def test_compile_errors(tiny_bert, tmp_path):
    with pytest.raises(kiln.NotFound) as info:
        kiln.compile(tmp_path / "missing.onnx")
    assert isinstance(info.value, FileNotFoundError)
    with pytest.raises(kiln.InvalidArgument, match="'batch'"):
        kiln.compile(tiny_bert)  # symbolic dims nobody binds
    with pytest.raises(kiln.InvalidArgument, match="'tpu'"):
        kiln.compile(tiny_bert, symbols={"batch": 1, "sequence": 8}, target="tpu")
    with pytest.raises(kiln.InvalidArgument, match="opt_level"):
        kiln.compile(tiny_bert, symbols={"batch": 1, "sequence": 8}, opt_level=7)
    with pytest.raises(TypeError, match="profile"):
        kiln.compile(tiny_bert, profile={"batch": 8})
    with pytest.raises(TypeError, match="symbols"):
        kiln.compile(tiny_bert, symbols={"batch": "1"})
    not_onnx = tmp_path / "garbage.onnx"
    not_onnx.write_bytes(b"\x08\x07garbage")
    with pytest.raises(kiln.Error):
        kiln.compile(not_onnx, symbols={"batch": 1})


def test_compile_below_fp32_and_its_gate(tiny_bert, tmp_path):
    """int8 / bf16 cpu plans run close to fp32; a gate not met raises AccuracyError and
    writes nothing (kiln/verify.h; the CLI's --accept)."""
    inputs = feeds(2, 16, seed=3)
    want = kiln.compile(tiny_bert, symbols={"batch": 2, "sequence": 16}).session().run(inputs)
    for precision in ("bf16", "int8"):
        plan = kiln.compile(tiny_bert, symbols={"batch": 2, "sequence": 16}, precision=precision)
        got = plan.session().run(inputs)
        a, b = want["last_hidden_state"], got["last_hidden_state"]
        cos = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
        assert cos.min() > 0.999, (precision, cos.min())
        info = plan.info()
        assert any(n["precision"] == precision for n in info["precision_notes"])
    out = tmp_path / "int8.kiln"
    with pytest.raises(kiln.AccuracyError, match="fails its accuracy gate") as error:
        kiln.compile(tiny_bert, out, symbols={"batch": 2, "sequence": 16}, precision="int8",
                     accept="max_abs<=1e-12")
    assert error.value.code == "ABORTED"
    assert not out.exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(kiln.AccuracyError):
        kiln.compile(tiny_bert, symbols={"batch": 2, "sequence": 16}, precision="int8",
                     accept="cosine>=1.5")
    with pytest.raises(kiln.InvalidArgument, match="unknown metric"):
        kiln.compile(tiny_bert, symbols={"batch": 2, "sequence": 16}, precision="int8",
                     accept="angle>=0.9")
    kiln.compile(tiny_bert, out, symbols={"batch": 2, "sequence": 16}, precision="int8",
                 accept="none")
    assert out.exists()


def test_damaged_plans_are_refused(plan_file, tmp_path):
    data = bytearray(plan_file.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the weights: the CRC catches it
    damaged = tmp_path / "damaged.kiln"
    damaged.write_bytes(bytes(data))
    with pytest.raises(kiln.Error, match="damaged.kiln"):
        kiln.Plan.load(damaged)
    truncated = tmp_path / "truncated.kiln"
    truncated.write_bytes(bytes(data[:100]))
    with pytest.raises(kiln.Error, match="truncated.kiln"):
        kiln.Plan.load(truncated)
    with pytest.raises(kiln.NotFound):
        kiln.Plan.load(tmp_path / "absent.kiln")


def test_progress(tiny_bert, capfd, monkeypatch):
    lines = []
    kiln.compile(tiny_bert, symbols={"batch": 1, "sequence": 8}, progress=lines.append)
    assert any(line.startswith("import:") for line in lines), lines
    kiln.compile(tiny_bert, symbols={"batch": 1, "sequence": 8}, progress=True)
    assert "import:" in capfd.readouterr().err

    def broken(line):
        raise RuntimeError("callback bug")

    # A callback that raises is reported once (as unraisable) and the compile finishes.
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    plan = kiln.compile(tiny_bert, symbols={"batch": 1, "sequence": 8}, progress=broken)
    assert plan.buckets
    assert len(reported) == 1 and isinstance(reported[0].exc_value, RuntimeError)
    reported.clear()  # its traceback's frames would keep this test's objects alive


def test_help_shows_docs():
    for obj in (kiln.compile, kiln.Plan.load, kiln.Plan.session, kiln.Session.run, kiln.Error):
        assert obj.__doc__ and len(obj.__doc__) > 40, obj


def test_stubs_are_built():
    stub = pathlib.Path(kiln.__file__).with_name("_kiln.pyi")
    text = stub.read_text()
    for sig in ("def run(self, inputs: dict, outputs: str = 'auto', pack: bool = True) -> dict",
                "def load(path: str | os.PathLike) -> Plan",
                "def session(self, threads: int = 0, device: str | None = None) -> Session"):
        assert sig in text, sig


def test_threads_share_one_session_exactly(session):
    """8 threads x 100 runs through one session, each output equal to the serial one."""
    cases = [feeds(1 + i % 4, 8 + 3 * i, seed=i, lengths=None) for i in range(8)]
    want = [session.run(c)["last_hidden_state"] for c in cases]
    failures = []

    def worker(i):
        for _ in range(100):
            got = session.run(cases[i])["last_hidden_state"]
            if got.tobytes() != want[i].tobytes():
                failures.append(i)
                return

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads)
    assert failures == []


def test_the_gil_is_released_while_running(session):
    """While one thread is inside run(), another thread's Python code keeps running: the
    counter it bumps moves during at least some of the 20 runs (with the GIL held it
    could move during none)."""
    inputs = feeds(16, 128)
    moved = []
    counter = [0]
    done = threading.Event()

    def runner():
        for _ in range(20):
            before = counter[0]
            session.run(inputs)
            moved.append(counter[0] != before)
        done.set()

    t = threading.Thread(target=runner)
    t.start()
    while not done.is_set():
        counter[0] += 1
    t.join()
    assert any(moved), "the counter never moved while kiln ran: is the GIL held?"


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_no_leak_over_10000_runs(session):
    """RSS stays flat: after 1000 warm-up runs, 10 000 more grow it by < 8 MiB. A leaked
    output buffer (1 x 8 x 64 floats = 2 KiB, one page per aligned allocation) or input
    reference would add >= 20 MiB."""
    inputs = feeds(1, 8)
    for _ in range(1000):
        session.run(inputs)
    gc.collect()
    before = rss_bytes()
    for _ in range(10000):
        session.run(inputs)
    gc.collect()
    grown = rss_bytes() - before
    print(f"RSS growth over 10000 runs: {grown / 2**20:.2f} MiB")
    assert grown < 8 * 2**20


def test_inputs_stay_referenced_only_during_the_run(session):
    inputs = feeds(1, 8)
    counts = {k: sys.getrefcount(v) for k, v in inputs.items()}
    session.run(inputs)
    assert {k: sys.getrefcount(v) for k, v in inputs.items()} == counts


def test_outputs_option(session):
    inputs = feeds(1, 8)
    want = session.run(inputs)["last_hidden_state"]
    np.testing.assert_array_equal(session.run(inputs, outputs="host")["last_hidden_state"], want)
    with pytest.raises(kiln.InvalidArgument, match="outputs='gpu'"):
        session.run(inputs, outputs="gpu")
    with pytest.raises(kiln.InvalidArgument, match="needs a cuda session"):
        session.run(inputs, outputs="device")


CUDA_MAX_ABS = 1e-3  # fp32 CUDA kernels vs the CPU plan: other summation orders, O(1) values


def test_cuda_plans(tiny_bert, session):
    """A cuda plan compiles on any machine; without a GPU its session is refused with the
    reason. With one: host I/O matches the CPU plan, and CUDA tensors go in and out
    (DLPack, no host trip) with the same bits as host I/O."""
    plan = kiln.compile(tiny_bert, target="cuda", profile={"batch": [1, 4], "sequence": [16]})
    assert plan.target == "cuda" and plan.info()["cuda_sms"]
    dev = kiln.cuda_device()
    if not dev["available"]:
        with pytest.raises(kiln.FailedPrecondition, match="cuda"):
            plan.session()
        pytest.skip(f"no usable GPU: {dev['reason']}")
    inputs = feeds(3, 12, seed=9)
    cuda = plan.session()
    assert cuda.device == "cuda"
    host = cuda.run(inputs)["last_hidden_state"]
    assert isinstance(host, np.ndarray)
    err = float(np.max(np.abs(host - session.run(inputs)["last_hidden_state"])))
    assert err <= CUDA_MAX_ABS, err
    torch = pytest.importorskip("torch", reason="torch is not installed: device I/O unchecked")
    out = cuda.run({k: torch.from_numpy(v).cuda() for k, v in inputs.items()})
    on_device = torch.from_dlpack(out["last_hidden_state"])
    assert on_device.is_cuda
    assert np.array_equal(on_device.cpu().numpy(), host)


def test_cuda_packed_plans(tiny_bert, tmp_path):
    """A cuda plan with a packed program (profile tokens=...) compiles on any machine, with
    the packed signature; with a GPU, run() packs a batch of mixed lengths (padding positions
    zeros) and agrees with pack=False on the real positions within CUDA_MAX_ABS."""
    plan = kiln.compile(tiny_bert, tmp_path / "packed_cuda.kiln", target="cuda",
                        profile={"batch": [1, 4], "sequence": [32], "tokens": [32, 64]})
    assert plan.target == "cuda"
    assert [s["program"] for s in plan.info()["signatures"]] == ["packed"]
    dev = kiln.cuda_device()
    if not dev["available"]:
        with pytest.raises(kiln.FailedPrecondition, match="cuda"):
            plan.session()
        pytest.skip(f"no usable GPU: {dev['reason']}")
    lengths = [32, 3, 17, 9]
    inputs = feeds(4, 32, seed=5, lengths=lengths)
    with plan.session() as s:
        packed = s.run(inputs)["last_hidden_state"]
        padded = s.run(inputs, pack=False)["last_hidden_state"]
    for row, n in enumerate(lengths):
        assert float(np.max(np.abs(packed[row, :n] - padded[row, :n]))) <= CUDA_MAX_ABS
        assert not packed[row, n:].any()


def test_packed_runs_match_padded_runs(tiny_bert, tmp_path):
    """A plan with a packed program (profile tokens=...): run() packs a batch of mixed
    lengths and returns the padded layout; pack=False runs the padded buckets. On the real
    positions they agree within 1e-5 (fp32 summation order); padding positions of the packed
    run are zeros (docs/packing.md)."""
    plan = kiln.compile(tiny_bert, tmp_path / "packed.kiln",
                        profile={"batch": [1, 4], "sequence": [32], "tokens": [32, 64]})
    assert [s["program"] for s in plan.info()["signatures"]] == ["packed"]
    lengths = [32, 3, 17, 9]
    inputs = feeds(4, 32, seed=5, lengths=lengths)
    with plan.session(threads=1) as s:
        packed = s.run(inputs)["last_hidden_state"]
        padded = s.run(inputs, pack=False)["last_hidden_state"]
    assert packed.shape == padded.shape == (4, 32, 64)
    for row, n in enumerate(lengths):
        assert float(np.max(np.abs(packed[row, :n] - padded[row, :n]))) <= 1e-5
        assert not packed[row, n:].any()
