"""Topology-aware placement against the same plan made topology-blind, on two NVL72-era inventories.

Usage: python bench/topology.py [--repeat 5]

Inventories (the compact --nodes form):
  gb200  1026x4:GB200/rack=18/nvlink_domain=rack  57 racks of 18 nodes of 4 GB200, a domain per rack (4,104 GPUs)
  h100   512x8:H100/rack=16/zone=256              32 racks of 16 nodes of 8 H100 over 2 zones (a node: its own domain)

Configs of the repository, scaled to fill the inventory:
  disaggregated  tests/data/spec_examples/auto-disaggregate.yaml: train on half the GPUs, eval and env a quarter each
  colocated      tests/data/spec_examples/auto-colocate-device.yaml: train, eval and env on every GPU
  rlinf-auto     tests/data/frameworks/rlinf/config/grpo_dynamic.yaml (RLinf's AUTO mode: rlplace places the actor),
                 num_nodes and ranges scaled (actor, rollout, inference: 1/4, 5/8, 1/8 of the GPUs); as written
                 (tensor parallel 2), and with groups that do not tile the inventory's NVLink domains (gb200: tensor
                 8 x context 2 = 16 ranks in 72-GPU domains; h100: tensor 2 x context 3 = 6 ranks in 8-GPU nodes)
  rlinf-ranges   tests/data/frameworks/rlinf/config/grpo_collocated.yaml (written ranges, kept; tensor 4 / 16 / 6)

For each: model-parallel groups split across NVLink domains (spanning more domains than their size needs: in
rlinf-auto those of the actor, which rlplace places; in rlinf-ranges every written group, kept as written), bytes
per weight sync crossing racks and zones (this plan, the topology-blind plan, the lower bound), bytes per step
crossing them, and the planning time with topology on and blind (best CPU time of --repeat, alternately). The
topology-blind plan is the same config planned as before topology (every `cluster.topology` level null, RLinf's
AUTO actor on every GPU as RLinf places it); its bytes and groups are counted on the real topology. Then the
issue's done-when bars for the disaggregated config and the model-parallel groups.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import pathlib
import time

from rlplace.config import load
from rlplace.inventory import Inventory, parse_nodes
from rlplace.model import JobSpec, ModelParallel, Placement, Segment
from rlplace.plan import Plan, PlanTopology
from rlplace.planner import estimate, plan
from rlplace.planner.estimate import Estimate, format_bytes
from rlplace.planner.parallel import domain_gpus
from rlplace.planner.topology import domains, read_topology

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
INVENTORIES = {
    "gb200": "1026x4:GB200/rack=18/nvlink_domain=rack",
    "h100": "512x8:H100/rack=16/zone=256",
}
#: Model-parallel groups that do not tile each inventory's domains: (tensor, context) parallel sizes.
UNTILED = {"gb200": (8, 2), "h100": (2, 3)}


def blind(spec: JobSpec) -> JobSpec:
    """`spec` planned as before topology: every level null, and RLinf's AUTO actor on every GPU (as RLinf does)."""
    comps = tuple(dataclasses.replace(c, chosen=False) for c in spec.components)
    return dataclasses.replace(spec, topology=(), components=comps)


def pools_config(path: pathlib.Path, counts: dict[str, int]) -> JobSpec:
    spec = load(path)
    comps = {c.name: c for c in spec.components}
    out = [dataclasses.replace(comps[name], num_workers=n) for name, n in counts.items() if name in comps]
    return dataclasses.replace(spec, components=tuple(out) + tuple(c for c in spec.components if c.name not in counts))


def with_groups(spec: JobSpec, tp: int, cp: int) -> JobSpec:
    """`spec` with actor and inference in groups of tp x cp consecutive ranks (as RLinf's sizes would give)."""
    kind = "tensor-parallel" if cp == 1 else "tensor/context-parallel"
    mp = ModelParallel(((kind, tp * cp, f"actor.model.tensor_model_parallel_size: {tp}, context_parallel_size: {cp}"),))
    return dataclasses.replace(
        spec,
        components=tuple(dataclasses.replace(c, model_parallel=mp) if c.model_parallel else c for c in spec.components),
    )


def rlinf_auto(inventory: Inventory) -> JobSpec:
    """grpo_dynamic.yaml on the whole inventory: its ranges scaled (actor 1/4, rollout 5/8, inference 1/8)."""
    spec = load(DATA / "frameworks" / "rlinf" / "config" / "grpo_dynamic.yaml")
    gpus = inventory.total_gpus
    a, r = gpus // 32 * 8, gpus // 32 * 8 + gpus * 5 // 64 * 8  # multiples of 8: whole rollout processes
    ranges = {"actor": range(0, a), "rollout": range(a, r), "inference": range(r, gpus)}
    comps = []
    for c in spec.components:
        if c.name in ranges and c.placement is not None and not c.chosen:
            c = dataclasses.replace(c, placement=Placement(c.placement.groups, (Segment(tuple(ranges[c.name])),)))
        comps.append(c)
    scaled = dataclasses.replace(spec, num_nodes=len(inventory), components=tuple(comps))
    # AUTO widened the actor at load time; with the new ranges rollout starts on the actor's GPUs again
    rollout = next(c for c in scaled.components if c.name == "rollout")
    wide = Placement(rollout.placement.groups, (Segment(tuple(range(r))),))
    return dataclasses.replace(
        scaled, components=tuple(dataclasses.replace(c, placement=wide) if c.name == "rollout" else c for c in comps)
    )


def rlinf_ranges(inventory: Inventory) -> JobSpec:
    spec = load(DATA / "frameworks" / "rlinf" / "config" / "grpo_collocated.yaml")
    return dataclasses.replace(spec, num_nodes=len(inventory))


def configs(name: str, inventory: Inventory) -> dict[str, JobSpec]:
    gpus = inventory.total_gpus
    tp, cp = UNTILED[name]
    return {
        "disaggregated": pools_config(
            DATA / "spec_examples" / "auto-disaggregate.yaml", {"train": gpus // 2, "eval": gpus // 4, "env": gpus // 4}
        ),
        "colocated": pools_config(
            DATA / "spec_examples" / "auto-colocate-device.yaml", {"train": gpus, "eval": gpus, "env": gpus}
        ),
        "rlinf-auto": rlinf_auto(inventory),
        f"rlinf-auto tp{tp}xcp{cp}": with_groups(rlinf_auto(inventory), tp, cp),
        "rlinf-ranges": rlinf_ranges(inventory),
        f"rlinf-ranges tp{tp}xcp{cp}": with_groups(rlinf_ranges(inventory), tp, cp),
    }


def split_groups(spec: JobSpec, p: Plan, topology: PlanTopology, inventory: Inventory) -> tuple[int, int]:
    """(groups spanning more NVLink domains than their size needs, groups) over the model-parallel components
    rlplace places (RLinf's AUTO actor), or, in a config without one, over all (their ranks are written)."""
    largest = max(domain_gpus(topology, inventory).values())
    split = total = 0
    chosen = any(c.chosen for c in spec.components if c.model_parallel is not None)
    for c in spec.components:
        if c.model_parallel is None or (chosen and not c.chosen):
            continue
        workers = p.by_component(c.name)
        of = domains(topology, [w.node_rank for w in workers])
        for _, size, _ in c.model_parallel.groups:
            need = math.ceil(size / largest)
            for start in range(0, len(of) - len(of) % size, size):
                total += 1
                split += len(set(of[start : start + size])) > need
    return split, total


def placed(spec: JobSpec, p: Plan) -> int:
    """Ranks of the model-parallel components rlplace places (the price of whole groups: GPUs it leaves idle)."""
    return sum(len(p.by_component(c.name)) for c in spec.components if c.model_parallel is not None and c.chosen)


def cpu_best(fn, repeat: int) -> float:
    out = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        out = min(out, time.process_time() - t0)
    return out


def measure(name: str, nodes: str, repeat: int) -> list[dict]:
    inventory = parse_nodes(nodes)
    topology = read_topology(load("cluster: {}").topology, inventory)
    rows = []
    for config, spec in configs(name, inventory).items():
        on, off = plan(spec, inventory), plan(blind(spec), inventory)
        off_counted = dataclasses.replace(off, topology=topology)
        est_on, est_off = estimate(on, inventory=inventory), estimate(off_counted, inventory=inventory)
        t_on = t_off = float("inf")
        for _ in range(repeat):
            t_on = min(t_on, cpu_best(lambda spec=spec: plan(spec, inventory), 1))
            t_off = min(t_off, cpu_best(lambda spec=spec: plan(blind(spec), inventory), 1))
        rows.append(
            {
                "inventory": name,
                "config": config,
                "split": split_groups(spec, on, topology, inventory),
                "split_blind": split_groups(spec, off_counted, topology, inventory),
                "on": est_on,
                "off": est_off,
                "ranks": placed(spec, on),
                "ranks_blind": placed(spec, off),
                "ms": t_on * 1e3,
                "ms_blind": t_off * 1e3,
            }
        )
    return rows


def _level(est: Estimate, level: str, what: str) -> str:
    values = {"sync": est.crossing, "bound": est.crossing_lower_bound, "step": est.crossing_per_step}[what]
    if values is None or level not in values:
        return "-"
    return format_bytes(values[level])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(
        "| inventory | config | groups split (blind) | ranks rlplace places (blind) | "
        "weight sync across racks: plan / blind / "
        "lower bound | across zones: plan / blind / lower bound | per step across racks: plan / blind | "
        "plan ms topology / blind |"
    )
    print("|---|---|---:|---:|---|---|---|---:|")
    results = []
    for name, nodes in INVENTORIES.items():
        for r in measure(name, nodes, args.repeat):
            results.append(r)
            on, off = r["on"], r["off"]
            (s, n), (sb, _) = r["split"], r["split_blind"]
            print(
                f"| {name} | {r['config']} | {s} of {n} ({sb}) | {r['ranks'] or '-'} ({r['ranks_blind'] or '-'}) | "
                f"{_level(on, 'rack', 'sync')} / {_level(off, 'rack', 'sync')} / {_level(on, 'rack', 'bound')} | "
                f"{_level(on, 'zone', 'sync')} / {_level(off, 'zone', 'sync')} / {_level(on, 'zone', 'bound')} | "
                f"{_level(on, 'rack', 'step')} / {_level(off, 'rack', 'step')} | "
                f"{r['ms']:.1f} / {r['ms_blind']:.1f} ({r['ms'] / r['ms_blind']:.2f}x) |",
                flush=True,
            )
    print()
    for name in INVENTORIES:
        mine = [r for r in results if r["inventory"] == name]
        chosen = [r for r in mine if not r["config"].startswith("rlinf-ranges")]
        split = sum(r["split"][0] for r in chosen)
        blind_split = sum(r["split_blind"][0] for r in chosen)
        print(f"{name}: groups split where rlplace chooses: {split} (topology-blind: {blind_split})")
        d = next(r for r in mine if r["config"] == "disaggregated")
        on, off, bound = d["on"].crossing["rack"], d["off"].crossing["rack"], d["on"].crossing_lower_bound["rack"]
        within = on <= 1.1 * bound
        print(
            f"{name}: disaggregated weight sync across racks {format_bytes(on)}, lower bound {format_bytes(bound)} "
            f"({'within' if within else 'NOT within'} 1.1x), topology-blind {format_bytes(off)} "
            f"({'at most' if 2 * on <= off else 'MORE than'} half)"
        )


if __name__ == "__main__":
    main()
