"""The reward curve: finished-episode returns, the 'solved' test, and a text rendering of the curve.

Solved means the classic CartPole criterion: the average return of the last 100 finished episodes is
at least 195. The window is measured on the training (stochastic) policy, so it is conservative.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SOLVED_RETURN = 195.0
SOLVED_WINDOW = 100
_BARS = " ▁▂▃▄▅▆▇█"


@dataclass
class RewardCurve:
    """Episode returns in finishing order, and the windowed average after each iteration."""

    returns: list[float] = field(default_factory=list)
    averages: list[float] = field(default_factory=list)  # one point per iteration

    def add_iteration(self, finished: list[float]) -> float:
        """Record one iteration's finished episodes; returns the current windowed average."""
        self.returns.extend(finished)
        self.averages.append(self.average)
        return self.average

    @property
    def average(self) -> float:
        window = self.returns[-SOLVED_WINDOW:]
        return sum(window) / len(window) if window else 0.0

    @property
    def solved(self) -> bool:
        return len(self.returns) >= SOLVED_WINDOW and self.average >= SOLVED_RETURN

    @property
    def scale(self) -> float:
        """The top of the sparkline: the target, or the best average if it went higher."""
        return max([SOLVED_RETURN, *self.averages])

    def sparkline(self, width: int = 60) -> str:
        """The per-iteration averages as one line of block characters, 0..`scale` (a full block is the top)."""
        points = self.averages
        if len(points) > width:  # keep the first and last points; sample the rest evenly
            points = [points[round(i * (len(points) - 1) / (width - 1))] for i in range(width)]
        top = len(_BARS) - 1
        return "".join(_BARS[round(p / self.scale * top)] for p in points)
