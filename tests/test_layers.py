"""The shape of the code, checked: no import cycle among rlplace's modules (function-level and TYPE_CHECKING
imports included), and Ray's private API named in one module only. The layers themselves are
import-linter's contracts in pyproject.toml (`lint-imports`, run by `make test`)."""

from __future__ import annotations

import pathlib
import re

import grimp

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "rlplace"
#: What only rlplace/ray/_compat.py may name: Ray's private modules and attributes.
PRIVATE_RAY = re.compile(
    r"ray\._private|ray\._raylet|\._actor_id|_internal_kv_|__ray_metadata__|__ray_actor_class__|_default_options"
)


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_among_rlplaces_modules_lazy_imports_included():
    graph = grimp.build_graph("rlplace")
    # grimp reads imports inside functions too: the lazy import of the Ray layer by `rlplace.connect`'s
    # module attribute is there (a TYPE_CHECKING import), as is the one `Job.launch` makes of local_group.
    assert "rlplace.ray.local_group" in graph.find_modules_directly_imported_by("rlplace.ray.job")
    assert _cycles(graph) == []


def test_a_cycle_is_found_where_there_is_one():
    graph = grimp.ImportGraph()
    for name in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(name)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")
    graph.add_import(importer="a.z", imported="a.x")
    assert _cycles(graph) == [["a.x", "a.y"]]


def test_the_cli_imports_the_example_pipeline_only_for_demo_and_run():
    """`rlplace.commands` holds the CLI; what only the demo needs (its node-loss options, its report) lives with the
    example, which only `demo` and `run` (its bundled pipeline) import."""
    graph = grimp.build_graph("rlplace")
    examples = {m for m in graph.modules if m.startswith("rlplace.examples")}
    importers = {m for e in examples for m in graph.find_modules_that_directly_import(e)}
    cli = {m for m in importers if m == "rlplace.cli" or m.startswith("rlplace.commands")}
    assert cli == {"rlplace.commands.demo", "rlplace.commands.run"}


def test_every_command_prints_through_the_one_console_with_the_wrapping_rule():
    """`run` and `demo` wrapped at 80 columns mid-sentence when piped while `plan` never wrapped: every rich
    Console is now made by rlplace.viz.console (a terminal's width on a terminal, whole lines elsewhere)."""
    made = {
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if re.search(r"\bConsole\(", path.read_text()) and path != SRC / "viz" / "console.py"
    }
    assert made == set()


def test_rays_private_api_is_named_only_in_the_compat_module():
    named = {
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if PRIVATE_RAY.search(path.read_text()) and path != SRC / "ray" / "_compat.py"
    }
    assert named == set()
