"""Pure planning: (JobSpec, Inventory) -> Plan, plus its export and cost estimate. Imports no Ray."""

from rlplace.planner.core import plan
from rlplace.planner.estimate import Estimate, estimate
from rlplace.planner.export import export_resource_pool, write_resource_pool

__all__ = ["Estimate", "estimate", "export_resource_pool", "plan", "write_resource_pool"]
