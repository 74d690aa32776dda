"""The configs RLightning and RLinf users already have: each one of tests/data/frameworks loads and plans.

The corpus (tests/data/frameworks, README there) is written in the frameworks' real shapes: Hydra config
groups with `defaults:`, whole training configs with `cluster:` inside and interpolations, every robot type,
every framework key, and typos beside real keys. Each config is loaded as a user would (`rlplace.config.load`
on the file, composed without Hydra) and planned on the inventory named beside it; a representative subset
has its expected plan checked in (tests/data/frameworks/expected/), regenerated with RLPLACE_REGEN=1.
"""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from rlplace.config import load
from rlplace.errors import ConfigError
from rlplace.inventory import parse_nodes
from rlplace.planner import plan

CORPUS = pathlib.Path(__file__).resolve().parent.parent / "data" / "frameworks"
EXPECTED = CORPUS / "expected"

# (config, inventory, {component: workers}, fragments of the load warnings, expected plan checked in)
CASES = [
    ("rlightning/conf/train_ppo.yaml", "1x8", {"train": 4, "eval": 4, "env": 4, "buffer": 1}, [], True),
    ("rlightning/conf/train_async.yaml", "2x4", {"train": 1, "eval": 3, "env": 3, "buffer": 1}, [], False),
    ("rlightning/conf/train_inline.yaml", "2x4", {"train": 2, "eval": 2, "env": 2, "buffer": 1}, [], True),
    (
        "rlightning/conf/train_small_machine.yaml",
        "1x1",
        {"train": 1, "eval": 1, "env": 4, "buffer": 1},
        ["train_each_gpu_num: 0.5 and policy.train_num_gpus: 1 disagree"],
        True,
    ),
    ("rlightning/conf/cluster/1t1e.yaml", "2x2", {"train": 1, "eval": 1, "env": 1, "buffer": 1}, [], True),
    ("rlightning/conf/cluster/4t4e_devcolo.yaml", "2x4", {"train": 4, "eval": 4, "env": 4}, [], False),
    ("rlightning/conf/cluster/4t4e_manual.yaml", "1x8", {"train": 4, "eval": 4, "env": 4, "buffer": 1}, [], True),
    ("rlightning/conf/cluster/2t2e_pool_group.yaml", "2x4", {"train": 2, "eval": 2, "env": 2, "buffer": 1}, [], True),
    ("rlightning/conf/cluster/8t8e_colocate.yaml", "1x8", {"train": 8, "eval": 8, "env": 8, "buffer": 1}, [], True),
    ("rlightning/conf/cluster/remote_debug.yaml", "1x5", {"train": 1, "eval": 2, "env": 2, "buffer": 1}, [], False),
    ("rlightning/conf/cluster/empty.yaml", "1x4", {"train": 1, "eval": 1, "env": 1}, ["RLightning's Cluster"], False),
    ("rlightning/conf/cluster/small_machine.yaml", "1x2", {"train": 1, "eval": 1, "env": 1, "buffer": 1}, [], False),
    (
        "rlightning/conf/cluster/default_env_strategy.yaml",
        "1x6",
        {"train": 2, "eval": 2, "env": 2},
        ["env_strategy: device-colocate has no effect under strategy default (the strategy when none is written)"],
        False,
    ),
    (
        "rlightning/conf/cluster/extra_keys.yaml",
        "2x4",
        {"train": 2, "eval": 2, "env": 2},
        ["extra_keys.yaml:4: seed: unknown key 'seed'", "experiment_tag", "placement.notes"],
        False,
    ),
    ("rlinf/config/grpo_collocated.yaml", "2x8", {"actor": 16, "reward": 16}, [], False),
    ("rlinf/config/grpo_disaggregated.yaml", "2x8", {"actor": 8, "reward": 8, "inference": 2}, [], False),
    (
        "rlinf/config/grpo_dynamic.yaml",
        "2x8",
        {"actor": 16, "rollout": 7, "inference": 2},
        ["actor placed on every GPU (written: 0-3) and rollout on GPUs 0-13 (written: 4-13), as RLinf's AUTO mode"],
        True,
    ),
    (
        "rlinf/config/embodied_robots.yaml",
        "2x8:A800,4x0",
        {"env_franka": 2, "env_dual": 1, "env_gim": 1, "env_turtle": 1, "env_so101": 2, "env_yam": 1, "env_phone": 1},
        [],
        False,
    ),
    ("rlinf/config/dual_arm_controller.yaml", "1x8,2x0", {"actor": 8, "controller": 2, "env": 4}, [], True),
    ("rlinf/config/all_nodes.yaml", "4x8", {"actor": 32, "agent": 4}, [], True),
    ("rlinf/embodiment/config/maniskill_ppo_openvla.yaml", "1x8", {"actor": 8, "env": 4, "rollout": 4}, [], True),
    ("rlinf/embodiment/config/realworld_sac_forms.yaml", "2x8", {"actor": 8, "rollout": 8, "env": 1}, [], True),
    ("rlinf/reasoning/config/math/grpo_megatron.yaml", "2x8", {"actor": 8, "rollout": 3, "inference": 2}, [], True),
    (
        "rlinf/e2e/embodied/ppo_openvla_e2e.yaml",
        "1x8",
        {"actor": 8, "env": 8, "rollout": 8},
        [
            "hydra.searchpath[0]: the search path 'file://${oc.env:CORPUS_REPO_PATH}/tests/data/frameworks/rlinf/"
            "embodiment/config' is skipped (CORPUS_REPO_PATH is not set)",
            "env/pick_cube@env.train, env/pick_cube_ood@env.eval, model/openvla@actor.model, "
            "hybrid_engines/fsdp@actor.fsdp_config; placement reads none of their values",
        ],
        False,
    ),
]
#: Corpus configs refused on purpose, each by the test named.
REFUSED = {
    "rlinf/e2e/reasoning/grpo_model_group.yaml": "test_hydra.py::test_a_value_placement_reads_from_a_gap_is_an_error"
}


def _config_of(case) -> str:
    return (case.values if hasattr(case, "values") else case)[0]


@pytest.mark.parametrize(
    ("config", "nodes", "counts", "warnings", "checked_in"), CASES, ids=[_config_of(c) for c in CASES]
)
def test_framework_config_loads_and_plans(config, nodes, counts, warnings, checked_in, monkeypatch):
    for variable in ("CORPUS_EMBODIED_PATH", "CORPUS_REPO_PATH"):  # as a user who set none of them
        monkeypatch.delenv(variable, raising=False)
    spec = load(CORPUS / config)
    text = "\n".join(spec.warnings)
    for fragment in warnings:
        assert fragment in text, f"{fragment!r} not in the warnings:\n{text}"
    if not warnings:
        assert not spec.warnings, text
    result = plan(spec, parse_nodes(nodes))
    placed = {c: sum(1 for w in result.workers if w.component == c) for c in counts}
    assert placed == counts
    if checked_in:
        _compare_with_expected(config, result)


def _compare_with_expected(config: str, result) -> None:
    """Where every worker goes (component, rank, node, GPUs, share, CPUs, group) and the effective settings."""
    got = {
        "settings": result.to_dict()["settings"],
        "workers": [
            f"{w.component} {w.rank}: node {w.node_rank} gpus {list(w.gpus)} share {w.gpu_fraction:g} "
            f"cpus {w.num_cpus:g} group {w.group}"
            for w in result.workers
        ],
    }
    path = EXPECTED / (config.replace("/", "__").removesuffix(".yaml") + ".json")
    if os.environ.get("RLPLACE_REGEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(got, indent=1) + "\n")
    assert got == json.loads(path.read_text())


def test_every_corpus_config_is_in_a_case():
    """A config added to the corpus without a case would never be loaded by CI."""
    listed = {_config_of(c) for c in CASES} | set(REFUSED)
    primaries = {
        str(p.relative_to(CORPUS))
        for p in CORPUS.rglob("*.yaml")
        if "typos" not in p.parts
        and "large" not in p.parts  # the pictures' 40-node config (tests/viz), not a loader case
        and (p.parent.name in ("cluster", "conf") or "\ncluster:" in "\n" + p.read_text(encoding="utf-8"))
    }
    assert primaries == listed


# (typo file, key path of the problem, fragments of its message)
TYPOS = [
    ("remote_storge.yaml", "remote_storge", ["did you mean 'remote_storage'"]),
    ("frank.yaml", "cluster.node_groups[0].hardware.type", ["unknown hardware type 'Frank'", "did you mean 'Franka'"]),
    ("typos_beside_real_keys.yaml", "cluster.auto_schedular", ["did you mean 'auto_scheduler'"]),
    ("typos_beside_real_keys.yaml", "cluster.component_placement.actor.node_groups", ["did you mean 'node_group'"]),
    ("typos_beside_real_keys.yaml", "cluster.node_groups[0].env_config", ["did you mean 'env_configs'"]),
    ("pools_typos.yaml", "cluster.eval_workers_num", ["did you mean 'eval_worker_num'"]),
    ("pools_typos.yaml", "cluster.ray_adress", ["did you mean 'ray_address'"]),
    ("pools_typos.yaml", "cluster.placement.env_stategy", ["did you mean 'env_strategy'"]),
]


@pytest.mark.parametrize(("name", "path", "fragments"), TYPOS, ids=[f"{t[0]}:{t[1]}" for t in TYPOS])
def test_a_typo_beside_real_keys_is_an_error_at_its_line(name, path, fragments):
    with pytest.raises(ConfigError) as e:
        load(CORPUS / "typos" / name)
    found = [p for p in e.value.problems if p.path == path]
    assert found, [str(p) for p in e.value.problems]
    assert found[0].line is not None and found[0].file == str(CORPUS / "typos" / name)
    for fragment in fragments:
        assert fragment in found[0].message


def test_typo_files_report_only_their_typos():
    """Real keys beside the typos (profiling, rollout_env_interaction, node_ranks: all) raise nothing."""
    for name in {t[0] for t in TYPOS}:
        with pytest.raises(ConfigError) as e:
            load(CORPUS / "typos" / name)
        assert {p.path for p in e.value.problems} == {t[1] for t in TYPOS if t[0] == name}


def test_the_json_schema_accepts_the_framework_configs_and_flags_their_typos(capsys):
    jsonschema = pytest.importorskip("jsonschema")
    yaml = pytest.importorskip("yaml")
    from rlplace.config import config_schema

    validator = jsonschema.Draft202012Validator(config_schema())
    for config in (
        "rlinf/config/embodied_robots.yaml",
        "rlinf/config/dual_arm_controller.yaml",
        *(f"rlightning/conf/{name}.yaml" for name in ("train_inline", "train_async")),
    ):
        errors = list(validator.iter_errors(yaml.safe_load((CORPUS / config).read_text())))
        assert not errors, f"{config}: {errors[0].message}"
    for typo in ("typos_beside_real_keys.yaml", "pools_typos.yaml", "remote_storge.yaml"):
        document = yaml.safe_load((CORPUS / "typos" / typo).read_text())
        assert list(validator.iter_errors(document if "cluster" in document else {"cluster": document})), typo


def test_an_overridden_buffer_count_says_where_the_count_came_from():
    """RLightning's unified storage holds one buffer worker; with train on two nodes the planner puts a shard on
    each, and says the 1 came from buffer.storage.type (the file writes buffer_worker_num: auto, or nothing)."""
    pytest.importorskip("hydra")
    spec = load(CORPUS / "rlightning/conf/train_ppo.yaml", overrides=["cluster=1t1e", "cluster.train_worker_num=2"])
    warnings = [w for w in plan(spec, parse_nodes("2x1,2x8")).warnings if "overridden" in w]
    assert warnings == [
        "buffer_worker_num: 1 (from buffer.storage.type, as RLightning counts it) overridden to 2: under pool "
        "strategies there is one buffer shard per node holding train workers (nodes 0, 1)"
    ]
