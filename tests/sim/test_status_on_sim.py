"""`rlplace status` read off the simulated cluster: what it shows of a job's nodes (the explorer checks the rest
after every step of its schedules)."""

from __future__ import annotations

from rlplace.ray import records, status
from rlplace.ray.records import ComponentRecord, JobRecord, NodeRecord
from rlplace.ray.state import NodeEvent
from rlplace.sim.memory_port import SimCluster


def test_ranks_lost_or_failed_are_shown_when_their_events_fell_out_of_the_record():
    """A rack of nodes lost at once: the record keeps the last node events only, and those of nodes 1 and 2 are
    older; status still shows node 1 LOST (with its window) and node 2 FAILED, beside the ranks the events name."""
    sim = SimCluster()
    takeovers = tuple(
        NodeEvent(
            "spare", rank, (f"rlplace:train:{rank}",), 100.0 + rank, f"s{rank}", "10.0.1.1", "hot spare took over", 1.0
        )
        for rank in range(3, 3 + 50)
    )
    record = JobRecord(
        job="j",
        namespace="ns",
        instance="1" * 32,
        ray_job_id=sim.job,
        written_at=200.0,
        nodes={rank: NodeRecord(f"n{rank}", f"10.0.0.{rank}") for rank in range(53)},
        components={"train": ComponentRecord(53, tuple(range(53)), 0, "10.0.0.0", 29500)},
        lost={1: (90.0, 10**12)},
        failed=(2,),
        events=takeovers,
    )
    sim.kv_put(records.key("ns", "j"), record.to_bytes())
    rows = {r.node: r for r in status.collect_all(sim, probe_gpus=False)[0] if r.job == sim.job}
    assert (rows["node 1"].state, rows["node 1"].since) == ("LOST", 90.0)
    assert rows["node 1"].detail.startswith("waiting for a hot spare or a replacement node (")
    assert (rows["node 2"].state, rows["node 2"].detail) == ("FAILED", "its replacement window passed")
    assert rows["node 3"].state == "SPARE" and len(rows) == 2 + 50


def test_workers_are_listed_in_plan_order_not_by_name():
    """train, eval, env as the plan lists them, whatever order they were launched in (it was env, eval, train:
    alphabetical)."""
    from rlplace.sim.explore import SimWorker, case_of, simulated_job

    text = "cluster:\n  train_worker_num: 1\n  eval_worker_num: 1\n  placement: {strategy: disaggregate}\n"
    sim, job = simulated_job(case_of(text, "2x4"))
    job.start()
    for component in ("env", "eval", "train"):
        job.launch(component, SimWorker)
    rows = [r.component for r in status.collect_all(sim, probe_gpus=False)[1] if r.job == sim.job]
    assert rows == ["train", "eval", "env"]
    job.shutdown()


def test_a_drain_ray_was_given_no_deadline_is_shown_so_and_its_workers_move_to_the_spare():
    """`ray drain-node` without a deadline: Ray reports 0; status says "no deadline" and the job moves the node's
    workers to the hot spare at once (it cannot know when the node goes)."""
    from rlplace.sim.explore import SimWorker, case_of, node_labels, node_resources, simulated_job

    text = (
        "cluster:\n  num_nodes: 2\n  component_placement:\n    train: {node_group: a800, placement: '4-7'}\n"
        "    eval: {node_group: a800, placement: '0'}\n  node_groups:\n    - {label: a800, node_ranks: '0,1'}\n"
    )
    sim, job = simulated_job(case_of(text, "2x4:A800"))
    job.start()
    job.launch("train", SimWorker)
    shape = job.live.node(1)
    spare = sim.add_node(node_resources(shape), node_labels(shape, None)).node_id
    assert sim.drain_node(str(shape.node_id), 10.0, announced=False)
    sim.advance(1.0)
    draining = [r for r in status.collect_all(sim, probe_gpus=False)[0] if r.state == "DRAINING"]
    assert [(r.node, r.deadline) for r in draining] == [(f"node 1 ({shape.address})", None)]
    assert draining[0].detail.startswith("no deadline; ") and str(job.live.node(1).node_id) == spare
    job.shutdown()
    sim.close()
