"""Collects the code blocks of README.md, docs/*.md and examples/*/README.md as tests (Sybil).

A root conftest because pytest offers a conftest's collection hook only for files below it; the parsers,
the scratch directory and the convention are in tests/docs/blocks.py.
"""

from tests.docs.blocks import sybil

pytest_collect_file = sybil().pytest()
