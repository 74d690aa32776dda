"""Hydra's defaults grammar in rlplace's own composer: every form gives the config hydra-core composes.

Each tree below is written in a form the frameworks' trees use (or Hydra documents), composed by rlplace
(no Hydra needed) and by hydra-core's compose API with the version base RLinf's entry points use; the two
must be equal, and every value must point at the file and line it was written at.
"""

from __future__ import annotations

import pathlib
import warnings

import pytest
from tests.trees import write_tree

from rlplace.config import load
from rlplace.config.compose import compose_file
from rlplace.config.problems import Reporter
from rlplace.config.yaml_source import read_yaml
from rlplace.errors import ConfigError

CORPUS = pathlib.Path(__file__).resolve().parent.parent / "data" / "frameworks"
ROOT = CORPUS.parents[2]
#: Every primary config of the corpus: RLightning's trees and RLinf's (with their search paths resolvable).
PRIMARIES = sorted(
    [
        *(CORPUS / "rlightning" / "conf").glob("*.yaml"),
        CORPUS / "rlightning" / "conf" / "cluster" / "2t2e_pool_group.yaml",
        *(CORPUS / "rlinf").rglob("*.yaml"),
    ]
)
#: The variables the corpus's search paths name, set as RLinf's launch scripts set theirs.
CORPUS_ENV = {"CORPUS_EMBODIED_PATH": str(CORPUS / "rlinf" / "embodiment"), "CORPUS_REPO_PATH": str(ROOT)}


def ours(primary: pathlib.Path) -> tuple[object, Reporter]:
    rep = Reporter(str(primary))
    text = primary.read_text()
    return compose_file(str(primary), rep, read_yaml(text, rep), text).data, rep


def hydra_core(primary: pathlib.Path) -> object:
    """hydra-core's composition of `primary`, as the frameworks' entry points run it (Hydra's node removed)."""
    pytest.importorskip("hydra")
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with initialize_config_dir(config_dir=str(primary.parent.resolve()), version_base="1.1"):
            cfg = compose(config_name=primary.stem)
    data = OmegaConf.to_container(cfg, resolve=False)
    data.pop("hydra", None)
    return data


@pytest.mark.parametrize("primary", PRIMARIES, ids=lambda p: str(p.relative_to(CORPUS)))
def test_every_corpus_config_composes_as_hydra_core_composes_it(primary, monkeypatch):
    for name, value in CORPUS_ENV.items():
        monkeypatch.setenv(name, value)
    data, rep = ours(primary)
    assert not rep.problems and not rep.warnings
    assert data == hydra_core(primary)


@pytest.mark.parametrize("primary", PRIMARIES, ids=lambda p: str(p.relative_to(CORPUS)))
def test_every_composed_value_points_at_the_line_that_wrote_it(primary, monkeypatch):
    for name, value in CORPUS_ENV.items():
        monkeypatch.setenv(name, value)
    data, rep = ours(primary)
    for path, key in _keys(data):
        assert path in rep.lines, path
        file = rep.files.get(path, str(primary))
        text = pathlib.Path(file).read_text()
        line = text.splitlines()[rep.lines[path] - 1]
        root = Reporter(file)
        read_yaml(text, root)
        assert str(key) in line or rep.lines[path] == root.lines[()], (path, file, line)  # or a whole config


def _keys(node: object, path: tuple = ()) -> list[tuple[tuple, object]]:
    """(key path, key) of every mapping key in `node`."""
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            out.append(((*path, str(k)), k))
            out.extend(_keys(v, (*path, str(k))))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.extend(_keys(v, (*path, i)))
    return out


# Each tree: a primary `main.yaml` and its groups, in one form of the grammar.
FORMS = {
    "config entries with packages, and relative and absolute paths": {
        "main.yaml": """\
            defaults:
              - env/pick@env.train
              - env/pick@env.eval
              - /model/vla@actor.model
              - sub/../model/vla@rollout.model
              - override hydra/job_logging: stdout
            cluster: {num_nodes: 1}
            """,
        "env/pick.yaml": "task: pick\nenvs: 8\n",
        "model/vla.yaml": "path: /m\nprecision: fp32\n",
    },
    "group@package: option, nested groups and their packages": {
        "main.yaml": """\
            defaults:
              - cluster@cluster: big
              - engine@actor.engine: fsdp
              - _self_
            cluster: {train_worker_num: 1}
            """,
        "cluster/big.yaml": """\
            defaults:
              - pools: two
              - /shared/limits: strict
              - extras@_global_: notes
              - _self_
            train_worker_num: 4
            """,
        "cluster/pools/two.yaml": "- {name: a, num_node: 1}\n- {name: b, num_node: 1}\n",
        "shared/limits/strict.yaml": "max_restarts: 0\n",
        "cluster/extras/notes.yaml": "notes: composed at the top\n",
        "engine/fsdp.yaml": "strategy: fsdp\n",
    },
    "_self_ first, in the middle, and in a group file": {
        "main.yaml": """\
            defaults:
              - _self_
              - trainer: fast
              - model: small
            trainer: {lr: 0.1, steps: 10}
            model: {layers: 2}
            """,
        "trainer/fast.yaml": "lr: 0.5\n",
        "model/small.yaml": "defaults:\n  - _self_\n  - width: narrow\nlayers: 4\nwidth: 64\n",
        "model/width/narrow.yaml": "value: 32\n",
    },
    "package headers, and an entry's package beating the header": {
        "main.yaml": """\
            defaults:
              - logging: quiet
              - paths: local
              - paths@storage.paths: local
              - db: mysql
            """,
        "logging/quiet.yaml": "# @package _global_\nrunner: {log_level: warning}\n",
        "paths/local.yaml": "# A comment stops the header, so this one is not read:\n# @package _global_\nroot: /tmp\n",
        "db/mysql.yaml": "# @package storage.db\nhost: localhost\n",
    },
    "_here_, _group_ and _global_ packages": {
        "main.yaml": """\
            defaults:
              - env: pick
              - db@_group_.primary: mysql
              - extra@_global_.notes: text
            """,
        "env/pick.yaml": "defaults:\n  - common@_here_\n  - _self_\ntask: pick\n",
        "env/common.yaml": "steps: 80\ntask: common\n",
        "db/mysql.yaml": "host: localhost\n",
        "extra/text.yaml": "body: hello\n",
    },
    "override entries, from the primary and from a later entry's subtree": {
        "main.yaml": """\
            defaults:
              - env: pick
              - trainer: base
              - override env: push
            """,
        "env/pick.yaml": "task: pick\n",
        "env/push.yaml": "task: push\n",
        "trainer/base.yaml": "defaults:\n  - optimizer: sgd\n  - override optimizer: adam\nsteps: 1\n",
        "trainer/optimizer/sgd.yaml": "name: sgd\n",
        "trainer/optimizer/adam.yaml": "name: adam\n",
    },
    "optional, null, lists of options and an interpolated option": {
        "main.yaml": """\
            defaults:
              - optional reward: learned
              - critic: null
              - plugins: [a, b]
              - size: small
              - model: ${size}
            """,
        "plugins/a.yaml": "a: 1\nshared: a\n",
        "plugins/b.yaml": "b: 2\nshared: b\n",
        "size/small.yaml": "n: 1\n",
        "model/small.yaml": "layers: 2\n",
    },
    "merging: ??? never replaces, lists replace, null replaces a mapping": {
        "main.yaml": """\
            defaults:
              - base
              - _self_
            ranges: [9]
            model: ???
            nested: null
            """,
        "base.yaml": "ranges: [1, 2]\nmodel: {path: /m}\nnested: {a: 1}\nlr: 2e-05\nday: 2024-01-01\n",
    },
}


@pytest.mark.parametrize("form", FORMS, ids=list(FORMS))
def test_a_defaults_form_composes_as_hydra_core_composes_it(form, tmp_path):
    primary = write_tree(tmp_path, FORMS[form]) / "main.yaml"
    data, rep = ours(primary)
    assert not rep.problems, [str(p) for p in rep.problems]
    assert data == hydra_core(primary)


def test_forms_land_where_hydra_puts_them(tmp_path):
    """Spot checks of the comparisons above, so that a wrong hydra-core install cannot make them pass."""
    trees = {
        form: ours(write_tree(tmp_path / str(i), files) / "main.yaml")[0]
        for i, (form, files) in enumerate(FORMS.items())
    }
    nested = trees["group@package: option, nested groups and their packages"]
    assert nested["cluster"]["train_worker_num"] == 1 and len(nested["cluster"]["pools"]) == 2
    assert nested["cluster"]["shared"]["limits"] == {"max_restarts": 0} and nested["notes"] == "composed at the top"
    assert nested["actor"]["engine"] == {"strategy": "fsdp"}
    self_first = trees["_self_ first, in the middle, and in a group file"]
    assert self_first["trainer"] == {"lr": 0.5, "steps": 10} and self_first["model"] == {
        "layers": 4,
        "width": {"value": 32},
    }
    headers = trees["package headers, and an entry's package beating the header"]
    assert headers["runner"] == {"log_level": "warning"} and headers["paths"] == {"root": "/tmp"}
    assert headers["storage"] == {"paths": {"root": "/tmp"}, "db": {"host": "localhost"}}
    packages = trees["_here_, _group_ and _global_ packages"]
    assert packages["env"] == {"steps": 80, "task": "pick"} and packages["db"] == {"primary": {"host": "localhost"}}
    overrides = trees["override entries, from the primary and from a later entry's subtree"]
    assert overrides["env"] == {"task": "push"} and overrides["trainer"]["optimizer"] == {"name": "adam"}
    optional = trees["optional, null, lists of options and an interpolated option"]
    assert optional["plugins"] == {"a": 1, "b": 2, "shared": "b"} and optional["model"] == {"layers": 2}
    assert "reward" not in optional and "critic" not in optional
    merging = trees["merging: ??? never replaces, lists replace, null replaces a mapping"]
    assert merging["ranges"] == [9] and merging["model"] == {"path": "/m"} and merging["nested"] is None
    assert merging["lr"] == 2e-05 and merging["day"] == "2024-01-01"


# Bad defaults lists: (files, fragments of the one problem, its line in main.yaml)
BAD = {
    "missing option, closest few named": (
        {
            "main.yaml": "defaults:\n  - env: libero_spatal\n",
            **{
                f"env/libero_{n}.yaml": "a: 1\n"
                for n in ("spatial", "object", "goal", "10", "90", "130", "spatial_ood", "long")
            },
        },
        ["config group env: no option 'libero_spatal'", "closest of the 8 options there: libero_spatial"],
        2,
    ),
    "config entry with a package that does not exist": (
        {"main.yaml": "defaults:\n  - env/nope@env.train\n", "env/pick.yaml": "a: 1\n"},
        ["config group env: no option 'nope'", "options there: pick"],
        2,
    ),
    "no option chosen": (
        {"main.yaml": "defaults:\n  - env: ???\n", "env/pick.yaml": "a: 1\n"},
        ["no option is chosen for config group 'env' (???)", "options: pick"],
        2,
    ),
    "override before a plain entry": (
        {"main.yaml": "defaults:\n  - override env: b\n  - env: a\n", "env/a.yaml": "x: 1\n", "env/b.yaml": "x: 2\n"},
        ["Hydra requires overrides at the end of the defaults list"],
        3,
    ),
    "override of a group nothing chooses": (
        {"main.yaml": "defaults:\n  - env: a\n  - override model: b\n", "env/a.yaml": "x: 1\n"},
        ["'override model: b' matches no entry", "nothing chooses config group model"],
        3,
    ),
    "a keyword Hydra does not know": (
        {"main.yaml": "defaults:\n  - optinal env: a\n", "env/a.yaml": "x: 1\n"},
        ["unknown keyword 'optinal'", "the keywords are optional and override"],
        2,
    ),
    "a group chosen twice": (
        {"main.yaml": "defaults:\n  - env: a\n  - env: b\n", "env/a.yaml": "x: 1\n", "env/b.yaml": "x: 2\n"},
        ["config group env is chosen twice (a, then b)", "write the later one as '- override env: b'"],
        3,
    ),
    "an empty defaults key": (
        {"main.yaml": "defaults:\ncluster: {}\n"},
        ["defaults must be a list like '- cluster: 1t1e', got None"],
        1,
    ),
    "a list merged over a mapping": (
        {"main.yaml": "defaults:\n  - base\n  - _self_\npools: [1]\n", "base.yaml": "pools: {a: 1}\n"},
        ["merges a list and a mapping at this key"],
        4,
    ),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_a_bad_defaults_list_is_one_clear_problem_at_its_line(case, tmp_path):
    files, fragments, line = BAD[case]
    primary = write_tree(tmp_path, files) / "main.yaml"
    with pytest.raises(ConfigError) as e:
        load(primary)
    (problem,) = e.value.problems
    assert problem.line == line and problem.file == str(primary)
    for fragment in fragments:
        assert fragment in problem.message, problem.message
    assert len(problem.message) < 400  # the closest few, never the whole folder
