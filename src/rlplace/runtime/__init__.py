"""Runtime services for a placed job: phases with offload hooks, buffer shard routing, weight sync.

The torch helpers live in `rlplace.runtime.offload` and need the optional extra `rlplace[torch]`;
nothing imported here needs torch.
"""

from rlplace.runtime.buffer import BufferShard, SampleStats, ShardRouter
from rlplace.runtime.phases import HOOKS, HookEvent, Phases
from rlplace.runtime.sync import SyncReport, sync_weights

__all__ = [
    "HOOKS",
    "BufferShard",
    "HookEvent",
    "Phases",
    "SampleStats",
    "ShardRouter",
    "SyncReport",
    "sync_weights",
]
