"""How a component's time per iteration changes with its number of GPUs: a `Curve` through measured points.

rlplace's rule (docs/guide.md, "Choosing a placement"), for points a profile file measured:
- at a measured count, the measured seconds;
- between two measured counts, linear in 1/GPUs: t(n) = a + b/n through both points (Amdahl's law between them:
  a serial part a and a parallel part b);
- beyond them, the same line through the two nearest points, never faster per GPU than perfect scaling (a >= 0)
  and never slower with more GPUs (b >= 0): a line that would break either is clamped to perfect scaling
  (t = t_k g_k / n) or to flat (t = t_k);
- one measured point: perfect scaling, t(n) = t_1 g_1 / n, the optimistic rule: give two points to say more.

RLinf's `profile_data` (one cost per component, measured collocated on every GPU) is read as RLinf's own
auto-placement tool reads it (toolkits/auto_placement/node.py at RLinf a3816b5): a Megatron component (actor,
inference) at fewer GPUs takes the linear time divided by 1 + min(0.9, max(scale / 10, 0.1)), scale = all GPUs / n,
at the counts whose data-parallel size divides the trainer's batch; rollout takes the same time while its engines
hold every request of the batch at once (instances x max_running_requests, 90% of it from 128 requests up, at least
rollout_batch_size x group_size), else the linear time; an embodied env or rollout takes the seconds measured for
its envs per instance (env_num / instances), interpolated linearly between measured sizes (RLinf fits a curve) and
impossible above the largest. Those curves hold only at the counts RLinf's tool would consider (`only_points`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Curve:
    """Seconds of one iteration of a component on n GPUs of the model its points were measured on."""

    points: tuple[tuple[int, float], ...]  # (GPUs, seconds), GPUs ascending, at least one
    #: Only the points' counts are possible (a curve derived by RLinf's rules); else rlplace's rule between/beyond.
    only_points: bool = False

    def seconds(self, n: int) -> float | None:
        """The time at `n` GPUs, or None where the curve says it cannot run (RLinf's rules)."""
        if n <= 0:
            return None
        counts = [g for g, _ in self.points]
        i = bisect.bisect_left(counts, n)
        if i < len(counts) and counts[i] == n:
            return self.points[i][1]
        if self.only_points:
            return None
        if len(self.points) == 1:
            g, t = self.points[0]
            return t * g / n
        if 0 < i < len(counts):
            return _line(self.points[i - 1], self.points[i])(n)
        near = self.points[-2:] if i == len(counts) else self.points[:2]
        end = near[1] if i == len(counts) else near[0]
        return _clamped(near[0], near[1], end)(n)

    @property
    def counts(self) -> tuple[int, ...]:
        return tuple(g for g, _ in self.points)


def _line(p: tuple[int, float], q: tuple[int, float]):
    """t = a + b/n through p and q."""
    (g1, t1), (g2, t2) = p, q
    b = (t1 - t2) / (1 / g1 - 1 / g2)
    a = t1 - b / g1
    return lambda n: a + b / n


def _clamped(p: tuple[int, float], q: tuple[int, float], end: tuple[int, float]):
    """The line through p and q, through `end` (one of them), with a >= 0 and b >= 0."""
    (g1, t1), (g2, t2) = p, q
    b = (t1 - t2) / (1 / g1 - 1 / g2)
    g, t = end
    if b < 0:
        return lambda n: t
    if t - b / g < 0:
        return lambda n: t * g / n
    return _line(p, q)


def measured(points: Mapping[int, float]) -> Curve:
    """A profile file's points."""
    return Curve(tuple(sorted(points.items())))


# --- RLinf's rules (toolkits/auto_placement/node.py, util.py) -----------------------------------------------


def megatron_valid_counts(total_gpus: int, unit: int, group_size: int, batch: int, minibatches: int) -> set[int]:
    """RLinf's `get_valid_gpu_num_list`: n = dp x unit where the trainer's iteration batch (batch x group_size /
    minibatches) divides by dp x group_size."""
    iteration = batch * group_size // minibatches
    return {dp * unit for dp in range(1, total_gpus // unit + 1) if iteration % (dp * group_size) == 0}


def megatron(cost: float, all_gpus: int, counts: Iterable[int]) -> Curve:
    """RLinf's MegatronNode: `cost` on all GPUs; on n < all of `counts`, cost x scale / (1 + clamp(scale/10, 0.1,
    0.9)), scale = all / n."""
    points = {all_gpus: cost}
    for n in counts:
        if 0 < n < all_gpus:
            scale = all_gpus / n
            points[n] = cost * scale / (1 + min(0.9, max(scale / 10, 0.1)))
    return Curve(tuple(sorted(points.items())), only_points=True)


def rollout(cost: float, all_gpus: int, unit: int, max_running_requests: int, requests: int) -> Curve:
    """RLinf's RolloutNode: flat while n // unit engines hold every request at once, else linear."""
    per_engine = math.ceil(max_running_requests * (0.9 if max_running_requests >= 128 else 1))
    points = {all_gpus: cost}
    for n in range(unit, all_gpus, unit):
        points[n] = cost if (n // unit) * per_engine >= requests else cost * all_gpus / n
    return Curve(tuple(sorted(points.items())), only_points=True)


def embodied(measured_s: Mapping[int, float], env_num: int, all_gpus: int, unit: int, aligned: bool) -> Curve:
    """RLinf's EnvNode (`aligned`: env_num must divide by the instances) and EnvRolloutNode (instances = n / unit):
    the seconds measured for env_num // instances envs per instance; none above the largest measured size."""
    largest = max(measured_s)
    points = {}
    for n in range(unit, all_gpus + 1, unit):
        instances = n // unit
        if aligned and env_num % instances:
            continue
        per = env_num // instances
        if per > largest or per <= 0:
            continue
        points[n] = _interpolated(measured_s, per)
    return Curve(tuple(sorted(points.items())), only_points=True)


def _interpolated(measured_s: Mapping[int, float], x: int) -> float:
    """Linear between measured sizes; below the smallest, in proportion to it."""
    if x in measured_s:
        return measured_s[x]
    sizes = sorted(measured_s)
    i = bisect.bisect_left(sizes, x)
    if i == 0:
        return measured_s[sizes[0]] * x / sizes[0]
    lo, hi = sizes[i - 1], sizes[i]
    return measured_s[lo] + (measured_s[hi] - measured_s[lo]) * (x - lo) / (hi - lo)
