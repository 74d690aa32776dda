"""Export a pool plan in RLightning's `resource_pool` form, as its docs' "Tip" asks (resource_pool_auto.yaml;
docs/planner.md, "Export").

Re-planning the same config with `placement.mode: manual` and this `resource_pool` gives the identical
placement. Pools are written without `node_ids` when "the next unused GPU nodes" rule rebuilds them
(nodes 0..K-1, in pool order, equal GPU counts per pool); otherwise every pool names its nodes by rank,
with a per-node `num_gpus` list.
"""

from __future__ import annotations

import pathlib

import yaml

from rlplace.errors import ConfigError, Problem
from rlplace.model import COUNTED_COMPONENTS
from rlplace.output_files import write_file
from rlplace.plan import Plan
from rlplace.planner.ranges import format_ranks


def export_resource_pool(plan: Plan) -> dict:
    """`{"resource_pool": [{name, num_node, num_gpus, [node_ids], train, eval, env}, ...]}`."""
    if plan.settings.dialect == "verl":  # verl reads no pool file: its trainer builds the pools from its keys
        raise ConfigError(
            Problem(
                path="--export",
                value=plan.settings.strategy,
                message="it writes RLightning's resource_pool (placement.mode: manual), which verl does not "
                "read: verl's trainer builds its pools from trainer.nnodes x trainer.n_gpus_per_node and the roles "
                "the config asks for, so there is no file to write that verl would use. The plan's pools, their "
                "nodes and the roles on them are in `rlplace plan ... --format json` (groups) or --format yaml",
            )
        )
    if plan.settings.dialect != "pools" or not plan.uses_placement_groups or not plan.groups:
        raise ConfigError(
            Problem(
                path="--export",
                value=plan.settings.strategy,
                message=f"strategy {plan.settings.strategy} creates no resource pools, so there is nothing to "
                "export; export works for strategies disaggregate, colocate and manual",
            )
        )
    order = [n for g in plan.groups for n in g.node_ranks]
    plain = order == list(range(len(order))) and all(len(set(g.gpus_per_node)) == 1 for g in plan.groups)
    pools = []
    for g in plan.groups:
        entry: dict[str, object] = {"name": g.name, "num_node": len(g.node_ranks)}
        if plain:
            entry["num_gpus"] = g.gpus_per_node[0]
        else:
            entry["node_ids"] = list(g.node_ranks)
            entry["num_gpus"] = list(g.gpus_per_node)
        for c in COUNTED_COMPONENTS:  # the buffer follows train (alignment): it needs no range
            if c in g.components:
                entry[c] = format_ranks(g.components[c])
        pools.append(entry)
    return {"resource_pool": pools}


def write_resource_pool(plan: Plan, path: str | pathlib.Path) -> pathlib.Path:
    """Write `export_resource_pool(plan)` as YAML, with a header saying how to use it (atomically, never through a
    link: `rlplace.output_files`)."""
    header = (
        f"# resource_pool computed by `rlplace plan` (strategy {plan.settings.strategy}, env_strategy "
        f"{plan.settings.env_strategy}).\n# Use it: put this resource_pool in the config (under or beside "
        "`cluster:`) and set placement.mode: manual;\n# the plan is then identical. Edit the ranges to tune.\n"
    )
    body = yaml.safe_dump(export_resource_pool(plan), sort_keys=False, default_flow_style=None)
    return write_file(path, header + body)
