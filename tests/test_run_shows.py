"""What `rlplace run` shows and refuses before anything starts (issue 34): the estimate line and the picture as
`rlplace plan` has them, a `--simulate` larger than this machine, the demo's real model size, and where `make
demo` writes. No cluster is started in here."""

from __future__ import annotations

import pathlib
import re
from types import SimpleNamespace

from rlplace.cli import main
from rlplace.config import load
from rlplace.examples.cartpole_ppo import CONFIGS
from rlplace.inventory import Inventory, Node
from rlplace.planner import plan
from rlplace.ray import handoff, machine
from rlplace.ray.local_raylets import simulated_inventory

JOB = str(CONFIGS / "disaggregate.yaml")
ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_run_with_a_command_prints_the_estimate_line_and_writes_the_picture_like_plan(tmp_path, capsys):
    """The command cannot start (refused with 127 after the plan is shown), so no cluster starts either."""
    code = main(["run", JOB, "--simulate", "2x4", "--out", str(tmp_path), "--", "no-such-program-here"])
    err = capsys.readouterr().err
    assert code == 127
    assert main(["plan", JOB, "--nodes", "2x4"]) == 0
    planned = capsys.readouterr().out
    line = next(x for x in planned.splitlines() if x.startswith("estimate: "))
    assert line in err.splitlines(), err  # the same words `plan` prints
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topology.html", "topology.svg"]
    assert f"Topology picture: {tmp_path / 'topology.svg'} and {tmp_path / 'topology.html'}" in err
    assert 'data-component="train"' in (tmp_path / "topology.svg").read_text()


def test_a_simulated_cluster_larger_than_this_machine_is_refused_at_once_saying_the_limit(tmp_path, capsys):
    code = main(["run", JOB, "--simulate", "5000x8", "--out", str(tmp_path), "--", "python", "-c", "pass"])
    err = capsys.readouterr().err
    limit = machine.machine_limit().nodes
    assert code == 2 and err.count("\n") == 1 and "usage" not in err
    assert err.startswith(
        f"rlplace run: error: argument --simulate: 5000 simulated nodes are more than this machine can hold: at most "
        f"{limit}, each node being a raylet and its two agents (memory: half of the "
    )
    assert "(/proc/meminfo MemAvailable)" in err and "(os.cpu_count())" in err
    assert list(tmp_path.iterdir()) == []  # refused before the plan is even shown


def test_the_limit_is_the_smallest_of_memory_threads_and_cores():
    limit = machine.MachineLimit(
        by_memory=40, by_threads=None, by_cores=83, available_bytes=9 * 2**30, threads_left=None, cores=2
    )
    assert limit.nodes == 40
    assert machine.too_many(40, limit) is None
    said = machine.too_many(41, limit)
    assert said is not None and "at most 40" in said and "memory: half of the 9.0 GiB available" in said
    assert "threads" not in said  # no limit on this user's threads: not said
    assert "CPU: half of 2 core(s) (os.cpu_count()), at 1.2 % of a core per idle node -> 83" in said


def test_the_handed_plan_says_every_change_of_the_nodes_it_was_made_for():
    planned = simulated_inventory("2x4/rack=1,1x2:RTX4090")
    nodes = list(planned.nodes)
    nodes[0] = Node(0, 4, labels={"rack": "rack-9", "rlplace/node-rank": "0"}, num_cpus=32)  # moved racks
    nodes[1] = Node(1, 8, labels=dict(planned.node(1).labels), num_cpus=32)  # more GPUs
    live = Inventory(tuple(nodes[:2]))  # node 2 gone
    assert handoff.changes(planned, live) == [
        "node 0: rack=rack-9, the plan was made for rack=rack-0",
        "node 1: 8 GPU(s), the plan was made for 4",
        "node 2 is gone (the live cluster has node ranks 0-1)",
    ]
    grown = Inventory((*planned.nodes, Node(3, 4)))  # a node more changes nothing the plan uses
    assert handoff.changes(planned, grown) == []


def test_the_handed_plan_round_trips_and_is_readable_by_its_owner_only(tmp_path):
    nodes = simulated_inventory("2x4:A800,1x2")
    shown = plan(load(JOB), nodes)
    env = handoff.write_handoff(shown, nodes, tmp_path)
    assert pathlib.Path(env[handoff.PLAN_ENV]).stat().st_mode & 0o777 == 0o600
    assert handoff.read_handoff(env) == (shown, nodes)
    assert handoff.read_handoff({}) is None


def test_the_demo_picture_states_the_model_the_pipeline_syncs(tmp_path, capsys):
    """It said "14 GB (assumed)"; the pipeline syncs its CartPole actor and critic, 9,155 float64 parameters."""
    from rlplace.examples.cartpole_ppo.command import _show_plan
    from rlplace.examples.cartpole_ppo.ppo import Agent, parameter_bytes
    from rlplace.viz.console import console

    nodes = simulated_inventory("2x4:A800,1x2:RTX4090,1x0")
    job = SimpleNamespace(plan=plan(load(CONFIGS / "node-groups.yaml"), nodes), live=nodes, warnings=[])
    _show_plan(job, console(), tmp_path / "demo_topology")
    assert parameter_bytes() == Agent().params.nbytes == 73_240
    svg = (tmp_path / "demo_topology.svg").read_text()
    assert "weights 73.24 KB" in svg and "assumed" not in svg and "14 GB" not in svg
    assert "(model 73.24 KB from the CartPole actor and critic this pipeline syncs)" in capsys.readouterr().out


def test_make_demo_writes_its_pictures_into_the_ignored_out_folder():
    recipe = re.search(r"^demo:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert recipe is not None
    assert any(line.endswith("rlplace demo --out out") for line in recipe.group(1).splitlines())
    assert "/out/" in (ROOT / ".gitignore").read_text().splitlines()
    assert "`out/demo_topology.svg`" in (ROOT / "README.md").read_text()
