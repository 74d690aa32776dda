"""rlplace: place and run the workers of distributed RL jobs on Ray clusters, from one YAML section.

`connect` and `worker_placement` live in `rlplace.ray`; they are resolved on first use (module
`__getattr__`), so `import rlplace` -- and with it `rlplace validate` / `rlplace plan` -- never imports Ray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlplace.errors import ConfigError, PlacementError, PlanError, Problem, RlplaceError

if TYPE_CHECKING:
    from rlplace.ray.job import connect
    from rlplace.ray.worker import placement as worker_placement

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

_LAZY = {
    "connect": ("rlplace.ray.job", "connect"),
    "worker_placement": ("rlplace.ray.worker", "placement"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'rlplace' has no attribute {name!r}")
    import importlib

    module, attr = _LAZY[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value
