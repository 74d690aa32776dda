"""The plan `rlplace run` showed, handed to the command it starts, so that `rlplace.connect()` runs that plan.

`run CONFIG ... -- COMMAND` plans once and prints the plan; planning the config again in the command could give
another one (the config edited meanwhile, other nodes, another planner). So `run` writes the plan it showed, with
the nodes it was made for, to a file only its user can read, in a folder of its own that it removes when the
command ends, and names it in $RLPLACE_PLAN. `connect()` with no argument reads it instead of planning, after
comparing those nodes with the live cluster's: a node gone, or one whose GPUs, accelerator, labels (its rack, its
NVLink domain) or robots are not what the plan was made for, stops it with a PlacementError naming each change,
rather than running a plan made for another cluster (docs/guide.md, section 6).

With `--profile-out`, `run` also names a file in that folder in $RLPLACE_PHASE_TIMES: the command's Job writes the
seconds of its phases there (`rlplace.phases.PhaseTimes`), and `run` makes the profile from them when the command
ends (docs/guide.md, "Measuring a profile").
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from collections.abc import Mapping

from rlplace.errors import PlacementError, RlplaceError
from rlplace.inventory import Inventory, Node
from rlplace.output_files import write_file
from rlplace.plan import Plan

#: The file holding the plan `run` showed and the nodes it was made for (JSON).
PLAN_ENV = "RLPLACE_PLAN"
#: The file the command's Job writes its phase times to (`--profile-out` only).
PHASE_TIMES_ENV = "RLPLACE_PHASE_TIMES"
#: Labels Ray sets itself, which name a node's instance (`ray.io/node-id`) rather than its place; the topology
#: levels Ray's labels carry (a zone) are checked with the plan's topology (`rlplace.ray.topology.check_live`).
RAY_LABELS = "ray.io/"


def write_handoff(plan: Plan, inventory: Inventory, folder: str | os.PathLike[str]) -> dict[str, str]:
    """Write `plan` and the nodes it was made for into `folder` (readable by its owner only: the plan holds the
    config's values, secrets from the environment included); the variables that name it to the command."""
    doc = {"plan": plan.to_dict(), "nodes": [dataclasses.asdict(n) for n in inventory.nodes]}
    path = write_file(pathlib.Path(folder) / "plan.json", json.dumps(doc), mode=0o600)
    return {PLAN_ENV: str(path)}


def phase_times_handoff(folder: str | os.PathLike[str]) -> dict[str, str]:
    """The variable that tells the command's Job where to write its phase times: a file in `folder`, not yet
    written (none is written when the command finishes no phase)."""
    return {PHASE_TIMES_ENV: str(pathlib.Path(folder) / "phases.json")}


def phase_times_path(environ: Mapping[str, str] | None = None) -> str | None:
    """Where `run` asked this process's Job to write its phase times; None when it did not."""
    return (os.environ if environ is None else environ).get(PHASE_TIMES_ENV) or None


def read_handoff(environ: Mapping[str, str] | None = None) -> tuple[Plan, Inventory] | None:
    """The plan and nodes `run` handed over, or None when this process was not given one."""
    environ = os.environ if environ is None else environ
    path = environ.get(PLAN_ENV)
    if not path:
        return None
    try:
        doc = json.loads(pathlib.Path(path).read_text())
        plan = Plan.from_dict(doc["plan"])
        nodes = Inventory(tuple(Node(**n) for n in doc["nodes"]))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RlplaceError(
            f"${PLAN_ENV} names {path}, which holds no plan `rlplace run` wrote ({e}); `rlplace run` sets it for the "
            "command it starts, and removes the file when the command ends: run the command under `rlplace run` "
            f"again, or unset ${PLAN_ENV} and pass the config to connect()"
        ) from None
    return plan, nodes


def changes(planned: Inventory, live: Inventory) -> list[str]:
    """How the live nodes differ from those a plan was made for: each node gone, and each change of a node's GPUs,
    accelerator, labels or custom resources (robots). Nodes added since change nothing the plan uses."""
    out = []
    for before in planned.nodes:
        if before.rank >= len(live):
            ranks = f"0-{len(live) - 1}" if len(live) else "none"
            out.append(f"node {before.rank} is gone (the live cluster has node ranks {ranks})")
            continue
        now = live.node(before.rank)
        out += [f"node {before.rank}: {change}" for change in _node_changes(before, now)]
    return out


def _node_changes(before: Node, now: Node) -> list[str]:
    out = []
    if now.num_gpus != before.num_gpus:
        out.append(f"{now.num_gpus} GPU(s), the plan was made for {before.num_gpus}")
    if now.accelerator_resource != before.accelerator_resource:
        out.append(f"accelerators are {now.accelerator_resource}, the plan was made for {before.accelerator_resource}")
    if before.gpu_model is not None and now.gpu_model != before.gpu_model:
        out.append(f"accelerator model {now.gpu_model or 'unnamed'}, the plan was made for {before.gpu_model}")
    for key, value in sorted(before.labels.items()):
        if key.startswith(RAY_LABELS) or now.labels.get(key) == value:
            continue
        got = f"{key}={now.labels[key]}" if key in now.labels else f"no label {key}"
        out.append(f"{got}, the plan was made for {key}={value}")
    for name, amount in sorted(before.resources.items()):
        if now.resources.get(name, 0.0) != amount:
            out.append(f"{now.resources.get(name, 0.0):g} of {name}, the plan was made for {amount:g}")
    return out


def check_unchanged(planned: Inventory, live: Inventory) -> None:
    """A PlacementError naming every change when the live cluster is not the one the handed plan was made for."""
    found = changes(planned, live)
    if found:
        raise PlacementError(
            "the live cluster is no longer the one `rlplace run` planned on, so its plan is not run:\n  "
            + "\n  ".join(found)
            + "\nRun `rlplace run` again to plan on the cluster as it is now"
        )
