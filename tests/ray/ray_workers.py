"""Worker classes the Ray-layer tests launch (importable by the workers, so defined in a module)."""

from __future__ import annotations

import json
import os
import sys
import time

import rlplace


class Probe:
    """Reports where it runs, from rlplace's placement object and from the raw process environment."""

    def __init__(self, tag: str = "") -> None:
        self.tag = tag
        self.placement = rlplace.worker_placement()  # readable already in __init__

    def where(self) -> dict:
        p = rlplace.worker_placement()
        return {
            "placement": p,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "python": sys.executable,
            "tag": self.tag,
        }

    def env(self, key: str) -> str | None:
        return os.environ.get(key)

    def echo(self, value: object) -> object:
        return value

    def pid(self) -> int:
        return os.getpid()


class Stepper:
    """A trainer in miniature: counts its steps and checkpoints the count to a file after each one, and
    reloads it in `on_replaced` when rlplace relaunches it on a spare or replacement node."""

    def __init__(self, checkpoint_dir: str) -> None:
        self.checkpoint_dir = checkpoint_dir
        self.steps = 0
        self.replaced: list[str] = []

    def _checkpoint(self) -> str:
        p = rlplace.worker_placement()
        return os.path.join(self.checkpoint_dir, f"{p.component}-{p.rank}.json")

    def step(self, seconds: float = 0.0) -> int:
        time.sleep(seconds)
        self.steps += 1
        with open(self._checkpoint(), "w") as f:
            json.dump({"steps": self.steps}, f)
        return self.steps

    def on_replaced(self, event) -> None:
        with open(self._checkpoint()) as f:
            self.steps = json.load(f)["steps"]
        self.replaced.append(f"{event.kind} {event.node_rank}")

    def state(self) -> dict:
        import ray

        return {
            "steps": self.steps,
            "replaced": self.replaced,
            "node_id": ray.get_runtime_context().get_node_id(),
            "placement": rlplace.worker_placement(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        }


class Elastic:
    """A worker of an elastic component: says where it runs and with which rendezvous, and records each
    `on_resized(event)` with the rank and world size it had then."""

    def __init__(self) -> None:
        self.resized: list[tuple] = []

    def on_resized(self, event) -> None:
        p = rlplace.worker_placement()
        self.resized.append((event.cause, event.old_size, event.new_size, p.rank, p.world_size))

    def where(self) -> dict:
        import ray

        p = rlplace.worker_placement()
        keys = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
        return {
            "node_id": ray.get_runtime_context().get_node_id(),
            "rank": p.rank,
            "world": p.world_size,
            "node": p.node_rank,
            "gpus": p.gpus,
            "name": p.actor_name,
            "mismatch": p.mismatch,
            "env": {k: os.environ.get(k) for k in keys},
            "resized": list(self.resized),
        }

    def sleep(self, seconds: float) -> int:
        time.sleep(seconds)
        return rlplace.worker_placement().rank
