"""Torch offload helpers: exact round trips on CPU, identity kept for the optimizer, bandwidth on a GPU."""

from __future__ import annotations

import copy
import time

import pytest

torch = pytest.importorskip("torch")

from rlplace.runtime import Offloader, OffloadHooks  # noqa: E402


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))


def _step(model: torch.nn.Module, opt: torch.optim.Optimizer, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(8, 16, generator=g)
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()


def _snapshot(model: torch.nn.Module, opt: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    snap = {}
    for i, p in enumerate(model.parameters()):
        snap[f"param{i}"] = p.detach().clone()
        snap[f"grad{i}"] = p.grad.detach().clone()
        for k, v in opt.state[p].items():
            snap[f"opt{i}.{k}"] = v.detach().clone()
    return snap


def _assert_bit_exact(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert torch.equal(a[k].view(-1).view(torch.uint8), b[k].view(-1).view(torch.uint8)), k


def test_round_trip_is_bit_exact_for_params_grads_and_adam_state() -> None:
    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    _step(model, opt, 1)
    before = _snapshot(model, opt)
    params_before = list(model.parameters())
    ptrs_before = [p.data_ptr() for p in params_before]

    off = Offloader(model, opt, bucket_mb=0.001)  # ~1 KiB buckets: several buckets per kind
    out = off.offload()
    assert all(off.is_offloaded(k) for k in ("params", "grads", "optimizer"))
    assert [p.data_ptr() for p in model.parameters()] != ptrs_before  # the data really moved
    back = off.reload()

    _assert_bit_exact(before, _snapshot(model, opt))
    assert list(model.parameters()) == params_before  # same Parameter objects
    assert all(p is q for p, q in zip(opt.param_groups[0]["params"], params_before, strict=True))
    assert out.bytes == back.bytes == sum(t.numel() * t.element_size() for t in before.values())
    assert out.buckets > 3 and out.tensors == len(before)
    assert out.seconds >= 0 and back.direction == "reload"


def test_training_after_round_trips_matches_training_without_them() -> None:
    plain = _model()
    plain_opt = torch.optim.Adam(plain.parameters(), lr=1e-2)
    cycled = copy.deepcopy(plain)
    cycled_opt = torch.optim.Adam(cycled.parameters(), lr=1e-2)
    off = Offloader(cycled, cycled_opt)
    for seed in range(4):
        _step(plain, plain_opt, seed)
        _step(cycled, cycled_opt, seed)
        off.offload(optimizer=True)
        off.reload()
    _assert_bit_exact(_snapshot(plain, plain_opt), _snapshot(cycled, cycled_opt))


def test_kinds_move_independently_and_twice_is_a_no_op() -> None:
    model = _model()
    opt = torch.optim.Adam(model.parameters())
    _step(model, opt, 0)
    off = Offloader(model, opt)
    first = off.offload(params=False, grads=False, optimizer=True)
    assert set(first.per_kind) == {"optimizer"} and off.is_offloaded("optimizer")
    assert not off.is_offloaded("params")
    again = off.offload(params=False, grads=False, optimizer=True)
    assert again.bytes == 0
    assert off.reload(params=True, optimizer=False).bytes == 0  # params never left
    assert off.reload().per_kind == {"optimizer": first.bytes}


def test_host_buffers_are_reused_across_cycles() -> None:
    model = _model()
    off = Offloader(model)
    off.offload()
    host_ptrs = [p.data_ptr() for p in model.parameters()]
    off.reload()
    off.offload()
    assert [p.data_ptr() for p in model.parameters()] == host_ptrs


def test_missing_grads_and_optimizer_state_are_not_an_error() -> None:
    model = _model()
    off = Offloader(model, torch.optim.Adam(model.parameters()))
    stats = off.offload()
    assert stats.per_kind["grads"] == 0 and stats.per_kind["optimizer"] == 0
    assert stats.bytes == sum(p.numel() * 4 for p in model.parameters())


def test_hooks_mixin_moves_what_each_spec_hook_names() -> None:
    class Worker(OffloadHooks):
        def __init__(self) -> None:
            self.model = _model()
            self.opt = torch.optim.Adam(self.model.parameters())
            _step(self.model, self.opt, 0)
            self.offloader = Offloader(self.model, self.opt)

    w = Worker()

    def where() -> dict[str, bool]:
        return {k: w.offloader.is_offloaded(k) for k in ("params", "grads", "optimizer")}

    assert set(w.offload_model_optimizer().per_kind) == {"optimizer"}
    assert where() == {"params": False, "grads": False, "optimizer": True}
    assert set(w.offload_model_param_and_grad(offload_grad=True, offload_optimizer=False).per_kind) == {
        "params",
        "grads",
    }
    assert where() == {"params": True, "grads": True, "optimizer": True}
    w.reload_model_param_and_grad(load_grad=False, load_optimizer=True)
    assert where() == {"params": False, "grads": True, "optimizer": False}
    assert w.offload_eval_model().per_kind == {"params": sum(p.numel() * 4 for p in w.model.parameters())}
    assert w.reload_eval_model().bytes > 0 and where()["params"] is False


def test_bucket_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="bucket_mb"):
        Offloader(_model(), bucket_mb=0)


@pytest.mark.gpu
def test_offload_bandwidth_close_to_one_plain_pinned_copy() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    torch.manual_seed(0)
    # ~1 GiB in 256 tensors of 4 MiB: a per-tensor copy would pay 256 launches and syncs.
    model = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(1 << 20, device="cuda")) for _ in range(256)])
    off = Offloader(model)
    off.offload()
    off.reload()  # warm: host buffers pinned, tensors now views of one device buffer per bucket
    ours = off.offload()
    flat = torch.empty(ours.bytes // 4, device="cuda")
    host = torch.empty(flat.numel(), pin_memory=True)
    torch.cuda.synchronize()
    start = time.perf_counter()
    host.copy_(flat, non_blocking=True)
    torch.cuda.synchronize()
    plain_gib_s = ours.bytes / 2**30 / (time.perf_counter() - start)
    print(f"offload {ours.gib_per_s:.1f} GiB/s, plain pinned copy {plain_gib_s:.1f} GiB/s")
    assert ours.gib_per_s >= 0.7 * plain_gib_s
