"""The Ray-layer tests ship their worker and plan modules to the workers by value; `extra` adds nodes to the
session cluster for one test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import ray_plans
import ray_workers
from ray import cloudpickle
from tests.ray_helpers import Extra

from rlplace.ray.nodes import live_inventory

# The test-only modules are not importable in worker processes (tests/ray is not on their path): ship
# their code with the pickled classes instead.
cloudpickle.register_pickle_by_value(ray_workers)
cloudpickle.register_pickle_by_value(ray_plans)


@pytest.fixture
def extra(ray_cluster: Any) -> Iterator[Extra]:
    """Nodes this test adds to the session cluster (ranked nodes, spares) and loses; whatever is still alive is
    removed at the end, and the live inventory is the session's four nodes again."""
    nodes = Extra(ray_cluster.cluster)
    try:
        yield nodes
    finally:
        nodes.remove_all()
        assert len(live_inventory()) == 4, "the session cluster must be its four ranked nodes again"
