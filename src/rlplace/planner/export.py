"""Export a pool plan in RLightning's `resource_pool` form, as its docs' "Tip" asks (resource_pool_auto.yaml;
docs/planner.md, "Export").

Re-planning the same config with `placement.mode: manual` and this `resource_pool` gives the identical
placement. Pools are written without `node_ids` when "the next unused GPU nodes" rule rebuilds them
(nodes 0..K-1, in pool order, equal GPU counts per pool); otherwise every pool names its nodes by rank,
with a per-node `num_gpus` list. CPU-only workers (env workers of `env_each_gpu_num: 0`) hold no GPU of their
pool, so auto mode gives them an empty range; they are written with the whole pool's range, which places them
the same way (on the pool's nodes, each beside its eval worker) and validates (an empty range does not).

The file is where a user tunes the pools by hand, so it is never replaced silently: when it holds other pools
than the new ones (edited, or from another plan), the new ones go beside it (`NAME.1.yaml`, `NAME.2.yaml`, ...)
and the caller says so; when it (or such a file beside it) holds the same pools, nothing is written.
docs/decisions.md, "The exported pools are never replaced".
"""

from __future__ import annotations

import os
import pathlib
import stat
from dataclasses import dataclass

import yaml

from rlplace.errors import ConfigError, Problem, RlplaceError
from rlplace.model import COUNTED_COMPONENTS
from rlplace.output_files import write_file
from rlplace.plan import Plan
from rlplace.planner.ranges import format_ranks


def export_resource_pool(plan: Plan) -> dict:
    """`{"resource_pool": [{name, num_node, num_gpus, [node_ids], train, eval, env}, ...]}`."""
    if plan.settings.dialect == "verl":  # verl reads no pool file: its trainer builds the pools from its keys
        raise ConfigError(
            Problem(
                path="--export",
                value=plan.settings.strategy,
                message="it writes RLightning's resource_pool (placement.mode: manual), which verl does not "
                "read: verl's trainer builds its pools from trainer.nnodes x trainer.n_gpus_per_node and the roles "
                "the config asks for, so there is no file to write that verl would use. The plan's pools, their "
                "nodes and the roles on them are in `rlplace plan ... --format json` (groups) or --format yaml",
            )
        )
    if plan.settings.dialect != "pools" or not plan.uses_placement_groups or not plan.groups:
        raise ConfigError(
            Problem(
                path="--export",
                value=plan.settings.strategy,
                message=f"strategy {plan.settings.strategy} creates no resource pools, so there is nothing to "
                "export; export works for strategies disaggregate, colocate and manual",
            )
        )
    order = [n for g in plan.groups for n in g.node_ranks]
    plain = order == list(range(len(order))) and all(len(set(g.gpus_per_node)) == 1 for g in plan.groups)
    pools = []
    for g in plan.groups:
        entry: dict[str, object] = {"name": g.name, "num_node": len(g.node_ranks)}
        if plain:
            entry["num_gpus"] = g.gpus_per_node[0]
        else:
            entry["node_ids"] = list(g.node_ranks)
            entry["num_gpus"] = list(g.gpus_per_node)
        for c in COUNTED_COMPONENTS:  # the buffer follows train (alignment): it needs no range
            if c in g.components:
                entry[c] = format_ranks(g.components[c] or range(sum(g.gpus_per_node)))  # (): CPU-only workers
        pools.append(entry)
    return {"resource_pool": pools}


#: How many files beside an edited export `write_resource_pool` tries before it gives up.
BESIDE_LIMIT = 100
#: An existing export larger than this is not read back (it cannot be one rlplace wrote): it counts as edited.
READ_LIMIT = 1 << 20


@dataclass(frozen=True)
class WrittenPools:
    """Where `write_resource_pool` put the pools: `path`, and `asked`, the path it was given."""

    path: pathlib.Path
    asked: pathlib.Path
    unchanged: bool = False  # `path` already held these pools: nothing was written

    def describe(self) -> str:
        """What happened, for the user: written, written beside an edited file, or already there."""
        use = "(use it with placement.mode: manual)"
        kept = f"{self.asked} holds other pools (edited, or from another plan), so it was left as it is"
        if self.path == self.asked:
            return (
                f"{self.path} already holds these pools {use}"
                if self.unchanged
                else f"resource_pool written to {self.path} {use}"
            )
        if self.unchanged:
            return f"{kept}; these pools are already in {self.path} beside it {use}"
        return f"{kept}; these pools were written beside it to {self.path} {use}"


def write_resource_pool(plan: Plan, path: str | pathlib.Path, *, written_by: str) -> WrittenPools:
    """Write `export_resource_pool(plan)` as YAML under a header naming the command that wrote it (`written_by`)
    and how to use it; atomically, never through a link (`rlplace.output_files`), and never over a file that
    holds other pools (module docstring)."""
    header = (
        f"# resource_pool computed by `{_one_line(written_by)}` (strategy {plan.settings.strategy}, env_strategy "
        f"{plan.settings.env_strategy}).\n# Use it: put this resource_pool in the config (under or beside "
        "`cluster:`) and set placement.mode: manual;\n# the plan is then identical. Edit the ranges to tune.\n"
    )
    body = yaml.safe_dump(export_resource_pool(plan), sort_keys=False, default_flow_style=None)
    asked = pathlib.Path(path)
    for candidate in _candidates(asked):
        held = _pools_held(candidate)
        if held is None:
            return WrittenPools(write_file(candidate, header + body), asked)
        if held == _pools_text(body):
            return WrittenPools(candidate, asked, unchanged=True)
    raise RlplaceError(
        f"{asked} and the {BESIDE_LIMIT - 1} files beside it that rlplace would write instead all hold other pools; "
        "nothing was written: remove some of them or name another file"
    )


def _candidates(asked: pathlib.Path) -> list[pathlib.Path]:
    """`asked`, then `NAME.1.yaml`, `NAME.2.yaml`, ... beside it."""
    return [asked, *(asked.with_name(f"{asked.stem}.{i}{asked.suffix}") for i in range(1, BESIDE_LIMIT))]


def _pools_held(path: pathlib.Path) -> str | None:
    """The pools an existing file at `path` holds (its text without comments); None when there is no file. A link
    or anything but a regular file is handed to `write_file`, which refuses it and says why."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None  # write_file refuses it with its reason
    if info.st_size > READ_LIMIT:
        return "(too large to be an export)"
    try:
        with open(path, "rb") as f:
            return _pools_text(f.read(READ_LIMIT).decode("utf-8", errors="replace"))
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from None


def _pools_text(text: str) -> str:
    """The lines that are not comments: an export whose header alone differs holds the same pools."""
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))


def _one_line(text: str) -> str:
    """`text` as one printable line (a newline in a command's argument must not end the YAML comment)."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
