"""Pure planning: (JobSpec, Inventory) -> Plan, plus its export and cost estimate, and incremental planning of
elastic components (`resize`). Imports no Ray."""

from rlplace.planner.capacity import NodeFree, free_capacity
from rlplace.planner.core import plan
from rlplace.planner.estimate import Estimate, estimate
from rlplace.planner.export import export_resource_pool, write_resource_pool
from rlplace.planner.resize import Resize, SizeChange, grow, grow_back, resize, shrink, shrink_lost_node

__all__ = [
    "Estimate",
    "NodeFree",
    "Resize",
    "SizeChange",
    "estimate",
    "export_resource_pool",
    "free_capacity",
    "grow",
    "grow_back",
    "plan",
    "resize",
    "shrink",
    "shrink_lost_node",
    "write_resource_pool",
]
