"""Fixtures every pytest suite of kiln's shares (tests/e2e, tests/python): the source tree
and the kiln CLI under test. A suite's conftest.py puts tests/ on sys.path and imports
them, which registers them with pytest.

CTest sets KILN_BIN (the built CLI) and KILN_SOURCE_DIR; run by hand, KILN_BIN must be set
or build/kiln must exist in the source tree. The source tree's models/ goes on sys.path
(the generators: gen_bert, gen_variants, pretrained).
"""

import os
import pathlib
import sys

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("KILN_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(SOURCE_DIR / "models"))


@pytest.fixture(scope="session")
def source_dir():
    """The kiln source tree."""
    return SOURCE_DIR


@pytest.fixture(scope="session")
def kiln_bin():
    """Path of the kiln CLI under test."""
    path = os.environ.get("KILN_BIN") or str(SOURCE_DIR / "build" / "kiln")
    if not os.access(path, os.X_OK):
        pytest.fail(f"kiln binary not found at {path}: set KILN_BIN (CTest does)")
    return path
