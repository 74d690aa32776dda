"""Shared test fixtures. Ray-cluster fixtures live in tests/ray/conftest.py (one cluster per session)."""

from __future__ import annotations

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "tests" / "data" / "spec_examples"


@pytest.fixture
def spec_examples() -> pathlib.Path:
    """The tests' own copies of ../shared/spec/examples (the acceptance needs copies, not the shared dir)."""
    return EXAMPLES
