"""Move a torch module's parameters, gradients and optimizer state to host memory and back.

Why this shape:
- Colocated train and eval workers share a GPU only if one of them gets out of the way between phases
  (docs/runtime.md, "Phases and offload hooks"). The hooks the phase engine calls (`rlplace.runtime.phases`) are where a
  worker uses an `Offloader`.
- Copies go through flat buckets (one host buffer per dtype and device, split at `bucket_mb`): copying
  tensor by tensor is several times slower than one large copy (peers' published offload fixes).
  The host buffers are pinned where CUDA exists (pageable memory is about 10x slower to copy from) and are
  kept for the next cycle, because pinning costs more than the copy itself.
- Tensors keep their identity: only `.data` is swapped, so the optimizer (which keys its state by the
  Parameter objects) and any other holder of a reference keeps working after a round trip.
- After a reload the tensors of a bucket are views of one device buffer, so the next offload is one
  copy per bucket; tensors that are not (fresh gradients from a backward pass) are gathered on the
  device first, costing at most one bucket of extra device memory. Tensors already in host memory
  (CPU-only runs, Adam's step counters) are copied straight into their bucket.

torch is an optional extra (`rlplace[torch]`): this module imports it, `rlplace.runtime` does not.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

import torch

Kind = Literal["params", "grads", "optimizer"]
KINDS: tuple[Kind, ...] = ("params", "grads", "optimizer")


@dataclass(frozen=True)
class TransferStats:
    """What one offload or reload moved, and how long it took (device synchronised at the end)."""

    direction: Literal["offload", "reload"]
    bytes: int
    seconds: float
    buckets: int
    tensors: int
    per_kind: dict[str, int] = field(default_factory=dict)  # kind -> bytes

    @property
    def gib_per_s(self) -> float:
        return self.bytes / 2**30 / self.seconds if self.seconds > 0 else 0.0


@dataclass
class _Bucket:
    """Same-dtype tensors from one device, laid out back to back in `host` (and in `device_flat` after a
    reload). `ids` fixes the layout so a bucket is reused only for exactly the same tensors."""

    tensors: list[torch.Tensor]
    device: torch.device
    host: torch.Tensor
    ids: tuple[tuple[int, tuple[int, ...]], ...]
    device_flat: torch.Tensor | None = None

    @property
    def nbytes(self) -> int:
        return self.host.numel() * self.host.element_size()

    def views(self, flat: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """(tensor, its slice of `flat`) pairs, in layout order."""
        return flat_views(self.tensors, flat)


class Offloader:
    """Offload and reload one module (and optionally its optimizer) between its device and host memory.

    >>> off = Offloader(model, optimizer)
    >>> off.offload()                       # params, grads and optimizer state to host
    >>> off.reload(optimizer=False)         # params and grads back, optimizer state stays on host

    A kind already where it is asked to go is not moved again (0 bytes). Gradients that are `None` and
    optimizer state not created yet are simply absent: there is nothing to move.
    """

    def __init__(self, module: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None, bucket_mb: float = 256):
        if bucket_mb <= 0:
            raise ValueError(f"bucket_mb must be positive, got {bucket_mb}")
        self.module = module
        self.optimizer = optimizer
        self.bucket_bytes = int(bucket_mb * 2**20)
        self.pin = torch.cuda.is_available()
        self._buckets: dict[Kind, list[_Bucket]] = {}
        self._on_host: set[Kind] = set()

    def is_offloaded(self, kind: Kind) -> bool:
        return kind in self._on_host

    def offload(self, *, params: bool = True, grads: bool = True, optimizer: bool = True) -> TransferStats:
        """Copy the chosen kinds to host buffers and point the tensors at them; device memory is freed."""
        kinds = [k for k, on in zip(KINDS, (params, grads, optimizer), strict=True) if on and k not in self._on_host]
        return self._transfer("offload", kinds)

    def reload(self, *, params: bool = True, grads: bool = True, optimizer: bool = True) -> TransferStats:
        """Copy the chosen kinds back to the devices they came from, as views of one buffer per bucket."""
        kinds = [k for k, on in zip(KINDS, (params, grads, optimizer), strict=True) if on and k in self._on_host]
        return self._transfer("reload", kinds)

    def _transfer(self, direction: Literal["offload", "reload"], kinds: list[Kind]) -> TransferStats:
        start = time.perf_counter()
        per_kind: dict[str, int] = {}
        n_buckets = n_tensors = 0
        for kind in kinds:
            if direction == "offload":
                buckets = self._layout(kind)
                for b in buckets:
                    self._to_host(b)
                self._buckets[kind] = buckets
                self._on_host.add(kind)
            else:
                buckets = self._buckets.get(kind, [])
                for b in buckets:
                    self._to_device(b)
                self._on_host.discard(kind)
            per_kind[kind] = sum(b.nbytes for b in buckets)
            n_buckets += len(buckets)
            n_tensors += sum(len(b.tensors) for b in buckets)
        _synchronize()
        return TransferStats(
            direction=direction,
            bytes=sum(per_kind.values()),
            seconds=time.perf_counter() - start,
            buckets=n_buckets,
            tensors=n_tensors,
            per_kind=per_kind,
        )

    def _tensors(self, kind: Kind) -> list[torch.Tensor]:
        params: list[torch.Tensor] = list(self.module.parameters())
        if kind == "params":
            return params
        if kind == "grads":
            return [p.grad for p in params if p.grad is not None]
        if self.optimizer is None:
            return []
        return [v for state in self.optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)]

    def _layout(self, kind: Kind) -> list[_Bucket]:
        """Buckets for the kind's current tensors, reusing last cycle's host buffers when the tensors match."""
        old = {b.ids: b for b in self._buckets.get(kind, [])}
        buckets = []
        for device, tensors in group_buckets(unique_tensors(self._tensors(kind)), self.bucket_bytes):
            ids = tuple((id(t), tuple(t.shape)) for t in tensors)
            bucket = old.get(ids)
            if bucket is None:
                numel = sum(t.numel() for t in tensors)
                host = torch.empty(numel, dtype=tensors[0].dtype, pin_memory=self.pin)
                bucket = _Bucket(tensors=tensors, device=device, host=host, ids=ids)
            buckets.append(bucket)
        return buckets

    def _to_host(self, b: _Bucket) -> None:
        flat = _laid_out_flat(b)
        if flat is not None:
            b.host.copy_(flat, non_blocking=self.pin)
        elif b.device.type == "cpu":  # host to host: straight into the bucket, a staging copy would double it
            for t, view in b.views(b.host):
                view.copy_(t.detach())
        else:  # gather on the device (fast), then one transfer instead of one per tensor
            b.host.copy_(torch.cat([t.detach().reshape(-1) for t in b.tensors]), non_blocking=self.pin)
        for t, view in b.views(b.host):
            t.data = view
        b.device_flat = None

    def _to_device(self, b: _Bucket) -> None:
        flat = torch.empty(b.host.numel(), dtype=b.host.dtype, device=b.device)
        flat.copy_(b.host, non_blocking=self.pin)
        for t, view in b.views(flat):
            t.data = view
        b.device_flat = flat


def unique_tensors(tensors: Iterable[torch.Tensor]) -> list[torch.Tensor]:
    """Drop repeats (tied weights appear once in parameters(), but optimizer state may alias)."""
    seen: set[int] = set()
    out = []
    for t in tensors:
        if id(t) not in seen:
            seen.add(id(t))
            out.append(t)
    return out


def group_buckets(tensors: list[torch.Tensor], bucket_bytes: int) -> Iterator[tuple[torch.device, list[torch.Tensor]]]:
    """Split tensors into (device, dtype) groups in first-seen order, each cut at `bucket_bytes`.

    The one bucketing of rlplace: offload copies and collective weight sync (`rlplace.runtime.collective`)
    both lay tensors out this way, so a bucket is one flat buffer and one copy or one broadcast."""
    groups: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
    for t in tensors:
        groups.setdefault((t.device, t.dtype), []).append(t)
    for (device, _), members in groups.items():
        chunk: list[torch.Tensor] = []
        size = 0
        for t in members:
            nbytes = t.numel() * t.element_size()
            if chunk and size + nbytes > bucket_bytes:
                yield device, chunk
                chunk, size = [], 0
            chunk.append(t)
            size += nbytes
        if chunk:
            yield device, chunk


def flat_views(tensors: list[torch.Tensor], flat: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(tensor, its slice of the flat buffer `flat`, shaped like it) pairs, tensors laid out back to back."""
    offset = 0
    for t in tensors:
        n = t.numel()
        yield t, flat[offset : offset + n].view(t.shape)
        offset += n


def _laid_out_flat(b: _Bucket) -> torch.Tensor | None:
    """`b.device_flat` when every tensor is still the view of it that the last reload made, else None."""
    flat = b.device_flat
    if flat is None:
        return None
    base, esize = flat.data_ptr(), flat.element_size()
    offset = 0
    for t in b.tensors:
        if t.data_ptr() != base + offset * esize or not t.is_contiguous():
            return None
        offset += t.numel()
    return flat


def _synchronize() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class OffloadHooks:
    """The offload hooks (RLightning's names) for a worker that keeps an `Offloader` in `self.offloader`.

    Mix into a train or eval worker class; `rlplace.runtime.phases` calls these around phases. Each returns
    its `TransferStats`, so the driver sees in `Phases.events` how many bytes moved and how fast.
    """

    offloader: Offloader

    def reload_eval_model(self) -> TransferStats:
        return self.offloader.reload(grads=False, optimizer=False)

    def offload_eval_model(self) -> TransferStats:
        return self.offloader.offload(grads=False, optimizer=False)

    def reload_model_param_and_grad(self, load_grad: bool = True, load_optimizer: bool = True) -> TransferStats:
        return self.offloader.reload(params=True, grads=load_grad, optimizer=load_optimizer)

    def offload_model_optimizer(self) -> TransferStats:
        return self.offloader.offload(params=False, grads=False, optimizer=True)

    def offload_model_param_and_grad(self, offload_grad: bool = True, offload_optimizer: bool = False) -> TransferStats:
        return self.offloader.offload(params=True, grads=offload_grad, optimizer=offload_optimizer)
