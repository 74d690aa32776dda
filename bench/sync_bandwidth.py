#!/usr/bin/env python3
"""Weight-sync bandwidth: object store against the collective broadcast, 1 source to 1, 2 and 4 targets.

CPU (default): a simulated cluster of 5 nodes (source on node 0, target i on node i), Gloo. For each
weight size (float32 tensors of at most 16 MB each, like a model's layers) and target count it times
`rlplace.runtime.sync_weights` with transport="object_store" and transport="collective" (groups built
by an untimed first sync), and, as the yardstick, a plain `torch.distributed.broadcast` of one flat
tensor of the same size over a default group of the same actors. Each figure is the median of
`--repeats` rounds (the three methods interleaved), timed on the driver until every target has the
weights; GB/s = weight bytes (one copy) / that time.

GPU (`--gpu`, needs 1 + max(targets) GPUs on the machine): the same on one real node, every actor owning
one GPU, tensors on the GPU, NCCL; the yardstick is the plain NCCL broadcast (goal: collective sync >= 90%).

Memory: each size needs about (1 + targets) x size for the tensors, as much again in the object stores,
plus a bucket of staging per process; a size that does not fit in the memory available is skipped, and
the reason printed.

Usage: .venv/bin/python bench/sync_bandwidth.py [--sizes 10,100,1000] [--targets 1,2,4] [--repeats 3] [--gpu]
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import sys
import time
from typing import Any

MB = 10**6
TENSOR_MB = 16


class Holder:
    """Source or target: float32 tensors adding up to `nbytes` (zeros on targets)."""

    def __init__(self, nbytes: int, source: bool, gpu: bool) -> None:
        import torch

        device = "cuda" if gpu else "cpu"
        sizes = [TENSOR_MB * MB // 4] * (nbytes // (TENSOR_MB * MB))
        if nbytes % (TENSOR_MB * MB):
            sizes.append(nbytes % (TENSOR_MB * MB) // 4)
        make = torch.randn if source else torch.zeros
        self.weights = [make(n, device=device) for n in sizes]

    def weight_tensors(self) -> list[Any]:
        return self.weights

    def get_weights(self) -> list[Any]:
        return [w.cpu().numpy() for w in self.weights]

    def set_weights(self, arrays: list[Any]) -> None:
        import torch

        for w, a in zip(self.weights, arrays, strict=True):
            w.copy_(torch.from_numpy(a))

    def checksum(self) -> float:
        return float(sum(w.double().sum() for w in self.weights))

    def free_port(self) -> tuple[str, int]:
        import ray

        with socket.socket() as s:
            s.bind(("", 0))
            return ray.util.get_node_ip_address(), s.getsockname()[1]

    def yard_init(self, address: str, port: int, rank: int, size: int, backend: str) -> None:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
        dist.init_process_group(backend, init_method=f"tcp://{address}:{port}", rank=rank, world_size=size)

    def yard_broadcast(self, nbytes: int) -> None:
        """The yardstick: one flat tensor, one torch.distributed.broadcast from rank 0."""
        import torch
        import torch.distributed as dist

        if getattr(self, "flat", None) is None or self.flat.numel() != nbytes // 4:
            self.flat = torch.empty(nbytes // 4, device="cuda" if self.weights[0].is_cuda else "cpu")
        dist.broadcast(self.flat, 0)
        if self.flat.is_cuda:
            torch.cuda.synchronize()

    def yard_done(self) -> None:
        import torch.distributed as dist

        self.flat = None
        if dist.is_initialized():
            dist.destroy_process_group()


def start_cluster(nodes: int, store_bytes: int, gpu: bool):
    import ray
    from ray.cluster_utils import Cluster

    if gpu:  # one real node: the actors share it, one GPU each
        ray.init(num_cpus=2 * nodes, log_to_driver=False)
        return None
    args = dict(num_cpus=2, object_store_memory=store_bytes)
    cluster = Cluster(
        initialize_head=True, head_node_args=dict(**args, resources={"bench_node_0": 1}, include_dashboard=False)
    )
    for i in range(1, nodes):
        cluster.add_node(**args, resources={f"bench_node_{i}": 1})
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    return cluster


def group(name: str, actors: list[Any]):
    from rlplace.plan import Worker
    from rlplace.ray.group import WorkerGroup

    workers = [Worker(name, r, len(actors), None, (), 0.0, 1.0, None) for r in range(len(actors))]
    return WorkerGroup(name, workers, actors)


def launch(nbytes: int, targets: int, gpu: bool) -> tuple[Any, list[Any]]:
    import ray

    cls = ray.remote(Holder)

    def on(i: int) -> dict:
        return {"num_gpus": 1, "num_cpus": 1} if gpu else {"num_cpus": 1, "resources": {f"bench_node_{i}": 0.01}}

    source = cls.options(**on(0)).remote(nbytes, True, gpu)
    sinks = [cls.options(**on(i + 1)).remote(nbytes, False, gpu) for i in range(targets)]
    ray.get([a.checksum.remote() for a in (source, *sinks)])
    return source, sinks


def measure(source: Any, sinks: list[Any], nbytes: int, repeats: int, bucket_mb: float, backend: str) -> dict:
    """Median seconds of each method from `source` to `sinks`. Rounds interleave the three methods (rotating
    who goes first), so that load from elsewhere on the machine hits them alike; one warm-up each first
    (the collective builds its groups in it)."""
    import ray

    from rlplace.runtime import sync_weights

    src, dst = group("source", [source]), group(f"targets{len(sinks)}", sinks)
    members = [source, *sinks]
    address, port = ray.get(source.free_port.remote())
    ray.get([a.yard_init.remote(address, port, r, len(members), backend) for r, a in enumerate(members)])

    def sync(transport: str) -> float:
        return sync_weights(src, [dst], transport=transport, bucket_mb=bucket_mb).seconds

    def yardstick() -> float:
        t0 = time.perf_counter()
        ray.get([a.yard_broadcast.remote(nbytes) for a in members])
        return time.perf_counter() - t0

    methods = {
        "object_store": lambda: sync("object_store"),
        "collective": lambda: sync("collective"),
        "yardstick": yardstick,
    }
    for run in methods.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in methods}
    names = list(methods)
    for r in range(repeats):
        for name in names[r % 3 :] + names[: r % 3]:
            times[name].append(methods[name]())
    ray.get([a.yard_done.remote() for a in members])
    return {name: statistics.median(t) for name, t in times.items()}


def available_bytes() -> int:
    with open("/proc/meminfo") as f:
        info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f}
    return info["MemAvailable"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000", help="weight sizes in MB (10**6 bytes)")
    parser.add_argument("--targets", default="1,2,4", help="target counts")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--bucket-mb", type=float, default=256.0)
    parser.add_argument("--gpu", action="store_true", help="NCCL on this machine's GPUs instead of Gloo on CPU")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    target_counts = sorted(int(t) for t in args.targets.split(","))

    import ray
    import torch

    backend = "nccl" if args.gpu else "gloo"
    if args.gpu and torch.cuda.device_count() < 1 + target_counts[-1]:
        print(f"--gpu needs {1 + target_counts[-1]} GPUs, this machine has {torch.cuda.device_count()}")
        return 2
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{available_bytes() / 2**30:.1f} GiB available; torch {torch.__version__}, ray {ray.__version__}; {backend}"
    )
    store = int(max(sizes) * MB * 1.3) + 200 * 2**20
    cluster = start_cluster(1 + target_counts[-1], store, args.gpu)
    rows = []
    try:
        for size in sizes:
            nbytes = size * MB
            need = (1 + target_counts[-1]) * nbytes * (1 if args.gpu else 2) + 2**30
            if available_bytes() < need:
                print(
                    f"{size} MB skipped: needs about {need / 2**30:.1f} GiB, {available_bytes() / 2**30:.1f} available"
                )
                continue
            source, sinks = launch(nbytes, target_counts[-1], args.gpu)
            for k in target_counts:
                row = {
                    "MB": size,
                    "targets": k,
                    **measure(source, sinks[:k], nbytes, args.repeats, args.bucket_mb, backend),
                }
                want = ray.get(source.checksum.remote())
                assert all(ray.get(s.checksum.remote()) == want for s in sinks[:k]), "a target got other weights"
                rows.append(row)
                print(_line(row), flush=True)
            for a in (source, *sinks):
                ray.kill(a)
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
    print("\n" + table(rows, backend))
    return 0


def _gbps(nbytes: int, seconds: float) -> float:
    return nbytes / 1e9 / seconds


def _line(r: dict) -> str:
    n = r["MB"] * MB
    cells = "  ".join(
        f"{k} {r[k]:7.3f} s ({_gbps(n, r[k]):5.2f} GB/s)" for k in ("object_store", "collective", "yardstick")
    )
    return f"{r['MB']:5d} MB -> {r['targets']} targets: {cells}"


def table(rows: list[dict], backend: str) -> str:
    head = (
        f"| weights | targets | object store | collective ({backend}) | plain broadcast ({backend}) | "
        "collective / plain | collective / object store |"
    )
    lines = [head, "|---|---|---|---|---|---|---|"]
    for r in rows:
        n = r["MB"] * MB
        cell = {k: f"{r[k]:.3f} s, {_gbps(n, r[k]):.2f} GB/s" for k in ("object_store", "collective", "yardstick")}
        lines.append(
            f"| {r['MB']} MB | {r['targets']} | {cell['object_store']} | {cell['collective']} | {cell['yardstick']} | "
            f"{r['yardstick'] / r['collective']:.0%} | {r['object_store'] / r['collective']:.2f}x |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
