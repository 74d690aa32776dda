"""The plans the views are checked on: every spec example with the inventory its README row names, and
framework-shaped configs of tests/data/frameworks (RLinf reasoning with actor/rollout/reward, embodied with
robots, node groups; RLightning auto and manual pools, a component in the driver, strategy default)."""

from __future__ import annotations

import importlib.util
import pathlib

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "render_pictures.py"
_spec = importlib.util.spec_from_file_location("render_pictures", SCRIPT)
render_pictures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render_pictures)

FRAMEWORKS_DIR = ROOT / "tests" / "data" / "frameworks"

#: (config, --nodes) of every spec example, in the README's order.
SPEC: list[tuple[pathlib.Path, str]] = render_pictures.examples()

#: (config, --nodes, Hydra overrides) in the frameworks' shapes.
FRAMEWORKS: list[tuple[pathlib.Path, str, tuple[str, ...]]] = [
    (FRAMEWORKS_DIR / path, nodes, overrides)
    for path, nodes, overrides in (
        ("rlinf/config/grpo_collocated.yaml", "2x8", ()),  # actor, rollout spanning 2 GPUs, reward
        ("rlinf/config/grpo_disaggregated.yaml", "2x8", ()),
        ("rlinf/config/grpo_dynamic.yaml", "2x8", ()),
        ("rlinf/config/embodied_robots.yaml", "2x8:A800,4x0", ()),  # every robot type
        ("rlinf/config/dual_arm_controller.yaml", "1x8,2x0", ()),  # a process on two robots
        ("rlinf/config/all_nodes.yaml", "4x8", ()),  # node groups, node_ranks: all
        ("rlinf/large/three_groups.yaml", "16x8:A800,16x8:RTX4090,8x0", ()),
        ("rlightning/conf/cluster/1t1e.yaml", "2x2", ()),  # auto
        ("rlightning/conf/cluster/4t4e_devcolo.yaml", "2x4", ()),  # auto, device-colocate
        ("rlightning/conf/cluster/8t8e_colocate.yaml", "1x8", ()),
        ("rlightning/conf/cluster/default_env_strategy.yaml", "1x6", ()),  # strategy default
        ("rlightning/conf/cluster/4t4e_manual.yaml", "1x8", ()),  # manual pools
        ("rlightning/conf/cluster/2t2e_pool_group.yaml", "2x4", ()),
        ("rlightning/conf/cluster/remote_debug.yaml", "1x5", ()),  # components in the driver
        ("rlightning/conf/train_ppo.yaml", "1x8", ()),  # a Hydra primary config
        # topology: racks in zones, train and rollout in every rack; NVLink domains of several nodes
        ("rlightning/conf/cluster/1t1e.yaml", "8x2:H100/rack=2/zone=4", ("train_worker_num=4", "eval_worker_num=4")),
        ("rlinf/config/grpo_collocated.yaml", "2x8/nvlink_domain=2", ()),
    )
]
