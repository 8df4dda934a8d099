"""bench/cpuid_mask.cc, the LD_PRELOAD library behind `bench/e2e_bench.py --cpu-isa avx2`:
under it an AVX-512 machine must look AVX2-only to kiln as to onnxruntime, kiln must then
run (and agree with onnxruntime) on its AVX2 path without being told, and the library must
not swallow real crashes.

CTest passes the library's path as KILN_CPUID_MASK_LIB (bench/ built: -DKILN_BENCH=ON, the
default). Skipped, with the reason, where it is absent, on a CPU without AVX-512 (nothing to
hide) or without CPUID faulting ("cpuid_fault" in /proc/cpuinfo).
"""

import json
import os
import pathlib
import signal
import subprocess
import sys

import numpy as np
import pytest

from conftest import KILN_TIMEOUT_S, run_onnxruntime
import gen_bert

LIB = os.environ.get("KILN_CPUID_MASK_LIB", "")
TOLERANCE = 1e-4  # as test_plan.py: fp32 plans against onnxruntime, outputs of order 1


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


SHOW_ACTIVE = "import os; print(os.environ.get('KILN_CPUID_MASK_ACTIVE'))"


def masked_env(value="avx2"):
    env = {k: v for k, v in os.environ.items()
           if k not in ("KILN_CPU_ISA", "KILN_GEMM", "PYTHONFAULTHANDLER")}
    env.update(LD_PRELOAD=LIB, KILN_CPUID_MASK=value)
    return env


def skip_reason():
    if not LIB:
        return "KILN_CPUID_MASK_LIB is not set (run through CTest with bench/ built)"
    if not os.path.exists(LIB):
        return f"{LIB} does not exist"
    flags = cpu_flags()
    if not {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "this CPU lacks kiln's AVX-512 path (F/BW/VL/DQ): the mask would hide nothing"
    if "cpuid_fault" not in flags:
        return "this CPU (or its hypervisor) has no CPUID faulting"
    probe = subprocess.run([sys.executable, "-c", SHOW_ACTIVE], capture_output=True, text=True,
                           env=masked_env(), timeout=60, check=False)
    if probe.stdout.strip() != "avx2":  # e.g. arch_prctl refused by a seccomp sandbox
        return f"the mask does not take effect here: {probe.stderr.strip() or probe.stdout}"
    return None


SKIP = skip_reason()
pytestmark = pytest.mark.skipif(SKIP is not None, reason=SKIP or "")


def run(args, env):
    return subprocess.run(list(map(str, args)), capture_output=True, text=True, env=env,
                          timeout=KILN_TIMEOUT_S, check=False)


@pytest.fixture(scope="module")
def tiny(kiln_bin, tmp_path_factory):
    """The tiny BERT fixture and its plan at batch 2 x sequence 16."""
    root = tmp_path_factory.mktemp("cpuid")
    model = pathlib.Path(gen_bert.fixture_path("opset17", "classifier"))
    plan = root / "tiny.kiln"
    proc = run([kiln_bin, "compile", model, "-o", plan, "--quiet", "--shape",
                "batch=2,sequence=16"], os.environ)
    assert proc.returncode == 0, proc.stderr
    return model, plan


def bench_json(kiln_bin, plan, env):
    proc = run([kiln_bin, "bench", plan, "--runs", "1", "--warmup", "0", "--threads", "2",
                "--json"], env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_kiln_detects_avx2_under_the_mask(kiln_bin, tiny):
    """Unmasked, kiln picks AVX-512 on this machine; masked, with no KILN_CPU_ISA, it picks
    AVX2 for its own kernels and every Linear implementation it reports is an AVX2 one
    (kiln's AVX2 tile or oneDNN below AVX-512)."""
    _, plan = tiny
    native = bench_json(kiln_bin, plan, masked_env("off"))
    assert native["cpu_isa"] == "avx512", native["cpu_isa"]
    masked = bench_json(kiln_bin, plan, masked_env())
    assert masked["cpu_isa"] == "avx2", masked["cpu_isa"]
    impls = json.dumps(masked["impls"])
    assert "avx2" in impls or "gemm:jit" in impls, impls
    assert "avx512" not in impls, impls


def test_kiln_under_the_mask_matches_onnxruntime(kiln_bin, tiny, tmp_path):
    model, plan = tiny
    feeds = gen_bert.random_inputs(gen_bert.SIZES["tiny"], 2, 16, 7)
    args = [kiln_bin, "run", plan, "--output-dir", tmp_path / "out"]
    for name, array in feeds.items():
        np.save(tmp_path / f"{name}.npy", array)
        args += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    proc = run(args, masked_env())
    assert proc.returncode == 0, proc.stderr
    for name, want in run_onnxruntime(model, feeds).items():
        got = np.load(tmp_path / "out" / f"{name}.npy")
        err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
        assert err <= TOLERANCE, f"{name}: max abs error {err:.3g} > {TOLERANCE}"


def test_the_mask_reports_itself_and_refuses_unknown_profiles():
    show = [sys.executable, "-c", SHOW_ACTIVE]
    proc = run(show, masked_env())
    assert proc.returncode == 0 and proc.stdout.strip() == "avx2", (proc.stdout, proc.stderr)
    # Not masked: the variable is cleared even when the parent's environment had it.
    proc = run(show, dict(masked_env("avx1"), KILN_CPUID_MASK_ACTIVE="avx2"))
    assert proc.returncode == 0 and proc.stdout.strip() == "None", proc.stdout
    assert "KILN_CPUID_MASK=avx1 is not 'avx2'; not masking" in proc.stderr, proc.stderr


# Each prints "reached" and then dies of SIGSEGV: a fault, or one sent by kill.
SEGFAULTS = {
    "fault": "import ctypes; print('reached', flush=True); ctypes.string_at(0)",
    "kill": "import os, signal; print('reached', flush=True); os.kill(os.getpid(), "
            "signal.SIGSEGV); print('survived')",
}


@pytest.mark.parametrize("how", sorted(SEGFAULTS))
@pytest.mark.parametrize("faulthandler", [False, True], ids=["plain", "faulthandler"])
def test_other_segfaults_still_kill_the_process(how, faulthandler):
    """The handler only emulates CPUID. Any other SIGSEGV reaches the program's own handler
    (faulthandler here: it installs one after the mask, which must not take over CPUID
    faults, or Python would die at its first CPUID) or the default action."""
    env = dict(masked_env(), **({"PYTHONFAULTHANDLER": "1"} if faulthandler else {}))
    proc = run([sys.executable, "-c", SEGFAULTS[how]], env)
    assert proc.stdout.strip() == "reached", (proc.stdout, proc.stderr)
    assert proc.returncode == -signal.SIGSEGV, (proc.returncode, proc.stderr)
    if faulthandler:
        assert "Fatal Python error: Segmentation fault" in proc.stderr, proc.stderr


def test_a_program_with_its_own_segv_handler_still_sees_avx2(kiln_bin, tiny):
    """faulthandler on: Python's imports (numpy's CPU dispatch runs CPUID) and kiln still
    start and see the masked CPU."""
    env = dict(masked_env(), PYTHONFAULTHANDLER="1")
    proc = run([sys.executable, "-c", "import numpy, os; print(os.environ.get("
                "'KILN_CPUID_MASK_ACTIVE'))"], env)
    assert proc.returncode == 0 and proc.stdout.strip() == "avx2", (proc.stdout, proc.stderr)
    assert bench_json(kiln_bin, tiny[1], env)["cpu_isa"] == "avx2"
