"""The words of the time model's views: a plan's predicted iteration phase by phase (`rlplace plan --time`), and
`rlplace tune`'s table of candidates with why each loses. Pure text and rich tables; the numbers are
`planner.timing.Prediction`'s."""

from __future__ import annotations

from rich.table import Table

from rlplace.planner.estimate import format_bytes
from rlplace.planner.phase_order import Block, block_seconds
from rlplace.planner.timing import Prediction
from rlplace.planner.tune import Candidate, TuneResult
from rlplace.planner.workload import Workload


def seconds(t: float | None) -> str:
    return "-" if t is None else f"{t:.2f} s"


def structure(blocks: tuple[Block, ...], gpus: dict[str, int]) -> str:
    """`rollout (72) | inference (16) | actor (32)`: side by side with `|`, taking turns with `+`, a block over
    the blocks that split its GPUs with `over (...)`."""

    def one(b: Block) -> str:
        members = " + ".join(b.members) + f" ({gpus.get(b.members[0], '?')})"
        if not b.children:
            return members
        return f"{members} over ({' | '.join(one(c) for c in b.children)})"

    return " | ".join(one(b) for b in blocks)


def prediction_lines(p: Prediction, workload: Workload) -> list[str]:
    """What `rlplace plan --time` prints under the plan's table."""
    gpus = {s.name: s.gpus for s in p.stages}
    out = []
    if p.seconds is None:
        out.append("predicted iteration: cannot be told: " + "; ".join(p.problems))
    else:
        out.append(f"predicted iteration: {seconds(p.seconds)} ({p.mode}: {structure(p.blocks, gpus)})")
        width = max(len(s.name) for s in p.stages)
        for s in p.stages:
            swap = f" + offload/reload {seconds(s.swap)}" if s.swap else ""
            out.append(f"  {s.name:<{width}}  {s.gpus:>5} x {s.gpu_model:<8} {seconds(s.compute):>10}{swap}")
        out.append(f"  compute {seconds(p.compute)}: {_how(p)}")
        est = p.estimate
        if est is not None and est.roles and "weights" in est.roles:
            source, target = est.roles["weights"]
            pulls = sum(1 for f in est.flows if f.kind == "weights")
            out.append(
                f"  weight sync ({source} -> {target}) {seconds(p.weight_sync)}: {pulls} node(s) pull "
                f"{format_bytes(est.model_bytes)} across nodes"
            )
        if p.per_step >= 0.005:  # shown to the hundredth
            out.append(f"  experience, interaction and sampling across nodes {seconds(p.per_step)}")
    out.append("  costs: " + "; ".join(workload.sources))
    if p.assumed:
        out.append("  assumed: " + "; ".join(p.assumed))
    return out


def _how(p: Prediction) -> str:
    """How the blocks' times make the compute time."""
    if p.mode == "collocated":
        return "the components take turns on the same GPUs (their times add)"
    own = {s.name: s.seconds for s in p.stages}
    times = [(block_seconds(b, own, p.batches, p.streamed), b) for b in p.blocks]
    if not p.streamed:
        return "sequential: each waits for the one before (cluster.disaggregated_stages: sequential)"
    if len(times) == 1:
        return f"{' + '.join(times[0][1].members)} take turns with the blocks inside, which stream"
    slowest, block = max(times, key=lambda t: t[0])
    rest = p.compute - slowest
    return (
        f"streamed over {p.batches} group batches: the slowest side, {' + '.join(block.stages)} ({seconds(slowest)}), "
        f"plus the others' first batch ({seconds(rest)})"
    )


def _pace(p: Prediction) -> str:
    """What sets a prediction's compute time, in a few words."""
    if p.mode == "collocated":
        return "taking turns: " + " + ".join(s.name for s in p.stages)
    if not p.streamed:
        return "in sequence"
    own = {s.name: s.seconds for s in p.stages}
    slowest = max(p.blocks, key=lambda b: block_seconds(b, own, p.batches, p.streamed))
    return f"paced by {' + '.join(slowest.stages)}"


def candidate_rows(result: TuneResult, limit: int = 12) -> list[tuple[str, ...]]:
    """Rank, seconds, mode, GPUs per component, and why it loses (to the best)."""
    best = result.best
    rows: list[tuple[str, ...]] = []
    shown = [c for c in result.candidates if c.seconds is not None][:limit]
    shown += [c for c in result.candidates if c.seconds is None][:3]
    for i, c in enumerate(shown):
        rank = "best" if best is not None and c is best else str(i + 1) if c.seconds is not None else "-"
        rows.append((rank, seconds(c.seconds), c.mode, _gpus(c), _why(c, best)))
    w = result.written
    rows.append(("as written", seconds(w.seconds), w.mode, _gpus(w), _why(w, best)))
    return rows


def _gpus(c: Candidate) -> str:
    return ", ".join(f"{name} {n}" for name, n in c.gpus.items())


def _why(c: Candidate, best: Candidate | None) -> str:
    """Why `c` is slower than `best` (or cannot run)."""
    if c.seconds is None:
        return c.problem or "infeasible"
    if best is None or c is best or best.seconds is None:
        return ""
    gap = c.seconds - best.seconds
    if gap <= 1e-9:
        return "as fast"
    p, q = c.prediction, best.prediction
    parts = [f"+{gap:.2f} s ({gap / best.seconds:.1%})"]
    if p is not None and q is not None:
        if p.compute - q.compute > 0.005:
            parts.append(f"compute {seconds(p.compute)}, {_pace(p)}")
        if p.weight_sync - q.weight_sync > 0.005:
            parts.append(f"weight sync {seconds(p.weight_sync)}")
        if p.per_step - q.per_step > 0.005:
            parts.append(f"per-step transfers {seconds(p.per_step)}")
    return "; ".join(parts)


def candidate_table(result: TuneResult) -> Table:
    t = Table(title=f"placements by predicted seconds per iteration ({result.line_gpus} GPUs tuned)")
    for col in ("rank", "seconds", "mode", "GPUs", "why it loses"):
        t.add_column(col, overflow="fold")
    for row in candidate_rows(result):
        t.add_row(*row)
    return t
