"""Every message the error catalogues quote (docs/guide.md section 10, docs/config.md) is provoked here and
compared with the quote, so the catalogue cannot drift from the program.

A quote is a backtick span in the first column of a catalogue table (several per row are joined with ` / `);
`...` in a quote stands for any text. A new row needs a provoker below; a provoker whose row is gone fails too.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable

import pytest

from rlplace.cli import main
from rlplace.config import load
from rlplace.config.driver_env import load_driver_config
from rlplace.errors import RlplaceError
from rlplace.inventory import parse_nodes, with_node_env
from rlplace.planner import plan, resize

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: The catalogues: page -> the heading of the section whose tables quote messages.
CATALOGUES = {"docs/config.md": "## Errors and how to fix them", "docs/guide.md": "## 10. Errors and how to fix them"}


def catalogue_quotes() -> list[str]:
    """The quotes of every catalogue table, in page order."""
    quotes = []
    for page, heading in CATALOGUES.items():
        text = (ROOT / page).read_text()
        section = text[text.index(heading) :]
        section = section[: section.find("\n## ", 1)] if "\n## " in section[1:] else section
        for line in section.splitlines():
            if line.startswith("| `"):
                first_cell = re.split(r"(?<!\\)\|", line)[1]
                quotes += re.findall(r"`([^`]+)`", first_cell)
    return quotes


def matches(quote: str, message: str) -> bool:
    """`message` contains `quote`, with `...` matching any text and runs of whitespace compared as one space."""
    norm = " ".join(message.split())
    pattern = r".*?".join(re.escape(" ".join(part.split())) for part in quote.split("..."))
    return re.search(pattern, norm, re.DOTALL) is not None


# -- provokers -------------------------------------------------------------------------------------------

Provoker = Callable[[pytest.FixtureRequest], str]


def raised(call: Callable[[], object], kind: type[BaseException] = RlplaceError) -> str:
    with pytest.raises(kind) as e:
        call()
    return str(e.value)


def config(text: str) -> Provoker:
    return lambda _request: raised(lambda: load(text))


def planned(text: str, nodes: str) -> Provoker:
    return lambda _request: raised(lambda: plan(load(text), parse_nodes(nodes)))


def cli(*argv: str) -> Provoker:
    """What `rlplace ARGV` prints on stderr (argparse's own exit included), run in the test's own folder (`run`
    writes its picture there before it refuses a command)."""

    def provoke(request: pytest.FixtureRequest) -> str:
        capsys = request.getfixturevalue("capsys")
        request.getfixturevalue("monkeypatch").chdir(request.getfixturevalue("tmp_path"))
        try:
            code = main(list(argv))
        except SystemExit as e:
            code = e.code
        assert code != 0
        return capsys.readouterr().err

    return provoke


def cluster_found_here(request: pytest.FixtureRequest) -> str:
    """`rlplace run` without --simulate, --address or $RAY_ADDRESS where a Ray cluster runs: the session's."""
    request.getfixturevalue("ray_cluster")
    request.getfixturevalue("monkeypatch").delenv("RAY_ADDRESS", raising=False)
    return cli("run", str(CONFIGS / "disaggregate.yaml"), "--", sys.executable, "-c", "pass")(request)


def python_on_path(*argv: str) -> Provoker:
    """`cli(*argv)` with this interpreter's folder first on PATH, so that `python` is one (as in a venv)."""

    def provoke(request: pytest.FixtureRequest) -> str:
        monkeypatch = request.getfixturevalue("monkeypatch")
        monkeypatch.setenv("PATH", f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        return cli(*argv)(request)

    return provoke


NG = "cluster:\n  num_nodes: 1\n  component_placement: {actor: {node_group: a, placement: 0}}\n  node_groups:\n"
ROBOT = "    - label: a\n      node_ranks: 0\n      hardware: {type: Franka, configs: [%s]}\n"
ENV = "    - label: a\n      node_ranks: 0\n      env_configs:\n        - node_ranks: 0\n          env_vars:\n%s"
MANUAL = "cluster:\n  placement: {mode: manual}\n  resource_pool:\n"
TOO_LARGE = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join(['*' + p] * 10)}]\n" for p, n in zip("abcde", "bcdef", strict=True)
)


def config_tree(files: dict[str, str], load_path: str, **kwargs: object) -> Provoker:
    """The error of loading `load_path` from a tree of config files written to a scratch directory."""

    def provoke(request: pytest.FixtureRequest) -> str:
        root = request.getfixturevalue("tmp_path")
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        return raised(lambda: load(root / load_path, **kwargs))

    return provoke


def without_module(module: str, provoker: Provoker) -> Provoker:
    """What `provoker` gets when `module` cannot be imported (an optional extra not installed)."""

    def provoke(request: pytest.FixtureRequest) -> str:
        request.getfixturevalue("monkeypatch").setitem(sys.modules, module, None)
        return provoker(request)

    return provoke


def value_of_a_left_out_config(request: pytest.FixtureRequest) -> str:
    """The corpus's reasoning config whose actor TP comes from a group behind an unset search path variable."""
    request.getfixturevalue("monkeypatch").delenv("CORPUS_REPO_PATH", raising=False)
    return raised(lambda: load(ROOT / "tests/data/frameworks/rlinf/e2e/reasoning/grpo_model_group.yaml"))


#: Node 3's Franka configured by two groups.
TWO_ARMS = """\
cluster:
  num_nodes: 4
  component_placement: {env: {node_group: arm, placement: 0}}
  node_groups:
    - label: arm
      node_ranks: 2-3
      hardware: {type: Franka, configs: [{node_rank: 3, robot_ip: '10.0.0.1'}]}
    - label: arm2
      node_ranks: 3
      hardware: {type: Franka, configs: [{node_rank: 3, robot_ip: '10.0.0.9'}]}
"""
RLIGHTNING_WHOLE = (
    "cluster:\n  train_worker_num: 2\n  eval_worker_num: 2\n  env_worker_num: 5\n"
    "  placement: {strategy: disaggregate}\n"
    "env:\n  - {name: a, num_workers: 2, num_gpus: 1}\n  - {name: b, num_workers: 1, num_gpus: 1}\n"
    "buffer: {storage: {type: unified}}\npolicy: {type: PPO}\ntrain: {max_epochs: 1}\n"
)
RLINF_REASONING = (
    "cluster:\n  num_nodes: 1\n  component_placement:\n    actor,rollout: all\n"
    "actor: {model: {tensor_model_parallel_size: 4}}\nrollout: {tensor_parallel_size: 3}\n"
)
HYDRA_TREE = {"main.yaml": "defaults:\n  - cluster: 1t1e\n", "cluster/1t1e.yaml": "train_worker_num: 1\n"}

TWO_ROBOTS_ON_NODE_1 = (
    "cluster:\n  num_nodes: 2\n  component_placement: {env: {node_group: a, placement: 0-1}}\n  node_groups:\n"
    "    - label: a\n      node_ranks: 1\n      hardware: {type: Franka, configs: [{node_rank: 1, camera_serials: [a]},"
    " {node_rank: 1, camera_serials: [b]}]}\n"
)
REASONING = (
    "runner: {task_type: reasoning}\nalgorithm: {recompute_logprobs: %s}\nrollout: {}\ncluster:\n  num_nodes: 1\n"
)
PROFILED = "cluster:\n  num_nodes: 1\n  component_placement: {actor: 0}\n  profiling: %s\n"

CONFIG: dict[str, Provoker] = {
    "YAML syntax: a tab (column 1); YAML indents with spaces only: replace the tab with spaces": config(
        "cluster:\n\ttrain_worker_num: 2\n"
    ),
    "this is a Python file, not a YAML config": config_tree({"train.py": "import rlplace\n"}, "train.py"),
    "this robot config is the same as configs[0] (RLinf refuses equal configs)": config(
        NG + ROBOT % "{node_rank: 0}, {node_rank: 0}"
    ),
    "runner.task_type: reasoning runs RLinf's model-parallel placement, which needs reward placed": config(
        REASONING % "true" + "  component_placement: {actor,rollout: 0-7}\n"
    ),
    "... share some GPUs: RLinf's model-parallel placement ... takes either actor and rollout on the same GPUs "
    "(collocated) or every component on GPUs of its own": config(
        REASONING % "true" + "  component_placement: {actor: 0-5, rollout: 4-7, reward: 0-7}\n"
    ),
    "inference is placed (...), but RLinf runs it only with algorithm.recompute_logprobs: true": config(
        REASONING % "false" + "  component_placement: {actor: 0-3, rollout: 4-5, inference: 6, reward: 7}\n"
    ),
    "cluster.profiling.backend: needs 'backend'": config(PROFILED % "{enabled: true}"),
    "... is both a flag and an option": config(PROFILED % "{backend: nsight, flags: [t], options: {t: cuda}}"),
    "Franka hardware of node 3 is already configured by node group 'arm'": config(TWO_ARMS),
    "Hydra overrides (...) need hydra-core": without_module(
        "hydra", config_tree(HYDRA_TREE, "main.yaml", overrides=["cluster=1t1e"])
    ),
    "cannot resolve '${...}': ...": config("sizes: {train: 3}\ncluster:\n  train_worker_num: ${sizes.eval}\n"),
    "config group cluster: no option '8t8e' (...); options there: ...": config_tree(
        {**HYDRA_TREE, "main.yaml": "defaults:\n  - cluster: 8t8e\n"}, "main.yaml"
    ),
    "env_worker_num: 5 disagrees with the env: groups of this training config (3)": config(RLIGHTNING_WHOLE),
    "hardware_type is taken from hardware.type when a hardware block is given": config(
        TWO_ARMS.replace("    - label: arm2", "      hardware_type: Franka\n    - label: arm2")
    ),
    "is an interpolation; resolving it needs omegaconf": without_module(
        "omegaconf", config("cluster:\n  train_worker_num: ${oc.env:RLPLACE_WORKERS,3}\n")
    ),
    "config group env is chosen twice (a, then b)": config_tree(
        {"main.yaml": "defaults:\n  - env: a\n  - env: b\n", "env/a.yaml": "x: 1\n", "env/b.yaml": "x: 2\n"},
        "main.yaml",
    ),
    "... comes after 'override env': Hydra requires overrides at the end of the defaults list": config_tree(
        {"main.yaml": "defaults:\n  - override env: b\n  - model: a\n", "model/a.yaml": "y: 1\n"}, "main.yaml"
    ),
    "placement reads this value, and '...' may supply it, but that config is left out: ... is not set": (
        value_of_a_left_out_config
    ),
    "there is no key ... to override; did you mean '...'?": config_tree(
        HYDRA_TREE, "main.yaml", overrides=["cluster.train_worker_nm=2"]
    ),
    "Could not find '...'; did you mean ...?": config_tree(HYDRA_TREE, "main.yaml", overrides=["cluster=1t1"]),
    "node_ranks: all needs num_nodes": config(
        "cluster:\n  component_placement: {actor: {node_group: a, placement: 0}}\n  node_groups:\n"
        "    - label: a\n      node_ranks: all\n"
    ),
    "rollout.tensor_parallel_size 3 must divide actor.model.tensor_model_parallel_size 4": config(RLINF_REASONING),
    "auto_scheduler: true (RLinf's AUTO mode) needs actor, rollout, inference one after the other, in that order, "
    "starting at GPU 0": config(
        "cluster:\n  num_nodes: 1\n  auto_scheduler: true\n"
        "  component_placement: {actor: 0-3, rollout: 2-5, inference: 6-7}\nrollout: {tensor_parallel_size: 1}\n"
    ),
    "unknown hardware type 'Frank'; did you mean 'Franka'? RLinf refuses a type it does not register (...). Known "
    "types: ...": config(NG + ROBOT.replace("type: Franka", "type: Frank") % "{node_rank: 0, robot_ip: '10.0.0.1'}"),
    "unknown key 'eval_worker_nm' in the cluster section; did you mean 'eval_worker_num'?": config(
        "cluster:\n  eval_worker_nm: 2\n"
    ),
    "must be an integer >= 1, got '2'": config("cluster:\n  train_worker_num: '2'\n"),
    "must be true or false, got 'yes' (write true without quotes)": config("cluster:\n  is_colocated: 'yes'\n"),
    "must be one of 'auto', 'manual', got 'manul'; did you mean 'manual'?": config(
        "cluster:\n  placement: {mode: manul}\n"
    ),
    "above 1 it must be a whole number of GPUs": config("cluster:\n  train_each_gpu_num: 1.5\n"),
    "is_colocated: true contradicts placement.strategy: disaggregate": config(
        "cluster:\n  is_colocated: true\n  placement: {strategy: disaggregate}\n"
    ),
    "placement.mode is manual but no resource_pool is given": config("cluster:\n  placement: {mode: manual}\n"),
    "resource_pool is only read in manual mode": config(
        "cluster:\n  resource_pool:\n    - {name: p, num_node: 1, num_gpus: 8, train: 0-7}\n"
    ),
    "resource_pool is written twice": config(
        MANUAL + "    - {name: p, num_node: 1, num_gpus: 8, train: 0-7}\n"
        "resource_pool:\n  - {name: p, num_node: 1, num_gpus: 8, train: 0-7}\n"
    ),
    "train already has a range in pool 'a'; a component lives in exactly one pool": config(
        MANUAL + "    - {name: a, num_node: 1, num_gpus: 8, train: 0-3}\n"
        "    - {name: b, num_node: 1, num_gpus: 8, train: 0-3}\n"
    ),
    "GPU index 24 is outside pool 'p', which has 24 GPUs": config(
        MANUAL + "    - {name: p, num_node: 3, num_gpus: 8, train: 0-24}\n"
    ),
    "range '7-0' runs backwards": config(MANUAL + "    - {name: p, num_node: 1, num_gpus: 8, train: 7-0}\n"),
    "rank 4 appears twice": config(
        "cluster:\n  num_nodes: 8\n  component_placement: {actor: {node_group: a, placement: 0}}\n"
        "  node_groups:\n    - {label: a, node_ranks: [4, 4]}\n"
    ),
    "'0..7' is not a rank": config(MANUAL + "    - {name: p, num_node: 1, num_gpus: 8, train: '0..7'}\n"),
    "nodes of a pool without node_ids must have the same GPU count": config(
        MANUAL + "    - {name: p, num_node: 2, num_gpus: [8, 4], train: 0-7}\n"
    ),
    "num_gpus lists 2 counts but the pool has 3 nodes": config(
        MANUAL + "    - {name: p, num_node: 3, node_ids: [0, 1, 2], num_gpus: [8, 4], train: 0-7}\n"
    ),
    "num_node is 3 but node_ids names 2 nodes": config(
        MANUAL + "    - {name: p, num_node: 3, node_ids: [0, 1], num_gpus: [8, 8], train: 0-7}\n"
    ),
    "node 0 is already in pool 'a'; pools must not share nodes": config(
        MANUAL + "    - {name: a, node_ids: [0], num_gpus: [8], train: 0-7}\n"
        "    - {name: b, node_ids: [0], num_gpus: [8], eval: 0-7}\n"
    ),
    "eval_worker_num is set but no resource_pool entry gives eval a GPU range": config(
        "cluster:\n  eval_worker_num: 2\n  placement: {mode: manual}\n  resource_pool:\n"
        "    - {name: p, num_node: 1, num_gpus: 8, train: 0-7}\n"
    ),
    "16 train workers x 1 GPU each need 16 GPUs, but the train range 0-7 holds 8": config(
        "cluster:\n  train_worker_num: 16\n  placement: {mode: manual}\n  resource_pool:\n"
        "    - {name: p, num_node: 1, num_gpus: 8, train: 0-7}\n"
    ),
    "must be a list (one entry per pool), got a mapping; perhaps a '-' is missing": config(MANUAL + "    name: p\n"),
    "the config mixes the two dialects": config("cluster:\n  train_worker_num: 2\n  num_nodes: 2\n"),
    "label 'node' is reserved": config(
        "cluster:\n  num_nodes: 2\n  component_placement: {actor: 0}\n  node_groups:\n"
        "    - {label: node, node_ranks: 0}\n"
    ),
    "label 'a800' is already used by node_groups[0]": config(
        "cluster:\n  num_nodes: 2\n  component_placement: {actor: {node_group: a800, placement: 0}}\n"
        "  node_groups:\n    - {label: a800, node_ranks: 0}\n    - {label: a800, node_ranks: 1}\n"
    ),
    "node rank 18 is outside the cluster: num_nodes is 18": config(
        "cluster:\n  num_nodes: 18\n  component_placement: {actor: {node_group: a, placement: 0}}\n"
        "  node_groups:\n    - {label: a, node_ranks: 18}\n"
    ),
    "node ranks 9 are not in this group": config(
        "cluster:\n  num_nodes: 10\n  component_placement: {actor: {node_group: a, placement: 0}}\n"
        "  node_groups:\n    - label: a\n      node_ranks: 0-7\n      env_configs:\n"
        "        - {node_ranks: 9, env_vars: [{A: b}]}\n"
    ),
    "node ranks 2-3 are already configured by env_configs[0]": config(
        "cluster:\n  num_nodes: 4\n  component_placement: {actor: {node_group: a, placement: 0}}\n"
        "  node_groups:\n    - label: a\n      node_ranks: 0-3\n      env_configs:\n"
        "        - {node_ranks: 0-3, env_vars: [{A: b}]}\n        - {node_ranks: 2-3, env_vars: [{B: c}]}\n"
    ),
    "each entry must hold exactly one KEY: value pair, got {'A': 'x', 'B': 'y'}; perhaps a '-' is missing before B": (
        config(NG + ENV % "            - A: x\n              B: y\n")
    ),
    "A is set twice": config(NG + ENV % "            - A: x\n            - A: y\n"),
    "NCCL_DEBUG: True is a boolean; quote it": config(NG + ENV % "            - NCCL_DEBUG: True\n"),
    "'1BAD' is not an environment variable name": config(NG + ENV % "            - 1BAD: x\n"),
    "must be an absolute path to a Python interpreter": config(
        NG + "    - label: a\n      node_ranks: 0\n      env_configs:\n"
        "        - {node_ranks: 0, python_interpreter_path: venv/bin/python}\n"
    ),
    "'10.0.0.300' is not a valid IPv4 or IPv6 address": config(NG + ROBOT % "{node_rank: 0, robot_ip: '10.0.0.300'}"),
    "node_rank 1 is not in this group": config(NG + ROBOT % "{node_rank: 1, robot_ip: '10.0.0.1'}"),
    "serial 0123 was read by YAML as the number 83; quote it": config(
        NG + ROBOT % "{node_rank: 0, robot_ip: '10.0.0.1', camera_serials: [0123]}"
    ),
    "this robot (10.0.0.1) is already configured by configs[0]": config(
        NG + ROBOT % "{node_rank: 0, robot_ip: '10.0.0.1'}, {node_rank: 0, robot_ip: '10.0.0.1'}"
    ),
    "ignore_hardware: true contradicts the hardware block": config(
        NG + "    - label: a\n      node_ranks: 0\n      ignore_hardware: true\n"
        "      hardware: {type: Franka, configs: [{node_rank: 0, robot_ip: '10.0.0.1'}]}\n"
    ),
    "node group 'a80' is not defined; did you mean 'a800'?": config(
        "cluster:\n  num_nodes: 1\n  component_placement: {actor: {node_group: a80, placement: 0}}\n"
        "  node_groups:\n    - {label: a800, node_ranks: 0}\n"
    ),
    "segment '0-2:0-3' puts 4 processes on 3 resources": config(
        "cluster:\n  num_nodes: 1\n  component_placement: {actor: {node_group: a800, placement: '0-2:0-3'}}\n"
        "  node_groups:\n    - {label: a800, node_ranks: 0}\n"
    ),
    "process ranks in '0-3:0-3,4-7:5-8' must continue from 4": config(
        "cluster:\n  num_nodes: 1\n  component_placement: {actor: {node_group: a800, placement: '0-3:0-3,4-7:5-8'}}"
        "\n  node_groups:\n    - {label: a800, node_ranks: 0}\n"
    ),
    "resource rank 2 is out of range: 'franka' has 2 robots": config(
        "cluster:\n  num_nodes: 2\n  component_placement: {env: {node_group: franka, placement: 2}}\n"
        "  node_groups:\n    - label: franka\n      node_ranks: 0-1\n      hardware: {type: Franka, configs: "
        "[{node_rank: 0, robot_ip: '10.0.0.1'}, {node_rank: 1, robot_ip: '10.0.0.2'}]}\n"
    ),
    "would make one process span several nodes": config(
        "cluster:\n  num_nodes: 2\n  component_placement: {agent: {node_group: node, placement: '0-1:0'}}\n"
    ),
    "component 'actor' is already placed by 'actor'": config(
        "cluster:\n  num_nodes: 1\n  component_placement:\n    actor: {node_group: node, placement: 0}\n"
        "    'actor,rollout': {node_group: node, placement: 0}\n"
    ),
    "'all' must be the whole placement": config(
        "cluster:\n  num_nodes: 1\n  component_placement: {actor: {node_group: node, placement: 'all,0'}}\n"
    ),
    "key 'train_worker_num' is written twice (lines 2 and 3)": config(
        "cluster:\n  train_worker_num: 2\n  train_worker_num: 3\n"
    ),
    "the tag tag:yaml.org,2002:python/object:os.system is not allowed here": config(
        "cluster: !!python/object:os.system\n  x: 1\n"
    ),
    "YAML syntax: ...": config("cluster:\n  train_worker_num: [1\n"),
    "the file is too large: ... MiB, and rlplace reads configs of up to 1 MiB": config_tree(
        {"big.yaml": "cluster: {}\n" + "".join(f"key_{i}: {i}\n" for i in range(200_000))}, "big.yaml"
    ),
    "the document is too large: aliases expand it by more than 100000 values": config(TOO_LARGE + "cluster: *f\n"),
    "the document is nested more than 64 levels deep": config("cluster: " + "[" * 70 + "]" * 70 + "\n"),
    "is a directory, not a config file": config_tree({"conf/job.yaml": "cluster: {}\n"}, "conf"),
    "no cluster: section found; did you mean 'cluster'?": config("clustr:\n  train_worker_num: 2\n"),
    "'evl' is not a component of this config; did you mean 'eval'?": config("cluster:\n  elastic: {evl: {max: 2}}\n"),
    "min 4 is larger than max 2": config("cluster:\n  eval_worker_num: 2\n  elastic: {eval: {min: 4, max: 2}}\n"),
    "eval starts with 4 worker(s) (eval_worker_num: 4), above its elastic max 2": config(
        "cluster:\n  eval_worker_num: 4\n  elastic: {eval: {max: 2}}\n"
    ),
    "env cannot change size on its own: under env_strategy device-colocate env worker i shares eval worker i's GPU": (
        config("cluster:\n  placement: {strategy: colocate, env_strategy: device-colocate}\n  elastic: {env: {}}\n")
    ),
    "buffer cannot change size on its own: under strategy disaggregate there is one buffer shard on each node "
    "holding train workers": config("cluster:\n  placement: {strategy: disaggregate}\n  elastic: {buffer: {}}\n"),
    "env cannot change size on its own: it is placed on the Franka units of node group 'arm'": config(
        TWO_ARMS + "  elastic: {env: {}}\n"
    ),
    "in manual mode a component grows only inside its range": config(
        MANUAL + "    - {name: p, num_node: 1, num_gpus: 8, eval: 0-3}\n  elastic: {eval: {max: 6}}\n"
    ),
    "no such file": config("no-such-config.yaml"),
    "the config is too large: its files hold ... MiB together, and rlplace reads configs of up to 1 MiB": config_tree(
        {
            "main.yaml": "defaults:\n  - one\n  - two\n  - _self_\ncluster: {}\n",
            "one.yaml": "".join(f"k{i}: {'v' * 40}\n" for i in range(13_000)),
            "two.yaml": "".join(f"k{i}: {'v' * 40}\n" for i in range(13_000)),
        },
        "main.yaml",
    ),
    "the defaults lists load more than 256 configs": config_tree(
        {
            "main.yaml": "defaults:\n" + "".join(f"  - a@p{i}\n" for i in range(20)) + "cluster: {}\n",
            "a.yaml": "defaults:\n" + "".join(f"  - b@q{i}\n" for i in range(20)) + "x: 1\n",
            "b.yaml": "y: 1\n",
        },
        "main.yaml",
    ),
    "is not a regular file but a FIFO (a named pipe): rlplace reads a config from a file": lambda request: raised(
        lambda: load(fifo_in(request.getfixturevalue("tmp_path")))
    ),
    "byte 0xff is not UTF-8: rlplace reads UTF-8 text": lambda request: raised(
        lambda: load(written(request.getfixturevalue("tmp_path") / "job.yaml", b"cluster: {}\n# \xff\n"))
    ),
    "RAY_AUTH_TOKEN is Ray's token authentication, which rlplace never puts into a config": config(
        "cluster:\n  ray_address: ${oc.env:RAY_AUTH_TOKEN}\n"
    ),
    "'...' is not found, and it climbs out of the search path's folders": config_tree(
        {
            "main.yaml": "defaults:\n  - ../../outside/file\nhydra:\n  searchpath: ['file://${oc.env:RLPLACE_DOCS_UNSET}']\n"
            "cluster: {}\n"
        },
        "main.yaml",
    ),
    "the search path 'pkg://...', as hydra-core reads it, would make hydra-core import the package": config_tree(
        {"main.yaml": "cluster: {}\n"}, "main.yaml", overrides=[r"hydra.searchpath=[pkg\://this.conf]"]
    ),
    "the search path 'structured://x', as hydra-core reads it, is no folder: a search path on the command line is "
    "a folder, written file://FOLDER": config_tree(
        {"main.yaml": "cluster: {}\n"}, "main.yaml", overrides=[r"hydra.searchpath=[structured\://x]"]
    ),
}


def fifo_in(folder: pathlib.Path) -> pathlib.Path:
    path = folder / "job.yaml"
    os.mkfifo(path)
    return path


def written(path: pathlib.Path, data: bytes) -> pathlib.Path:
    path.write_bytes(data)
    return path


ELASTIC_EVAL = """
cluster:
  train_worker_num: 1
  eval_worker_num: 1
  placement: {strategy: disaggregate}
  elastic: {eval: {max: 6}}
"""


def resized(component: str, n: int) -> Provoker:
    """What `job.resize(component, n)` raises for ELASTIC_EVAL on 2 nodes of 2 GPUs (the planner's step)."""

    def provoke(_request: pytest.FixtureRequest) -> str:
        spec, live = load(ELASTIC_EVAL), parse_nodes("2x2", num_cpus=8)
        return raised(lambda: resize(spec, plan(spec, live), live, component, n))

    return provoke


def planned_on_file(config_path: str, inventory: str) -> Provoker:
    """What `rlplace plan CONFIG --inventory FILE` prints on stderr, FILE holding `inventory`."""

    def provoke(request: pytest.FixtureRequest) -> str:
        path = request.getfixturevalue("tmp_path") / "nodes.yaml"
        path.write_text(inventory)
        return cli("plan", config_path, "--inventory", str(path))(request)

    return provoke


PLAN: dict[str, Provoker] = {
    "node 1's ROBOT_IP='10.0.0.1' holds 1 comma-separated value(s) for its 2 Franka robots": lambda _request: raised(
        lambda: plan(load(TWO_ROBOTS_ON_NODE_1), with_node_env(parse_nodes("1x8,1x0"), ["1:ROBOT_IP=10.0.0.1"]))
    ),
    "eval: 3 of 3 more worker(s) do not fit (1 GPU and 1 CPU(s) each) in its range 0 in pool rollout_pool "
    "(nodes 1), ...: node 1: no free GPU (2 held by the job), ...": resized("eval", 4),
    "eval: 7 worker(s) asked for, but its elastic range is 1-6 (cluster.elastic.eval); it has 1": resized("eval", 7),
    "train is not elastic (elastic components: eval); list it under cluster.elastic to resize it": resized("train", 3),
    "cannot shrink below the elastic minimum: eval would keep 0 (min 1) (cluster.elastic)": resized("eval", 0),
    "node 0 (2x GPU, 4 CPU, ?) can never hold what the plan reserves there (2 GPU, 7 CPU): missing 3 CPU": (
        planned_on_file(
            str(ROOT / "examples" / "cartpole_ppo" / "configs" / "colocate-offload.yaml"),
            "nodes:\n  - {count: 2, gpus: 2, cpus: 4}\n",
        )
    ),
    "rollout cannot change size: its processes span GPUs that other components' processes hold": planned(
        RLINF_REASONING.replace("{tensor_parallel_size: 3}", "{tensor_parallel_size: 2}").replace(
            "actor,rollout: all\n", "actor,rollout: all\n  elastic: {rollout: {}}\n"
        ),
        "1x8",
    ),
    "strategy disaggregate needs 6 GPU(s): train_pool 2 (train 2 x 1) + rollout_pool 4 = eval + env "
    "(eval 2 x 1, env 2 x 1); the inventory has 4": planned(
        "cluster:\n  train_worker_num: 2\n  eval_worker_num: 2\n  placement: {strategy: disaggregate}\n", "1x4"
    ),
    "strategy colocate: global_pool needs 8 GPU(s) = max(train 4, rollout 8 = eval + env)": planned(
        "cluster:\n  train_worker_num: 4\n  eval_worker_num: 4\n  placement: {strategy: colocate}\n", "1x4"
    ),
    "strategy default: train, eval and env ask for 4 GPU(s) (train 1 x 2, eval 1 x 1, env 1 x 1) but the inventory "
    "has 2": planned("cluster:\n  train_each_gpu_num: 2\n", "2x1"),
    "strategy default: each train worker needs 2 GPUs on one node; the largest node has 1": planned(
        "cluster:\n  train_each_gpu_num: 2\n", "4x1"
    ),
    "num_nodes is 18 but the inventory has 4 node(s)": planned(
        "cluster:\n  num_nodes: 18\n  component_placement: {actor: {node_group: node, placement: 0}}\n", "4x8"
    ),
    "node group g names node ranks 5-7, but the inventory has 4 node(s) (ranks 0-3)": planned(
        "cluster:\n  component_placement: {actor: {node_group: g, placement: 0}}\n  node_groups:\n"
        "    - {label: g, node_ranks: 5-7}\n",
        "4x8",
    ),
    "cluster.component_placement.actor: placement asks for resource rank 8 in a800, which has ranks 0-7": planned(
        "cluster:\n  num_nodes: 1\n  component_placement: {actor: {node_group: a800, placement: 0-8}}\n"
        "  node_groups:\n    - {label: a800, node_ranks: 0}\n",
        "1x8",
    ),
    "pool q takes nodes 1-2, which have [8, 4] GPUs: without node_ids all nodes of a pool must have the same GPU "
    "count; bind them with node_ids: [1, 2] and num_gpus: [8, 4]": planned(
        MANUAL + "    - {name: p, num_node: 1, num_gpus: 8, train: 0-7}\n"
        "    - {name: q, num_node: 2, num_gpus: 8, eval: 0-15}\n",
        "2x8,1x4",
    ),
    "pool p: node 2 (2) has 4 GPU(s), the pool wants 8": planned(
        MANUAL + "    - {name: p, node_ids: [0, 2], num_gpus: [8, 8], train: 0-15}\n", "2x8,1x4"
    ),
    "pool q needs 2 node(s) with GPUs (num_node: 2) but only 1 is left after earlier pools": planned(
        MANUAL + "    - {name: p, num_node: 1, num_gpus: 8, train: 0-7}\n"
        "    - {name: q, num_node: 2, num_gpus: 8, eval: 0-15}\n",
        "2x8",
    ),
    "pool p: node_ids entry 'x' matches no node of the inventory": planned(
        MANUAL + "    - {name: p, node_ids: [x], num_gpus: [8], train: 0-7}\n", "2x8"
    ),
    "train worker 1 needs 2 GPUs on one node, but its share of the range (cluster.resource_pool[0].train: 2-3) spans "
    "nodes 0-1 of pool p": planned(
        "cluster:\n  train_each_gpu_num: 2\n"
        + MANUAL[len("cluster:\n") :]
        + "    - {name: p, num_node: 2, num_gpus: 3, train: 0-5}\n",
        "2x3",
    ),
}


# -- command line and connection (no cluster needed unless asked for) -------------------------------------

CONFIGS = ROOT / "src/rlplace/examples/cartpole_ppo/configs"
NOT_THE_PIPELINES = "cluster:\n  num_nodes: 1\n  component_placement: {actor: 0, rollout: 0}\n"


def unreachable(address: str) -> Provoker:
    from rlplace.ray.join import reachable_address

    return lambda _request: raised(lambda: reachable_address(address))


def no_cluster_on_this_machine(request: pytest.FixtureRequest) -> str:
    """`rlplace status` where no Ray runs: in a PID namespace of its own (root, as CI is), so the Ray processes
    of this test session and of anyone else on the machine are out of sight, as on a machine without Ray."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) to hide this machine's Ray processes")
    empty = request.getfixturevalue("tmp_path")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {"RAY_TMPDIR": str(empty)}
    rlplace = pathlib.Path(sys.executable).with_name("rlplace")
    done = subprocess.run(
        [unshare, "--pid", "--fork", "--mount-proc", str(rlplace), "status"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    return done.stderr


def head_port_of_running_ray(request: pytest.FixtureRequest) -> str:
    from rlplace.commands.start import check_can_start

    port = request.getfixturevalue("ray_cluster").address.rpartition(":")[2]
    return raised(lambda: check_can_start(head=True, address=None, ray_args=["--port", port]))


def head_port_of_another_program(_request: pytest.FixtureRequest) -> str:
    from rlplace.commands.start import check_can_start

    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        return raised(lambda: check_can_start(head=True, address=None, ray_args=["--", "--port", port]))


def run_with(config_text: str, *argv: str) -> Provoker:
    def provoke(request: pytest.FixtureRequest) -> str:
        path = request.getfixturevalue("tmp_path") / "job.yaml"
        path.write_text(config_text)
        return cli("run", str(path), *argv)(request)

    return provoke


def without_gymnasium(request: pytest.FixtureRequest) -> str:
    request.getfixturevalue("monkeypatch").setitem(sys.modules, "gymnasium", None)  # as if not installed
    return cli("demo")(request)


def simulated_while_connected(request: pytest.FixtureRequest) -> str:
    from rlplace.ray.local_raylets import simulated_cluster

    request.getfixturevalue("ray_cluster")
    return raised(lambda: simulated_cluster(parse_nodes("1x0")).__enter__())


def rlplace_as_user(*argv: str, cluster: str | None = None, token: str | None = None, **env: str) -> Provoker:
    """What `rlplace ARGV --address CLUSTER` prints on stderr, run as a user of this machine with a HOME of its own
    (no token there) and `token` ("wrong": a token file that is not the cluster's) in $RAY_AUTH_TOKEN_PATH."""

    def provoke(request: pytest.FixtureRequest) -> str:
        import real_heads

        home = request.getfixturevalue("tmp_path")
        where = [] if cluster is None else ["--address", request.getfixturevalue(cluster).address]
        if token == "wrong":
            env["RAY_AUTH_TOKEN_PATH"] = str(home / "wrong_token")
            (home / "wrong_token").write_text("0" * 64)
        done, _ = real_heads.run([real_heads.RLPLACE, *argv, *where], home, **env)
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        return done.stderr

    provoke.cluster = cluster  # type: ignore[attr-defined]  # the session clusters' rows carry the `ray` marker
    return provoke


def not_a_gcs(request: pytest.FixtureRequest) -> str:
    """`rlplace status` at a port that accepts connections but is no Ray head."""
    with socket.socket() as other:
        other.bind(("0.0.0.0", 0))  # Ray turns 127.0.0.1 into this node's IP
        other.listen()
        port = other.getsockname()[1]
        return rlplace_as_user("status", "--address", f"127.0.0.1:{port}")(request)


def loopback_head_without_the_switch(request: pytest.FixtureRequest) -> str:
    """A client of a head that listens on 127.0.0.1 only (here a plain socket, as such a head's GCS is)."""
    with socket.socket() as head:
        head.bind(("127.0.0.1", 0))
        head.listen()
        return rlplace_as_user("status", "--address", f"127.0.0.1:{head.getsockname()[1]}")(request)


def token_of(environ: dict[str, str], token_file: str | None = None) -> Provoker:
    from rlplace.ray import auth

    if token_file is not None:
        return lambda _request: raised(lambda: auth.head_token_path(environ, pathlib.Path(token_file)))
    return lambda _request: raised(lambda: auth.find_token(environ))


COMMAND_LINE: dict[str, Provoker] = {
    "no Ray cluster to join: address auto finds none running on this machine and $RAY_ADDRESS is not set": (
        no_cluster_on_this_machine
    ),
    "no Ray cluster reachable at 127.0.0.1:1 (...Connection refused)": unreachable("127.0.0.1:1"),
    "'head-node' is not a Ray address: write HOST:PORT (e.g. 10.0.0.1:6379) or auto": unreachable("head-node"),
    "Ray already runs on this machine with its head at ...:..., the port this head would take": (
        head_port_of_running_ray
    ),
    "port ... on ... is taken by another program, so a Ray head cannot start there": head_port_of_another_program,
    "argument --simulate: '2x' is not COUNTxGPUS[:MODEL][@RESOURCE][/LEVEL=N...], one term per group of nodes, the "
    "terms separated by ',' (e.g. '2x8', ...)": cli("run", "job.yaml", "--simulate", "2x"),
    "argument --config: 'colocate_offload' is neither a shipped config nor a file (did you mean "
    "'colocate-offload'?). Shipped configs: colocate-offload, default, disaggregate, manual-pools, node-groups": cli(
        "demo", "--config", "colocate_offload"
    ),
    "cluster.component_placement: the CartPole pipeline needs components train, eval, env, buffer; this config has "
    "actor, rollout and lacks train, eval, env, buffer": run_with(NOT_THE_PIPELINES, "--simulate", "2x4"),
    "nothing to run after --: write the command, e.g. -- python train.py": cli(
        "run", str(CONFIGS / "disaggregate.yaml"), "--simulate", "2x4", "--"
    ),
    "cannot run 'pyhton': not found on PATH (the command after -- is started without a shell)": cli(
        "run", str(CONFIGS / "disaggregate.yaml"), "--simulate", "2x4", "--", "pyhton", "train.py"
    ),
    "argument --simulate: 5000 simulated nodes are more than this machine can hold: at most ..., each node being a "
    "raylet and its two agents (memory: ...)": cli(
        "run", str(CONFIGS / "disaggregate.yaml"), "--simulate", "5000x8", "--", "python", "train.py"
    ),
    "argument --address: not given, and a Ray cluster runs on this machine (head at ...)": cluster_found_here,
    "cannot run python trian.py: the script 'trian.py' does not exist in ...": python_on_path(
        "run", str(CONFIGS / "disaggregate.yaml"), "--simulate", "2x4", "--", "python", "trian.py"
    ),
    "'train.py' is not a Hydra override (KEY=VALUE); to run a command as the job's driver, write it after --: "
    "rlplace run job.yaml -- python train.py": cli("run", "job.yaml", "train.py"),
    "rlplace.connect() was given no config and $RLPLACE_CONFIG is not set: pass one": lambda _request: raised(
        lambda: load_driver_config({})
    ),
    "cluster.ray_address: the config names 10.0.0.1:6379 as the Ray cluster to join": run_with(
        "cluster:\n  ray_address: 10.0.0.1:6379\n  train_worker_num: 1\n", "--simulate", "2x4", "--", "python"
    ),
    "the head listens on 127.0.0.1 only (--node-ip-address 127.0.0.1): set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 "
    "here": loopback_head_without_the_switch,
    "argument --timeout: must be more than 0 seconds, got 0": cli(
        "run", str(CONFIGS / "disaggregate.yaml"), "--simulate", "2x4", "--timeout", "0"
    ),
    "error: /nonexistent/plan.svg: No such file or directory (check the path and its permissions)": cli(
        "plan", str(CONFIGS / "disaggregate.yaml"), "--nodes", "2x4", "--svg", "/nonexistent/plan.svg"
    ),
    "... is a symbolic link (to ...); rlplace does not write through links, so nothing was written": (
        lambda request: cli("schema", "-o", str(linked(request.getfixturevalue("tmp_path"))))(request)
    ),
    "... exists and is not a regular file; nothing was written": lambda request: cli(
        "schema", "-o", str(fifo_in(request.getfixturevalue("tmp_path")))
    )(request),
    "argument --nodes: '10000000000x8': that is more than 16384 nodes in all, the most rlplace plans for": cli(
        "plan", str(CONFIGS / "disaggregate.yaml"), "--nodes", "10000000000x8"
    ),
    "argument --nodes: '1x100000000000': 100000000000 accelerators on a node is more than the 1024 rlplace plans for": (
        cli("plan", str(CONFIGS / "disaggregate.yaml"), "--nodes", "1x100000000000")
    ),
    "argument --nodes: '1x1': that is 131073 accelerators in all (nodes x accelerators so far), more than the "
    "131072 rlplace plans for (16384 nodes of 8)": cli(
        "plan", str(CONFIGS / "disaggregate.yaml"), "--nodes", "8192x16,1x1"
    ),
    "cluster.node_groups[0].hardware: the plan would have more than 1024 robots (hardware units) in all, ...": (
        lambda _request: raised(
            lambda: plan(
                load(
                    "cluster:\n  num_nodes: 2\n  node_groups:\n    - label: arm\n      node_ranks: 0-1\n"
                    "      hardware: {type: Franka, configs: []}\n  component_placement:\n"
                    "    env: {node_group: arm, placement: all}\n"
                ),
                with_node_env(parse_nodes("2x0"), ["0-1:ROBOT_IP=" + ",".join(["10.0.0.1"] * 600)]),
            )
        )
    ),
    "cannot resolve '${a8}${a8}': the config's interpolations take more than 500 resolutions ...": config(
        "a0: x\n"
        + "".join(f"a{i}: ${{a{i - 1}}}${{a{i - 1}}}\n" for i in range(1, 10))
        + "cluster:\n  train_worker_num: ${a9}\n"
    ),
    "argument --inventory: .../nowhere.yaml: no such file": cli(
        "plan", str(CONFIGS / "disaggregate.yaml"), "--inventory", "/nonexistent/nowhere.yaml"
    ),
    "the CartPole pipeline needs gymnasium: pip install 'rlplace[demo]'": without_gymnasium,
    "this process is already connected to a Ray cluster; cannot start a simulated one": simulated_while_connected,
    "the Ray cluster at ... requires a token and none was found: looked at $RAY_AUTH_TOKEN (unset), "
    "$RAY_AUTH_TOKEN_PATH (unset), .../.ray/auth_token (no such file)": rlplace_as_user(
        "status", cluster="secured_head"
    ),
    "the Ray cluster at ... refused the token from $RAY_AUTH_TOKEN_PATH=...: it is not this cluster's token": (
        rlplace_as_user("status", cluster="secured_head", token="wrong")
    ),
    "RAY_AUTH_MODE=token is set here, but the Ray cluster at ... does not require a token": rlplace_as_user(
        "status", cluster="ray_cluster", RAY_AUTH_MODE="token"
    ),
    "$RAY_AUTH_TOKEN_PATH=/nonexistent/token: cannot read the token file (No such file or directory)": token_of(
        {"RAY_AUTH_TOKEN_PATH": "/nonexistent/token"}
    ),
    "--token-file rl.token and $RAY_AUTH_TOKEN both name a token; drop one of them": token_of(
        {"RAY_AUTH_TOKEN": "x"}, "rl.token"
    ),
    "...:... accepts connections but does not answer as a Ray head within 4 s": not_a_gcs,
    "--insecure: only a head is started open; a node takes the head's mode": cli(
        "start", "--address", "10.0.0.1:6379", "--insecure", "--accelerator", "A800", "--dry-run"
    ),
    "$RAY_AUTH_MODE=disabled: rlplace start --head requires a token unless --insecure is given": rlplace_as_user(
        "start", "--head", "--accelerator", "A800", "--dry-run", RAY_AUTH_MODE="disabled"
    ),
    "... belongs to another user (uid ...), who can then choose the token; use a token file of your own": (
        lambda request: head_token(request, "0" * 64, owner=65534)
    ),
    "every user may write the token file ..., and so choose the token": lambda request: head_token(
        request, "0" * 64, mode=0o666
    ),
    "$RAY_AUTH_TOKEN: character 11 of the token is a control character (U+0009); gRPC carries only printable ASCII "
    "in the header Ray sends the token in": token_of({"RAY_AUTH_TOKEN": "0" * 10 + "\t" + "0" * 54}),
    "the token is 1 character long; a head requires at least 32": lambda request: head_token(request, "x"),
    "the token file /dev/zero is a device, not a regular file": token_of({"RAY_AUTH_TOKEN_PATH": "/dev/zero"}),
    "... is a FIFO, not a regular file": lambda request: raised(
        lambda: find_token_in(fifo_in(request.getfixturevalue("tmp_path")))
    ),
    "line 1 of the token file ... is not UTF-8 (byte 0xff)": lambda request: raised(
        lambda: find_token_in(written(request.getfixturevalue("tmp_path") / "token", b"0000\xff\n"))
    ),
}


def linked(folder: pathlib.Path) -> pathlib.Path:
    """A link where the user will write, to a file of theirs."""
    (folder / "target").write_text("precious\n")
    (folder / "link").symlink_to(folder / "target")
    return folder / "link"


def find_token_in(path: pathlib.Path) -> object:
    from rlplace.ray import auth

    return auth.find_token({"RAY_AUTH_TOKEN_PATH": str(path)})


def head_token(request: pytest.FixtureRequest, value: str, *, mode: int = 0o600, owner: int | None = None) -> str:
    """What a head says of the token file `--token-file FILE` holding `value` (with `mode`, of user `owner`: as root
    the file is given to that user; as anyone else the check believes this process is another user)."""
    from rlplace.ray import auth

    path = written(request.getfixturevalue("tmp_path") / "rl.token", value.encode())
    path.chmod(mode)
    if owner is not None and os.getuid() == 0:
        os.chown(path, owner, owner)
    elif owner is not None:
        me = os.getuid()
        request.getfixturevalue("monkeypatch").setattr(os, "getuid", lambda: me + 1)
    return raised(lambda: auth.token_for_head({}, path))


# -- placement: the live inventory (pure) and the session's simulated cluster -----------------------------


def _ray_node(ip: str, rank: str | None) -> dict:
    labels = {} if rank is None else {"rlplace/node-rank": rank}
    return {"NodeID": f"{ip}-id", "NodeManagerAddress": ip, "Alive": True, "Labels": labels, "Resources": {"CPU": 8}}


def live_inventory_of(*ranks: str | None) -> Provoker:
    from rlplace.ray.nodes import inventory_from_nodes

    nodes = [_ray_node(f"10.0.0.{i + 1}", rank) for i, rank in enumerate(ranks)]
    return lambda _request: raised(lambda: inventory_from_nodes(nodes))


class Crashing:
    """A worker whose process dies in the middle of a call."""

    def crash(self) -> None:
        os._exit(1)


def on_cluster(
    config_text: str, *, hold: dict[str, float] | None = None, launch: str | None = None, inventory: str | None = None
) -> Provoker:
    """Connect `config_text` on the session cluster (optionally while a placement group of another job holds
    `hold` on node 2, launching component `launch` with `Crashing`, or planning for the declared `inventory`
    instead of the live one); the PlacementError it ends in, or the warnings of the job when it starts."""

    def provoke(request: pytest.FixtureRequest) -> str:
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group

        import rlplace

        request.getfixturevalue("ray_cluster")
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
        other = None
        if hold:
            other = placement_group([hold], name="holds-a-gpu", bundle_label_selector=[{"rlplace/node-rank": "2"}])
            assert other.wait(10)
        try:
            declared = parse_nodes(inventory) if inventory else None
            with rlplace.connect(config_text, inventory=declared, timeout_s=1.0, export_path=None) as job:
                if launch is None:
                    return "\n".join(job.warnings)
                group = job.launch(launch, Crashing)
                if launch == "train":
                    return raised(lambda: group.call("crash"))
                return raised(job.verify)
        except RlplaceError as e:
            return str(e)
        finally:
            if other is not None:
                remove_placement_group(other)

    return provoke


ON_NODE_3 = "cluster:\n  num_nodes: 4\n  component_placement:\n    %s\n"
BIG = "  node_groups:\n    - {label: node_0, node_ranks: 0}\n"
RTX = "  node_groups:\n    - {label: rtx, node_ranks: 2}\n"
THREE_ROBOTS = (
    "  node_groups:\n    - label: robots\n      node_ranks: 3\n      hardware:\n        type: Franka\n"
    "        configs:\n" + "".join(f"          - {{node_rank: 3, robot_ip: '10.0.0.{i}'}}\n" for i in range(1, 4))
)

PLACEMENT: dict[str, Provoker] = {
    "3 of 4 nodes have a rlplace/node-rank label; give every node a rank or none": live_inventory_of(
        "0", "1", "2", None
    ),
    "node rank 1 is given to two nodes": live_inventory_of("0", "1", "1"),
    "node ranks must be contiguous from 0 to 2 for 3 nodes; the cluster has ranks [0, 1, 3], missing [2]": (
        live_inventory_of("0", "1", "3")
    ),
    "node 0 (4x A800, 8 CPU, ...) can never hold what the plan reserves there (8 GPU, 8 CPU): missing 4 GPU": (
        on_cluster(ON_NODE_3 % "actor: {node_group: node_0, placement: 0-7}" + BIG, inventory="1x8,2x4,1x0")
    ),
    "missing 3 CPU. Every worker reserves 1 CPU unless its component asks for less": on_cluster(
        ON_NODE_3 % "agent: {node_group: node, placement: '3:0-10'}"
    ),
    "node 2 (2x RTX4090, 8 CPU, ...) could not reserve its bundles within ... s: missing 1 GPU of 2 GPU, 2 CPU "
    "(free now: ...). Held by: placement group 'holds-a-gpu' of job ...": on_cluster(
        ON_NODE_3 % "eval: {node_group: rtx, placement: 0-1}" + RTX, hold={"GPU": 1.0}
    ),
    "workers not launched; fix python_interpreter_path in the node group's env_configs": on_cluster(
        ON_NODE_3
        % "env: {node_group: cpu, placement: 0}"
        + "  node_groups:\n    - label: cpu\n      node_ranks: 3\n      env_configs:\n"
        "        - {node_ranks: 3, python_interpreter_path: /nonexistent/bin/python3}\n",
        launch="env",
    ),
    "worker rlplace:train:0 on node 0 died during crash(): ...": on_cluster(
        ON_NODE_3 % "train: {node_group: node, placement: 0}", launch="train"
    ),
    "workers are not where the plan put them:": on_cluster(
        ON_NODE_3 % "eval: {node_group: rtx, placement: 0}" + RTX, hold={"GPU": 1.0}, launch="eval"
    ),
    "node 3 does not advertise rlplace/robot/franka/2, so other jobs are not kept off that hardware": on_cluster(
        ON_NODE_3 % "env: {node_group: robots, placement: 2}" + THREE_ROBOTS
    ),
}

PROVOKERS: dict[str, Provoker] = {**CONFIG, **PLAN, **COMMAND_LINE, **PLACEMENT}
NEEDS_RAY = {q for q, p in PLACEMENT.items() if getattr(p, "__name__", "") == "provoke"}
NEEDS_RAY |= {
    q for q, p in COMMAND_LINE.items() if p in (head_port_of_running_ray, simulated_while_connected, cluster_found_here)
}
NEEDS_RAY |= {q for q, p in COMMAND_LINE.items() if getattr(p, "cluster", None) == "ray_cluster"}
#: The rows on the secured head run in tests/ray/test_secure_start.py, with the other tests of that head: pytest-xdist
#: (`--dist loadfile`) keeps a file's tests on one worker, so the head (about 7 s of CPU) starts once per run, where
#: from this file it started a second time whenever the two files went to different workers.
ON_SECURED_HEAD = [q for q, p in COMMAND_LINE.items() if getattr(p, "cluster", None) == "secured_head"]


def test_every_quoted_message_has_a_provoker_and_every_provoker_a_quote():
    quoted = catalogue_quotes()
    assert len(quoted) == len(set(quoted)), "a message is quoted twice"
    assert sorted(set(quoted) - set(PROVOKERS)) == [], "catalogue rows without a provoker here"
    assert sorted(set(PROVOKERS) - set(quoted)) == [], "provokers whose catalogue row is gone"


@pytest.mark.parametrize(
    "quote",
    [pytest.param(q, marks=[pytest.mark.ray] if q in NEEDS_RAY else []) for q in PROVOKERS if q not in ON_SECURED_HEAD],
    ids=lambda q: q[:60],
)
def test_the_program_prints_what_the_catalogue_quotes(quote, request):
    assert_prints_as_quoted(quote, request)


def assert_prints_as_quoted(quote: str, request: pytest.FixtureRequest) -> None:
    """The catalogue row `quote`, provoked: the program says it, without a traceback."""
    message = PROVOKERS[quote](request)
    assert "Traceback" not in message
    assert matches(quote, message), f"the catalogue quotes:\n  {quote}\nthe program says:\n  {message}"


@pytest.mark.parametrize(
    ("quote", "message", "expected"),
    [
        ("missing 4 GPU", "node 0 ...: missing 4 GPU", True),
        ("node ... (4x A800, ...) can", "node 0 (4x A800, 8 CPU, 10.0.0.1) can", True),
        ("missing  4\nGPU", "missing 4 GPU", True),
        ("missing 4 GPU", "missing 3 GPU", False),
        ("missing ... GPU", "missing 4 CPU", False),
    ],
)
def test_a_quote_matches_only_its_message(quote, message, expected):
    assert matches(quote, message) is expected
