"""Weight sync (`rlplace.runtime.sync`) on the simulated cluster: its calls go through the job's port, so it runs on
`SimCluster` as it does on Ray, on the members a takeover left, in milliseconds of real time."""

from __future__ import annotations

import logging
import uuid

import pytest

from rlplace.runtime.sync import sync_weights
from rlplace.sim.explore import case_of, node_labels, node_resources, simulated_job
from rlplace.sim.memory_port import HEALTH_DELAY_S

# One train and one eval worker on each of the two nodes.
SPREAD = """
cluster:
  num_nodes: 2
  component_placement:
    train: {node_group: a800, placement: "0,4"}
    eval: {node_group: a800, placement: "1,5"}
  node_groups:
    - {label: a800, node_ranks: "0,1"}
"""


class Trainer:
    """Weights of its own: a sync that sent a receiver another trainer's would show."""

    def __init__(self, *_: object) -> None:
        self.weights = uuid.uuid4().hex

    def get_weights(self) -> str:
        return self.weights


class Evaluator:
    def __init__(self, *_: object) -> None:
        self.received: list[str] = []

    def set_weights(self, *weights: str) -> None:
        self.received.extend(weights)


@pytest.fixture(autouse=True)
def quiet():
    logging.disable(logging.WARNING)  # the node loss below is what the test provokes
    yield
    logging.disable(logging.NOTSET)


def test_each_receiver_gets_the_weights_of_the_trainer_on_its_node_through_the_simulated_port():
    sim, job = simulated_job(case_of(SPREAD, "2x4:A800"))
    job.start()
    train, evals = job.launch("train", Trainer), job.launch("eval", Evaluator)
    began = sim.now()
    report = sync_weights(train, [evals], source="nearest", topology=job.plan.topology, transport="object_store")
    assert (report.sources, report.objects, report.targets, report.transport) == ((0, 1), 2, 2, "object_store")
    on_node = {w.node_rank: a.instance.weights for w, a in zip(train.workers, train.actors, strict=True)}
    assert [a.instance.received for a in evals.actors] == [[on_node[w.node_rank]] for w in evals.workers]
    assert sim.now() > began  # the calls took virtual time: they ran on the simulated cluster, not in the test
    every = sync_weights(train, [evals], source="all", transport="object_store")
    assert every.sources == (0, 1) and all(a.instance.received[1:] == [*on_node.values()] for a in evals.actors)
    job.shutdown()
    assert not sim.live_actors() and not sim.kv


def test_after_a_takeover_the_sync_reaches_the_workers_relaunched_on_the_spare():
    sim, job = simulated_job(case_of(SPREAD, "2x4:A800"))
    job.start()
    shape = job.live.node(0)
    spare = sim.add_node(node_resources(shape), node_labels(shape, None)).node_id
    train, evals = job.launch("train", Trainer), job.launch("eval", Evaluator)
    sim.kill_node(str(job.live.node(1).node_id))
    sim.advance(HEALTH_DELAY_S + 1)  # Ray's verdict: the watcher declares the loss and the spare takes over
    job.wait_for_takeovers()
    assert str(job.live.node(1).node_id) == spare
    sync_weights(train, [evals], source="nearest", topology=job.plan.topology, transport="object_store")
    moved_trainer, moved_eval = train.actors[1], evals.actors[1]
    assert moved_eval.node_id == spare and moved_trainer.node_id == spare  # the new incarnations
    assert moved_eval.instance.received == [moved_trainer.instance.weights]
    job.shutdown()
