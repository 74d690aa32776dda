"""The explorer on the simulated cluster: no violation over the run `make test` makes, every named mutation
caught, a violation reported with a seed that replays it and a shortened schedule, the same seed the same run."""

from __future__ import annotations

import ast
import logging
import pathlib
import random
import subprocess
import sys

import pytest

from rlplace.sim.explore import MUTATIONS, Move, case_of, cases, draw, explore, run, schedule, shrink

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: train on node 1 (4 GPUs), eval on node 0
PINNED_TEXT = """
cluster:
  num_nodes: 2
  component_placement:
    train: {node_group: a800, placement: "4-7"}
    eval: {node_group: a800, placement: "0"}
  node_groups:
    - {label: a800, node_ranks: "0,1"}
"""


@pytest.fixture(scope="module")
def all_cases():
    logging.disable(logging.WARNING)  # the jobs' own warnings (losses, shrinks) are the schedules' moves
    yield cases(ROOT)
    logging.disable(logging.NOTSET)


def test_the_repositorys_examples_are_explored_each_also_elastic(all_cases):
    names = [c.name for c in all_cases]
    assert any("cartpole_ppo/configs/disaggregate.yaml" in n for n in names)
    assert any("spec_examples/pools-mixed.yaml" in n for n in names)
    assert sum(n.endswith(", elastic") for n in names) >= 8
    assert len(names) >= 20


def test_a_fresh_run_of_300_schedules_breaks_no_invariant(all_cases):
    """Each `make test` explores 300 schedules of a run seed drawn afresh (about 4 s of a quiet core), so the suite's
    runs add up to new schedules rather than the same ones again; a violation names the run seed, and
    `scripts/explore.py --seed S --schedules 300` (or `--replay` with the schedule's own seed) runs it again. The
    long runs are `make test-long`'s 10,000 schedules of seed 1 and the before-stop check (DEVELOPERS.md)."""
    seed = random.SystemRandom().randrange(1, 1_000_000)
    report = explore(all_cases, 300, seed=seed)
    assert report.schedules == 300
    found = [(own, case.name, violation) for own, case, _, violation in report.violations]
    assert found == [], f"run seed {seed}: {found}"


@pytest.mark.long
def test_ten_thousand_schedules_break_no_invariant(all_cases):
    """The long run (`make test-long`; about 90 s of one core): run seed 1, the same schedules every time."""
    report = explore(all_cases, 10_000, seed=1)
    assert report.schedules == 10_000
    assert [(seed, case.name, violation) for seed, case, _, violation in report.violations] == []


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_every_named_mutation_is_caught(all_cases, name):
    """Run seed 5 catches each within 150 schedules (6 s of CPU for all; run seed 2 took 13 s, two mutations 500
    schedules or more). That every mutation is caught at the default settings, with other seeds, is the
    before-stop check's `--mutate all --schedules 3000` (DEVELOPERS.md)."""
    with MUTATIONS[name]():  # caught is enough: shrinking (a third of the time) is tested below
        report = explore(all_cases, 1000, seed=5, until_violation=True, shrunk=0)
    assert report.violations, f"mutation {name} went unnoticed in {report.schedules} schedules"


def test_a_violation_replays_from_its_seed_and_shrinks_to_a_shorter_schedule(all_cases):
    with MUTATIONS["skip-renumbering"]():
        report = explore(all_cases, 1000, seed=3, until_violation=True)
        own, case, shortest, violation = report.violations[0]
        replayed_case, moves = draw(all_cases, own)
        assert replayed_case is case and run(case, moves).violation == violation  # the seed is the schedule
        assert len(shortest) < len(moves) and shortest == shrink(case, moves)
        assert run(case, shortest).violation is not None
    assert run(case, shortest).violation is None  # without the bug the same schedule holds


def test_the_same_seed_runs_the_same_schedules(all_cases):
    first = [(c.name, tuple(m)) for c, m in (draw(all_cases, s) for s in range(50))]
    again = [(c.name, tuple(m)) for c, m in (draw(all_cases, s) for s in range(50))]
    assert first == again and len(set(first)) == 50


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts/explore.py"), *args], capture_output=True, text=True, timeout=120
    )


def test_the_script_lists_its_mutations_and_refuses_an_unknown_one():
    listed = _script("--mutate", "list")
    assert listed.returncode == 0 and listed.stdout.split() == list(MUTATIONS)
    unknown = _script("--mutate", "forget-everything")
    assert unknown.returncode == 2
    assert "--mutate 'forget-everything' is not a known mutation; known: keep-groups-when-workers-go" in unknown.stderr


def test_the_script_reports_its_count_and_a_caught_mutation():
    clean = _script("--schedules", "50", "--seed", "4", "--jobs", "1")
    assert clean.returncode == 0
    assert clean.stdout.startswith("explored 50 schedules (run seed 4), 0 invariant violations")
    caught = _script("--schedules", "20", "--seed", "4", "--jobs", "1", "--mutate", "drop-call-in-flight")
    assert caught.returncode == 0 and "mutation drop-call-in-flight: caught" in caught.stdout
    assert "shortest schedule" in caught.stdout and "seed " in caught.stdout


def test_status_shows_a_drained_ranks_workers_alive_on_the_replacement_that_took_it_over(all_cases):
    """The schedule the status invariant found (seed 21000353, shrunk): node 2 drains with 1 s left and nothing
    can take it over; a replacement with node 2's label joins; the move's group, selected by that label, must land
    on the replacement, since the draining node carries the label too (Ray schedules nothing new on a draining
    node; the simulation did, and status showed the moved workers dead while the state had them on the
    replacement)."""
    name = "src/rlplace/examples/cartpole_ppo/configs/node-groups.yaml on 4x8:A800"  # what the seed drew then
    case = next(c for c in all_cases if c.name == name)
    moves = [Move("launch", ("eval",)), Move("drain", (2, 1.0)), Move("join", (2,)), Move("hang", ("eval",))]
    assert run(case, [*moves, Move("shutdown", ())]).violation is None


def _named(all_cases, name):
    return next(c for c in all_cases if c.name == name)


def _move(printed: str) -> Move:
    """A move as the explorer prints it: `drain(2, 1.0, 'outlives')`."""
    kind, _, args = printed.partition("(")
    return Move(kind, ast.literal_eval(f"({args[:-1]},)") if args[:-1] else ())


def test_a_drain_the_gcs_keeps_from_the_job_past_its_deadline_promises_nothing_one_told_in_time_does(all_cases):
    """Run 1, seed 1007201: a GCS restart of 2 s began as node 2 was drained with 1 s left, so the job (whose
    watcher reads the draining nodes from the GCS) could not know of it before the deadline; the drain invariant
    held that against it. A restart that leaves the watcher a period before the deadline keeps the promise (and
    the invariant catches a watcher that ignores drains then)."""
    case = _named(all_cases, "src/rlplace/examples/cartpole_ppo/configs/node-groups.yaml on 4x8:A800")

    def drained(gcs_s: float, deadline_s: float) -> list[Move]:
        moves = [Move("launch", ("eval",)), Move("spare", (0, 2)), Move("drain", (2, deadline_s, "outlives"))]
        return [*moves, Move("gcs_restart", (gcs_s,)), Move("wait", (6.0,)), Move("shutdown", ())]

    assert run(case, drained(2.0, 1.0)).violation is None
    shrunk = ["launch('eval', 0)", "slow(2)", "gcs_restart(5.0)", "spare(0, 2)", "gcs_restart(2.0)", "call('eval')"]
    shrunk += ["hang('eval')", "drain(2, 1.0, 'outlives')", "gcs_restart(2.0)", "shutdown()"]  # as the run printed it
    elastic = _named(all_cases, f"{case.name}, elastic")
    assert run(elastic, [_move(m) for m in shrunk]).violation is None
    for gcs_s, deadline_s in ((2.0, 5.0), (0.5, 1.5)):
        assert run(case, drained(gcs_s, deadline_s)).violation is None
        with MUTATIONS["ignore-drains"]():
            violation = run(case, drained(gcs_s, deadline_s)).violation
        assert violation is not None and violation.startswith("a drain moves the workers before the deadline")


def test_a_replacement_another_job_holds_part_of_is_no_node_to_take_a_failed_rank_over(all_cases, monkeypatch):
    """Run 1, seed 1007768: node 1 failed (no spare in the window), a node with its rank label joined, and a second
    job placed a worker there by that label first: the job could not reserve the rank's bundles beside it, and the
    liveness invariant held the failed rank against it. A replacement left free must still take the rank over."""
    case = case_of(PINNED_TEXT, "2x4:A800")
    moves = [Move("launch", ("train",)), Move("call_across_loss", ("train", 1, "kill")), Move("join", (1,))]
    settle = [Move("settle", ()), Move("shutdown", ())]
    assert run(case, [*moves, Move("other_job", ("start",)), *settle]).violation is None  # its learner: node 1
    assert run(case, [*moves, *settle]).violation is None
    monkeypatch.setattr("rlplace.ray.failover.watcher.candidates", lambda *a, **k: [])  # replacements ignored
    assert run(case, [*moves, *settle]).violation == "liveness: node 1 stays failed though a node could take it over"


def test_check_nodes_answers_about_the_job_when_it_returns(all_cases, monkeypatch):
    """Node 3's processes die under a call; check_nodes declares it lost and the elastic agent shrinks off it at
    once: the node no longer serves the job, so "no node lost" is the truth (seed 966328899678, shrunk). A
    check_nodes that never finds a loss is still caught on the same schedule's first moves."""
    case, _ = draw(all_cases, 966328899678)
    moves = [
        Move("launch", ("actor", 0)),
        Move("call_across_loss", ("actor", 3, "kill")),
        Move("partition", (6, None)),
        Move("check_nodes", ()),
        Move("shutdown", ()),
    ]
    assert run(case, moves).violation is None
    from rlplace.ray.job import Job

    monkeypatch.setattr(Job, "check_nodes", lambda self: False)
    killed = [Move("launch", ("actor", 0)), Move("lose", (3, "kill")), Move("check_nodes", ()), Move("shutdown", ())]
    assert "nodes [3] refuse" in (run(case, killed).violation or "")


def test_a_spare_whose_cpus_ray_filled_is_no_node_to_take_a_buffer_shard_over(all_cases):
    """Strategy default: Ray restarts the workers it placed on the hot spare and fills its CPUs, so the lost
    node's buffer shard (pinned by node affinity, no placement group) cannot start there; the rank staying failed
    breaks no promise (run 2 seed 2007111, shrunk)."""
    case, _ = draw(all_cases, 2007111)
    assert case.name == "tests/data/spec_examples/auto-default.yaml on 2x4:A800" and not case.plan.bundles
    moves = [
        Move("launch", ("eval", -1)),
        Move("launch", ("env", 1)),
        Move("launch", ("buffer", 1)),
        Move("lose", (0, "kill")),
        Move("spare", (3, 0)),
        Move("call_across_loss", ("env", 1, "vanish")),
        Move("settle", ()),
        Move("shutdown", ()),
    ]
    assert run(case, moves).violation is None


def test_two_drains_waiting_on_hung_calls_promise_nothing_in_the_simulation(all_cases):
    """Two nodes of the job drain at once and a call hangs: the watcher's two waits for the hung calls run nested
    on the simulation's one thread (on Ray, two threads wait side by side), so the earlier drain's move is held
    past its deadline here only; the invariant holds no promise then (run 5 seed 5003407, shrunk)."""
    case, _ = draw(all_cases, 5003407)
    moves = [
        Move("launch", ("buffer", 0)),
        Move("spare", (0, 1)),
        Move("drain", (0, 4.0, "cancelled")),
        Move("drain", (1, 10.0, "dies")),
        Move("hang", ("buffer",)),
        Move("shutdown", ()),
    ]
    assert run(case, moves).violation is None


def test_a_takeover_under_way_when_the_job_is_shut_down_starts_no_worker_after_it():
    """Run 8, seed 8000221 (shrunk): the user's other thread shut the job down while the watcher was moving a
    drained node's buffer shard to a replacement, past its check that the job is open and waiting for the cluster
    to start the relaunched worker; the shutdown killed what was started, then the takeover started the worker,
    which outlived the job. No worker starts once the job is shut down."""
    text = """
cluster:
  train_worker_num: 3
  eval_worker_num: 2
  env_worker_num: 3
  buffer_worker_num: 2
  env_each_gpu_num: 0
  placement: {mode: auto, strategy: default}
  train_each_gpu_num: 0.5
  eval_each_gpu_num: 0.5
"""
    moves = [
        Move("launch", ("buffer", 1)),
        Move("launch", ("env", 1)),
        Move("kill_lag", (1.0,)),
        Move("stop_during", (2.0,)),
        Move("drain", (0, 4.0, "dies")),
        Move("drain", (1, 10.0, "dies")),
        Move("spare", (0, 0)),
        Move("join", (1,)),
        Move("hang", ("env",)),
        Move("shutdown", ()),
    ]
    assert run(case_of(text, "2x4:A800"), moves).violation is None


def test_a_takeover_undone_frees_its_workers_names_before_the_next_spare_is_tried(all_cases):
    """Run 51, seed 51000673 (shrunk): both nodes lost, Ray's own workers restarted onto the first spare and filled
    its CPUs, so the buffer shard relaunched there waited for a CPU and the takeover was undone; the next spare,
    tried at once, was refused the shard's name (its relaunched actor killed, not dead yet) and the rank failed
    with a spare free. An undone takeover waits until what it relaunched is dead."""
    case, _ = draw(all_cases, 51000673)
    assert case.name == "tests/data/spec_examples/auto-default.yaml on 2x4:A800, elastic"
    moves = [
        Move("launch", ("train", 1)),
        Move("launch", ("eval", 1)),
        Move("launch", ("buffer", 1)),
        Move("spare", (3, 0)),
        Move("lose", (0, "kill")),
        Move("lose", (1, "kill")),
        Move("wait", (5.0,)),
        Move("spare", (3, 1)),
        Move("spare", (3, 0)),
        Move("settle", ()),
        Move("shutdown", ()),
    ]
    assert run(case, moves).violation is None


def test_status_shows_the_worker_started_again_not_its_dead_namesake_listed_after_it(all_cases):
    """A vanished node's rollout worker is killed and started again on the replacement at the same virtual time:
    two actors of one name, one DEAD, with equal start times. Ray lists its actors in no order (the simulated actor
    table neither): status showed the worker DEAD when the dead one came later (run 7 seed 7000734, shrunk)."""
    case, _ = draw(all_cases, 7000734)
    assert case.name.startswith("generated, 7 nodes")
    moves = [
        Move("launch", ("rollout", 0)),
        Move("bad_start", (2,)),
        Move("lose", (4, "vanish")),
        Move("other_job", ("start",)),
        Move("join", (4,)),
        Move("wait", (2.0,)),
        Move("shutdown", ()),
    ]
    assert run(case, moves).violation is None


def test_a_cluster_no_drawn_config_plans_on_leaves_the_schedule_to_an_example(all_cases, monkeypatch):
    """`generate.planned` gives up after `TRIES` configs that do not plan; the schedule then runs an example."""
    from rlplace.sim import generate

    monkeypatch.setattr(generate, "TRIES", 0)
    assert generate.planned(random.Random(1), 3) is None
    case, _ = draw(all_cases, 1, nodes=3)
    assert case in all_cases


def test_a_schedule_whose_weights_are_all_drawn_zero_draws_with_the_base_weights(all_cases):
    class Zeros(random.Random):
        """Draws every schedule weight's factor 0 (the first choice); the rest as a seeded Random."""

        def choice(self, seq):
            return seq[0] if seq == (0, 0.5, 1, 2, 4) else super().choice(seq)

    moves = schedule(Zeros(1), all_cases[0], 12)
    assert len(moves) == len(all_cases[0].plan.components) + 12 + 2 and moves[-1].kind == "shutdown"


def test_a_hung_call_waits_out_the_nested_takeovers_of_actors_slower_than_the_timeout(all_cases):
    """Run 2 seed 2009689 (shrunk): actors start slower than the job's timeout_s and node 1 is cut off under a hung
    call; every node's takeover fails after timeout_s, twice over (the window, then the failed rank's next look).
    On Ray the waiting call fails the rank on its own thread; here the watcher's rounds run nested in the call's
    wait, which the move's bound allows for (every node tried twice), and nothing else is broken."""
    case, _ = draw(all_cases, 2009689)
    assert case.name.startswith("generated, 2 nodes")
    moves = [
        Move("launch", ("critic", 0)),
        Move("join", (1,)),
        Move("spare", (0, 0)),
        Move("join", (1,)),
        Move("join", (1,)),
        Move("slow_starts", (8.0,)),
        Move("partition", (1, None)),
        Move("hang", ("critic",)),
        Move("shutdown", ()),
    ]
    assert run(case, moves).violation is None


def test_a_component_launched_while_its_rank_0s_node_is_taken_over_meets_on_the_new_node(all_cases):
    """Found by `make test`'s fresh run (run seed 421110, schedule seed 421111263367, shrunk): node 0 drains, the
    GCS restarts, a replacement with node 0's rank joins, then buffer (never launched yet) is launched. Its workers'
    starts wait for the GCS, and meanwhile the watcher moved rank 0 to the replacement: the takeover moves launched
    groups only, so buffer's workers started with the master on the drained node while the state served rank 0 from
    the replacement ("MASTER_ADDR is rank 0's node"). A launch now holds the mover's lock, so the takeover waits
    for it and then moves buffer's workers too."""
    case, _ = draw(all_cases, 421111263367)
    assert case.name == "tests/data/spec_examples/offload-colocate.yaml on 2x4:A800"
    moves = [
        Move("launch", ("train", 1)),
        Move("drain", (0, 10.0, "dies")),
        Move("gcs_restart", (2.0,)),
        Move("join", (0,)),
        Move("launch", ("buffer", 0)),
        Move("shutdown", ()),
    ]
    assert run(case, moves).violation is None


def test_a_drain_with_a_hung_call_on_another_draining_node_moves_before_its_deadline(all_cases):
    """Found by the before-stop run of 10,000 schedules (run seed 66013, schedule seed 66013203042, shrunk): on a
    generated 4-node cluster, actor's calls hang, node 0 drains with a 4 s deadline and node 3 (actor's) with
    10 s, one hot spare is ready. Node 0's workers answered at once, but the wait for node 3's hung calls (up to
    5 s) ran inside node 0's, and node 0 moved 4.78 s after its notice. A drain's wait is a ticker now that looks
    and never waits (docs/decisions.md, "A drain's wait is a ticker")."""
    case, _ = draw(all_cases, 66013203042)
    moves = [
        Move("launch", ("actor", 1)),
        Move("launch", ("agent", 0)),
        Move("spare", (0, 0)),
        Move("hang", ("actor",)),
        Move("drain", (0, 4.0, "dies")),
        Move("drain", (3, 10.0, "dies")),
        Move("settle", ()),
        Move("shutdown", ()),
    ]
    assert run(case, moves).violation is None
