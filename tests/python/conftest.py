"""Shared fixtures for the Python package's tests (tests/python): the package under test,
the source tree, the kiln CLI and small models.

CTest runs these with PYTHONPATH=<build>/python (the package as the build lays it out),
KILN_BIN and KILN_SOURCE_DIR set. Run by hand from the source tree:
  PYTHONPATH=build/python python3 -m pytest tests/python
"""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/

from kiln_fixtures import SOURCE_DIR, kiln_bin, source_dir  # noqa: E402,F401  (fixtures)

try:
    import kiln  # noqa: F401  (fail at collection with a useful message, not per test)
except ImportError as err:
    raise pytest.UsageError(
        f"cannot import the kiln package ({err}); build it (cmake --build build) and set "
        "PYTHONPATH=build/python, or pip install . (CTest sets the path itself)") from err

TINY_BERT = SOURCE_DIR / "models" / "fixtures" / "bert_tiny_opset14_none.onnx"


@pytest.fixture(scope="session")
def tiny_bert():
    """A committed 2-layer BERT (opset 14, inputs input_ids/attention_mask/token_type_ids
    i64[batch, sequence], output last_hidden_state f32[batch, sequence, 64], vocab 1000)."""
    assert TINY_BERT.exists(), TINY_BERT
    return TINY_BERT
