"""rlplace: place and run the workers of distributed RL jobs on Ray clusters, from one YAML section."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlplace.errors import ConfigError, PlacementError, PlanError, Problem, RlplaceError

if TYPE_CHECKING:
    import os

    from rlplace.inventory import Inventory
    from rlplace.ray.job import Job
    from rlplace.ray.worker import WorkerPlacement

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "PlacementError",
    "PlanError",
    "Problem",
    "RlplaceError",
    "__version__",
    "connect",
    "worker_placement",
]


def connect(
    config: Any,
    *,
    inventory: Inventory | None = None,
    timeout_s: float = 30.0,
    name: str | None = None,
    address: str | None = None,
    export_path: str | os.PathLike | None = "resource_pool_auto.yaml",
) -> Job:
    """Plan `config` and reserve it on Ray, as `rlplace.ray.job.connect` (Ray is imported only here)."""
    from rlplace.ray.job import connect as _connect

    return _connect(
        config, inventory=inventory, timeout_s=timeout_s, name=name, address=address, export_path=export_path
    )


def worker_placement() -> WorkerPlacement:
    """Inside a worker started by rlplace: its component, rank, node, GPUs, hardware (`rlplace.ray.worker`)."""
    from rlplace.ray.worker import placement

    return placement()
