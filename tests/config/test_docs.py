"""docs/config.md documents every key the loader accepts (a key added to the schema must be documented)."""

from __future__ import annotations

import pathlib

from rlplace.config.fields import Section
from rlplace.config.hardware import REGISTRY
from rlplace.config.sections import (
    ELASTIC_RANGE,
    ENV_CONFIG,
    NODE_GROUP,
    NODE_GROUPS_SECTION,
    PLACEMENT_BLOCK,
    POOL,
    POOLS_SECTION,
)

DOC = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "config.md").read_text()


def test_every_declared_key_is_in_the_user_guide():
    sections: list[Section] = [POOLS_SECTION, PLACEMENT_BLOCK, POOL, NODE_GROUPS_SECTION, NODE_GROUP, ENV_CONFIG]
    sections += [ELASTIC_RANGE]
    sections += [cls.config for cls in REGISTRY.values()]
    missing = sorted({key for s in sections for key in s.fields if f"`{key}`" not in DOC and f".{key}`" not in DOC})
    assert not missing, f"keys missing from docs/config.md: {missing}"
    assert all(f"`{name}`" in DOC for name in REGISTRY)
