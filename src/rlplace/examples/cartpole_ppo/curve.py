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

    def sparkline(self, width: int = 60) -> str:
        """The per-iteration averages as one line of block characters, scaled to 0..500 (CartPole's max)."""
        points = self.averages
        if len(points) > width:  # keep the last point; sample the rest evenly
            points = [points[round(i * (len(points) - 1) / (width - 1))] for i in range(width)]
        return "".join(_BARS[min(len(_BARS) - 1, round(p / 500 * (len(_BARS) - 1)))] for p in points)
