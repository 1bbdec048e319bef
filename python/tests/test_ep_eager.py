"""symmoe._ep_eager, the fast path of the common eager dispatch (fresh, do_cpu_sync=False) and combine, against the
general path of symmoe.ep (forced by turning the fast path off): the same runtime calls, outputs, handle, event and
stream order; every wrong argument falls back and raises the general path's error. fake_torch stands in for torch
and fakes for the native EpBuffer / EpHandle."""

import pytest

import fake_torch as torch
from fake_cuda import FakeEpBuffer, FakeNative

import symmoe
from symmoe import _checks, _ep_eager, _ep_types, ep as ep_module

R, T_MAX, H, K, E = 2, 64, 256, 4, 16
T, RECV, EXPANDED, CAPACITY = 32, 40, 70, R * T_MAX
FP8 = ("fp8", "fp32_per128")


@pytest.fixture
def env(monkeypatch):
    torch.install(monkeypatch)
    monkeypatch.setattr(_ep_types, "_torch_marker", [])
    copies, used = [], []
    monkeypatch.setattr(ep_module._C, "memcpy_async", lambda *args: copies.append(args))
    for name in ("dispatch", "combine"):  # records which calls the fast path made
        fast = getattr(_ep_eager, name)

        def spy(*args, _fast=fast, _name=name):
            out = _fast(*args)
            used.append((_name, out is not None))
            return out
        monkeypatch.setattr(_ep_eager, name, spy)
    return monkeypatch, copies, used


def make_buffer(**state):
    buf = symmoe.ElasticBuffer._validation_only(R, T_MAX, H, K, E, **state)
    buf._state.new_native_handle = FakeNative
    for key in (("bf16", "none"), FP8, ("fp8", "ue8m0_per32"), ("fp8", "ue8m0_per128")):
        buf._state.natives[key] = FakeEpBuffer(R, E, K, T_MAX, RECV, EXPANDED, CAPACITY)
    return buf


def inputs(fp8=True):
    x = torch.Tensor((T, H), torch.float8_e4m3fn if fp8 else torch.bfloat16)
    sf = torch.Tensor((T, H // 128), torch.float32)
    return ((x, sf) if fp8 else x), torch.Tensor((T, K), torch.int64), torch.Tensor((T, K), torch.float32)


# EPHandle's record, compared between the paths: all of it but the objects checked by identity and the two caches
# (routing, topk_idx_ptr) that each path fills when it needs them.
_RECORD_COMPARED = tuple(f for f in _ep_types.EPHandle.RECORD
                         if f not in ("owner", "native", "like", "routing", "topk_idx_ptr"))


def describe(t):
    if t is None:
        return None
    if isinstance(t, tuple):
        return tuple(describe(u) for u in t)
    return t.shape, t.dtype, t.stride(), t.allocated_on.cuda_stream


def run_pairs(buf, fast, monkeypatch, dispatch_kw, combine_kw, fp8=True, cached_kw=None):
    """Two dispatch + combine + cached dispatch rounds; -> what is
    observable."""
    cached_kw = cached_kw or {}
    if not fast:
        monkeypatch.setattr(_ep_eager, "dispatch", lambda *args: None)
        monkeypatch.setattr(_ep_eager, "combine", lambda *args: None)
    x, idx, w = inputs(fp8)
    seen = []
    for _ in range(2):
        recv_x, recv_idx, recv_w, handle, event = buf.dispatch(x, topk_idx=idx, topk_weights=w, do_cpu_sync=False,
                                                               **dispatch_kw)
        y = torch.Tensor((CAPACITY, H), torch.bfloat16)
        cw = torch.Tensor((CAPACITY,) if handle.do_expand else (CAPACITY, K), torch.float32)
        combined_x, combined_w, c_event = buf.combine(y, handle=handle, topk_weights=cw, **combine_kw)
        impl = buf._state.natives[FP8 if fp8 else ("bf16", "none")]
        d_call, c_call = impl.calls[-2], impl.calls[-1]
        outs = (recv_x, recv_idx, recv_w, combined_x, combined_w)
        d_out = impl.out_addresses
        # a cached dispatch of the same handle (the backward of a combine)
        c_recv_x, c_recv_idx, c_recv_w, c_handle, c_d_event = buf.dispatch(x, topk_weights=w, handle=handle,
                                                                           **cached_kw)
        assert c_handle is handle and impl.calls[-1][4] == handle.native.ptrs["topk_idx"]
        assert impl.calls[-1][7] is handle.native and d_call[7] is handle.native
        cached_outs = (c_recv_x, c_recv_idx, c_recv_w)
        c_addresses = {t.data_ptr(): i for i, t in enumerate(_flat(cached_outs))}
        addresses = {t.data_ptr(): i for i, t in enumerate(_flat(outs))}
        seen.append(dict(
            outputs=[describe(t) for t in outs],
            # runtime calls with the new tensors' addresses replaced by their output index
            dispatch=d_call[:2] + d_call[6:7] + d_call[8:],
            out_addresses=tuple(addresses.get(a, a) for a in d_out),
            combine=c_call[3:6] + c_call[7:-2] + tuple(addresses.get(a, a) for a in c_call[-2:]),
            handle={k: getattr(handle, k) for k in _RECORD_COMPARED + ("num_recv_tokens", "num_tokens", "num_topk",
                                                                       "do_expand", "expert_alignment")},
            like=handle.like is _ep_types._torch_marker[0],
            owner=handle.owner is buf._state and handle.native is d_call[7],
            events=[(e.event, e.extra_tensors, e.hook_after_wait, e._release_handle_by_call, type(e))
                    for e in (event, c_event, c_d_event)],
            cached_outputs=[describe(t) for t in cached_outs],
            cached=impl.calls[-1][:2] + impl.calls[-1][6:7] + impl.calls[-1][8:],
            cached_out_addresses=tuple(c_addresses.get(a, a) for a in impl.out_addresses),
            cached_handle=(handle.row_capacity, handle.like is _ep_types._torch_marker[0]),
            last_stream=buf._state.last_stream))
        assert d_call[2:6] == ((x[0] if fp8 else x).data_ptr(), x[1].data_ptr() if fp8 else 0, idx.data_ptr(),
                               w.data_ptr())
        assert c_call[1:3] == (y.data_ptr(), cw.data_ptr())
    return seen


def _flat(outs):
    for t in outs:
        if isinstance(t, tuple):
            yield from _flat(t)
        elif t is not None:
            yield t


@pytest.mark.parametrize("fp8", [True, False])
@pytest.mark.parametrize("dispatch_kw, combine_kw, cached_kw", [
    ({}, {}, {}),
    (dict(num_sms=12, expert_alignment=None), dict(num_sms=0), dict(do_cpu_sync=False, num_sms=3)),
    (dict(do_expand=True, expert_alignment=4, do_zero_padding=False), dict(do_cpu_sync=True),
     dict(expert_alignment=4, do_expand=False)),
    (dict(num_experts=E, num_max_tokens_per_rank=T_MAX, num_sms=8), dict(num_sms=20), dict(num_experts=E)),
])
def test_fast_path_matches_the_general_path(env, fp8, dispatch_kw, combine_kw, cached_kw):
    monkeypatch, copies, used = env
    fast = run_pairs(make_buffer(), True, monkeypatch, dispatch_kw, combine_kw, fp8, cached_kw)
    # both rounds took the fast path throughout (the first call finds torch's raw-stream getter itself)
    assert used == [("dispatch", True), ("combine", True), ("dispatch", True)] * 2
    general = run_pairs(make_buffer(), False, monkeypatch, dispatch_kw, combine_kw, fp8, cached_kw)
    assert fast == general and copies == []


def test_fast_path_after_a_general_dispatch_and_for_handles_of_cpu_sync(env):
    monkeypatch, copies, used = env
    buf = make_buffer()
    x, idx, w = inputs()
    _, _, _, synced, _ = buf.dispatch(x, topk_idx=idx, topk_weights=w)  # CPU sync: exact rows
    y = torch.Tensor((RECV, H), torch.bfloat16)
    buf.combine(y, handle=synced)
    assert used[-1] == ("combine", True) and synced.routing == (T, K, False, RECV, 1)
    with pytest.raises(ValueError, match="x has 39 rows; the dispatch of this handle received 40"):
        buf.combine(torch.Tensor((RECV - 1, H), torch.bfloat16), handle=synced)
    # a cached dispatch rewrites the handle: what the fast combine knows is read again
    buf.dispatch(x, topk_weights=w, handle=synced)
    assert synced.routing is None
    buf.combine(y, handle=synced)
    assert used[-1] == ("combine", True) and synced.routing == (T, K, False, RECV, 1)


def test_do_handle_copy_false_and_released_handles(env):
    monkeypatch, copies, used = env
    buf = make_buffer()
    x, idx, w = inputs()
    buf.dispatch(x, topk_idx=idx, topk_weights=w, do_cpu_sync=False)
    _, _, _, shared, _ = buf.dispatch(x, topk_idx=idx, topk_weights=w, do_cpu_sync=False, do_handle_copy=False)
    assert used[-1] == ("dispatch", True) and shared.topk_idx is idx
    buf.combine(torch.Tensor((CAPACITY, H), torch.bfloat16), handle=shared)  # general path: copies topk_idx
    assert used[-1] == ("combine", False) and copies[-1][:3] == (shared.native.ptrs["topk_idx"], idx.data_ptr(),
                                                                 T * K * 8)
    native = shared.native
    del shared
    assert buf._state.free_native_handles[-1] is native  # released to the pool as the general path's handles are


def test_a_failing_fast_call_gives_its_native_handle_back_and_keeps_the_stream(env):
    monkeypatch, copies, used = env
    buf = make_buffer()
    x, idx, w = inputs()
    buf.dispatch(x, topk_idx=idx, topk_weights=w, do_cpu_sync=False)
    buf._state.natives[FP8].fail = "bad expert id"
    buf._state.free_native_handles.clear()  # the failing call takes a new native handle
    with pytest.raises(RuntimeError, match="bad expert id"):
        buf.dispatch(x, topk_idx=idx, topk_weights=w, do_cpu_sync=False)
    assert len(buf._state.free_native_handles) == 1  # given back: no EPHandle took it
    assert buf._state.last_stream == _checks.CUDA_STREAM_LEGACY


def _bad_calls():
    """(name, call(buf, x, idx, w)) of wrong arguments that the fast path must leave to the general path."""
    def t(shape, dtype=torch.float32, **kw):
        return torch.Tensor(shape, dtype, **kw)
    yield "x hidden", lambda b, x, i, w: b.dispatch((t((T, H + 128), torch.float8_e4m3fn), x[1]), topk_idx=i,
                                                    topk_weights=w, do_cpu_sync=False)
    yield "x tokens", lambda b, x, i, w: b.dispatch((t((T_MAX + 1, H), torch.float8_e4m3fn),
                                                     t((T_MAX + 1, H // 128))), topk_idx=i, topk_weights=w,
                                                    do_cpu_sync=False)
    yield "x dtype", lambda b, x, i, w: b.dispatch((t((T, H), torch.bfloat16), x[1]), topk_idx=i, topk_weights=w,
                                                   do_cpu_sync=False)
    yield "fp8 without sf", lambda b, x, i, w: b.dispatch(x[0], topk_idx=i, topk_weights=w, do_cpu_sync=False)
    yield "sf rows", lambda b, x, i, w: b.dispatch((x[0], t((T - 1, H // 128))), topk_idx=i, topk_weights=w,
                                                   do_cpu_sync=False)
    yield "sf dtype", lambda b, x, i, w: b.dispatch((x[0], t((T, H // 128), torch.int64)), topk_idx=i,
                                                    topk_weights=w, do_cpu_sync=False)
    yield "sf int32 cols", lambda b, x, i, w: b.dispatch((x[0], t((T, 3), torch.int32)), topk_idx=i,
                                                         topk_weights=w, do_cpu_sync=False)
    yield "sf strided", lambda b, x, i, w: b.dispatch((x[0], t((T, H // 128), strides=(1, T))), topk_idx=i,
                                                      topk_weights=w, do_cpu_sync=False)
    yield "x device", lambda b, x, i, w: b.dispatch((t((T, H), torch.float8_e4m3fn, device_index=1), x[1]),
                                                    topk_idx=i, topk_weights=w, do_cpu_sync=False)
    yield "idx dtype", lambda b, x, i, w: b.dispatch(x, topk_idx=t((T, K), torch.int32), topk_weights=w,
                                                     do_cpu_sync=False)
    yield "idx shape", lambda b, x, i, w: b.dispatch(x, topk_idx=t((T, K + 1), torch.int64), topk_weights=w,
                                                     do_cpu_sync=False)
    yield "idx missing", lambda b, x, i, w: b.dispatch(x, topk_weights=w, do_cpu_sync=False)
    yield "w shape", lambda b, x, i, w: b.dispatch(x, topk_idx=i, topk_weights=t((T - 1, K)), do_cpu_sync=False)
    yield "w dtype", lambda b, x, i, w: b.dispatch(x, topk_idx=i, topk_weights=t((T, K), torch.bfloat16),
                                                   do_cpu_sync=False)
    yield "alignment", lambda b, x, i, w: b.dispatch(x, topk_idx=i, topk_weights=w, do_cpu_sync=False,
                                                     expert_alignment=2048)
    yield "alignment type", lambda b, x, i, w: b.dispatch(x, topk_idx=i, topk_weights=w, do_cpu_sync=False,
                                                          expert_alignment=1.0)
    yield "num_sms", lambda b, x, i, w: b.dispatch(x, topk_idx=i, topk_weights=w, do_cpu_sync=False, num_sms=-1)
    yield "num_experts", lambda b, x, i, w: b.dispatch(x, topk_idx=i, topk_weights=w, do_cpu_sync=False,
                                                       num_experts=2 * E)
    yield "payload tuple", lambda b, x, i, w: b.dispatch(x + (None,), topk_idx=i, topk_weights=w,
                                                         do_cpu_sync=False)

    def fresh(b, x, i, w):
        return b.dispatch(x, topk_idx=i, topk_weights=w, do_cpu_sync=False)[3]
    yield "cached tokens", lambda b, x, i, w: b.dispatch((t((T - 1, H), torch.float8_e4m3fn), t((T - 1, H // 128))),
                                                         topk_weights=t((T - 1, K)), handle=fresh(b, x, i, w))
    yield "cached alignment", lambda b, x, i, w: b.dispatch(x, topk_weights=w, handle=fresh(b, x, i, w),
                                                            expert_alignment=8)
    yield "cached weights", lambda b, x, i, w: b.dispatch(x, topk_weights=t((T, K + 1)), handle=fresh(b, x, i, w))
    yield "cached empty handle", lambda b, x, i, w: b.dispatch(x, topk_weights=w, handle=symmoe.ep.EPHandle(b))
    yield "cached other buffer", lambda b, x, i, w: b.dispatch(x, topk_weights=w, handle=fresh(make_buffer(), x, i, w))

    def combine(y=None, handle="own", **kw):
        def call(b, x, i, w):
            h = b.dispatch(x, topk_idx=i, topk_weights=w, do_cpu_sync=False)[3]
            if handle is None:
                h = None
            elif handle == "empty":
                h = symmoe.ep.EPHandle(b)
            elif handle == "other":
                h = make_buffer().dispatch(x, topk_idx=i, topk_weights=w, do_cpu_sync=False)[3]
            return b.combine(y if y is not None else t((CAPACITY, H), torch.bfloat16), handle=h, **kw)
        return call
    yield "combine rows", combine(t((CAPACITY + 1, H), torch.bfloat16))
    yield "combine dtype", combine(t((CAPACITY, H), torch.float32))
    yield "combine hidden", combine(t((CAPACITY, H // 2), torch.bfloat16))
    yield "combine strided", combine(t((CAPACITY, H), torch.bfloat16, strides=(1, CAPACITY)))
    yield "combine weights", combine(topk_weights=t((CAPACITY, K + 1)))
    yield "combine no handle", combine(handle=None)
    yield "combine empty handle", combine(handle="empty")
    yield "combine other buffer", combine(handle="other")
    yield "combine num_sms", combine(num_sms=-2)
    yield "combine reduce", combine(reduce_local_experts=True)


@pytest.mark.parametrize("name, call", list(_bad_calls()), ids=[n for n, _ in _bad_calls()])
def test_wrong_arguments_raise_the_general_paths_error(env, name, call):
    monkeypatch, _, _ = env
    errors = []
    for fast in (True, False):
        if not fast:
            monkeypatch.setattr(_ep_eager, "dispatch", lambda *args: None)
            monkeypatch.setattr(_ep_eager, "combine", lambda *args: None)
        buf = make_buffer()
        x, idx, w = inputs()
        buf.dispatch(x, topk_idx=idx, topk_weights=w, do_cpu_sync=False)  # arms the fast path
        with pytest.raises((ValueError, TypeError)) as info:
            call(buf, x, idx, w)
        errors.append((info.type, str(info.value)))
        assert buf._state.natives[FP8].calls[-1][0] == "dispatch"  # nothing reached the runtime
    assert errors[0] == errors[1]


def test_implementation_is_this_module_without_the_extension(env):
    """The libtorch extension symmoe._torch_ep is tried only under the real torch (its torch._C loaded) and chosen
    only for the torch.Tensor it was built against: with fake_torch the Python fast path runs."""
    assert _ep_eager.implementation(torch) is _ep_eager
    assert _ep_eager.implementation(None) is _ep_eager
    previous = _ep_eager.use_native(False)
    try:
        assert _ep_eager.implementation(torch) is _ep_eager
    finally:
        assert _ep_eager.use_native(previous) is False
    assert isinstance(_ep_eager.native_status(), str)
