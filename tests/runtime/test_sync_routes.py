"""Who weight sync reads from, decided before any worker is called: `source="nearest"` sends each receiver the
weights of the train rank on its node, else in its NVLink domain, rack or zone, else rank 0, so the bytes crossing
racks at run time are the ones the plan's estimate shows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from tests.planner.specs import auto

from rlplace.errors import ConfigError
from rlplace.inventory import parse_nodes
from rlplace.plan import Plan, PlanTopology, Worker
from rlplace.planner import estimate, plan
from rlplace.runtime import sync
from rlplace.runtime.sync import sync_weights

GB = 10**9


@dataclass
class Rows:
    """A group as routing sees it: its workers' plan rows (no actor is called)."""

    workers: Sequence[Worker]

    @property
    def actors(self) -> list[str]:
        return [w.name for w in self.workers]


def routes_of(p: Plan, source: str, topology: PlanTopology | None) -> dict[int, int]:
    """eval worker's node -> the node of the train rank it reads from."""
    train, evals = Rows(p.by_component("train")), Rows(p.by_component("eval"))
    routes = sync._routes(train, [evals], source, topology)  # type: ignore[arg-type]
    return {
        w.node_rank: train.workers[routes.ranks[feed[0]]].node_rank
        for w, feed in zip(evals.workers, routes.feeds[0], strict=True)
    }


def test_nearest_reads_inside_the_rack_where_the_estimate_counts_no_rack_crossing():
    p = plan(auto("disaggregate", "default", train=16, eval=8, env=8), parse_nodes("8x4/rack=4"))
    pulls = {f.dst[0]: f.src for f in estimate(p, 14 * GB).flows if f.kind == "weights"}
    assert routes_of(p, "nearest", p.topology) == pulls == {2: 0, 6: 4}  # each rack from its own train node
    assert routes_of(p, "rank0", p.topology) == {2: 0, 6: 0}  # the default: rack 1 reads across racks
    assert routes_of(p, "nearest", None) == {2: 0, 6: 0}  # without the topology only a train rank's own node counts


def test_nearest_without_a_trainer_near_reads_from_rank_0_and_a_node_with_one_reads_its_own():
    p = plan(auto("colocate", train=8, eval=8, env=0), parse_nodes("2x4/rack=1"))
    assert routes_of(p, "nearest", p.topology) == {0: 0, 1: 1}  # eval beside train on every node: never crosses
    lone = plan(auto("disaggregate", "default", train=4, eval=8, env=0), parse_nodes("3x4/rack=1"))
    assert set(routes_of(lone, "nearest", lone.topology).values()) == {0}  # no rack but rank 0's has a trainer


def test_an_unknown_source_is_refused_naming_the_three():
    with pytest.raises(ConfigError, match="source: got 'closest'; must be 'rank0', 'all' or 'nearest'"):
        sync_weights(Rows(()), [], source="closest")  # type: ignore[arg-type]
