"""RLinf's worker semantics: which GPUs a worker sees, and whose env vars it gets; load-time warnings."""

from __future__ import annotations

import dataclasses

from tests.planner.specs import auto, groups_spec, r

from rlplace.inventory import parse_nodes
from rlplace.model import HardwareUnit, NodeGroupSpec
from rlplace.planner import plan


def seen(p, component):
    return [(w.node_rank, w.gpus, w.sees_node_gpus, w.visible_gpus) for w in p.by_component(component)]


def test_workers_on_a_robot_a_node_or_an_accelerator_less_group_see_their_nodes_gpus_unreserved():
    robot = HardwareUnit("Franka", 1, {"robot_ip": "10.0.0.1"})
    groups = [
        NodeGroupSpec("franka", (1,), hardware_type="Franka", hardware=(robot,)),
        NodeGroupSpec("cpu", (0, 1), ignore_hardware=True),
    ]
    comps = {
        "actor": (("cluster",), [(r(0, 3), None)]),
        "env": (("franka",), [((0,), None)]),
        "agent": (("node",), [((0,), r(0, 1))]),
        "helper": (("cpu",), [((1,), None)]),
    }
    p = plan(groups_spec(comps, groups), parse_nodes("1x4,1x2"))
    assert seen(p, "actor") == [(0, (g,), False, None) for g in range(4)]  # isolated to their own GPU
    assert seen(p, "env") == [(1, (), True, (0, 1))]
    assert seen(p, "agent") == [(0, (), True, (0, 1, 2, 3))] * 2
    assert seen(p, "helper") == [(1, (), True, (0, 1))]
    assert sum(b.num_gpus for b in p.bundles) == 4  # seeing reserves nothing
    worker = p.to_dict()["workers"][4]
    assert (worker["component"], worker["sees_node_gpus"], worker["visible_gpus"]) == ("env", True, [0, 1])


def test_on_a_node_without_gpus_nothing_is_seen():
    groups = [NodeGroupSpec("cpu", (0,))]
    p = plan(groups_spec({"agent": (("cpu",), [((0,), r(0, 2))])}, groups), parse_nodes("1x0"))
    assert seen(p, "agent") == [(0, (), False, None)] * 3


def test_pool_dialect_cpu_workers_do_not_see_gpus():
    """RLightning's CPU-only actors (env_each_gpu_num: 0, buffer) get no GPU and none is made visible."""
    spec = auto("colocate", train=1, eval=1, gpus={"env": 0.0})
    p = plan(spec, parse_nodes("1x2"))
    assert all(not w.sees_node_gpus and w.visible_gpus is None for w in p.workers)


def test_load_time_warnings_come_first_in_the_plan():
    spec = dataclasses.replace(auto("default"), warnings=("cluster.foo: unknown key, ignored",))
    p = plan(spec, parse_nodes("1x4"))
    assert p.warnings[0] == "cluster.foo: unknown key, ignored"
