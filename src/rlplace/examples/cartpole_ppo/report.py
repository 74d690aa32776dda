"""What a run prints at the end: the reward curve, where each worker ran, offload and buffer counts.

Kept apart from the pipeline so the pipeline stays the part users copy, and so the text is testable.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from rlplace.examples.cartpole_ppo.curve import SOLVED_RETURN, SOLVED_WINDOW
from rlplace.examples.cartpole_ppo.pipeline import RunResult


def outcome(result: RunResult) -> str:
    """One honest sentence: solved or not, after how many iterations, episodes and seconds."""
    curve = result.curve
    episodes = len(curve.returns)
    if curve.solved:
        return (
            f"Solved CartPole-v1: average return {curve.average:.1f} over the last {SOLVED_WINDOW} episodes "
            f"(>= {SOLVED_RETURN:g}) after {result.iterations} iterations, {episodes} episodes, {result.seconds:.1f} s."
        )
    window = min(episodes, SOLVED_WINDOW)
    ended = (
        "Stopped before solving, as asked (--stop-when-handled)" if result.stopped else "Not solved within the budget"
    )
    return (
        f"{ended}: average return {curve.average:.1f} over the last {window} episodes "
        f"(target {SOLVED_RETURN:g} over {SOLVED_WINDOW}) after {result.iterations} iterations, {episodes} episodes, "
        f"{result.seconds:.1f} s."
    )


def curve_text(result: RunResult) -> Text:
    """The windowed average per iteration as a sparkline, with its first and last values."""
    averages = result.curve.averages
    if not averages:
        return Text("reward curve: no iteration finished")
    text = Text(f"Reward curve: average return of the last {SOLVED_WINDOW} episodes after each iteration ")
    text.append(f"(bar height 0..{result.curve.scale:.0f}):\n")
    text.append(f"{averages[0]:5.1f} ")
    text.append(result.curve.sparkline(), style="green")
    text.append(f" {averages[-1]:.1f}")
    return text


def placement_table(placed: list[Any]) -> Table:
    """One row per worker: planned node and GPUs -> what the worker itself saw inside Ray, and whether they agree."""
    table = Table(title="Where each worker ran (plan -> reported by the worker)", title_justify="left")
    with_env = any(p.env_vars for p in placed)
    for column in ("worker", "group", "node", "GPUs", *(("env vars",) * with_env), "ok"):
        table.add_column(column, overflow="fold")
    for p in placed:
        planned_node = "any" if p.planned_node_rank is None else str(p.planned_node_rank)
        share = f" (x{p.gpu_fraction:.2g})" if p.planned_gpus and p.gpu_fraction < 1 else ""
        table.add_row(
            p.actor_name.removeprefix("rlplace:"),
            p.group or "-",
            f"{planned_node} -> {p.node_rank}",
            f"{_ids(p.planned_gpus)} -> {_ids(p.gpus)}{share}",
            *((" ".join(f"{k}={v}" for k, v in p.env_vars.items()) or "-",) * with_env),
            "yes" if p.mismatch is None else f"NO: {p.mismatch}",
        )
    return table


def _ids(gpus: tuple[int, ...]) -> str:
    return ",".join(map(str, gpus)) or "-"


def counters(result: RunResult) -> Text:
    """Offload moves per worker (when offload ran), buffer locality and time per phase."""
    lines = []
    moved = {k: v for k, v in result.offload.items() if v["offloads"] or v["reloads"]}
    if moved:
        parts = [
            f"{k} {v['offloads']}/{v['reloads']} ({v['bytes_offloaded'] / 1024:.0f} KiB out)" for k, v in moved.items()
        ]
        head = f"offload: {result.hook_calls} hook calls; arrays offloaded/reloaded per worker: "
        lines.append(head + ", ".join(parts))
    else:
        lines.append("offload hooks: not enabled in this config (nothing moved)")
    lines.append(f"buffer samples read on the train worker's own node: {result.buffer_local_fraction:.0%}")
    lines.append(communication(result))
    lines.append("time per phase: " + ", ".join(f"{k} {v:.1f} s" for k, v in result.phase_seconds.items()))
    return Text("\n".join(lines))


def failover_text(result: RunResult) -> Text:
    """What node losses did to the run: each loss and takeover, the iterations redone, the seconds lost."""
    if not result.failover:
        return Text("")
    text = Text("Node loss:\n", style="bold")
    text.append("\n".join(f"  {line}" for line in result.failover))
    if result.seconds_lost:
        text.append(f"\n  training time lost to node losses: {result.seconds_lost:.1f} s in all")
    return text


def communication(result: RunResult) -> str:
    """Which path gradients and weights took, and how many bytes each moved."""
    if result.all_reduces:
        grads = (
            f"gradients: {result.gradients} among the train workers, {result.all_reduces} all-reduces of "
            f"{_size(result.all_reduce_bytes)} per worker"
        )
    else:
        grads = f"gradients: {result.gradients or 'not averaged'}"
    sync = f"weight sync: {result.sync_transport or 'none'}"
    if result.syncs:
        sync += f", {result.syncs} syncs, {_size(result.sync_bytes)} to each eval worker"
    return f"{grads}; {sync}"


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


def summary(result: RunResult) -> Group:
    style = "bold green" if result.curve.solved else "bold yellow"
    parts = [curve_text(result), Text(outcome(result), style=style)]
    if result.failover:
        parts.append(failover_text(result))
    return Group(*parts, placement_table(result.placed), counters(result))
