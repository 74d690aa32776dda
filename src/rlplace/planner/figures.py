"""Published figures the time model falls back on when a profile does not say: each GPU model's memory, relative
speed, NVLink and host-device bandwidth, and the network's per-NIC and cross-zone bandwidth.

The numbers and their sources are tabled in docs/guide.md, "Choosing a placement". Speed is dense BF16 tensor
throughput relative to an A100 (312 TFLOPS), a compute ratio: decoding is often memory-bound, so a measured
profile on the target GPU (`gpus.<model>.speed` in a profile file) beats it. Bandwidths are per direction, in GB/s
(10^9 bytes per second): NVIDIA quotes NVLink as both directions together, so its figure is halved here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Host-device copies from pinned memory, per direction: about 24 GB/s on PCIe Gen4 x16 and 50 GB/s on Gen5 x16
#: (measured figures, under the links' 32 and 64 GB/s).
PCIE4 = 24.0
PCIE5 = 50.0
#: GPU-to-GPU without NVLink goes over PCIe (peer to peer through the host bridge).
NO_NVLINK = PCIE4


@dataclass(frozen=True)
class GpuModel:
    """What the time model needs of a GPU model; `source` says where each number came from (a view prints it)."""

    name: str
    memory_gb: float
    speed: float  # throughput relative to an A100 (1.0)
    nvlink_gb_s: float  # GPU to GPU inside an NVLink domain, per direction
    pcie_gb_s: float  # pinned host <-> device, per direction (offload and reload)
    source: str = "published"


def _gpu(name: str, memory_gb: float, tflops: float, nvlink_both_ways: float | None, pcie: float) -> GpuModel:
    nvlink = NO_NVLINK if nvlink_both_ways is None else nvlink_both_ways / 2
    return GpuModel(name, memory_gb, round(tflops / 312, 2), nvlink, pcie)


#: name -> GpuModel: datasheet memory, dense BF16 TFLOPS (speed = TFLOPS / 312), NVLink (both directions, GB/s).
GPU_MODELS: dict[str, GpuModel] = {
    g.name: g
    for g in (
        _gpu("V100", 32, 125, 300, 12.0),  # PCIe Gen3 x16
        _gpu("A100-40G", 40, 312, 600, PCIE4),
        _gpu("A100", 80, 312, 600, PCIE4),
        _gpu("A800-40G", 40, 312, 400, PCIE4),
        _gpu("A800", 80, 312, 400, PCIE4),
        _gpu("A10", 24, 125, None, PCIE4),
        _gpu("L20", 48, 119.5, None, PCIE4),
        _gpu("L40S", 48, 362, None, PCIE4),
        _gpu("RTX4090", 24, 82.6, None, PCIE4),
        _gpu("H20", 96, 148, 900, PCIE5),
        _gpu("H100", 80, 989, 900, PCIE5),
        _gpu("H800", 80, 989, 400, PCIE5),
        _gpu("H200", 141, 989, 900, PCIE5),
        _gpu("B200", 180, 2250, 1800, PCIE5),
        GpuModel("GB200", 186, round(2500 / 312, 2), 900.0, 450.0),  # Grace <-> GPU over NVLink-C2C (900 both ways)
    )
}

#: A model nobody named (or rlplace does not know): speed 1, memory unknown, PCIe Gen4; every view says so.
UNKNOWN_GPU = GpuModel("unknown", 0.0, 1.0, NO_NVLINK, PCIE4, source="assumed")

#: InfiniBand NDR: 400 Gb/s a port, 50 GB/s per direction; one NIC per GPU (DGX/HGX H100 and B200 nodes).
INFINIBAND_GB_S = 50.0
#: Between zones the RDMA fabric ends: a 100 Gb/s front-end Ethernet NIC per node.
CROSS_ZONE_GB_S = 12.5

_NOT_NAME = re.compile(r"[^A-Z0-9]")
#: A memory size inside a reported name: `NVIDIA-A100-SXM4-40GB` -> 40.
_MEMORY_SIZE = re.compile(r"(?<![A-Z0-9])(\d+)GB?(?![A-Z0-9])")


def gpu_model(name: str | None, overrides: dict[str, GpuModel] | None = None) -> GpuModel:
    """The figures of the GPU model a node reports (`A800`, `NVIDIA-H100-80GB-HBM3`, `RTX 4090`, `A100-40G`):
    the profile's own entry for it first (by name, letters and digits compared), else the table's: by name, else
    the longest model name inside it with the memory size the name says (`NVIDIA-A100-SXM4-40GB` is an A100-40G),
    else UNKNOWN_GPU."""
    if name is None:
        return UNKNOWN_GPU
    key = _key(name)
    for known, model in (overrides or {}).items():
        if _key(known) == key:
            return model
    if key in _BY_KEY:
        return _BY_KEY[key]
    inside = [k for k in _BASES if k in key]
    if not inside:
        return UNKNOWN_GPU
    base = _BY_KEY[max(inside, key=len)]
    size = _MEMORY_SIZE.search(name.upper())
    return _BY_KEY.get(_key(f"{base.name}-{size.group(1)}G"), base) if size else base


def _key(name: str) -> str:
    return _NOT_NAME.sub("", name.upper().removeprefix("NVIDIA"))


_BY_KEY = {_key(name): model for name, model in GPU_MODELS.items()}
#: The table's model names without a memory size, which a reported name may contain.
_BASES = [_key(name) for name in GPU_MODELS if "-" not in name]
