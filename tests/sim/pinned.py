"""What the tests of a job on the simulated cluster share: a pinned two-node config, a worker class that echoes, and
the job's warnings silenced (the losses and refusals the tests provoke are what they are about)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

#: On 2x4 GPUs: train rank 0 on the group's device 4 (node 1, GPU 0), rank 1 on its device 1 (node 0, GPU 1).
PINNED = """
cluster:
  num_nodes: 2
  component_placement:
    train: {node_group: a800, placement: "4,1"}
  node_groups:
    - {label: a800, node_ranks: "0,1"}
"""


class Echo:
    def step(self, x: int) -> int:
        return x


@pytest.fixture(autouse=True)
def quiet() -> Iterator[None]:
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)
