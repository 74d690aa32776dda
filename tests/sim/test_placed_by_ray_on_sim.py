"""Components rlplace leaves to Ray (strategy `default`) and components in the driver, on the simulated cluster:
the workers Ray places agree on one rendezvous through the KV store, also after a resize and a restart."""

from __future__ import annotations

import logging
import pathlib

import pytest

from rlplace.errors import PlacementError
from rlplace.sim.explore import Move, case_of, run
from rlplace.sim.world import SimWorker, World, simulated_job

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT = (ROOT / "tests/data/spec_examples/auto-default.yaml").read_text()
ELASTIC = DEFAULT.replace(
    "cluster:", "cluster:\n  elastic: {train: {min: 1, max: 3}, eval: {min: 1}}\n  remote_env: false", 1
)
CARTPOLE = (ROOT / "src/rlplace/examples/cartpole_ppo/configs/default.yaml").read_text()
CARTPOLE_ELASTIC = CARTPOLE.replace("cluster:", "cluster:\n  elastic: {env: {min: 1}}", 1)


def test_a_worker_ray_restarts_after_a_resize_meets_the_others_at_its_rank_and_size_now():
    """Found by the explorer (run 5, seed 5000322), once it ran components Ray places: Ray restarts a worker with
    its first constructor arguments, so after a resize it believed the old world size (rank 0 of 2, of 1 now) and
    met the others at the old exchange."""
    logging.disable(logging.WARNING)
    try:
        case = case_of(ELASTIC, "2x4:A800")
        moves = [Move("launch", ("train", 1)), Move("resize", ("train", 1)), Move("restart_worker", ("train", 0))]
        outcome = run(case, [*moves, Move("settle"), Move("shutdown")])
    finally:
        logging.disable(logging.NOTSET)
    assert outcome.violation is None, outcome.violation


def test_workers_ray_places_share_one_master_and_driver_local_ones_answer():
    sim, job = simulated_job(case_of(ELASTIC, "2x4:A800"))
    world = World(sim, job, case_of(ELASTIC, "2x4:A800"))
    job.start()
    train = job.launch("train", SimWorker)
    env = job.launch("env", SimWorker)
    sim.advance(1.0)
    envs = [a.payload["env"] for a in train.actors]
    assert {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs} == {(envs[0]["MASTER_ADDR"], envs[0]["MASTER_PORT"])}
    assert [e["RANK"] for e in envs] == ["0", "1"] and job.master("train") is None
    assert env.in_driver and env.call("step", 7) == [(7, i.serial) for i in env.instances]
    assert (repr(env), repr(env.actors[0])) == ("LocalGroup('env', 2 workers in the driver)", "LocalHandle(SimWorker)")
    placed = env.placements()  # where they run: the driver, as they are told
    assert [(p.component, p.rank, p.world_size, p.node_id) for p in placed] == [("env", r, 2, "driver") for r in (0, 1)]
    assert [sim.get(r) for r in env.placements_async()] == placed
    job.resize("train", 3)  # the new worker, and the two there, meet at a new exchange
    sim.advance(1.0)
    envs = [a.payload["env"] for a in train.actors]
    assert [e["WORLD_SIZE"] for e in envs] == ["3"] * 3 and len({e["MASTER_PORT"] for e in envs}) == 1
    assert world.broken() is None
    job.shutdown()
    assert not [k for k in sim.kv if k.startswith("rdzv/")]
    sim.close()


def test_a_shutdown_while_workers_ray_places_start_leaves_no_exchange_behind():
    """Found by the explorer once it ran components Ray places: shut down right after a launch, the workers'
    constructors published their exchange after the job had deleted it, and the keys stayed in the GCS."""
    case = case_of(DEFAULT, "2x4:A800")
    assert run(case, [Move("launch", ("env", -1)), Move("shutdown")]).violation is None


def test_a_worker_ray_restarted_meets_the_others_at_the_exchange_a_later_resize_sends_it():
    """Found by the explorer (run 4, seed 4003936): a worker Ray had restarted (its node died while it started)
    took every later resize's payload for its stale first constructor arguments and met the others at the newest
    exchange it could see in the KV store: its own, published by nobody yet, was not among them, so it took the
    old size's (its master port too) while the new worker waited for it at the new one, and never answered."""
    case = case_of(CARTPOLE_ELASTIC, "2x4:A800")
    moves = [Move("launch", ("env", 1)), Move("lose", (0, "kill")), Move("join", (0,)), Move("wait", (5.0,))]
    moves += [Move("resize", ("env", 1)), Move("resize", ("env", 2)), Move("settle"), Move("shutdown")]
    outcome = run(case, moves)
    assert outcome.violation is None, outcome.violation


def test_a_worker_ray_places_that_never_starts_fails_the_others_rendezvous_at_its_timeout():
    """Rank 0's constructor fails (a bad start): rank 1 waits for it at the exchange for the rendezvous timeout
    (120 s), then its constructor raises a RendezvousError naming the missing rank, and calls fail with a documented
    error instead of hanging."""
    sim, job = simulated_job(case_of(DEFAULT, "2x4:A800"))
    job.start()
    sim.weather.bad_starts = 1
    train = job.launch("train", SimWorker)
    sim.advance(119.0)
    assert [a.state for a in train.actors] == ["DEAD", "PENDING_CREATION"]
    sim.advance(2.0)
    error = train.actors[1].processes[-1].error
    assert train.actors[1].state == "DEAD" and type(error).__name__ == "RendezvousError"
    assert "rank(s) 0 did not start within 120 s" in str(error) and "ranks 1 did" in str(error)
    with pytest.raises(PlacementError, match="died during step"):
        train.call("step", 1)
    job.shutdown()
    sim.close()
