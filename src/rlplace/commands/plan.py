"""`rlplace plan FILE`: which worker lands on which node and GPU, before a cluster is touched.

Exit 0 when the plan fits, 3 when the inventory cannot hold it, 2 on a config error (cli.py maps the
exceptions). Without --nodes/--inventory the live Ray cluster's inventory is read (lazy Ray import).
"""

from __future__ import annotations

import argparse
import json
import sys

from rlplace.commands.arguments import (
    add_entry_arguments,
    add_show_env_argument,
    declared_nodes,
    inventory_file,
    invoked,
)
from rlplace.commands.costs import add_time_arguments, load_config, predicted, print_prediction
from rlplace.config.from_env import hide
from rlplace.errors import ConfigError, PlanError, Problem, RlplaceError
from rlplace.inventory import Inventory, with_node_env
from rlplace.model import JobSpec, Strategy
from rlplace.plan import Plan
from rlplace.planner.gc_pause import gc_paused
from rlplace.printable import printable

COMPARED: tuple[Strategy, ...] = ("default", "disaggregate", "colocate")
FORMATS = ("table", "table-full", "json", "yaml")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="show where every worker goes (offline with --nodes, or on the live cluster)",
        description="Where every worker of the config goes, before any cluster is touched: each node, its GPUs "
        "and the workers on them, the settings used (derived values filled in), warnings, and an estimate of the "
        "bytes crossing nodes and racks per iteration (with --time, of the seconds an iteration takes). Offline "
        "with --nodes or --inventory (no cluster needed), else on the live Ray cluster's nodes. Exit 0 when the plan "
        "fits, 3 when the nodes cannot hold it, 2 for a config or command-line error.",
    )
    add_source_arguments(p)
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="how the plan is printed: table (a row per run of alike nodes and devices), table-full (a row per "
        "device), json, yaml",
    )
    p.add_argument("--detail", action="store_true", help="the table with a row per device (= --format table-full)")
    p.add_argument("--export", metavar="PATH", help="write the computed resource_pool (manual-mode form) here")
    p.add_argument("--compare", action="store_true", help="estimate strategies default/disaggregate/colocate")
    p.add_argument(
        "--model-bytes",
        type=_size,
        help="model size for the estimate (14G, 512M, 1GiB; default: the config's cluster.model_bytes, else 14G, "
        "a 7B model in bf16, said to be assumed)",
    )
    p.add_argument("--batch-bytes", type=_size, default="256M", help="experience per iteration, for the estimate")
    add_picture_arguments(p)
    add_time_arguments(p)
    add_show_env_argument(p)
    p.set_defaults(func=run)


def add_source_arguments(p: argparse.ArgumentParser) -> None:
    """CONFIG, OVERRIDES, --config-name/--config-path (a verl entry module as CONFIG) and where the nodes come from
    (--nodes, --inventory, --address, --node-env): `plan` and `tune` read them alike (`load_config`, `inventory_of`)."""
    p.add_argument("file", help="config YAML with a `cluster:` section (or a Hydra primary/group file)")
    p.add_argument(
        "overrides", nargs="*", default=[], metavar="OVERRIDE", help="Hydra overrides, e.g. cluster.train_worker_num=8"
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--nodes",
        metavar="SPEC",
        type=declared_nodes,
        help="declared inventory, COUNTxGPUS[:MODEL][/LEVEL=N...],... in node-rank order (`/rack=18`: every 18 nodes "
        "a rack); it says nothing about CPUs, so the plan's CPUs are not checked (an --inventory file with `cpus`, "
        "or the live cluster, checks them)",
    )
    src.add_argument(
        "--inventory",
        metavar="FILE",
        type=inventory_file,
        help="inventory YAML (nodes: list or COUNTxGPUS string); `cpus` are checked",
    )
    src.add_argument(
        "--address",
        metavar="HOST:PORT",
        help="plan on the live cluster whose head is there (default without --nodes/--inventory: $RAY_ADDRESS, else "
        "the cluster started on this machine)",
    )
    p.add_argument(
        "--node-env",
        action="append",
        default=[],
        metavar="RANK[-RANK]:NAME=VALUE",
        help="the environment a node is started with, from which robots are enumerated as RLinf does "
        "(e.g. 1:ROBOT_IP=10.0.0.1,10.0.0.2 for two Franka robots on node 1); repeatable, a later value wins",
    )
    add_entry_arguments(p)


def add_picture_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--svg", metavar="PATH", help="write a topology picture (SVG)")
    p.add_argument("--html", metavar="PATH", help="write a topology picture (HTML)")


def _size(text: str) -> int:
    """An argparse type for byte counts (`rlplace.config.sizes`)."""
    from rlplace.config.sizes import SIZE_FORM, parse_size

    try:
        return parse_size(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {SIZE_FORM}") from None


def run(args: argparse.Namespace) -> int:
    from rlplace.planner import capacity, estimate, plan, write_resource_pool
    from rlplace.viz.shown import shown_plan

    args.time = args.time or args.profile is not None  # costs given: the prediction is what they are for
    spec, whole = load_config(args, whole=args.time)
    inventory = inventory_of(args)
    hidden = () if args.show_env else spec.from_env
    try:
        planned = capacity.checked(plan(spec, inventory), inventory)
    except PlanError as e:
        raise PlanError(hide(str(e), hidden)) from None
    # A file to reuse: a value from the environment is written as the config writes it.
    exported = (
        write_resource_pool(shown_plan(planned, spec.from_env), args.export, written_by=invoked(args))
        if args.export
        else None
    )
    result = shown_plan(planned, hidden)  # what is printed: values from the environment as written
    est = estimate(result, args.model_bytes, args.batch_bytes, inventory)
    if args.svg or args.html:
        _write_pictures(result, inventory, est, args)
    compared = _compare(spec, planned, inventory, est, args) if args.compare else None
    timed = predicted(spec, whole, planned, inventory, args, est) if args.time else None
    if args.format in ("table", "table-full"):
        _print_table(result, inventory, est, compared, args)
        if timed is not None:
            print_prediction(*timed)
    else:
        with gc_paused():  # ~100k dicts for a 4,096-node plan: 3x faster without collector passes
            doc = plan_document(spec, result, inventory, est)
            if compared is not None:
                doc["compare"] = compared
            if timed is not None:
                doc["time"] = timed[0].to_dict()
            _dump(doc, args.format)
    if exported is not None:  # after the table; on stderr when stdout is the plan's JSON or YAML
        table = args.format in ("table", "table-full")
        print(exported.describe(), file=sys.stdout if table else sys.stderr)
    return 0


def plan_document(spec: JobSpec, result: Plan, inventory: Inventory, est) -> dict:
    """What `rlplace plan --format json` prints (and `rlplace tune` gives as `best.plan`)."""
    from rlplace.viz.shown import from_environment

    doc = result.to_dict()
    doc["components"] = _components(result, inventory)
    doc["estimate"] = est.to_dict()
    if spec.from_env:
        doc["from_environment"] = from_environment(spec.from_env)
    return doc


def _write_pictures(result: Plan, inventory: Inventory, est, args: argparse.Namespace) -> None:
    """Write the pictures asked for, and say where (on stderr: stdout may be the plan's JSON)."""
    from rlplace.viz import picture

    if args.svg:
        written = picture.write_svg(result, args.svg, inventory=inventory, estimate=est)
        print(printable(f"wrote {written} (topology picture, SVG)"), file=sys.stderr)
    if args.html:
        written = picture.write_html(result, args.html, inventory=inventory, estimate=est)
        print(printable(f"wrote {written} (topology picture and plan, HTML)"), file=sys.stderr)


def _components(result: Plan, inventory: Inventory) -> dict[str, dict]:
    """Per-component facts for the JSON (the table prints them as its component lines)."""
    from rlplace.viz.collapse import node_runs
    from rlplace.viz.components import component_facts

    return {f.name: f.to_dict() for f in component_facts(result, node_runs(result, inventory))}


def inventory_of(args: argparse.Namespace) -> Inventory:
    """--nodes and --inventory were read when the command line was (commands/arguments.py)."""
    inventory = args.nodes or args.inventory or _live_inventory(args.address)
    return with_node_env(inventory, args.node_env) if args.node_env else inventory


def _live_inventory(address: str | None) -> Inventory:
    """The running Ray cluster's nodes; says on stderr which cluster was read, since nothing else tells."""
    try:
        from rlplace.ray.nodes import live_inventory
        from rlplace.ray.ray_port import RAY
    except ImportError as e:
        hint = "pass --nodes COUNTxGPUS,... or --inventory FILE"
        raise RlplaceError(f"cannot read a live inventory ({e}); {hint}") from e
    inventory = live_inventory(address or "auto")
    address = RAY.gcs_address()
    print(
        f"planning on the live Ray cluster at {address}: {len(inventory)} node(s), {inventory.total_gpus} GPU(s) "
        "(plan offline with --nodes COUNTxGPUS or --inventory FILE)",
        file=sys.stderr,
    )
    return inventory


def _compare(spec: JobSpec, planned: Plan, inventory: Inventory, est, args: argparse.Namespace) -> dict[str, dict]:
    """Plan the worker counts of `planned` under each auto strategy; a strategy that does not fit says why."""
    from rlplace.planner import estimate, plan
    from rlplace.planner.variants import eval_env_share, with_strategy

    if spec.dialect != "pools":
        raise ConfigError(
            Problem(
                path="--compare",
                value=spec.dialect,
                message="--compare needs the placement/resource_pool "
                "dialect (worker counts); node_groups placements are explicit",
            )
        )
    out: dict[str, dict] = {}
    shared = eval_env_share(planned)
    for strategy in COMPARED:
        env = spec.settings.env_strategy
        if strategy == "default" and env == "device-colocate":
            env = None  # Ray schedules every worker under default: device-colocate has no effect there
        elif strategy == "colocate" and env is None and shared:
            env = "device-colocate"  # the planned layout already puts eval and env on one GPU
        try:
            p = plan(with_strategy(spec, planned, strategy, env), inventory)
        except PlanError as e:
            out[strategy] = {"fits": False, "error": str(e)}
            continue
        out[strategy] = {
            "fits": True,
            "env_strategy": p.settings.env_strategy,
            "nodes_used": len({w.node_rank for w in p.workers if w.node_rank is not None}),
            **estimate(p, est.model_bytes, args.batch_bytes, inventory, est.model_source).to_dict(),
            "warnings": len(p.warnings),
        }
    return out


def _dump(doc: dict, fmt: str) -> None:
    if fmt == "json":
        sys.stdout.write(json.dumps(doc, indent=None, separators=(",", ":")) + "\n")
        return
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    sys.stdout.write(yaml.dump(doc, Dumper=dumper, sort_keys=False))


def _print_table(result: Plan, inventory: Inventory, est, compared: dict | None, args: argparse.Namespace) -> None:
    from rich.table import Table

    from rlplace.viz.console import console as terminal
    from rlplace.viz.table import render
    from rlplace.viz.text import estimate_line, model_size

    console = terminal()
    console.print(render(result, inventory, detail=args.detail or args.format == "table-full"))
    console.print(estimate_line(result, est))
    if compared:
        t = Table(title=f"strategies compared ({model_size(est)}, experience {_human(args.batch_bytes)} per iteration)")
        for col in ("strategy", "fits", "nodes", "GPUs used", "GPUs idle", "weight sync x-node", "experience x-node"):
            t.add_column(col, overflow="fold")  # a narrow terminal wraps a cell, never cuts it with "…"
        for name, row in compared.items():
            if not row["fits"]:
                t.add_row(name, "no", "", "", "", "", "")
                continue
            t.add_row(
                name,
                "yes",
                str(row["nodes_used"]),
                str(row["gpus_used"]),
                _opt(row["gpus_idle"]),
                _human(row["weight_sync_bytes"]),
                _human(row["experience_bytes"]),
            )
        console.print(t)
        for name, row in compared.items():  # why a strategy does not fit: below the table, not in a column of numbers
            if not row["fits"]:
                console.print(f"{name} does not fit: {row['error']}", highlight=False)


def _opt(v: int | None) -> str:
    return "?" if v is None else str(v)


def _human(n: int | None) -> str:
    from rlplace.planner.estimate import format_bytes
    from rlplace.viz.text import UNKNOWN

    return format_bytes(n, UNKNOWN)
