"""Shared fixtures for the end-to-end tests: the kiln binary, the source tree, running
`kiln run` on .npy inputs, and onnxruntime as the oracle.

CTest sets KILN_BIN (the built CLI) and KILN_SOURCE_DIR; run by hand, KILN_BIN must be set
(or build/kiln must exist in the source tree).
"""

import pathlib
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/

from kiln_fixtures import SOURCE_DIR, kiln_bin, source_dir  # noqa: E402,F401  (fixtures)
import gen_bert  # noqa: E402  (kiln_fixtures puts models/ on the path)

# `kiln run` on the small models takes well under a second; this only stops a hang.
KILN_TIMEOUT_S = 300


def run_kiln(kiln_bin, model, feeds, workdir, *extra):
    """Saves `feeds` as .npy files in `workdir`, runs `kiln run` (plus `extra` flags),
    returns (process, outdir)."""
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    outdir = workdir / "out"
    args = [kiln_bin, "run", str(model)]
    for name, array in feeds.items():
        path = workdir / f"{name}.npy"
        np.save(path, array)
        args += ["--input", f"{name}={path}"]
    args += ["--output-dir", str(outdir), *extra]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=KILN_TIMEOUT_S,
                          check=False)
    return proc, outdir


def run_onnxruntime(model, feeds):
    """Runs the model in onnxruntime (CPU, graph optimizations off so ORT executes the
    model's own ops rather than fused kernels); returns {output name: array}."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))
