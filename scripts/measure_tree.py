#!/usr/bin/env python3
"""Validate and plan every YAML with a cluster section in a framework's checkout, and count per folder.

    cd /path/to/RLinf && env -i PATH="$PATH" HOME="$HOME" /path/to/rlplace/.venv/bin/python \\
        /path/to/rlplace/scripts/measure_tree.py .
    cd /path/to/RLightning && ... measure_tree.py . --cluster-groups

Each file is loaded as `rlplace validate FILE` loads it and planned as `rlplace plan FILE --nodes Nx8` plans it:
on `num_nodes` x 8 GPUs when the config writes `num_nodes`, else on 1, 2 and 4 nodes of 8 GPUs (`--sizes`).
A file "with a cluster section" has `cluster:` at its top level, picks a `cluster` group in its `defaults:`
list, or has `component_placement` somewhere. `--cluster-groups` also measures every primary config of a
Hydra tree that has a `cluster/` group folder beside it with each option of that group (`cluster=OPTION`, or
`+cluster=OPTION` when the primary picks none), as `rlplace plan PRIMARY cluster=OPTION` does.

`--verl` measures verl's tree instead (its configs have no cluster section: their placement is what verl's
trainers build): every verl trainer config (a YAML with `trainer.nnodes` beside `actor_rollout_ref`, or a
primary whose `defaults:` names one) as `rlplace plan FILE` plans it, and every module of the tree with a
`@hydra.main` as `rlplace plan MODULE` does (only verl's RL trainers are planned; the rest are refused and listed).
`--launches FILE` (JSON lines `{"script", "module", "args"}`: the `python -m verl...` launches of verl's run
scripts, recorded as DEVELOPERS.md says) adds each launch as `rlplace plan MODULE ARGS` plans it. A verl case
is planned once, on as many nodes as its pools have placement groups, each with the most GPUs a pool asks per
node (enough for every pool: verl puts one placement group per node).

Run it with no environment variables set (`env -i` above) to measure what a user who just cloned the tree
gets. It prints one line per folder (cases; loaded; planned on every size tried; plans that fit, of those tried) and
every refusal with its first problem;
`--json FILE` writes every case. DEVELOPERS.md says how to bring the trees onto a machine.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import pathlib
import re
import sys
import time
import warnings

import yaml

from rlplace.config import load
from rlplace.config.verl import is_verl
from rlplace.config.verl.entry import config_file
from rlplace.errors import RlplaceError
from rlplace.inventory import parse_nodes
from rlplace.planner import plan

_CLUSTER_KEY = re.compile(
    r"^cluster:|^\s*-\s*(?:override\s+|optional\s+)*/?cluster(?:@\S+)?\s*:|component_placement:", re.M
)
_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv"}


@dataclasses.dataclass
class Case:
    file: str
    overrides: list[str]
    #: A verl entry module the case runs (`verl.trainer.main_ppo`); `file` is then the module's file, or the run
    #: script that launches it.
    entry: str | None = None
    loaded: bool = False
    load_error: str = ""
    warnings: int = 0
    plans: dict[str, str] = dataclasses.field(default_factory=dict)  # nodes -> "ok" or the refusal
    #: nodes -> every worker's placement (`--placements`): component, rank, node, GPUs, robot, share, env vars,
    #: interpreter, visible GPUs; two runs' files diff worker for worker (a change must keep written ranges).
    placements: dict[str, list[list]] = dataclasses.field(default_factory=dict)

    @property
    def planned(self) -> bool:
        return self.loaded and bool(self.plans) and all(v == "ok" for v in self.plans.values())

    def label(self) -> str:
        if self.entry and self.overrides:  # a run script's launch: its dozens of overrides are in --json
            return f"{self.file} ({self.entry}, {len(self.overrides)} arguments)"
        return " ".join([self.file, *self.overrides])


def cluster_files(root: pathlib.Path) -> list[pathlib.Path]:
    """Every YAML under `root` with a cluster section (see the module docstring), sorted."""
    out = []
    for path in _yaml_files(root):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if _CLUSTER_KEY.search(text):
            out.append(path)
    return out


def group_cases(root: pathlib.Path) -> list[tuple[pathlib.Path, list[str]]]:
    """(primary, [cluster=OPTION]) for every primary config beside a `cluster/` group folder."""
    out: list[tuple[pathlib.Path, list[str]]] = []
    for folder in sorted(p.parent for p in root.rglob("cluster") if p.is_dir() and not _SKIP_DIRS & set(p.parts)):
        options = sorted(p.stem for p in (folder / "cluster").glob("*.yaml"))
        for primary in sorted(folder.glob("*.yaml")):
            picks = bool(re.search(r"^\s*-\s*cluster\s*:", primary.read_text(encoding="utf-8"), re.M))
            out.extend((primary, [f"{'' if picks else '+'}cluster={option}"]) for option in options)
    return out


def verl_configs(root: pathlib.Path) -> list[pathlib.Path]:
    """Every verl trainer config under `root`: `trainer.nnodes` beside `actor_rollout_ref` (what the loader takes
    for one), or a primary whose `defaults:` names one by its name (`ppo_megatron_trainer.yaml`: `- ppo_trainer`),
    sorted."""
    docs = {}
    for path in _yaml_files(root):
        try:
            docs[path] = yaml.safe_load(path.read_text(encoding="utf-8", errors="replace"))
        except (OSError, yaml.YAMLError):
            continue
    found = {p for p, d in docs.items() if is_verl(d)}
    while True:  # primaries naming a found one, to a fixed point
        names = {p.stem for p in found}
        more = {p for p, d in docs.items() if p not in found and names & _defaults_names(d)}
        if not more:
            return sorted(found)
        found |= more


def _defaults_names(doc: object) -> set[str]:
    """The plain entries of a `defaults:` list (`- ppo_trainer`): other primaries it composes."""
    entries = doc.get("defaults") if isinstance(doc, dict) else None
    return {e for e in entries if isinstance(e, str) and e != "_self_"} if isinstance(entries, list) else set()


def verl_entries(root: pathlib.Path) -> list[tuple[pathlib.Path, str]]:
    """(file, dotted module) of every module of the `verl` package under `root` with a `@hydra.main`."""
    package = root / "verl"
    out = []
    for path in sorted(package.rglob("*.py")) if package.is_dir() else []:
        if _SKIP_DIRS & set(path.relative_to(root).parts):
            continue
        if "@hydra.main" in path.read_text(encoding="utf-8", errors="replace"):
            out.append((path, ".".join(path.relative_to(root).with_suffix("").parts)))
    return out


def launch_cases(file: pathlib.Path) -> list[tuple[str, str, list[str]]]:
    """(script, module, arguments) of each recorded launch of a verl module (`--launches`)."""
    out = []
    for line in file.read_text(encoding="utf-8").splitlines():
        record = json.loads(line) if line.strip() else {}
        if record.get("module"):
            out.append((record["script"], record["module"], list(record.get("args", []))))
    return out


def _entry_arguments(args: list[str]) -> tuple[str | None, str | None, list[str]]:
    """verl's command line -> (config name, config path, overrides), as Hydra reads `--config-name=N`/`-cn N`."""
    found: dict[str, str | None] = {"name": None, "path": None}
    overrides = []
    flags = {"--config-name": "name", "-cn": "name", "--config-path": "path", "-cp": "path"}
    rest = iter(args)
    for a in rest:
        flag, eq, value = a.partition("=")
        if flag in flags:
            found[flags[flag]] = (value if eq else next(rest, "")).strip("'\"")
        else:
            overrides.append(a)
    return found["name"], found["path"], overrides


def _yaml_files(root: pathlib.Path) -> list[pathlib.Path]:
    return [
        p
        for p in sorted(root.rglob("*"))
        if p.suffix in (".yaml", ".yml") and not _SKIP_DIRS & set(p.relative_to(root).parts) and p.is_file()
    ]


def measure(
    path: pathlib.Path,
    root: pathlib.Path,
    overrides: list[str],
    sizes: list[int],
    gpus: int,
    placements: bool = False,
    entry: str | None = None,
) -> Case:
    """One case, loaded by the path relative to the checkout root (run from there, so messages read as a
    user's do); with `entry`, the config that verl entry module composes with `overrides` (verl's arguments)."""
    case = Case(str(path.relative_to(root) if path.is_absolute() else path), overrides, entry)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if entry is None:
                spec = load(pathlib.Path(case.file), overrides=overrides)
            else:
                name, folder, hydra_overrides = _entry_arguments(overrides)
                spec = load(config_file(entry, name, folder), overrides=hydra_overrides)
    except RlplaceError as e:
        case.load_error = _first_problem(e)
        return case
    case.loaded, case.warnings = True, len(spec.warnings)
    tries = [(spec.num_nodes, gpus)] if spec.num_nodes else [(n, gpus) for n in sizes]
    if spec.dialect == "verl":
        tries = [
            (
                sum(len(g.gpus_per_node or ()) for g in spec.node_groups),
                max(max(g.gpus_per_node or (0,)) for g in spec.node_groups),
            )
        ]
    for n, per_node in tries:
        nodes = f"{n}x{per_node}"
        try:
            planned = plan(spec, parse_nodes(nodes))
            case.plans[nodes] = "ok"
            if placements:
                case.placements[nodes] = [_placement(w) for w in planned.workers]
        except RlplaceError as e:
            case.plans[nodes] = _first_problem(e)
    return case


def _placement(w) -> list:
    robot = None if not w.hardware else [w.hardware.get("type"), w.hardware.get("index")]
    visible = None if w.visible_gpus is None else list(w.visible_gpus)
    return [w.component, w.rank, w.node_rank, list(w.gpus), robot, w.gpu_fraction, w.env_vars, w.python, visible]


def _first_problem(e: RlplaceError) -> str:
    problems = getattr(e, "problems", None)
    text = str(problems[0]) if problems else str(e)
    return " ".join(text.split())


def folder_of(case: Case, depth: int) -> str:
    parts = pathlib.PurePath(case.file).parts[:-1]
    return "/".join(parts[:depth]) or "."


def report(cases: list[Case], depth: int, out=sys.stdout) -> None:
    by_folder: dict[str, list[Case]] = collections.defaultdict(list)
    for c in cases:
        by_folder[folder_of(c, depth)].append(c)
    width = max((len(f) for f in by_folder), default=6)
    print(f"{'folder':<{width}}  cases  load  plan  plans ok/tried", file=out)
    for folder, group in [*sorted(by_folder.items()), ("total", cases)]:
        loaded = sum(c.loaded for c in group)
        planned = sum(c.planned for c in group)
        ok = sum(v == "ok" for c in group for v in c.plans.values())
        tried = sum(len(c.plans) for c in group)
        print(f"{folder:<{width}}  {len(group):5}  {loaded:4}  {planned:4}  {ok:5}/{tried}", file=out)
    for c in cases:
        if not c.loaded:
            print(f"refused: {c.label()}: {c.load_error}", file=out)
        for nodes, outcome in c.plans.items():
            if outcome != "ok":
                print(f"not planned on {nodes}: {c.label()}: {outcome}", file=out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", type=pathlib.Path, help="the framework's checkout (run from there: paths print relative)")
    p.add_argument("--cluster-groups", action="store_true", help="also every primary with each cluster/ option")
    p.add_argument("--only-groups", action="store_true", help="only the primary x cluster-option cases")
    p.add_argument("--sizes", default="1,2,4", help="node counts for configs without num_nodes (default: 1,2,4)")
    p.add_argument("--gpus", type=int, default=8, help="GPUs per node (default: 8)")
    p.add_argument("--depth", type=int, default=2, help="folder depth of the per-folder counts (default: 2)")
    p.add_argument("--json", type=pathlib.Path, help="write every case (file, overrides, outcome) here")
    p.add_argument("--placements", action="store_true", help="with --json: every worker's placement too")
    p.add_argument("--verl", action="store_true", help="verl's tree: its trainer configs and entry modules")
    p.add_argument(
        "--launches",
        type=pathlib.Path,
        action="append",
        default=[],
        help="with --verl: JSON lines of verl's run scripts' launches (repeatable)",
    )
    args = p.parse_args(argv)
    launches = [launch for file in args.launches for launch in launch_cases(file.resolve())]
    root = args.root.resolve()
    os.chdir(root)
    sizes = [int(s) for s in args.sizes.split(",")]
    start = time.perf_counter()
    if args.verl:
        kinds = {
            "verl trainer configs": [
                measure(f, root, [], sizes, args.gpus, args.placements) for f in verl_configs(root)
            ],
            "entry modules (@hydra.main)": [
                measure(f, root, [], sizes, args.gpus, args.placements, entry=m) for f, m in verl_entries(root)
            ],
        }
        if launches:
            kinds["run scripts' launches"] = [
                measure(pathlib.Path(s), root, a, sizes, args.gpus, args.placements, entry=m) for s, m, a in launches
            ]
        for kind, group in kinds.items():
            print(f"== {kind}")
            report(group, args.depth)
        cases = [c for group in kinds.values() for c in group]
    else:
        todo: list[tuple[pathlib.Path, list[str]]] = [] if args.only_groups else [(f, []) for f in cluster_files(root)]
        if args.cluster_groups or args.only_groups:
            todo += group_cases(root)
        cases = [measure(f, root, o, sizes, args.gpus, args.placements) for f, o in todo]
        report(cases, args.depth)
    print(f"{len(cases)} case(s) in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(c) for c in cases], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
