"""Components that run in the driver (ComponentSpec.remote=False, RLightning's `remote_<c>: false`)."""

from __future__ import annotations

import dataclasses
import json

from tests.planner.specs import auto, groups_spec, manual, r

from rlplace.cli import main
from rlplace.config import load
from rlplace.inventory import parse_nodes
from rlplace.model import ComponentSpec
from rlplace.plan import Plan
from rlplace.planner import plan
from rlplace.viz.picture import svg
from rlplace.viz.table import render


def local(spec, *names):
    comps = tuple(dataclasses.replace(c, remote=c.name not in names) for c in spec.components)
    return dataclasses.replace(spec, components=comps)


def test_a_driver_local_component_is_planned_but_reserves_nothing():
    p = plan(local(auto("disaggregate", train=2, eval=2), "train"), parse_nodes("2x4"))
    train = p.by_component("train")
    assert [(w.rank, w.world_size, w.in_driver, w.node_rank, w.gpus, w.bundle, w.num_gpus) for w in train] == [
        (0, 2, True, None, (), None, 0.0),
        (1, 2, True, None, (), None, 0.0),
    ]
    assert [g.name for g in p.groups] == ["rollout_pool"]  # no train_pool: nothing to reserve for train
    assert sum(b.num_gpus for b in p.bundles) == 4  # eval 2 + env 2 only
    assert p.to_dict()["workers"][0]["in_driver"] is True
    assert Plan.from_dict(p.to_dict()) == p


def test_the_counts_of_a_driver_local_component_are_the_planned_ones():
    """RLightning builds as many in-process objects as it would have started actors; env follows eval."""
    p = plan(local(auto("colocate", train=3, eval=2), "eval"), parse_nodes("1x8"))
    assert [(w.rank, w.in_driver) for w in p.by_component("eval")] == [(0, True), (1, True)]
    assert len(p.by_component("env")) == 2 and not any(w.in_driver for w in p.by_component("env"))


def with_buffer(spec):
    return dataclasses.replace(spec, components=(*spec.components, ComponentSpec("buffer")))


def test_a_driver_local_buffer_and_remote_buffer_without_remote_train():
    p = plan(local(with_buffer(auto("colocate", train=2, eval=2)), "buffer"), parse_nodes("1x4"))
    assert [(w.in_driver, w.node_rank) for w in p.by_component("buffer")] == [(True, None)]
    p = plan(local(auto("colocate", train=2, eval=2), "train"), parse_nodes("1x4"))
    buffer = p.by_component("buffer")
    assert [(w.in_driver, w.node_rank, w.num_gpus) for w in buffer] == [(False, None, 0.0)]
    assert any("buffer shard(s) cannot sit beside train workers" in w for w in p.warnings)


def test_manual_pools_and_node_groups_components_can_run_in_the_driver():
    pools = manual([{"name": "g", "num_node": 1, "num_gpus": 4, "train": r(0, 3), "eval": r(0, 3)}])
    p = plan(local(pools, "train"), parse_nodes("1x4"))
    assert len(p.by_component("train")) == 4 and all(w.in_driver for w in p.by_component("train"))
    groups = groups_spec({"actor": (("cluster",), [(r(0, 3), None)]), "agent": (("node",), [((0,), r(0, 9))])})
    p = plan(local(groups, "agent"), parse_nodes("1x4"))
    assert [w.rank for w in p.by_component("agent")] == list(range(10))
    assert all(w.in_driver and w.node_rank is None for w in p.by_component("agent"))
    assert all(b.group != "node" for b in p.bundles)


def test_table_picture_and_json_show_driver_local_workers(tmp_path, capsys):
    p = plan(local(auto("disaggregate", train=2, eval=1), "train"), parse_nodes("2x4"))
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(render(p))
    text = console.export_text()
    assert "in the driver process (remote: false, nothing reserved): train 0-1" in text
    assert "remote_train: false" in text  # the migration note: RLightning would still reserve its GPUs
    import re

    picture = svg(p)
    where = re.findall(r'data-component="train" data-ranks="[^"]*" data-where="([^"]*)"', picture)
    assert where and set(where) == {"in the driver process"}


def test_cli_plan_json_of_a_driver_local_component(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("cluster:\n  train_worker_num: 2\n  placement: {strategy: disaggregate}\n")
    assert main(["plan", str(cfg), "--nodes", "2x4", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert all(not w["in_driver"] for w in doc["workers"])  # remote is the default


def test_cpu_only_env_workers_whose_gpu_components_all_run_in_the_driver_are_left_to_ray_and_said_so():
    """With train and eval in the driver the pool env would share has no node: colocate crashed dividing by zero,
    disaggregate dropped env's workers from the plan without a word."""
    for strategy in ("colocate", "disaggregate"):
        text = (
            "cluster:\n  env_each_gpu_num: 0\n  remote_train: false\n  remote_eval: false\n"
            f"  placement: {{mode: auto, strategy: {strategy}}}\n"
        )
        p = plan(load(text), parse_nodes("2x2:H100"))
        env = p.by_component("env")
        assert [(w.node_rank, w.in_driver, w.num_gpus) for w in env] == [(None, False, 0.0)], strategy
        assert any(w.startswith("env: its 1 worker(s) need no GPU") for w in p.warnings), p.warnings
