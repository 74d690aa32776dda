"""A hint for pool ranges written by hand whose weight sync crosses racks when other ranges would not.

Auto mode's disaggregate strategy fills every rack with train and rollout nodes in proportion, so each rack's
rollout pulls the weights from a trainer inside it (docs/planner.md, "Topology"); ranges written by hand are kept
exactly as written, so the most the planner can do is say so. When the manual plan's weight sync crosses racks
more often than the same workers placed by that strategy would, the warning names the crossings and gives the
pools that strategy computes (the `resource_pool` to paste, as `rlplace plan --export` writes it).
"""

from __future__ import annotations

from collections.abc import Callable

from rlplace.errors import ConfigError, PlanError
from rlplace.inventory import Inventory
from rlplace.model import RACK, EnvStrategy, JobSpec
from rlplace.plan import Plan
from rlplace.planner.estimate import estimate
from rlplace.planner.export import export_resource_pool
from rlplace.planner.variants import eval_env_share, with_strategy


def cross_rack_hint(
    spec: JobSpec, placed: Plan, inventory: Inventory, plan: Callable[[JobSpec, Inventory], Plan]
) -> str | None:
    """The warning for a manual pools plan whose weight sync crosses racks avoidably, else None; `plan` is the
    planner's entry point, which plans the strategy's pools."""
    s = placed.settings
    if s.dialect != "pools" or s.mode != "manual" or RACK not in placed.topology.units:
        return None
    ours = _rack_crossings(placed, inventory)
    if not ours:
        return None
    env_strategy: EnvStrategy | None = "device-colocate" if eval_env_share(placed) else None
    try:
        theirs = plan(with_strategy(spec, placed, "disaggregate", env_strategy), inventory)
    except (ConfigError, PlanError):
        return None  # the strategy cannot place these workers here: nothing better to suggest
    better = _rack_crossings(theirs, inventory)
    if better >= ours:
        return None
    exported = export_resource_pool(theirs)["resource_pool"]
    pools = ", ".join("{" + ", ".join(f"{k}: {v}" for k, v in pool.items()) + "}" for pool in exported)
    outcome = "inside racks" if not better else f"to {better} node(s) pulling across racks"
    return (
        f"weight sync: {ours} node(s) of eval workers pull the weights from a train node in another rack; these "
        f"ranges (strategy disaggregate's, for the same workers) would keep it {outcome}: `resource_pool: [{pools}]` "
        "(or placement.mode: auto, strategy: disaggregate)"
    )


def _rack_crossings(placed: Plan, inventory: Inventory) -> int:
    """How many nodes pull the weights across a rack (a model of 1 byte: the estimate then counts nodes)."""
    crossing = estimate(placed, 1, 1, inventory).crossing
    return (crossing or {}).get(RACK, 0)
