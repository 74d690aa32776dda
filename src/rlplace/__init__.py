"""rlplace: place and run the workers of distributed RL jobs on Ray clusters, from one YAML section.

This is the public surface the docs teach: `connect`, `worker_placement`, `Job`, `WorkerGroup`, `NodeEvent`,
`ResizeEvent`, `simulated_cluster` (a cluster of fake GPU nodes on this machine) and the errors. The Ray layer's
names are resolved on first use (module `__getattr__`), so `import rlplace` -- and with it `rlplace validate` /
`rlplace plan` -- never imports Ray. Runtime services (buffer routing, weight sync, phases, torch.distributed) are
imported from `rlplace.runtime`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlplace.errors import (
    ConfigError,
    NodeLostError,
    PlacementError,
    PlanError,
    Problem,
    RanksRemovedError,
    RendezvousError,
    RlplaceError,
)

if TYPE_CHECKING:
    from rlplace.ray.group import WorkerGroup
    from rlplace.ray.job import Job, connect
    from rlplace.ray.local_raylets import simulated_cluster
    from rlplace.ray.state import NodeEvent, ResizeEvent
    from rlplace.ray.worker import placement as worker_placement

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "Job",
    "NodeEvent",
    "NodeLostError",
    "PlacementError",
    "PlanError",
    "Problem",
    "RanksRemovedError",
    "RendezvousError",
    "ResizeEvent",
    "RlplaceError",
    "WorkerGroup",
    "__version__",
    "connect",
    "simulated_cluster",
    "worker_placement",
]

_LAZY = {
    "connect": ("rlplace.ray.job", "connect"),
    "Job": ("rlplace.ray.job", "Job"),
    "WorkerGroup": ("rlplace.ray.group", "WorkerGroup"),
    "NodeEvent": ("rlplace.ray.state", "NodeEvent"),
    "ResizeEvent": ("rlplace.ray.state", "ResizeEvent"),
    "worker_placement": ("rlplace.ray.worker", "placement"),
    "simulated_cluster": ("rlplace.ray.local_raylets", "simulated_cluster"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'rlplace' has no attribute {name!r}")
    import importlib

    module, attr = _LAZY[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value
