"""Runtime services for a placed job: phases with offload hooks, buffer shard routing, weight sync,
torch.distributed process groups and the torch offload helpers. Every name is imported from here.

The names that need torch (`init_component_group`, `destroy_component_group`, `ComponentGroup`,
`Offloader`, `OffloadHooks`, `TransferStats`) are resolved on first use, so `import rlplace.runtime` never
imports torch: it stays the optional extra `rlplace[torch]`. The runtime sits on the Ray layer's
worker-side API (`rlplace.ray.worker`) and on the `Group` protocol (`rlplace.groups`), nothing else of Ray.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rlplace.phases import HOOKS, HookEvent, Phases
from rlplace.runtime.buffer import BufferShard, SampleStats, ShardRouter
from rlplace.runtime.sync import SyncReport, sync_weights

if TYPE_CHECKING:
    from rlplace.runtime.collective import ComponentGroup, destroy_component_group, init_component_group
    from rlplace.runtime.offload import Offloader, OffloadHooks, TransferStats

__all__ = [
    "HOOKS",
    "BufferShard",
    "ComponentGroup",
    "HookEvent",
    "OffloadHooks",
    "Offloader",
    "Phases",
    "SampleStats",
    "ShardRouter",
    "SyncReport",
    "TransferStats",
    "destroy_component_group",
    "init_component_group",
    "sync_weights",
]

#: name -> the module that defines it (each needs torch).
_WITH_TORCH = {
    "ComponentGroup": "rlplace.runtime.collective",
    "destroy_component_group": "rlplace.runtime.collective",
    "init_component_group": "rlplace.runtime.collective",
    "OffloadHooks": "rlplace.runtime.offload",
    "Offloader": "rlplace.runtime.offload",
    "TransferStats": "rlplace.runtime.offload",
}


def __getattr__(name: str) -> Any:
    if name not in _WITH_TORCH:
        raise AttributeError(f"module 'rlplace.runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WITH_TORCH[name]), name)
    globals()[name] = value
    return value
