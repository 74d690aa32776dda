"""One invalid config per rule: each must be rejected with the right key path and a message that says why.

Every case is a small YAML text; the assertion finds the problem by its key path and checks the
substance of the message (what is wrong and what would be valid), as a user reading it would.
"""

from __future__ import annotations

import textwrap

import pytest

from rlplace.config import load
from rlplace.errors import ConfigError, Problem

POOLS = """\
cluster:
  train_worker_num: 1
  placement:
    mode: manual
  resource_pool:
    - name: global_pool
      num_node: 3
      num_gpus: 8
      train: "0-7"
"""

GROUPS = """\
cluster:
  num_nodes: 4
  component_placement:
    actor:
      node_group: gpu
      placement: 0-7
  node_groups:
    - label: gpu
      node_ranks: 0-1
"""


def problems_of(text: str) -> list[Problem]:
    with pytest.raises(ConfigError) as e:
        load(textwrap.dedent(text), filename="job.yaml")
    return e.value.problems


# (id, yaml, key path, substrings of the message)
CASES = [
    # --- the pools dialect (spec/placement-strategy.txt) ---
    (
        "unknown-cluster-key",
        "cluster:\n  train_workers_num: 2\n",
        "cluster.train_workers_num",
        ["unknown key", "did you mean 'train_worker_num'?"],
    ),
    (
        "unknown-placement-key",
        "cluster:\n  placement:\n    stratgy: colocate\n",
        "cluster.placement.stratgy",
        ["did you mean 'strategy'"],
    ),
    (
        "unknown-pool-key",
        POOLS.replace("num_node: 3", "num_nodes: 3\n      num_node: 3"),
        "cluster.resource_pool[0].num_nodes",
        ["did you mean 'num_node'"],
    ),
    ("bad-mode", "cluster:\n  placement:\n    mode: automatic\n", "cluster.placement.mode", ["'auto', 'manual'"]),
    (
        "bad-strategy",
        "cluster:\n  placement:\n    strategy: colocated\n",
        "cluster.placement.strategy",
        ["did you mean 'colocate'"],
    ),
    (
        "bad-env-strategy",
        "cluster:\n  placement:\n    env_strategy: node_affinity\n",
        "cluster.placement.env_strategy",
        ["did you mean 'node-affinity'"],
    ),
    ("zero-workers", "cluster:\n  train_worker_num: 0\n", "cluster.train_worker_num", ["integer >= 1", "got 0"]),
    ("quoted-worker-count", "cluster:\n  eval_worker_num: '2'\n", "cluster.eval_worker_num", ["integer >= 1", "'2'"]),
    (
        "huge-count",
        POOLS.replace("num_node: 3", "num_node: 1000000000"),
        "cluster.resource_pool[0].num_node",
        ["too large (at most 16384)"],
    ),
    ("bool-worker-count", "cluster:\n  env_worker_num: true\n", "cluster.env_worker_num", ["integer >= 1", "True"]),
    (
        "bad-buffer-num",
        "cluster:\n  buffer_worker_num: automatic\n",
        "cluster.buffer_worker_num",
        ["auto or an integer"],
    ),
    ("negative-buffer-num", "cluster:\n  buffer_worker_num: -1\n", "cluster.buffer_worker_num", ["auto or an integer"]),
    (
        "fractional-gpus-above-one",
        "cluster:\n  train_each_gpu_num: 1.5\n",
        "cluster.train_each_gpu_num",
        ["whole number"],
    ),
    ("negative-gpus", "cluster:\n  eval_each_gpu_num: -0.5\n", "cluster.eval_each_gpu_num", ["number >= 0"]),
    ("quoted-bool", "cluster:\n  is_colocated: 'yes'\n", "cluster.is_colocated", ["true or false", "without quotes"]),
    (
        "colocated-vs-disaggregate",
        "cluster:\n  is_colocated: true\n  placement:\n    strategy: disaggregate\n",
        "cluster.is_colocated",
        ["contradicts placement.strategy: disaggregate", "strategy: colocate"],
    ),
    (
        "not-colocated-vs-colocate",
        "cluster:\n  is_colocated: false\n  placement:\n    strategy: colocate\n",
        "cluster.is_colocated",
        ["contradicts placement.strategy: colocate"],
    ),
    (
        "manual-without-pools",
        "cluster:\n  placement:\n    mode: manual\n",
        "cluster.placement.mode",
        ["no resource_pool"],
    ),
    (
        "auto-with-pools",
        POOLS.replace("    mode: manual\n", "    strategy: colocate\n"),
        "cluster.resource_pool",
        ["only read in manual mode", "default when not written", "mode: manual"],
    ),
    (
        "pools-in-two-places",
        POOLS + "resource_pool:\n  - name: p\n    num_node: 1\n    num_gpus: 8\n",
        "resource_pool",
        ["written twice"],
    ),
    (
        "component-in-two-pools",
        POOLS + "    - name: other\n      num_node: 1\n      num_gpus: 8\n      train: 0-7\n",
        "cluster.resource_pool[1].train",
        ["already has a range in pool 'global_pool'", "exactly one pool"],
    ),
    (
        "range-out-of-pool",
        POOLS.replace('train: "0-7"', 'train: "16-24"'),
        "cluster.resource_pool[0].train",
        ["GPU index 24 is outside pool 'global_pool'", "24 GPUs", "0-23"],
    ),
    ("range-backwards", POOLS.replace('"0-7"', '"7-0"'), "cluster.resource_pool[0].train", ["runs backwards", "0-7"]),
    (
        "range-duplicate",
        POOLS.replace('"0-7"', '"0-7, 4-5"'),
        "cluster.resource_pool[0].train",
        ["rank 4 appears twice"],
    ),
    (
        "range-malformed",
        POOLS.replace('"0-7"', '"0..7"'),
        "cluster.resource_pool[0].train",
        ["'0..7' is not a rank", "0-7"],
    ),
    ("range-negative", POOLS.replace('"0-7"', '"-1"'), "cluster.resource_pool[0].train", ["negative"]),
    (
        "range-trailing-comma",
        POOLS.replace('"0-7"', '"0-7,"'),
        "cluster.resource_pool[0].train",
        ["empty part between commas"],
    ),
    (
        "mixed-gpu-counts-without-node-ids",
        POOLS.replace("num_node: 3\n      num_gpus: 8", "num_node: 2\n      num_gpus: [8, 4]"),
        "cluster.resource_pool[0].num_gpus",
        ["same GPU count", "node_ids"],
    ),
    (
        "num-gpus-list-length",
        POOLS.replace("num_node: 3\n      num_gpus: 8", "node_ids: [0, 1, 2]\n      num_gpus: [8, 4]"),
        "cluster.resource_pool[0].num_gpus",
        ["lists 2 counts", "3 nodes", "one count per node"],
    ),
    (
        "num-node-vs-node-ids",
        POOLS.replace("num_node: 3", "num_node: 3\n      node_ids: [0, 1]"),
        "cluster.resource_pool[0].num_node",
        ["num_node is 3 but node_ids names 2 nodes"],
    ),
    (
        "node-ids-duplicate",
        POOLS.replace("num_node: 3", "node_ids: [0, 0]"),
        "cluster.resource_pool[0].node_ids",
        ["lists a node twice"],
    ),
    (
        "node-ids-mixed",
        POOLS.replace("num_node: 3", "node_ids: [0, head]"),
        "cluster.resource_pool[0].node_ids",
        ["all node ranks (ints) or all node names"],
    ),
    (
        "node-in-two-pools",
        POOLS.replace("num_node: 3", "node_ids: [0]") + "    - name: other\n      node_ids: [0]\n      num_gpus: 8\n",
        "cluster.resource_pool[1].node_ids[0]",
        ["node 0 is already in pool 'global_pool'"],
    ),
    (
        "pool-without-num-gpus",
        POOLS.replace("      num_gpus: 8\n", ""),
        "cluster.resource_pool[0].num_gpus",
        ["needs 'num_gpus'"],
    ),
    (
        "pool-without-size",
        POOLS.replace("      num_node: 3\n", ""),
        "cluster.resource_pool[0].num_node",
        ["needs num_node (or node_ids"],
    ),
    (
        "pool-name-twice",
        POOLS + "    - name: global_pool\n      num_node: 1\n      num_gpus: 8\n",
        "cluster.resource_pool[1].name",
        ["already used by resource_pool[0]"],
    ),
    (
        "pool-name-reserved",
        POOLS.replace("name: global_pool", "name: node"),
        "cluster.resource_pool[0].name",
        ["reserved"],
    ),
    (
        "count-without-range",
        POOLS.replace("train_worker_num: 1", "eval_worker_num: 2"),
        "cluster.eval_worker_num",
        ["no resource_pool entry gives eval a GPU range"],
    ),
    (
        "demand-over-range",
        POOLS.replace("train_worker_num: 1", "train_worker_num: 16"),
        "cluster.train_worker_num",
        ["need 16 GPUs", "holds 8"],
    ),
    (
        "pools-missing-dash",
        "cluster:\n  placement:\n    mode: manual\n  resource_pool:\n    name: p\n    num_node: 1\n",
        "cluster.resource_pool",
        ["perhaps a '-' is missing"],
    ),
    (
        "mixed-dialects",
        "cluster:\n  num_nodes: 2\n  train_worker_num: 1\n  component_placement: {a: 0}\n",
        "cluster",
        ["mixes the two dialects", "num_nodes", "train_worker_num"],
    ),
    # --- the node-groups dialect (spec/heterogeneous-cluster.*) ---
    (
        "reserved-label-cluster",
        GROUPS.replace("label: gpu", "label: cluster"),
        "cluster.node_groups[0].label",
        ["'cluster' is reserved"],
    ),
    (
        "duplicate-label",
        GROUPS + "    - label: gpu\n      node_ranks: 2\n",
        "cluster.node_groups[1].label",
        ["already used by node_groups[0]", "case-sensitive"],
    ),
    ("label-with-comma", GROUPS.replace("label: gpu", "label: 'a,b'"), "cluster.node_groups[0].label", ["commas"]),
    (
        "group-rank-outside-cluster",
        GROUPS.replace("node_ranks: 0-1", "node_ranks: 3-4"),
        "cluster.node_groups[0].node_ranks",
        ["node rank 4 is outside the cluster", "num_nodes is 4", "0-3"],
    ),
    (
        "missing-node-ranks",
        GROUPS.replace("      node_ranks: 0-1\n", ""),
        "cluster.node_groups[0].node_ranks",
        ["needs 'node_ranks'"],
    ),
    (
        "env-config-not-subset",
        GROUPS + "      env_configs:\n        - node_ranks: 1-2\n",
        "cluster.node_groups[0].env_configs[0].node_ranks",
        ["node ranks 2 are not in this group", "0-1"],
    ),
    (
        "env-configs-overlap",
        GROUPS + "      env_configs:\n        - node_ranks: 0-1\n        - node_ranks: 1\n",
        "cluster.node_groups[0].env_configs[1].node_ranks",
        ["already configured by env_configs[0]", "must not overlap"],
    ),
    (
        "env-vars-missing-dash",
        GROUPS + "      env_configs:\n        - node_ranks: 0\n          env_vars:\n"
        "            GLOO_SOCKET_IFNAME: eth0\n",
        "cluster.node_groups[0].env_configs[0].env_vars",
        ["perhaps a '-' is missing", "- GLOO_SOCKET_IFNAME"],
    ),
    (
        "env-vars-two-keys-one-entry",
        GROUPS + "      env_configs:\n        - node_ranks: 0\n          env_vars:\n"
        "            - A: x\n              B: y\n",
        "cluster.node_groups[0].env_configs[0].env_vars[0]",
        ["exactly one KEY: value", "'-' is missing before B"],
    ),
    (
        "env-var-twice",
        GROUPS + "      env_configs:\n        - node_ranks: 0\n          env_vars:\n"
        "            - A: x\n            - A: y\n",
        "cluster.node_groups[0].env_configs[0].env_vars[1]",
        ["A is set twice"],
    ),
    (
        "env-var-bool",
        GROUPS + "      env_configs:\n        - node_ranks: 0\n          env_vars:\n            - NCCL_DEBUG: true\n",
        "cluster.node_groups[0].env_configs[0].env_vars[0].NCCL_DEBUG",
        ["boolean", 'quote it: NCCL_DEBUG: "true"'],
    ),
    (
        "env-var-bad-name",
        GROUPS + "      env_configs:\n        - node_ranks: 0\n          env_vars:\n            - MY-VAR: x\n",
        "cluster.node_groups[0].env_configs[0].env_vars[0]",
        ["not an environment variable name"],
    ),
    (
        "relative-interpreter",
        GROUPS + "      env_configs:\n        - node_ranks: 0\n          python_interpreter_path: venv/bin/python\n",
        "cluster.node_groups[0].env_configs[0].python_interpreter_path",
        ["absolute path"],
    ),
]

FRANKA = (
    GROUPS.replace("node_group: gpu\n      placement: 0-7", "node_group: arm\n      placement: 0-1")
    + """\
    - label: arm
      node_ranks: 2-3
      hardware:
        type: Franka
        configs:
          - robot_ip: "10.0.0.1"
            node_rank: 2
            camera_serials: ["1"]
          - robot_ip: "10.0.0.2"
            node_rank: 3
"""
)

#: An RLinf dynamic reasoning config (auto scheduler): actor, rollout, inference one after the other.
DYNAMIC = """\
cluster:
  num_nodes: 1
  auto_scheduler: true
  use_pre_process_policy: true
  component_placement:
    actor: 0-1
    rollout: 2-5
    inference: 6-7
    reward: all
actor:
  model: {tensor_model_parallel_size: 2}
rollout:
  tensor_parallel_size: 2
"""

CASES += [
    (
        "unknown-hardware-type",
        FRANKA.replace("type: Franka", "type: franka"),
        "cluster.node_groups[1].hardware.type",
        ["did you mean 'Franka'"],
    ),
    (
        "bad-robot-ip",
        FRANKA.replace('"10.0.0.1"', '"10.0.0.300"'),
        "cluster.node_groups[1].hardware.configs[0].robot_ip",
        ["not a valid IPv4 or IPv6 address"],
    ),
    (
        "robot-outside-group",
        FRANKA.replace("node_rank: 3", "node_rank: 1"),
        "cluster.node_groups[1].hardware.configs[1].node_rank",
        ["node_rank 1 is not in this group", "2-3"],
    ),
    (
        "unquoted-serial",
        FRANKA.replace('camera_serials: ["1"]', "camera_serials: [0322]"),
        "cluster.node_groups[1].hardware.configs[0].camera_serials[0]",
        ["read by YAML as the number 210", 'quote it: "0322"'],
    ),
    (
        "robot-configured-twice",
        FRANKA.replace('"10.0.0.2"', '"10.0.0.1"'),
        "cluster.node_groups[1].hardware.configs[1]",
        ["already configured by configs[0]", "one hardware config per robot"],
    ),
    (
        "hardware-and-ignore-hardware",
        FRANKA.replace("      hardware:", "      ignore_hardware: true\n      hardware:"),
        "cluster.node_groups[1].ignore_hardware",
        ["contradicts the hardware block"],
    ),
    (
        "unknown-franka-key",
        FRANKA.replace("node_rank: 3", "node_rank: 3\n            robot_port: 5"),
        "cluster.node_groups[1].hardware.configs[1].robot_port",
        ["unknown key 'robot_port'", "did you mean 'robot_ip'?"],
    ),
    (
        "placement-beyond-robots",
        FRANKA.replace("placement: 0-1", "placement: 0-2"),
        "cluster.component_placement.actor.placement",
        ["resource rank 2 is out of range", "'arm' has 2 robots", "0-1"],
    ),
    (
        "unknown-group",
        GROUPS.replace("node_group: gpu", "node_group: gpus"),
        "cluster.component_placement.actor.node_group",
        ["'gpus' is not defined", "did you mean 'gpu'", "cluster, node"],
    ),
    (
        "process-ratio",
        GROUPS.replace("placement: 0-7", "placement: 0-2:0-3"),
        "cluster.component_placement.actor.placement",
        ["4 processes on 3 resources", "divide"],
    ),
    (
        "process-numbering",
        GROUPS.replace("placement: 0-7", "placement: 0-1:0-3,2-3:5-8"),
        "cluster.component_placement.actor.placement",
        ["must continue from 4", "starts at 5"],
    ),
    (
        "node-placement-beyond-cluster",
        GROUPS.replace("node_group: gpu", "node_group: node"),
        "cluster.component_placement.actor.placement",
        ["resource rank 4 is out of range", "'node' has 4 nodes"],
    ),
    (
        "process-spanning-nodes",
        GROUPS.replace("node_group: gpu\n      placement: 0-7", "node_group: node\n      placement: 0-1:0"),
        "cluster.component_placement.actor.placement",
        ["span several nodes"],
    ),
    (
        "component-placed-twice",
        GROUPS.replace("  node_groups:", '    "x,actor": 0-1\n  node_groups:'),
        "cluster.component_placement['x,actor']",
        ["already placed by 'actor'"],
    ),
    (
        "missing-component-placement",
        "cluster:\n  num_nodes: 2\n",
        "cluster.component_placement",
        ["needs 'component_placement'"],
    ),
    (
        "all-inside-segments",
        GROUPS.replace("placement: 0-7", "placement: all,0-3"),
        "cluster.component_placement.actor.placement",
        ["'all' must be the whole placement"],
    ),
    (
        "placement-list",
        GROUPS.replace("placement: 0-7", "placement: [0, 1]"),
        "cluster.component_placement.actor.placement",
        ["not a placement string"],
    ),
    (
        "bad-component-name",
        GROUPS.replace("    actor:", "    my actor:"),
        "cluster.component_placement['my actor']",
        ["not a component name"],
    ),
    (
        "stray-colon-in-component-key",
        GROUPS.replace("    actor:", "    actor::"),
        "cluster.component_placement['actor:']",
        ["not a component name", "did you mean 'actor' (without ':')"],
    ),
    (
        "unknown-entry-key",
        GROUPS.replace("node_group: gpu", "node_groups: gpu"),
        "cluster.component_placement.actor.node_groups",
        ["did you mean 'node_group'"],
    ),
    (
        "entry-without-placement",
        GROUPS.replace("      placement: 0-7\n", ""),
        "cluster.component_placement.actor.placement",
        ["needs 'placement'"],
    ),
    # --- framework keys: known keys validated, near misses of known keys still errors ---
    (
        "remote-key-typo",
        "cluster:\n  train_worker_num: 1\n  remote_storge: true\n",
        "cluster.remote_storge",
        ["unknown key 'remote_storge'", "did you mean 'remote_storage'"],
    ),
    ("remote-not-bool", "cluster:\n  remote_env: 'no'\n", "cluster.remote_env", ["true or false", "without quotes"]),
    (
        "bad-ray-address",
        "cluster:\n  ray_address: head-node\n",
        "cluster.ray_address",
        ["auto, local, HOST:PORT or ray://HOST:PORT", "'head-node'"],
    ),
    (
        "bad-rollout-env-interaction",
        "cluster:\n  rollout_env_interaction: stream\n",
        "cluster.rollout_env_interaction",
        ["'batched', 'streaming'", "did you mean 'streaming'"],
    ),
    ("negative-cpus", "cluster:\n  env_each_cpu_num: -1\n", "cluster.env_each_cpu_num", ["number >= 0", "-1"]),
    (
        "placement-key-typo",
        "cluster:\n  placement:\n    env_stratgy: default\n",
        "cluster.placement.env_stratgy",
        ["did you mean 'env_strategy'"],
    ),
    (
        "node-groups-top-key-typo",
        GROUPS.replace("  num_nodes: 4", "  num_nodes: 4\n  auto_schedular: true"),
        "cluster.auto_schedular",
        ["did you mean 'auto_scheduler'"],
    ),
    (
        "rlinf-switch-not-bool",
        GROUPS.replace("  num_nodes: 4", "  num_nodes: 4\n  recreate_nccl_groups: sometimes"),
        "cluster.recreate_nccl_groups",
        ["true or false"],
    ),
    (
        "component-entry-num-cpus",
        GROUPS.replace("placement: 0-7", "placement: 0-7\n      num_cpus: lots"),
        "cluster.component_placement.actor.num_cpus",
        ["number >= 0"],
    ),
    (
        "node-ranks-all-without-num-nodes",
        GROUPS.replace("  num_nodes: 4\n", "").replace("node_ranks: 0-1", "node_ranks: all"),
        "cluster.node_groups[0].node_ranks",
        ["node_ranks: all needs num_nodes"],
    ),
    (
        "hardware-type-beside-hardware",
        FRANKA.replace("      hardware:", "      hardware_type: Franka\n      hardware:"),
        "cluster.node_groups[1].hardware_type",
        ["remove hardware_type"],
    ),
    (
        "hardware-type-near-miss",
        FRANKA.replace("type: Franka", "type: Frank"),
        "cluster.node_groups[1].hardware.type",
        ["unknown hardware type 'Frank'", "did you mean 'Franka'", "Known types:", "YAM"],
    ),
    (
        "camera-type-near-miss",
        FRANKA.replace('camera_serials: ["1"]', "camera_type: realsens"),
        "cluster.node_groups[1].hardware.configs[0].camera_type",
        ["did you mean 'realsense'"],
    ),
    (
        "controller-outside-cluster",
        FRANKA.replace('camera_serials: ["1"]', "controller_node_rank: 9"),
        "cluster.node_groups[1].hardware.configs[0].controller_node_rank",
        ["node rank 9 is outside the cluster", "num_nodes is 4"],
    ),
    (
        "same-robot-in-two-groups",
        FRANKA + "    - label: arm2\n      node_ranks: 3\n      hardware:\n        type: Franka\n"
        '        configs:\n          - {robot_ip: "10.0.0.9", node_rank: 3}\n',
        "cluster.node_groups[2].hardware.configs[0]",
        ["Franka hardware of node 3 is already configured by node group 'arm'"],
    ),
    (
        "yam-needs-both-ips",
        FRANKA.replace("type: Franka", "type: YAM").replace("robot_ip", "left_ip"),
        "cluster.node_groups[1].hardware.configs[0].right_ip",
        ["needs 'right_ip'"],
    ),
    (
        "gim-arm-variant",
        FRANKA.replace("type: Franka", "type: GimArm")
        .replace('robot_ip: "10.0.0.1"', "arm_variant: xl")
        .replace('robot_ip: "10.0.0.2"', "can_interface: can1"),
        "cluster.node_groups[1].hardware.configs[0].arm_variant",
        ["'gim_arm', 'gim_arm_xl'"],
    ),
    (
        "so101-variant",
        FRANKA.replace("type: Franka", "type: SO101")
        .replace('robot_ip: "10.0.0.1"', "arm_variant: so102")
        .replace('robot_ip: "10.0.0.2"', "port: /dev/ttyACM1")
        .replace('camera_serials: ["1"]', "port: /dev/ttyACM0"),
        "cluster.node_groups[1].hardware.configs[0].arm_variant",
        ["'so101', 'so100'", "did you mean 'so101'"],
    ),
    (
        "dosw1-port",
        FRANKA.replace("type: Franka", "type: DOSW1")
        .replace('robot_ip: "10.0.0.1"', "left_arm_port: 70000")
        .replace('robot_ip: "10.0.0.2"', "robot_url: 10.0.0.2"),
        "cluster.node_groups[1].hardware.configs[0].left_arm_port",
        ["too large (at most 65535)"],
    ),
    (
        "adb-needs-device",
        FRANKA.replace("type: Franka", "type: ADB")
        .replace('robot_ip: "10.0.0.1"', "adb_path: /usr/bin/adb")
        .replace('robot_ip: "10.0.0.2"', "device_id: emulator-5554")
        .replace('            camera_serials: ["1"]\n', ""),
        "cluster.node_groups[1].hardware.configs[0].device_id",
        ["needs 'device_id'"],
    ),
    (
        "unregistered-hardware-type",
        FRANKA.replace("type: Franka", "type: Gripper3000"),
        "cluster.node_groups[1].hardware.type",
        ["unknown hardware type 'Gripper3000': RLinf refuses a type it does not register", "Known types: ADB, DOSW1"],
    ),
    # --- RLinf's AUTO mode (auto_scheduler: true): the order RLinf checks before it starts ---
    (
        "auto-scheduler-overlapping-ranges",
        DYNAMIC.replace("rollout: 2-5", "rollout: 1-5"),
        "cluster.auto_scheduler",
        ["needs actor, rollout, inference one after the other, in that order, starting at GPU 0", "false"],
    ),
    (
        "auto-scheduler-split-range",
        DYNAMIC.replace("actor: 0-1", "actor: 0,2"),
        "cluster.auto_scheduler",
        ["each on its own contiguous GPU range"],
    ),
    (
        "auto-scheduler-pre-process-tp",
        DYNAMIC.replace("actor: 0-1", "actor: 0-2").replace("rollout: 2-5", "rollout: 3-5"),
        "cluster.use_pre_process_policy",
        ["actor's 3 GPU(s) too", "a multiple of rollout.tensor_parallel_size 2"],
    ),
    # --- the document itself ---
    (
        "duplicate-key",
        "cluster:\n  train_worker_num: 1\n  train_worker_num: 2\n",
        "cluster.train_worker_num",
        ["written twice (lines 2 and 3)"],
    ),
    ("yaml-syntax", "cluster:\n  train_worker_num: [1\n", "", ["YAML syntax"]),
    (
        "python-tag",
        "cluster:\n  train_worker_num: !!python/object/apply:os.system ['true']\n",
        "cluster.train_worker_num",
        ["python/object/apply:os.system is not allowed"],
    ),
    (
        "python-scalar-tag",
        "cluster:\n  train_worker_num: !!python/name:os.system\n",
        "cluster.train_worker_num",
        ["python/name:os.system is not allowed"],
    ),
    ("custom-tag", "cluster: !include other.yaml\n", "cluster", ["the tag !include is not allowed"]),
    ("top-level-list", "- cluster\n", "", ["must be a mapping"]),
    ("cluster-typo", "clustr:\n  num_nodes: 2\n", "", ["did you mean 'cluster'"]),
    ("cluster-not-mapping", "cluster: 5\n", "cluster", ["must be a mapping"]),
]


def test_there_are_at_least_ninety_distinct_invalid_configs():
    assert len({c[0] for c in CASES}) == len(CASES) >= 90
    assert len({c[1] for c in CASES}) == len(CASES), "two cases share the same YAML"


@pytest.mark.parametrize(("text", "path", "fragments"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_config_is_rejected_with_path_and_reason(text, path, fragments):
    found = problems_of(text)
    at_path = [p for p in found if p.path == path]
    assert at_path, f"no problem at {path!r}; got {[str(p) for p in found]}"
    messages = " | ".join(p.message for p in at_path)
    for fragment in fragments:
        assert fragment in messages, f"{fragment!r} not in {messages!r}"
    assert all(p.file == "job.yaml" for p in found)
    assert all(p.line is not None for p in found if p.path), "every located problem names its line"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (  # a near miss: the guess, not the 22 valid keys of the section after it
            "cluster:\n  train_worker_nm: 2\n",
            "unknown key 'train_worker_nm' in the cluster section; did you mean 'train_worker_num'?",
        ),
        (  # no guess: then the list
            "cluster:\n  train_worker_num: 1\n  elastic:\n    train: {most: 3}\n",
            "unknown key 'most' in an elastic range {min: N, max: M}; valid keys: max, min",
        ),
        (
            "cluster:\n  num_nodes: 2\n  node_groups:\n    - {label: gpus, node_ranks: 0-1}\n"
            "  component_placement:\n    actor: {node_group: robots, placement: 0-3}\n",
            "node group 'robots' is not defined. Defined groups: gpus, cluster, node",
        ),
    ],
    ids=["near-miss", "no-guess", "undefined-group"],
)
def test_a_message_is_sentences_that_end_and_lists_the_valid_names_only_without_a_guess(text, message):
    (problem,) = problems_of(text)
    assert problem.message == message
