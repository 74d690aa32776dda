"""Where a config can come from and where its sections may sit; how problems are reported."""

from __future__ import annotations

import pathlib
import textwrap

import pytest

from rlplace.config import load
from rlplace.config.yaml_source import MAX_ALIAS_VALUES, MAX_BYTES, MAX_DEPTH
from rlplace.errors import ConfigError
from rlplace.model import Segment

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "data" / "spec_examples"
HETERO = EXAMPLES / "hetero-18-nodes.yaml"


def test_path_string_text_dict_and_omegaconf_give_the_same_spec():
    omegaconf = pytest.importorskip("omegaconf")
    text = HETERO.read_text()
    from_path = load(HETERO)
    from_str_path = load(str(HETERO))
    from_text = load(text)
    from_dict = load(__import__("yaml").safe_load(text))
    from_omegaconf = load(omegaconf.OmegaConf.create(text))
    hydra_style = load(omegaconf.OmegaConf.create(text).cluster)  # cfg.cluster: the section itself
    assert from_path == from_str_path
    assert from_path.source == str(HETERO) and from_text.source == "<string>" and from_dict.source is None
    for other in (from_text, from_dict, from_omegaconf, hydra_style):
        assert placed(other) == placed(from_path)
        assert [(g.label, g.node_ranks, [u.config for u in g.hardware]) for g in other.node_groups] == [
            (g.label, g.node_ranks, [u.config for u in g.hardware]) for g in from_path.node_groups
        ]


def placed(spec):
    """What a spec asks for, without the key paths (they differ when the section sits at the top level)."""
    return [(c.name, c.placement, c.num_workers, c.gpus_per_worker) for c in spec.components]


def test_omegaconf_interpolation_is_resolved():
    omegaconf = pytest.importorskip("omegaconf")
    cfg = omegaconf.OmegaConf.create({"n": 2, "cluster": {"train_worker_num": "${n}"}})
    assert load(cfg).component("train").num_workers == 2
    broken = omegaconf.OmegaConf.create({"cluster": {"train_worker_num": "${missing}"}})
    with pytest.raises(ConfigError, match="cannot resolve"):
        load(broken)


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError) as e:
        load(tmp_path / "absent.yaml")
    assert str(e.value.problems[0]) == f"{tmp_path / 'absent.yaml'}: no such file"
    with pytest.raises(ConfigError, match="no such file"):
        load("absent.yaml")


def test_unsupported_source_type():
    with pytest.raises(ConfigError, match="cannot load a config from a int"):
        load(42)


def test_cluster_keys_at_top_level_and_resource_pool_beside_or_under():
    pool = "  - {name: p, num_node: 1, num_gpus: 4, train: 0-3}\n"
    top_level = load("placement: {mode: manual}\nresource_pool:\n" + pool)
    under = load("cluster:\n  placement: {mode: manual}\n  resource_pool:\n" + pool.replace("  -", "    -"))
    beside = load("cluster:\n  placement: {mode: manual}\nresource_pool:\n" + pool)
    assert placed(top_level) == placed(under) == placed(beside)
    assert beside.component("train").path == "resource_pool[0].train"
    assert under.component("train").path == "cluster.resource_pool[0].train"
    assert [g.label for g in top_level.node_groups] == ["p"]


def test_other_top_level_keys_beside_cluster_belong_to_the_application():
    spec = load("model: {lr: 0.1}\ntrainer: [1, 2]\ncluster:\n  train_worker_num: 3\n")
    assert spec.component("train").num_workers == 3


def test_every_problem_is_reported_at_once_in_file_order():
    text = textwrap.dedent(
        """\
        cluster:
          num_nodes: 2
          component_placement:
            actor: {node_group: gpu, placement: 0-2:0-3}
          node_groups:
            - label: node
              node_ranks: 0-5
            - label: gpu
              node_ranks: 0
              colour: red
        """
    )
    with pytest.raises(ConfigError) as e:
        load(text, filename="job.yaml")
    problems = e.value.problems
    assert [(p.line, p.path) for p in problems] == [
        (4, "cluster.component_placement.actor.placement"),
        (6, "cluster.node_groups[0].label"),
        (7, "cluster.node_groups[0].node_ranks"),
        (10, "cluster.node_groups[1].colour"),
    ]
    assert str(problems[1]).startswith("job.yaml:6: cluster.node_groups[0].label: label 'node' is reserved")
    assert problems[2].value == (0, 1, 2, 3, 4, 5)
    assert "4 problems in the config:" in str(e.value)


def test_dict_problems_have_paths_but_no_lines():
    with pytest.raises(ConfigError) as e:
        load({"cluster": {"train_worker_num": -1}})
    (p,) = e.value.problems
    assert (p.path, p.line, p.file, p.value) == ("cluster.train_worker_num", None, None, -1)


def test_yaml_base_60_numbers_stay_placement_text():
    spec = load("cluster:\n  num_nodes: 4\n  component_placement:\n    agent: {node_group: node, placement: 1:0}\n")
    assert spec.component("agent").placement.segments == (Segment((1,), (0,)),)


def test_alias_bomb_is_refused_naming_the_aliases_and_the_limit():
    layers = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    layers += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 7)]
    with pytest.raises(ConfigError) as e:
        load("\n".join(layers) + "\n")
    (problem,) = e.value.problems
    assert f"the document is too large: aliases expand it by more than {MAX_ALIAS_VALUES} values" in problem.message


def test_a_file_over_the_byte_limit_is_refused_before_it_is_parsed(tmp_path):
    """A file of plain keys (no aliases) past MAX_BYTES: the message names its size and the limit."""
    big = tmp_path / "big.yaml"
    big.write_text("cluster: {}\n" + "".join(f"key_{i}: {i}\n" for i in range(MAX_BYTES // 12)))
    with pytest.raises(ConfigError) as e:
        load(big)
    (problem,) = e.value.problems
    size = big.stat().st_size / 2**20
    assert problem.message == (
        f"the file is too large: {size:.1f} MiB, and rlplace reads configs of up to 1 MiB "
        "(a cluster config is a few KiB)"
    )


def test_a_long_list_outside_the_cluster_section_loads():
    """150k list items beside the section (0.9 MB, issue 15's case): under the byte limit, so read in proportion to
    its size."""
    text = "cluster:\n  train_worker_num: 2\ndataset:\n" + "".join(f"  - {i % 10}\n" for i in range(150_000))
    assert load(text).component("train").num_workers == 2


def test_deep_nesting_names_the_depth_limit():
    text = "cluster:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(MAX_DEPTH + 2)) + "  " * 70 + "x: 1\n"
    with pytest.raises(ConfigError) as e:
        load(text)
    assert any(f"nested more than {MAX_DEPTH} levels deep" in p.message for p in e.value.problems)


def test_a_bad_value_causes_no_knock_on_problems_elsewhere():
    text = (
        "cluster:\n  component_placement: {a: {node_group: g, placement: 0}}\n"
        "  node_groups:\n    - {label: g, node_ranks: 5-0}\n"
    )
    with pytest.raises(ConfigError) as e:
        load(text)
    assert [p.path for p in e.value.problems] == ["cluster.node_groups[0].node_ranks"]
    pools = (
        "cluster:\n  train_worker_num: 2\n  placement: {mode: manual}\n"
        "  resource_pool:\n    - {name: p, num_node: 1, num_gpus: 8, train: 9-0}\n"
    )
    with pytest.raises(ConfigError) as e:
        load(pools)
    assert [p.path for p in e.value.problems] == ["cluster.resource_pool[0].train"]
    misspelt = "cluster:\n  placement:\n    strategy: colocat\n    env_strategy: device-colocate\n"
    with pytest.raises(ConfigError) as e:
        load(misspelt)
    assert [p.path for p in e.value.problems] == ["cluster.placement.strategy"]
