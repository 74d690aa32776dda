"""Reading a config is bounded in work, not only in bytes (issue 36, item 3): interpolations and YAML merge keys.

Each attack is a few hundred bytes that asked for minutes of work before: a text doubled per line (`${a}${a}`),
a resolver that resolves its argument twice per line (`${oc.select:b,${b}}`), lists of lists of references,
the same bomb under `hydra:` where hydra-core resolves it while composing with an override, and merge keys
(`<<: *big` four thousand times: 8 million values built, 54 s and 1.4 GB). Each runs as `rlplace validate` in a
subprocess with a timeout, so that the code before the fix fails it instead of hanging the suite; the time of
each refusal is measured by bench/refusals.py.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
import yaml
from omegaconf import OmegaConf

from rlplace.config import load
from rlplace.config.yaml_source import MAX_ALIAS_VALUES
from rlplace.errors import ConfigError

RLPLACE = str(pathlib.Path(sys.executable).with_name("rlplace"))
HUNG_S = 20.0
TOO_MANY = "the config's interpolations take more than 500 resolutions"


def doubling(levels: int = 20) -> str:
    """`a20` is 16 characters doubled 20 times (16 MiB of text) in 388 bytes."""
    lines = ["a0: xxxxxxxxxxxxxxxx", *(f"a{i}: ${{a{i - 1}}}${{a{i - 1}}}" for i in range(1, levels + 1))]
    return "\n".join(lines) + f"\ncluster:\n  train_worker_num: ${{a{levels}}}\n"


def selecting(levels: int = 23) -> str:
    """`b23` resolves `b22` twice, and so on down: 2^23 resolutions for a result that stays `1`."""
    lines = ["b0: 1", *(f"b{i}: ${{oc.select:b{i - 1},${{b{i - 1}}}}}" for i in range(1, levels + 1))]
    return "\n".join(lines) + f"\ncluster:\n  train_worker_num: ${{b{levels}}}\n"


def nested_lists(resolver: bool) -> str:
    """Lists of ten references to the list before: 10^9 items eight lines down, followed by rlplace itself (an
    `env_vars` value) or by OmegaConf (a resolver around it)."""
    lines = ["l0: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"l{i}: [" + ", ".join([f"'${{l{i - 1}}}'"] * 10) + "]" for i in range(1, 9)]
    if resolver:
        return "\n".join(lines) + "\ncluster:\n  train_worker_num: ${oc.select:l8,1}\n"
    return "\n".join(lines) + (
        "\ncluster:\n  num_nodes: 1\n  node_groups:\n    - label: g\n      node_ranks: 0\n      env_configs:\n"
        "        - node_ranks: 0\n          env_vars: ${l8}\n  component_placement:\n"
        "    actor: {node_group: g, placement: 0}\n"
    )


def validate(path: pathlib.Path, *overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [RLPLACE, "validate", str(path), *overrides], capture_output=True, text=True, timeout=HUNG_S, env=os.environ
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (doubling(), "a20: cannot resolve '${a19}${a19}': " + TOO_MANY),
        (selecting(), "b23: cannot resolve '${oc.select:b22,${b22}}': " + TOO_MANY),
        (nested_lists(resolver=False), "l1[4]: cannot resolve '${l0}': " + TOO_MANY),
        (nested_lists(resolver=True), "cluster.train_worker_num: cannot resolve '${oc.select:l8,1}': " + TOO_MANY),
    ],
    ids=["doubling", "select", "lists", "lists-omegaconf"],
)
def test_interpolations_that_multiply_are_refused_naming_the_limit_and_the_key(tmp_path, text, said):
    job = tmp_path / "job.yaml"
    job.write_text(text)
    done = validate(job)
    assert done.returncode == 2 and said in done.stdout, done.stdout + done.stderr
    assert len(done.stdout.splitlines()) == 1  # one problem, no knock-on ones


def test_a_bomb_hydra_core_resolves_while_composing_is_refused_too(tmp_path):
    """hydra-core resolves `hydra.job.name` while it composes with an override (and swallows a failure there)."""
    body = doubling().split("\ncluster:")[0]
    (tmp_path / "main.yaml").write_text(
        f"defaults:\n  - _self_\n{body}\nhydra:\n  job:\n    name: ${{a20}}\ncluster:\n  train_worker_num: 1\n"
    )
    done = validate(tmp_path / "main.yaml", "cluster.train_worker_num=2")
    assert done.returncode == 2 and f"main.yaml: hydra.job.name: {TOO_MANY}" in done.stdout, done.stdout


def test_interpolations_of_real_configs_resolve_as_before(tmp_path, monkeypatch):
    """References, text, `oc.env`, `oc.select` and a reference to a whole mapping, within the budget."""
    monkeypatch.setenv("RLPLACE_TEST_NODES", "2")
    spec = load(
        "sizes: {train: 4, gpus: 8}\n"
        "name: lab\n"
        "cluster:\n"
        "  num_nodes: ${oc.decode:${oc.env:RLPLACE_TEST_NODES}}\n"
        "  node_groups:\n"
        "    - label: ${name}_gpu\n"
        "      node_ranks: 0-1\n"
        "  component_placement:\n"
        "    actor: {node_group: '${name}_gpu', placement: '0-${oc.select:missing,3}'}\n"
    )
    assert spec.num_nodes == 2 and spec.node_groups[0].label == "lab_gpu"
    assert spec.component("actor").placement.segments[0].resources == (0, 1, 2, 3)


# -- YAML merge keys ---------------------------------------------------------------------------------------------

MERGED = """\
base: &base {x: 1, y: 2, z: {deep: 1}}
other: &other {y: 20, w: 4}
one: {<<: *base, x: 3}
two: {<<: [*base, *other], w: 5}
three: {<<: [*other, *base]}
chained: &chained {<<: *base, v: 6}
again: {<<: [*chained, *chained, *chained]}
"""


def test_merge_keys_merge_as_yaml_and_omegaconf_merge_them():
    """A key the mapping writes wins over a merged one (it is no duplicate); of the merged mappings the first
    wins; merging the same mapping again adds nothing."""
    from rlplace.config.problems import Reporter
    from rlplace.config.yaml_source import read_yaml

    rep = Reporter("merged.yaml")
    data = read_yaml(MERGED, rep)
    assert not rep.problems, rep.problems
    assert data == yaml.safe_load(MERGED) == OmegaConf.to_container(OmegaConf.create(MERGED))
    assert data["one"] == {"x": 3, "y": 2, "z": {"deep": 1}} and data["three"]["y"] == 20  # type: ignore[index]
    rep = Reporter("twice.yaml")
    read_yaml("base: &base {x: 1}\none: {<<: *base, y: 1, y: 2}\n", rep)
    assert [p.message for p in rep.problems] == [
        "key 'y' is written twice (lines 2 and 2); YAML would keep only the last one, delete one of them"
    ]


def test_merge_keys_count_against_the_alias_budget(tmp_path):
    """4,000 mappings merging one of 2,000 keys (88 KB): 8 million values were built (54 s, 1.4 GB, whatever the
    PyYAML); now each merged pair counts as a value built again through an alias."""
    big = "big: &big {" + ", ".join(f"k{i}: 1" for i in range(2000)) + "}\n"
    job = tmp_path / "job.yaml"
    job.write_text(big + "".join(f"m{i}: {{<<: *big}}\n" for i in range(4000)) + "cluster: {train_worker_num: 1}\n")
    done = validate(job)
    assert done.returncode == 2 and done.stdout == (
        f"{job}:52: m50: the document is too large: aliases expand it by more than {MAX_ALIAS_VALUES} values\n"
    ), done.stdout


def test_a_merge_chain_that_grows_tenfold_a_line_is_refused_or_deduplicated(tmp_path):
    """`<<: [*a, *a, ...]` ten times a line: PyYAML before 6.0.3 copies every pair (4 GB and more than 120 s for
    565 bytes); rlplace merges each key once, as YAML means."""
    lines = ["a0: &a0 {" + ", ".join(f"k{i}: 1" for i in range(10)) + "}"]
    lines += [f"a{i}: &a{i} {{<<: [" + ", ".join([f"*a{i - 1}"] * 10) + "]}" for i in range(1, 8)]
    spec_text = "\n".join(lines) + "\ncluster: {train_worker_num: 1}\n"
    data = load(spec_text)
    assert data.component("train").num_workers == 1
    with pytest.raises(ConfigError, match="aliases expand it by more than"):
        load(spec_text.replace("cluster:", "x: [" + ", ".join(["*a7"] * 20000) + "]\ncluster:"))
