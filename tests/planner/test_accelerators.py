"""Accelerators other than NVIDIA GPUs: declared with --nodes / inventory files, counted by placement ranks."""

from __future__ import annotations

import pytest
from tests.planner.specs import auto, groups_spec, r

from rlplace.cli import main
from rlplace.errors import ConfigError
from rlplace.inventory import load_inventory, parse_nodes
from rlplace.planner import plan


@pytest.mark.parametrize(
    ("nodes", "resource", "model"),
    [
        ("2x8:Ascend910B@NPU", "NPU", "Ascend910B"),
        ("2x8:Ascend910B", "NPU", "Ascend910B"),  # Ascend models are NPUs without saying so
        ("2x8:Gaudi2", "HPU", "Gaudi2"),
        ("2x8@HPU", "HPU", None),
        ("2x8:MI300X", "GPU", "MI300X"),  # AMD and Intel GPUs are Ray "GPU"s
        ("2x8:P800@XPU", "XPU", "P800"),  # any resource name a cluster registers (Kunlun, MUSA, ...)
    ],
)
def test_nodes_declare_the_accelerator_resource(nodes, resource, model):
    inv = parse_nodes(nodes)
    assert [(n.num_gpus, n.gpu_model, n.accelerator_resource) for n in inv.nodes] == [(8, model, resource)] * 2


@pytest.mark.parametrize("bad", ["2x8@", "2x8@1NPU", "2x8:@NPU", "2x8@NPU@GPU"])
def test_a_malformed_accelerator_is_a_clear_error(bad):
    with pytest.raises(ConfigError, match=r"is not COUNTxGPUS\[:MODEL\]\[@RESOURCE\]"):
        parse_nodes(bad)


def test_inventory_files_take_an_accelerator_key(tmp_path):
    f = tmp_path / "nodes.yaml"
    f.write_text("nodes:\n  - {count: 1, gpus: 8, model: Ascend910B}\n  - {gpus: 4, accelerator: HPU}\n  - {gpus: 0}\n")
    inv = load_inventory(str(f))
    assert [n.accelerator_resource for n in inv.nodes] == ["NPU", "HPU", "GPU"]
    f.write_text("nodes: 1x8:Ascend910B@NPU\n")
    assert load_inventory(str(f)).node(0).accelerator_resource == "NPU"
    f.write_text("nodes:\n  - {gpus: 8, accelerator: 3}\n")
    with pytest.raises(ConfigError, match="accelerator"):
        load_inventory(str(f))


def test_placement_ranks_count_npus_and_bundles_name_them():
    spec = groups_spec({"actor": (("cluster",), [(r(0, 15), None)])})
    p = plan(spec, parse_nodes("2x8:Ascend910B@NPU"))
    assert [(w.node_rank, w.gpus) for w in p.by_component("actor")][7:9] == [(0, (7,)), (1, (0,))]
    assert {b.accelerator for b in p.bundles} == {"NPU"}
    assert p.to_dict()["bundles"][0]["accelerator"] == "NPU"


def test_mixed_inventories_name_each_nodes_accelerator():
    p = plan(auto("disaggregate", train=2, eval=1), parse_nodes("1x2:A800,1x2:Ascend910B"))
    by_node = {b.node_rank: b.accelerator for b in p.bundles if b.gpus}
    assert by_node == {0: "GPU", 1: "NPU"}


def test_the_table_says_which_accelerators_the_devices_are(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("cluster:\n  train_worker_num: 2\n  eval_worker_num: 2\n  placement: {strategy: colocate}\n")
    assert main(["plan", str(cfg), "--nodes", "1x4:Ascend910B"]) == 0
    assert "devices are NPU accelerators" in capsys.readouterr().out
