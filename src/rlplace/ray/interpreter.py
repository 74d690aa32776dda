"""Check, before any worker starts, that each planned Python interpreter exists on its node.

A `runtime_env.py_executable` that does not exist makes Ray retry the worker start forever without
telling the driver (only the raylet log says "No such file or directory"). A zero-CPU task pinned to
the node looks at the path first, so the user gets an error naming the node and the path instead.
"""

from __future__ import annotations

import os
import shlex
import shutil

from rlplace.errors import PlacementError
from rlplace.inventory import Node
from rlplace.ray.port import Cluster


def problem_with(command: str) -> str | None:
    """Why `command` (a path, or a command line whose first word is the interpreter) cannot run here."""
    words = shlex.split(command)
    if not words:
        return "is empty"
    program = words[0]
    if os.sep in program:
        if not os.path.exists(program):
            return "does not exist"
        if not os.access(program, os.X_OK):
            return "is not executable"
        return None
    return None if shutil.which(program) else "is not on PATH"


def check_interpreters(cluster: Cluster, targets: list[tuple[Node, str]], timeout_s: float) -> None:
    """Raise PlacementError naming every (node, interpreter) pair that cannot start a worker (`problem_with`
    run as a task on each node)."""
    refs = [cluster.run_task(problem_with, python, node_id=str(node.node_id)) for node, python in targets]
    ready, _ = cluster.wait(refs, timeout_s)
    problems = []
    for (node, python), ref in zip(targets, refs, strict=True):
        if ref not in ready:
            problems.append(f"node {node.rank}: could not check {python!r} within {timeout_s:g} s")
            cluster.cancel(ref)
            continue
        reason = cluster.get(ref)
        if reason:
            problems.append(f"node {node.rank} ({node.address}): python interpreter {python!r} {reason}")
    if problems:
        raise PlacementError(
            "workers not launched; fix python_interpreter_path in the node group's env_configs:\n  "
            + "\n  ".join(problems)
        )
