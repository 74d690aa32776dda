"""verl's trainer configs, the third front door: verl's Hydra tree as verl users launch it -> the one model.

A verl config has no `cluster:` section: its placement is what verl's trainers build from `trainer.nnodes`,
`trainer.n_gpus_per_node` and the roles the config asks for (`layout`). It is told by its keys: a document
with `trainer.nnodes` and an `actor_rollout_ref` section (every verl trainer config has both). The result is a
JobSpec of dialect `verl`: each verl resource pool a `NodeGroupSpec` with its declared GPUs per node, each role a
component with one process per GPU of its pools (the planner binds the pools to nodes as Ray places verl's
placement groups, `planner/verl.py`). Components are named by verl's role names (`actor_rollout_ref`,
`actor_rollout`, `actor`, `critic`, `ref`, `rollout`, `rm`, `teacher`); pools by verl's pool names.

`entry` finds the config of a verl entry point (`verl.trainer.main_ppo`) in a checkout or an installed verl
without importing verl.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from rlplace.config.problems import Reporter
from rlplace.config.values import Values
from rlplace.config.verl.layout import Layout, layout
from rlplace.config.verl.read import Reader
from rlplace.model import ComponentSpec, JobSpec, ModelParallel, NodeGroupSpec, Placement, PlacementSettings, Segment

__all__ = ["build", "is_verl"]


def is_verl(data: object) -> bool:
    """A verl trainer config: `trainer.nnodes` beside an `actor_rollout_ref` section, and no `cluster:`."""
    if not isinstance(data, Mapping) or "cluster" in data:
        return False
    trainer = data.get("trainer")
    return isinstance(trainer, Mapping) and "nnodes" in trainer and isinstance(data.get("actor_rollout_ref"), Mapping)


def build(values: Values, rep: Reporter) -> JobSpec | None:
    """The JobSpec of a verl config; None when a problem was reported."""
    found = layout(Reader(values, rep))
    if found is None or rep.problems:
        return None
    for path, note in found.notes:
        rep.warn(tuple(path.split(".")), note)
    for pool in found.unused:
        rep.warn(
            (*pool.keys.split("."), "enable_resource_pool"),
            f"verl makes {pool.name} ({pool.nnodes} x {pool.gpus_per_node} GPUs, {pool.keys}.nnodes x "
            f"{pool.keys}.n_gpus_per_node) and counts its GPUs in the total it checks the cluster for, but places "
            "nothing on it (reward.reward_model.enable is false); rlplace reserves nothing for it",
        )
    return dataclasses.replace(_spec(found), locations=_locations(found, rep))


def _locations(found: Layout, rep: Reporter) -> dict[str, str]:
    """`file:line` of the keys that size each pool (`trainer.nnodes`), which the planner's messages name."""
    out = {}
    for pool in [*found.pools, *found.unused]:
        for name in ("nnodes", "n_gpus_per_node"):
            key = f"{pool.keys}.{name}"
            file, line = rep.where(tuple(key.split(".")))
            if file is not None:
                out[key] = f"{file}:{line}" if line is not None else file
    return out


def _spec(found: Layout) -> JobSpec:
    groups = tuple(
        NodeGroupSpec(p.name, (), gpus_per_node=(p.gpus_per_node,) * p.nnodes, path=p.keys) for p in found.pools
    )
    components = tuple(
        ComponentSpec(
            role.name,
            Placement(role.pools, (Segment(role.gpus),)),
            gpus_per_worker=1.0,
            cpus_per_worker=1.0,
            path=role.path,
            model_parallel=ModelParallel(role.groups) if role.groups else None,
        )
        for role in found.roles
    )
    return JobSpec(
        "verl",
        PlacementSettings(mode="manual"),
        components,
        node_groups=groups,
        extras={"verl_entry": found.entry},
    )
