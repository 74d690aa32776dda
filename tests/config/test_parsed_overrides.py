"""Overrides are judged as hydra-core reads them, not as they are typed (issue 36, item 2).

The review's attack: `hydra.searchpath=[pkg\\://evil]` holds no `pkg://` as typed; hydra-core unescapes it and
imports `evil`, whose `__init__.py` runs. The same gap let a group choice past the preflight composition: with
`+extra='fan'` or `+extra=[fan]` rlplace composed without the group and hydra-core merged 1,728 configs (29 s).
Each variant below is an attack file tree of these tests' own; the slow ones run in a subprocess with a timeout,
so that the code before the fix fails them instead of hanging the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from tests.trees import write_tree

from cpu_clock import child_cpu_seconds, cpu_seconds
from rlplace.config import load
from rlplace.config.yaml_source import Budget
from rlplace.errors import ConfigError

RLPLACE = str(__import__("pathlib").Path(sys.executable).with_name("rlplace"))
HUNG_S = 20.0
#: A package whose import leaves a mark: hydra-core's `pkg://` source imports it to find its folder.
INIT = "import pathlib\npathlib.Path({marker!r}).write_text('imported')\n"


@pytest.fixture
def evil(tmp_path, monkeypatch):
    """A package `rlplace_evil_pkg` on sys.path with a config group, and the mark its import would leave."""
    marker = tmp_path / "imported"
    site = write_tree(
        tmp_path / "site",
        {
            "rlplace_evil_pkg/__init__.py": INIT.format(marker=str(marker)),
            "rlplace_evil_pkg/conf/__init__.py": INIT.format(marker=str(marker)),
            "rlplace_evil_pkg/conf/cluster/small.yaml": "train_worker_num: 3\n",
        },
    )
    monkeypatch.syspath_prepend(str(site))
    conf = write_tree(tmp_path / "conf", {"main.yaml": "defaults:\n  - _self_\ncluster: {eval_worker_num: 1}\n"})
    return conf / "main.yaml", marker


@pytest.mark.parametrize(
    "override",
    [
        r"hydra.searchpath=[pkg\://rlplace_evil_pkg.conf]",  # the review's: escaped
        r"hydra.searchpath=[ pkg\://rlplace_evil_pkg.conf ]",  # escaped, with the blanks hydra-core strips
        r"hydra.searchpath=sort([pkg\://rlplace_evil_pkg.conf])",  # computed by a grammar function
        r"hydra.searchpath=shuffle([pkg\://rlplace_evil_pkg.conf,file\:///tmp])",
        r"hydra.searchpath=[file\:///tmp,pkg\://rlplace_evil_pkg/conf]",  # second, with slashes
        r"+hydra.searchpath=[pkg\://rlplace_evil_pkg.conf]",
        r"++hydra.searchpath=[pkg\://rlplace_evil_pkg.conf]",
        "hydra.searchpath=['pkg://rlplace_evil_pkg.conf']",  # quoted, as typed
    ],
    ids=["escaped", "blanks", "sort", "shuffle", "second", "add", "force-add", "quoted"],
)
def test_a_pkg_search_path_is_refused_however_it_is_written(evil, override):
    main, marker = evil
    started = cpu_seconds()
    with pytest.raises(ConfigError) as e:
        load(main, overrides=[override, "cluster.train_worker_num=2"])
    seconds = cpu_seconds() - started
    (problem,) = e.value.problems
    assert "'pkg://rlplace_evil_pkg" in problem.message and "would make hydra-core import the package" in (
        problem.message
    ), problem
    assert problem.file == f"command line {override!r}"
    assert not marker.exists() and seconds < 1.0, f"{seconds:.2f} s"


def test_an_interpolated_search_path_on_the_command_line_imports_nothing(evil, monkeypatch):
    """hydra-core does not resolve `${...}` in a command-line search path: the entry is a folder of that name."""
    main, marker = evil
    monkeypatch.setenv("RLPLACE_TEST_EVIL", "pkg://rlplace_evil_pkg.conf")
    load(main, overrides=["hydra.searchpath=['${oc.env:RLPLACE_TEST_EVIL}']", "cluster.train_worker_num=2"])
    assert not marker.exists()


@pytest.mark.parametrize("override", [r"hydra.searchpath=[structured\://x]", "hydra.searchpath=['x\\://y']"])
def test_a_search_path_on_the_command_line_must_be_a_folder(evil, override):
    main, _ = evil
    with pytest.raises(ConfigError, match="is no folder: a search path on the command line is a folder"):
        load(main, overrides=[override])


def test_a_folder_search_path_on_the_command_line_still_composes(evil, tmp_path):
    main, marker = evil
    folder = tmp_path / "site/rlplace_evil_pkg/conf"
    spec = load(main, overrides=[f"hydra.searchpath=['file://{folder}']", "+cluster=small"])
    assert spec.component("train").num_workers == 3 and not marker.exists()


def test_a_pkg_source_hydra_core_is_handed_anyway_never_imports(evil, tmp_path):
    """The second line of defence (`hydra_guard`): while rlplace composes, hydra-core's `pkg://` source finds the
    package's folder without importing it and reads it through rlplace's reader; outside, hydra-core's is back."""
    from hydra._internal.core_plugins.importlib_resources_config_source import ImportlibResourcesConfigSource
    from hydra._internal.sources_registry import SourcesRegistry

    from rlplace.config import hydra_guard

    _, marker = evil
    registry = SourcesRegistry.instance()
    registry.register(ImportlibResourcesConfigSource)
    hydras = registry.resolve("pkg")
    with hydra_guard.reading(Budget()) as reading:
        source = registry.resolve("pkg")("test", "pkg://rlplace_evil_pkg.conf")
        assert source.available() and source.is_group("cluster")
        assert source.load_config("cluster/small").config == {"train_worker_num": 3}
        with pytest.raises(ConfigError, match="no folder rlplace_evil_pkg/nowhere of a Python package"):
            registry.resolve("pkg")("test", "pkg://rlplace_evil_pkg.nowhere")
    assert not marker.exists() and "rlplace_evil_pkg" not in sys.modules
    assert str(tmp_path / "site/rlplace_evil_pkg/conf/cluster/small.yaml") in reading.files
    assert registry.resolve("pkg") is hydras


FAN = {
    "conf/main.yaml": "defaults:\n  - _self_\ncluster: {}\n",
    "conf/extra/fan.yaml": "defaults:\n" + "".join(f"  - a@p{i}\n" for i in range(12)),
    "conf/extra/a.yaml": "defaults:\n" + "".join(f"  - b@q{i}\n" for i in range(12)) + "x: 1\n",
    "conf/extra/b.yaml": "defaults:\n" + "".join(f"  - c@r{i}\n" for i in range(12)) + "y: 1\n",
    "conf/extra/c.yaml": "z: 1\n",
}


@pytest.mark.parametrize("choice", ["+extra=fan", "+extra='fan'", '+extra="fan"', "+extra=[fan]", "+extra=[c,fan]"])
def test_a_group_choice_counts_however_it_is_written(tmp_path, choice):
    """A quoted or listed choice of a group whose tree loads 1,728 configs: refused at 256 within a second, as the
    plain `+extra=fan` is (hydra-core took 29 s on it when only the plain one was seen)."""
    tree = write_tree(tmp_path, FAN)
    argv = [RLPLACE, "validate", str(tree / "conf/main.yaml"), choice, "cluster.train_worker_num=1"]
    started = child_cpu_seconds()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=HUNG_S, env=os.environ)
    seconds = child_cpu_seconds() - started
    assert done.returncode == 2 and "the defaults lists load more than 256 configs" in done.stdout, done.stdout
    started = cpu_seconds()
    with pytest.raises(ConfigError, match="the defaults lists load more than 256 configs"):
        load(tree / "conf/main.yaml", overrides=[choice, "cluster.train_worker_num=1"])
    assert cpu_seconds() - started < 1.0, f"{seconds:.2f} s in a subprocess"
