"""The exceptions rlplace raises on purpose.

Every user-facing failure is one of these, so the CLI can print it without a traceback and tests can
assert on its parts. A ConfigError carries *every* problem found in one load, not only the first, so
a user fixes a config in one round trip.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a config, located as precisely as the loader could.

    `path` is the dotted key path with list indices, e.g.
    ``cluster.node_groups[1].env_configs[0].node_ranks``; `line` is 1-based in `file` (None when the
    config did not come from YAML text); `value` is the offending value as the user wrote it.
    """

    path: str
    message: str
    value: object = None
    file: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = self.file or "<config>"
        if self.line is not None:
            where += f":{self.line}"
        # A problem with the whole document (YAML syntax, missing file) has no key path to show.
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class RlplaceError(Exception):
    """Base of every error rlplace raises deliberately (the CLI prints these without a traceback)."""


class ConfigError(RlplaceError):
    """The config is invalid; `problems` lists every problem found (exit code 2 in the CLI)."""

    def __init__(self, problems: list[Problem] | Problem):
        self.problems: list[Problem] = [problems] if isinstance(problems, Problem) else list(problems)
        super().__init__(self._render())

    def _render(self) -> str:
        n = len(self.problems)
        head = f"{n} problem{'s' if n != 1 else ''} in the config:"
        return "\n".join([head, *(f"  {p}" for p in self.problems)])


class PlanError(RlplaceError):
    """The config is valid but the inventory cannot hold it (exit code 3 in the CLI).

    The message names what is missing where (group or pool, node rank, GPUs wanted vs present).
    """


class PlacementError(RlplaceError):
    """Realising a plan on Ray failed: infeasible or starved placement groups, missing interpreter,
    dead worker. The message says which node and which resources."""


class CommandError(RlplaceError):
    """The command after `rlplace run ... --` cannot be started: its program is not found, or the script its
    Python interpreter is told to run does not exist (exit code 127, as shells report a command not found: a
    Python given a missing script exits 2, the code of a config error). Found before any cluster starts."""


class ClusterAccessError(RlplaceError, ConnectionError):
    """The cluster would not let this process (or node) in: it requires a token and none was found (the message
    lists where it was looked for), the token found is not the cluster's, or this side's `RAY_AUTH_MODE` contradicts
    the cluster's. A ConnectionError, so code catching Ray's connection failures catches it too."""


class NodeLostError(PlacementError):
    """A node holding the job's workers was lost and neither a spare nor a replacement node took over within
    the job's replacement window (`connect(..., replace_within_s=...)`).

    `node_rank` is the plan's node rank, `workers` the actor names that ran there, `waited_for` what the job
    waited for (a spare of which shape, a replacement started with which command, how long).
    """

    def __init__(self, message: str, *, node_rank: int, workers: tuple[str, ...] = (), waited_for: str = ""):
        super().__init__(message)
        self.node_rank = node_rank
        self.workers = tuple(workers)
        self.waited_for = waited_for


class RendezvousError(RlplaceError):
    """The ranks of a component did not all arrive at their rendezvous in time (`init_component_group()`, or
    the exchange of a component Ray placed itself); the message names who is missing and where."""


class RanksRemovedError(PlacementError):
    """Calls were made on workers that an elastic component's shrink then removed (their node was lost and the
    job shrank the component instead of stopping, docs/guide.md "Elastic components"), so they have no result.

    Raised by `WorkerGroup.get()` (and `call`, `call_sharded`) once every other call of the same `get` is done:
    `results` are those other calls' results, in the order the calls were made (after the shrink: the
    survivors, in their new rank order), `removed` the names of the workers whose calls were lost, `component`
    the component. Nothing is dropped silently: redo the step at the new size.
    """

    def __init__(self, message: str, *, component: str, removed: tuple[str, ...], results: list):
        super().__init__(message)
        self.component = component
        self.removed = tuple(removed)
        self.results = list(results)


def first_line(error: BaseException, limit: int | None = 300) -> str:
    """What an error says, in one line for a message of ours: its first line, at most `limit` characters (None: all of
    it); its type's name when it says nothing. A worker's exception from Ray carries its whole traceback, so the
    line quoted is the user's own message."""
    text = str(error).strip()
    line = text.splitlines()[0] if text else type(error).__name__
    return line if limit is None else line[:limit]
