"""How long rlplace takes to refuse each attack of issue 36, against loading a small valid config.

Usage: python bench/refusals.py [--repeat 5]

Each attack is built in a scratch folder and run in this process as a user's call would run it (`load`, with
overrides where the attack needs hydra-core; `load_inventory` or `plan` for inventories), timed to its refusal.
The baseline is `load` of a three-line valid config, timed alike; a refusal's ratio is its best time over the
baseline's. Each attack's first run is shown (what one command pays: OmegaConf and hydra-core are imported and
started by the first attack that needs them) beside the best of --repeat runs (a busy shared machine only slows
the others). The issue asks
for every refusal in under a second; what each took before the fix is in docs/decisions.md ("Untrusted input").
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import replace

from rlplace.config import load
from rlplace.errors import RlplaceError
from rlplace.inventory import Inventory, load_inventory, parse_nodes
from rlplace.output_files import write_file
from rlplace.planner import plan

OVERRIDE = ["cluster.train_worker_num=2"]
ESCAPED = r"hydra.searchpath=[pkg\://evilpkg.conf]"
SORTED = r"hydra.searchpath=sort([pkg\://evilpkg.conf])"
VALID = "cluster:\n  train_worker_num: 2\n  eval_worker_num: 2\n"


def timed(call: Callable[[], object], repeat: int) -> tuple[float, float, str]:
    """(first time, best time, the refusal, or "accepted")."""
    times, answer = [], "accepted"
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            call()
        except RlplaceError as e:
            problems = getattr(e, "problems", None)
            answer = " ".join(str(problems[0] if problems else e).split())
        times.append(time.perf_counter() - start)
    return times[0], min(times), answer


def write(folder: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def chain(line: str, levels: int, first: str, cluster: str) -> str:
    """`a0: first`, then `aI: line` with `{p}` the previous key, then a cluster reading the last."""
    body = [f"a0: {first}", *(f"a{i}: " + line.format(p=f"a{i - 1}") for i in range(1, levels + 1))]
    return "\n".join(body) + "\n" + cluster.format(last=f"a{levels}")


@contextlib.contextmanager
def attacks() -> Iterator[list[tuple[str, Callable[[], object]]]]:
    with tempfile.TemporaryDirectory() as scratch:
        d = pathlib.Path(scratch)
        site = write(d / "site", {"evilpkg/__init__.py": "", "evilpkg/conf/__init__.py": ""})
        sys.path.insert(0, str(site))
        primary = write(d / "p", {"main.yaml": "defaults:\n  - _self_\ncluster: {train_worker_num: 1}\n"}) / "main.yaml"
        fan = {
            "conf/main.yaml": "defaults:\n  - _self_\ncluster: {}\n",
            "conf/extra/fan.yaml": "defaults:\n" + "".join(f"  - a@p{i}\n" for i in range(12)),
            "conf/extra/a.yaml": "defaults:\n" + "".join(f"  - b@q{i}\n" for i in range(12)) + "x: 1\n",
            "conf/extra/b.yaml": "defaults:\n" + "".join(f"  - c@r{i}\n" for i in range(12)) + "y: 1\n",
            "conf/extra/c.yaml": "z: 1\n",
        }
        fanned = write(d / "fan", fan) / "conf/main.yaml"
        reads = "cluster:\n  train_worker_num: ${{{last}}}\n"
        doubling = chain("${{{p}}}${{{p}}}", 20, "xxxxxxxxxxxxxxxx", reads)
        selecting = chain("${{oc.select:{p},${{{p}}}}}", 23, "1", reads)
        lists = "l0: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
            f"l{i}: [" + ", ".join([f"'${{l{i - 1}}}'"] * 10) + "]\n" for i in range(1, 9)
        )
        under_hydra = "defaults:\n  - _self_\n" + doubling.split("cluster:")[0] + "hydra: {job: {name: '${a20}'}}\n"
        big = "big: &big {" + ", ".join(f"k{i}: 1" for i in range(2000)) + "}\n"
        texts = {
            "doubling.yaml": doubling,
            "select.yaml": selecting,
            "lists.yaml": lists + "cluster:\n  train_worker_num: ${oc.select:l8,1}\n",
            "hydra/main.yaml": under_hydra + "cluster: {train_worker_num: 1}\n",
            "merge.yaml": big + "".join(f"m{i}: {{<<: *big}}\n" for i in range(4000)) + "cluster: {}\n",
            "inventory.yaml": "nodes:\n  - {count: 16384, gpus: 1024}\n",
        }
        write(d, texts)
        ips = ",".join(f"10.{i // 62500}.{i // 250 % 250}.{i % 250 + 1}" for i in range(50_000))
        robot_nodes = Inventory(tuple(replace(n, env={"ROBOT_IP": ips}) for n in parse_nodes("16384x0").nodes))
        robots = load(
            "cluster:\n  num_nodes: 16384\n  node_groups:\n    - label: franka\n      node_ranks: 0-16383\n"
            "      hardware: {type: Franka, configs: []}\n  component_placement:\n"
            "    env: {node_group: franka, placement: all}\n"
        )
        holds_itself: dict = {"train_worker_num": 1}
        holds_itself["again"] = holds_itself
        deep: dict = {}
        node = deep
        for _ in range(500):
            node["a"] = {}
            node = node["a"]
        shared: list = [1] * 10
        for _ in range(8):
            shared = [shared] * 10
        victim = d / "victim"
        victim.write_text("precious\n")
        (d / "plan.svg").symlink_to(victim)
        try:
            yield [
                ("2  pkg\\:// search path override", lambda: load(primary, overrides=[ESCAPED])),
                ("2  sort([pkg\\://...]) override", lambda: load(primary, overrides=[SORTED])),
                ("2  +extra='fan' (1,728 configs)", lambda: load(fanned, overrides=["+extra='fan'", *OVERRIDE])),
                ("2  +extra=[fan]", lambda: load(fanned, overrides=["+extra=[fan]", *OVERRIDE])),
                ("3  ${a}${a} x 20 lines", lambda: load(d / "doubling.yaml")),
                ("3  ${oc.select:b,${b}} x 23 lines", lambda: load(d / "select.yaml")),
                ("3  lists of 10 references x 8", lambda: load(d / "lists.yaml")),
                (
                    "3  the doubling in hydra.job.name + override",
                    lambda: load(d / "hydra/main.yaml", overrides=OVERRIDE),
                ),
                ("3  4,000 x <<: *big of 2,000 keys", lambda: load(d / "merge.yaml")),
                ("3  {count: 16384, gpus: 1024}", lambda: load_inventory(str(d / "inventory.yaml"))),
                ("3  --nodes 8192x16,1x1", lambda: parse_nodes("8192x16,1x1")),
                ("3  16,384 nodes x 50,000 ROBOT_IP", lambda: plan(robots, robot_nodes)),
                ("4  a dict that holds itself", lambda: load({"cluster": holds_itself})),
                ("4  a 500-deep dict", lambda: load({"cluster": {"train_worker_num": 1, "x": deep}})),
                ("4  a list held 10^8 times", lambda: load({"cluster": {"train_worker_num": 1, "x": shared}})),
                ("4  a link at an output path", lambda: write_file(d / "plan.svg", "<svg/>")),
            ]
        finally:
            sys.path.remove(str(site))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    warnings.simplefilter("ignore")
    os.environ.pop("RAY_AUTH_TOKEN", None)
    _, baseline, _ = timed(lambda: load(VALID), args.repeat)
    print(f"baseline: load of a valid 3-line config {baseline * 1e3:.2f} ms (best of {args.repeat})\n")
    print(f"{'item attack':<48} {'first s':>8} {'best s':>7} {'x base':>7}  refusal")
    with attacks() as cases:
        for label, call in cases:
            first, seconds, answer = timed(call, args.repeat)
            print(f"{label:<48} {first:8.3f} {seconds:7.3f} {seconds / baseline:7.0f}  {answer[:100]}")


if __name__ == "__main__":
    main()
