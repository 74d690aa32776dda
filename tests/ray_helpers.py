"""What every test on the session's simulated Ray cluster shares: what a test left alive, what a job created
(collected while it runs, so a check after its shutdown has something to look at), nodes a test adds and loses
(`Extra`, the `extra` fixture of tests/ray/conftest.py) and waiting for them until Ray reports them dead.
`tests/conftest.py` runs the leftover check after every test that uses the `ray_cluster` fixture."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import ray
from ray.actor import ActorHandle
from ray.util.placement_group import PlacementGroup, placement_group_table, remove_placement_group

from rlplace.ray import _compat
from rlplace.ray.labels import ACCELERATOR_LABEL, NODE_RANK_LABEL, SPARE_LABEL

#: Ray declares an abruptly removed node dead within this on the session cluster (fast health checks);
#: a loss must be over (taken over, shrunk or failed) this long after the node was removed, plus the window.
DETECT_S = 10.0

_LIVE_PG = ("PENDING", "CREATED", "RESCHEDULING")
_LIVE_ACTOR = ("DEPENDENCIES_UNREADY", "PENDING_CREATION", "ALIVE", "RESTARTING")


def leftovers() -> tuple[list[str], list[str]]:
    """Placement groups and actors of this driver's Ray job that are still alive."""
    job = ray.get_runtime_context().get_job_id()
    groups = [
        f"{pg.get('name') or pg_id} ({pg['state']})"
        for pg_id, pg in placement_group_table().items()
        if pg["state"] in _LIVE_PG and pg_id.endswith(job)
    ]
    actors = [
        f"{a.get('Name') or a.get('ActorClassName')} ({a['State']})"
        for a in _compat.actor_table().values()
        if a["State"] in _LIVE_ACTOR and a.get("JobID") == job
    ]
    return groups, actors


def leftovers_after(settle_s: float) -> tuple[list[str], list[str]]:
    """`leftovers()` once they are gone, or what is still alive after `settle_s` (Ray reports deaths late)."""
    deadline = time.monotonic() + settle_s
    groups, actors = leftovers()
    while (groups or actors) and time.monotonic() < deadline:
        time.sleep(0.1)
        groups, actors = leftovers()
    return groups, actors


def clean_up() -> None:
    """Remove every live placement group and kill every named actor (after a test that left some)."""
    for pg_id, pg in placement_group_table().items():
        if pg["state"] in _LIVE_PG:
            remove_placement_group(PlacementGroup(ray.PlacementGroupID(bytes.fromhex(pg_id))))
    for name in ray.util.list_named_actors(all_namespaces=True):
        ray.kill(ray.get_actor(name["name"], namespace=name["namespace"]), no_restart=True)


@dataclass(frozen=True)
class Footprint:
    """The placement groups and actors a job created, by id."""

    groups: tuple[str, ...]
    actors: tuple[str, ...]


def footprint(job: Any) -> Footprint:
    """What `job` holds now (its actors, not its driver-local workers). Take it before `job.shutdown()`: the job
    forgets its groups when it removes them."""
    actors = tuple(_compat.actor_id(a) for g in job.groups.values() for a in g.actors if isinstance(a, ActorHandle))
    return Footprint(tuple(pg.id.hex() for pg in job.placement_groups), actors)


def assert_gone(taken: Footprint) -> None:
    """Every placement group of `taken` removed and every actor dead."""
    table = placement_group_table()
    alive = [i for i in taken.groups if table[i]["state"] != "REMOVED"]
    actors = _compat.actor_table()
    running = [i for i in taken.actors if actors[i]["State"] != "DEAD"]
    assert not alive and not running, f"placement groups {alive} and actors {running} outlived the job"


def wait_until_dead(node_ids: Iterable[str], timeout_s: float = 30.0) -> set[str]:
    """Poll the GCS node table until Ray reports every node of `node_ids` dead; return those still alive."""
    wanted = set(node_ids)
    deadline = time.monotonic() + timeout_s
    while True:
        alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]} & wanted
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.1)


class Extra:
    """Nodes added to the session cluster for one test; removed again (and seen dead) at its end."""

    def __init__(self, cluster: Any):
        self.cluster = cluster
        self.nodes: list[Any] = []
        self.ids: list[str] = []  # every node added, lost ones included

    def ranked(
        self,
        rank: int = 4,
        gpus: int = 1,
        model: str = "A800",
        labels: dict[str, str] | None = None,
        **resources: float,
    ) -> Any:
        """A node of rank `rank`; `labels` adds to its rank and accelerator labels (a rack, say)."""
        return self._add({NODE_RANK_LABEL: str(rank), ACCELERATOR_LABEL: model, **(labels or {})}, gpus, resources)

    def spare(self, gpus: int = 1, model: str = "A800", cpus: int = 2, labels: dict[str, str] | None = None) -> Any:
        spare = {SPARE_LABEL: "true", **({ACCELERATOR_LABEL: model} if gpus else {}), **(labels or {})}
        return self._add(spare, gpus, {}, cpus)

    def lose(self, node: Any) -> float:
        """Remove `node` abruptly; returns the moment (monotonic) it went."""
        self.nodes.remove(node)
        self.cluster.remove_node(node, allow_graceful=False)
        return time.monotonic()

    def _add(self, labels: dict[str, str], gpus: int, resources: dict[str, float], cpus: int = 2) -> Any:
        node = self.cluster.add_node(
            num_cpus=cpus, num_gpus=gpus, resources=resources, labels=labels, object_store_memory=80 << 20
        )
        self.nodes.append(node)
        self.ids.append(node.node_id)
        self.cluster.wait_for_nodes()
        return node

    def remove_all(self) -> None:
        """Remove what is left and wait until Ray reports every added node dead (lost ones too)."""
        for node in self.nodes:
            self.cluster.remove_node(node)
        self.nodes.clear()
        wait_until_dead(self.ids)


def wait_declared(job: Any, rank: int = 4) -> None:
    """Until the job knows node `rank` is lost. A call made right after `remove_node` may still run: the
    raylet dies at once, its worker processes a moment later."""
    deadline = time.monotonic() + DETECT_S
    while job.state.health(rank) == "ok" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert job.state.health(rank) != "ok", f"node {rank} not declared lost within {DETECT_S} s"
