"""The job's record in the simulated cluster's KV store where the explorer's schedules cannot take it: written by a
change racing the shutdown, unwritable, or listed and gone before it is read; and a job's bounds checked."""

from __future__ import annotations

import pytest

from rlplace.ray import records, status
from rlplace.ray.state import Change
from rlplace.sim.explore import SimWorker, case_of, simulated_job

TEXT = "cluster:\n  train_worker_num: 1\n  eval_worker_num: 1\n  placement: {strategy: disaggregate}\n"


def test_a_record_that_cannot_be_written_fails_no_change_and_none_is_written_after_shutdown(monkeypatch):
    sim, job = simulated_job(case_of(TEXT, "2x4"))
    job.start()
    written = sim.kv[records.key(job.state.namespace, job.state.name)]

    def gone(key: str, value: bytes | str) -> None:
        raise ConnectionError("the GCS is gone")

    monkeypatch.setattr(sim, "kv_put", gone)
    job.state.apply(Change(warnings=("a change while Ray is gone",)))  # the record's writer is told: no error
    assert "a change while Ray is gone" in job.state.warnings
    assert sim.kv[records.key(job.state.namespace, job.state.name)] == written
    monkeypatch.undo()
    writer = records.RecordWriter(sim, job.state, sim.job, (1, "driver"))
    job.shutdown()
    assert writer.write() is None and not sim.kv  # after the shutdown nothing writes it back
    sim.close()


def test_a_record_listed_but_empty_when_read_is_skipped_and_status_reads_on():
    sim, job = simulated_job(case_of(TEXT, "2x4"))
    job.start()
    job.launch("train", SimWorker)
    sim.kv_put(records.key("another", "gone"), b"")  # deleted by its driver between the listing and the read
    assert [r.job for r in records.read_all(sim)] == [job.state.name]
    assert [w.component for w in status.collect_all(sim, probe_gpus=False)[1]] == ["train"]
    job.shutdown()
    sim.close()


def test_an_actor_named_like_a_worker_but_no_worker_is_not_listed():
    sim, job = simulated_job(case_of(TEXT, "2x4"))
    job.start()
    job.launch("train", SimWorker)
    sim.start_actor(SimWorker, {"name": "rlplace:router"})  # the user's own, under rlplace's prefix
    sim.advance(0.1)
    assert [w.name for w in status.collect_all(sim, probe_gpus=False)[1]] == ["rlplace:train:0"]
    job.shutdown()
    sim.close()


def test_a_negative_replacement_window_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"replace_within_s must be 0 .* not -1"):
        simulated_job(case_of(TEXT, "2x4"), replace_within_s=-1)


def test_a_worker_on_an_unranked_node_takes_its_node_rank_from_the_record_and_none_without_one(monkeypatch):
    """A worker Ray places on a hot spare (no rank label) reads its node rank from the job's record; once the job
    shut down (its record deleted) while the worker started, it has none."""
    from rlplace.ray import exchange, worker

    sim, job = simulated_job(case_of(TEXT, "2x4"))
    job.start()
    monkeypatch.setattr(worker, "cluster", lambda: sim)  # as inside a worker of the simulated cluster
    placement = {"namespace": job.state.namespace, "job": job.state.name}
    serving = job.state.live.node(1)
    assert exchange._node_rank_from_record(placement, str(serving.node_id)) == 1
    job.shutdown()
    assert exchange._node_rank_from_record(placement, str(serving.node_id)) is None
    sim.close()


def test_a_job_without_a_name_lives_in_its_drivers_namespace():
    from rlplace.ray.job import Job
    from rlplace.ray.nodes import inventory_from_nodes

    sim, named = simulated_job(case_of(TEXT, "2x4"))
    job = Job(named.plan, inventory_from_nodes(sim.nodes()), cluster=sim)
    assert job.state.namespace == sim.namespace() and job.state.name != named.state.name
