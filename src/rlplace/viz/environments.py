"""The environments a plan gives its workers: a node group's `env_configs` (env vars, interpreter), with who gets each.

RLinf's node groups set env vars and a Python interpreter per node range; a worker gets those of the group it is
placed through, on its node. The table prints one line per distinct environment under the node table, the
picture and the HTML page list the same lines, so a run's `GLOO_SOCKET_IFNAME=eth0` or `/opt/venv/openpi/bin/python3`
is seen before it runs, not only in `--format json`. One pass over the workers, keyed by the environment
object the planner shares among a node's workers (a few look-ups per node, not a dict comparison per worker).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlplace.plan import Plan
from rlplace.planner.ranges import format_ranks
from rlplace.viz.collapse import ranks_text


@dataclass(frozen=True)
class Environment:
    """One environment (env vars and interpreter) and who gets it: per component, its ranks; their nodes."""

    group: str | None
    env_vars: tuple[tuple[str, str], ...]
    python: str | None
    nodes: tuple[int, ...]
    ranks: dict[str, tuple[int, ...]]  # component -> ranks, in plan order

    def settings(self) -> str:
        """`GLOO_SOCKET_IFNAME=eth0, python /opt/venv/openpi/bin/python3`."""
        parts = [f"{k}={v}" for k, v in self.env_vars]
        return ", ".join(parts + ([f"python {self.python}"] if self.python else []))

    def line(self) -> str:
        """`env of actor 0-31 on nodes 0-3 (node group a800): GLOO_SOCKET_IFNAME=eth0, python ...`."""
        who = ", ".join(f"{c} {ranks_text(list(r))}" for c, r in self.ranks.items())
        where = f"node {self.nodes[0]}" if len(self.nodes) == 1 else f"nodes {format_ranks(self.nodes)}"
        group = f" (node group {self.group})" if self.group else ""
        return f"env of {who} on {where}{group}: {self.settings()}"


def environments(plan: Plan) -> list[Environment]:
    """Every distinct environment the plan's workers get, in plan order; none for workers that get neither env
    vars nor an interpreter."""
    items: dict[int, tuple[tuple[str, str], ...]] = {}  # id of a shared env dict -> its items
    found: dict[tuple, tuple[dict[str, list[int]], dict[int, None]]] = {}
    for w in plan.workers:
        if not w.env_vars and not w.python:
            continue
        env = items.get(id(w.env_vars))
        if env is None:
            env = items[id(w.env_vars)] = tuple(sorted(w.env_vars.items()))
        ranks, nodes = found.setdefault((w.group, env, w.python), ({}, {}))
        ranks.setdefault(w.component, []).append(w.rank)
        if w.node_rank is not None:
            nodes[w.node_rank] = None
    return [
        Environment(group, env, python, tuple(sorted(nodes)), {c: tuple(sorted(r)) for c, r in ranks.items()})
        for (group, env, python), (ranks, nodes) in found.items()
    ]
