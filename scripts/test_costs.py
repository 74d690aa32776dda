#!/usr/bin/env python3
"""What each test costs: its wall seconds and the CPU seconds of the test process's whole tree.

On the 2-core machine the suite is CPU-bound, and most of a Ray test's CPU is spent outside the test process: the
simulated cluster's raylets, GCS and agents, the workers they start, the CLI subprocesses. So the pytest process
moves itself into a cgroup of its own when pytest starts (`cpuacct` of cgroup v1, or cgroup v2's `cpu.stat`), which
every process it starts inherits, and each test's cost is the cgroup's CPU time between its start and its end
(setup and teardown included: the session cluster's start lands on the first test that uses it). It needs write
access to the cgroup tree (root, on the project's machine) and says so otherwise.

    PYTHONPATH=scripts .venv/bin/python -m pytest -p test_costs --costs-out ray.jsonl -m "ray and not long"
    python scripts/test_costs.py ray.jsonl [other.jsonl ...] [--top 30]

The first line prints the half's wall and CPU seconds; then the files and the tests costing the most CPU. Run it
for each half of `make test` side by side (two cgroups, named by pid) to see what each costs with the other beside.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import pathlib
import sys
import time
from collections.abc import Iterator
from typing import Any, TextIO

import pytest

V1 = pathlib.Path("/sys/fs/cgroup/cpuacct")
V2 = pathlib.Path("/sys/fs/cgroup")


def _cgroup(name: str) -> pathlib.Path:
    """A new cgroup holding this process (and so, later, every process it starts)."""
    root = V1 if (V1 / "cpuacct.usage").exists() else V2
    group = root / name
    try:
        group.mkdir(exist_ok=True)
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError as e:
        raise SystemExit(f"test_costs: cannot make a cgroup at {group} ({e}): run as a user who can (root)") from e
    return group


def _cpu_seconds(group: pathlib.Path) -> float:
    if (group / "cpuacct.usage").exists():
        return int((group / "cpuacct.usage").read_text()) / 1e9
    usage = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
    return int(usage["usage_usec"]) / 1e6


class _Recorder:
    """The pytest plugin's state: the cgroup and the file the rows go to (one JSON object a line)."""

    def __init__(self, group: pathlib.Path, out: TextIO) -> None:
        self.group, self.out = group, out
        self.write({"start": time.time(), "cpu": _cpu_seconds(group)})

    def write(self, row: dict[str, Any]) -> None:
        self.out.write(json.dumps(row) + "\n")
        self.out.flush()


_recorder: _Recorder | None = None


def pytest_addoption(parser: Any) -> None:
    parser.addoption("--costs-out", metavar="FILE", help="write each test's wall and process-tree CPU seconds here")


def pytest_configure(config: Any) -> None:
    global _recorder
    out = config.getoption("--costs-out")
    if out and os.environ.get("PYTEST_XDIST_WORKER"):  # each pytest-xdist worker writes its own file
        out = f"{out}.{os.environ['PYTEST_XDIST_WORKER']}"
    if out:
        _recorder = _Recorder(_cgroup(f"rlplace-test-costs-{os.getpid()}"), open(out, "w"))  # noqa: SIM115


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Iterator[None]:
    if _recorder is None:
        yield
        return
    t0, c0 = time.time(), _cpu_seconds(_recorder.group)
    yield
    wall, cpu = time.time() - t0, _cpu_seconds(_recorder.group) - c0
    _recorder.write({"id": item.nodeid, "t0": t0, "wall": wall, "cpu": cpu})


def pytest_unconfigure(config: Any) -> None:
    if _recorder is not None:
        _recorder.write({"end": time.time(), "cpu": _cpu_seconds(_recorder.group)})
        _recorder.out.close()
        (_recorder.group.parent / "cgroup.procs").write_text(str(os.getpid()))  # out again, so that it can go
        with contextlib.suppress(OSError):  # a process the tests started still runs in it: the group stays
            _recorder.group.rmdir()


def report(path: str, top: int) -> None:
    rows = [json.loads(line) for line in pathlib.Path(path).read_text().splitlines()]
    first, tests = rows[0], [r for r in rows if "id" in r]
    last = rows[-1] if "end" in rows[-1] else None
    span = (
        f"wall {last['end'] - first['start']:.0f} s, CPU {last['cpu'] - first['cpu']:.0f} s" if last else "unfinished"
    )
    print(f"{path}: {len(tests)} tests, {span} (the tests alone: CPU {sum(t['cpu'] for t in tests):.0f} s)")
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for t in tests:
        counts = files[t["id"].split("::")[0]]
        counts[0] += 1
        counts[1] += t["wall"]
        counts[2] += t["cpu"]
    print("  CPU s  wall s  tests  file")
    for name, (n, wall, cpu) in sorted(files.items(), key=lambda kv: -kv[1][2])[:top]:
        print(f"  {cpu:5.1f}  {wall:6.1f}  {n:5d}  {name}")
    print("  CPU s  wall s  test")
    for t in sorted(tests, key=lambda t: -t["cpu"])[:top]:
        print(f"  {t['cpu']:5.1f}  {t['wall']:6.1f}  {t['id']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="what --costs-out wrote")
    parser.add_argument("--top", type=int, default=25, help="how many files and tests to list (default: %(default)s)")
    args = parser.parse_args(argv)
    for path in args.files:
        report(path, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
