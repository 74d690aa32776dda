"""What a plan reserves per node is checked when the plan is made, where the inventory states it: CPUs and
custom resources against an inventory file (or a live cluster, tests/ray/test_plan_capacity.py); `--nodes`
states no CPUs, so none are checked."""

from __future__ import annotations

import pytest
from tests.conftest import ROOT
from tests.viz.plans import settings

from rlplace.cli import main
from rlplace.inventory import Inventory, Node
from rlplace.plan import Bundle, Plan
from rlplace.planner import capacity

COLOCATE_OFFLOAD = str(ROOT / "examples" / "cartpole_ppo" / "configs" / "colocate-offload.yaml")


def plan_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["plan", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_an_inventory_file_with_cpus_refuses_a_plan_its_nodes_cannot_hold(capsys, tmp_path):
    """The issue's case: two nodes of 2 GPUs and 4 CPUs; colocate-offload reserves 7 CPUs on node 0."""
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("nodes:\n  - {count: 2, gpus: 2, cpus: 4}\n")
    code, _, err = plan_cli(capsys, COLOCATE_OFFLOAD, "--inventory", str(nodes))
    assert code == 3
    assert "node 0 (2x GPU, 4 CPU, ?) can never hold what the plan reserves there (2 GPU, 7 CPU): missing 3 CPU" in err
    assert "`train_each_cpu_num: 0.5`" in err and "`rlplace start ... -- --num-cpus N`" in err
    nodes.write_text("nodes:\n  - {count: 2, gpus: 2, cpus: 8}\n")
    code, out, _ = plan_cli(capsys, COLOCATE_OFFLOAD, "--inventory", str(nodes))
    assert code == 0 and "7 of 8" in out


def test_nodes_and_inventory_entries_without_cpus_check_none(capsys, tmp_path):
    code, out, _ = plan_cli(capsys, COLOCATE_OFFLOAD, "--nodes", "2x2")
    assert code == 0 and " 7 │" in out  # what node 0 reserves, of an unstated number of CPUs
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("nodes:\n  - {count: 2, gpus: 2}\n")
    assert plan_cli(capsys, COLOCATE_OFFLOAD, "--inventory", str(nodes))[0] == 0


def test_the_help_says_nodes_checks_no_cpus(capsys):
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    assert "says nothing about CPUs, so the plan's CPUs are not checked" in " ".join(capsys.readouterr().out.split())


def plan_of(*bundles: Bundle) -> Plan:
    return Plan((), bundles, settings())


def test_custom_resources_a_node_advertises_are_checked():
    node = Node(rank=0, num_gpus=1, num_cpus=4.0, resources={"rlplace/robot/franka/0": 1.0})
    wants = plan_of(Bundle(0, 0, (), 1.0, {"rlplace/robot/franka/0": 2.0}))
    (problem,) = capacity.problems(wants, Inventory((node,)))
    assert problem.endswith(
        "(1 CPU, 2 rlplace/robot/franka/0): missing 1 rlplace/robot/franka/0 (start the node with "
        "`--resources '{\"rlplace/robot/franka/0\": 1}'`)"
    )


def test_hardware_a_node_does_not_advertise_is_left_out_with_the_warning_run_gives():
    """As `rlplace run` does: not a refusal (the node has no such resource to run out of), a warning on a live
    node, nothing on a declared one."""
    robot = plan_of(Bundle(0, 0, (), 1.0, {"rlplace/robot/franka/0": 1.0}))
    declared = Inventory((Node(rank=0, num_cpus=8.0),))
    live = Inventory((Node(rank=0, num_cpus=8.0, node_id="abc", address="10.0.0.1"),))
    assert capacity.problems(robot, declared) == capacity.problems(robot, live) == []
    assert capacity.warnings(robot, declared) == []
    assert capacity.warnings(robot, live) == [
        "node 0 does not advertise rlplace/robot/franka/0, so other jobs are not kept off that hardware; start the "
        "node with `rlplace start --hardware ...` (see docs/ray.md)"
    ]


def test_every_node_short_of_cpus_is_named():
    inventory = Inventory(tuple(Node(rank=r, num_gpus=1, num_cpus=2.0) for r in range(3)))
    wants = plan_of(Bundle(0, 0, (0,), 3.0), Bundle(1, 1, (0,), 2.0), Bundle(2, 2, (0,), 2.5))
    problems = capacity.problems(wants, inventory)
    assert [p.split(" (")[0] for p in problems] == ["node 0", "node 2"]
    assert capacity.refusal(problems).startswith("the plan cannot be placed on this cluster:\n  node 0 (1x GPU, 2 CPU")
