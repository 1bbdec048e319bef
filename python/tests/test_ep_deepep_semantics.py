"""DeepEP V2 semantics of ElasticBuffer that need no GPU: per-call payload dtype, num_topk from the first dispatch,
row counts of fresh / cached / expand outputs and handle metadata, None where DeepEP returns None, do_handle_copy,
combine defaults (num_sms, allow_multiple_reduction), previous_event rules, EventOverlap. The native EpBuffer and
EpHandle are replaced by fakes that fill the fields the C++ fills; inputs are fake CUDA tensors (never
dereferenced), so outputs are zero-copy DeviceViews whose addresses and shapes are checked."""
import inspect

import pytest

import symmoe
from symmoe import _ep_types, ep as ep_module

from fake_cuda import FakeCuda, FakeEpBuffer, FakeNative

R, T_MAX, H, K, E = 2, 64, 256, 4, 16
El = E // R
T = 32
RECV, EXPANDED, CAPACITY = 40, 70, R * T_MAX


def FakeImpl(key):
    return FakeEpBuffer(R, E, K, T_MAX, RECV, EXPANDED, CAPACITY)
def make_buffer(num_topk=K, **state):
    buf = symmoe.ElasticBuffer._validation_only(R, T_MAX, H, num_topk, E, **state)
    buf._state.new_native_handle = FakeNative
    for key in (("bf16", "none"), ("fp8", "fp32_per128"), ("fp8", "ue8m0_per32"), ("fp8", "ue8m0_per128")):
        buf._state.natives[key] = FakeImpl(key)
    return buf


def routing(t=T, k=K):
    return FakeCuda((t, k), "int64"), FakeCuda((t, k), "float32")


def test_constructor_defaults_match_deep_ep_v2():
    params = inspect.signature(symmoe.ElasticBuffer.__init__).parameters
    assert params["num_topk"].default == 0 and params["use_fp8_dispatch"].default is False
    assert params["num_allocated_qps"].default == 0 and params["allow_multiple_reduction"].default is True
    assert list(params)[1:16] == ["group", "num_bytes", "num_cpu_bytes", "num_max_tokens_per_rank", "hidden",
                                  "num_topk", "use_fp8_dispatch", "deterministic", "allow_hybrid_mode",
                                  "allow_multiple_reduction", "prefer_overlap_with_compute", "sl_idx",
                                  "num_allocated_qps", "num_cpu_timeout_secs", "num_gpu_timeout_secs"]
    buf = make_buffer(num_allocated_qps=17)
    assert buf.num_allocated_qps == 17 and buf.get_theoretical_num_qps(24) == 0
    assert (buf.num_scaleout_ranks, buf.num_scaleup_ranks, buf.scaleout_rank_idx, buf.scaleup_rank_idx) == (1, R, 0, 0)


@pytest.mark.parametrize("payload, key", [
    (lambda: FakeCuda((T, H), "bfloat16"), ("bf16", "none")),
    (lambda: (FakeCuda((T, H), "float8_e4m3fn"), FakeCuda((T, H // 128), "float32")), ("fp8", "fp32_per128")),
    (lambda: (FakeCuda((T, H), "uint8"), FakeCuda((T, H // 128), "int32")), ("fp8", "ue8m0_per32")),
    (lambda: (FakeCuda((T, H), "uint8"), FakeCuda((T, -(-H // 512)), "int32")), ("fp8", "ue8m0_per128")),
])
def test_payload_dtype_is_chosen_per_call(payload, key):
    buf = make_buffer()  # built for BF16: every payload still goes to the native buffer of its own dtype
    idx, w = routing()
    x = payload()
    recv_x, _, _, _, _ = buf.dispatch(x, topk_idx=idx, topk_weights=w)
    called = [k for k, impl in buf._state.natives.items() if impl.calls]
    assert called == [key]
    if key[0] == "fp8":
        recv_x, recv_sf = recv_x
        assert recv_x.dtype == "uint8" and recv_sf.shape == (RECV, x[1].shape[1])
        assert buf._state.natives[key].calls[0][3] == x[1].ptr
    else:
        assert recv_x.dtype == "bfloat16" and recv_x.shape == (RECV, H)


def test_num_topk_comes_from_the_first_dispatch():
    buf = make_buffer(num_topk=0)
    idx, w = routing(k=K)
    _, recv_idx, recv_w, handle, _ = buf.dispatch(FakeCuda((T, H), "bfloat16"), topk_idx=idx, topk_weights=w)
    assert recv_idx.shape == (RECV, K) and recv_w.shape == (RECV, K) and handle.num_topk == K


@pytest.mark.parametrize("cpu_sync", [True, False])
def test_row_counts_of_fresh_cached_and_expand_outputs(cpu_sync):
    buf = make_buffer()
    idx, w = routing()
    x = FakeCuda((T, H), "bfloat16")
    recv_x, recv_idx, recv_w, handle, _ = buf.dispatch(x, topk_idx=idx, topk_weights=w, do_cpu_sync=cpu_sync)
    rows = RECV if cpu_sync else CAPACITY
    assert recv_x.shape == (rows, H) and recv_idx.shape == (rows, K) and recv_w.shape == (rows, K)
    # handle metadata as DeepEP: [num_recv_tokens, 2 + K] (worst case without CPU sync), [T, K] for the source side
    assert handle.recv_src_metadata.shape == (rows, 2 + K) and handle.num_recv_tokens == rows
    assert handle.dst_buffer_slot_idx.shape == (T, K) and handle.topk_idx.shape == (T, K)
    assert handle.psum_num_recv_tokens_per_scaleup_rank.shape == (R,)
    assert handle.psum_num_recv_tokens_per_expert.shape == (El,)
    # a cached dispatch (no CPU sync of its own) returns the rows its handle knows
    c_x, c_idx, c_w, c_handle, _ = buf.dispatch(x, topk_weights=w, handle=handle)
    assert c_handle is handle and c_x.shape == (rows, H) and c_idx.shape == (rows, K) and c_w.shape == (rows, K)
    assert buf._state.natives[("bf16", "none")].calls[-1][11] is True  # cached
    # expand: no recv_topk_idx (DeepEP returns None), one weight per row
    e_x, e_idx, e_w, e_handle, _ = buf.dispatch(x, topk_idx=idx, topk_weights=w, do_expand=True,
                                                expert_alignment=4, do_cpu_sync=cpu_sync)
    e_rows = EXPANDED if cpu_sync else CAPACITY
    assert e_idx is None and e_x.shape == (e_rows, H) and e_w.shape == (e_rows,)
    assert e_handle.recv_src_metadata.shape == (rows, 2 + K)
    assert e_handle.num_expanded_tokens == (EXPANDED if cpu_sync else R * T_MAX * min(K, El) + El * 3)
    ce_x, ce_idx, ce_w, _, _ = buf.dispatch(x, topk_weights=w, handle=e_handle, do_zero_padding=True)
    assert ce_idx is None and ce_x.shape == (e_rows, H) and ce_w.shape == (e_rows,)


def test_do_handle_copy_false_shares_the_callers_topk_idx(monkeypatch):
    copies = []
    monkeypatch.setattr(ep_module._C, "memcpy_async", lambda dst, src, n, stream: copies.append((dst, src, n)))
    buf = make_buffer()
    idx, w = routing()
    x = FakeCuda((T, H), "bfloat16")
    _, _, _, own, _ = buf.dispatch(x, topk_idx=idx, topk_weights=w)
    assert own.topk_idx.data_ptr == own.native.ptrs["topk_idx"] != idx.ptr  # DeepEP: a clone
    _, _, _, shared, _ = buf.dispatch(x, topk_idx=idx, topk_weights=w, do_handle_copy=False)
    assert shared.topk_idx is idx
    impl = buf._state.natives[("bf16", "none")]
    y = FakeCuda((RECV, H), "bfloat16")
    buf.combine(y, handle=own)
    assert copies == []
    buf.combine(y, handle=shared)  # reads the caller's topk_idx as it is now
    assert copies == [(shared.native.ptrs["topk_idx"], idx.ptr, T * K * 8)] and impl.calls[-1][0] == "combine"
    buf.dispatch(x, topk_weights=w, handle=shared)  # so does a cached dispatch
    assert copies[-1] == (shared.native.ptrs["topk_idx"], idx.ptr, T * K * 8)


@pytest.mark.parametrize("allow_multiple_reduction", [True, False])
def test_combine_defaults_follow_the_dispatch_and_the_buffer(allow_multiple_reduction):
    buf = make_buffer(allow_multiple_reduction=allow_multiple_reduction)
    impl = buf._state.natives[("bf16", "none")]
    idx, w = routing()
    x = FakeCuda((T, H), "bfloat16")
    _, _, _, handle, _ = buf.dispatch(x, topk_idx=idx, topk_weights=w, num_sms=12)
    combined_x, combined_w, event = buf.combine(FakeCuda((RECV, H), "bfloat16"), handle=handle,
                                                topk_weights=FakeCuda((RECV, K), "float32"))
    call = impl.calls[-1]
    assert call[8] == 12 and call[7] is False  # num_sms: the dispatch's; non-expand: no local reduction
    assert combined_x.shape == (T, H) and combined_w.shape == (T, K) and event.event is None
    buf.combine(FakeCuda((RECV, H), "bfloat16"), handle=handle, num_sms=20)
    assert impl.calls[-1][8] == 20
    _, _, _, e_handle, _ = buf.dispatch(x, topk_idx=idx, topk_weights=w, do_expand=True)
    _, none_w, _ = buf.combine(FakeCuda((EXPANDED, H), "bfloat16"), handle=e_handle)
    assert impl.calls[-1][7] is allow_multiple_reduction and none_w is None
    buf.combine(FakeCuda((EXPANDED, H), "bfloat16"), handle=e_handle, reduce_local_experts=False)
    assert impl.calls[-1][7] is False
    with pytest.raises(ValueError, match="previous_event needs allocate_on_comm_stream=True"):
        buf.combine(FakeCuda((RECV, H), "bfloat16"), handle=handle, previous_event=object())


def test_event_overlap_waits_hooks_and_releases():
    seen = []
    ev = symmoe.EventOverlap(None)
    ev.current_stream_wait()  # nothing recorded: nothing to wait for
    ev.register_hook_after_wait(lambda: seen.append("hook"))
    with pytest.raises(RuntimeError, match="already registered"):
        ev.register_hook_after_wait(lambda: None)
    ev.event = "recorded"
    monkey = _ep_types.cuda_event
    try:
        _ep_types.cuda_event = lambda e: None  # no torch here: the wait itself is exercised on the GPU tests
        with ev(release_handle=True):
            pass
    finally:
        _ep_types.cuda_event = monkey
    assert seen == ["hook"] and ev.event is None and ev.hook_after_wait is None
