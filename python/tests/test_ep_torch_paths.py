"""ElasticBuffer's torch paths on the CPU, with fake_torch standing in for torch and fakes for the native EpBuffer:
outputs are new tensors per call (kernels write them directly without CPU sync; exact rows are copied with it),
column-major scales, and the streams of DeepEP's stream control (communication stream, events, record_stream,
allocation stream, previous_event, the order of EP calls made from different streams, graph capture)."""

import pytest

import fake_torch as torch
from fake_cuda import FakeEpBuffer, FakeNative

import symmoe
from symmoe import _checks, _ep_types, ep as ep_module

R, T_MAX, H, K, E = 2, 64, 256, 4, 16
T, RECV, EXPANDED, CAPACITY = 32, 40, 70, R * T_MAX


class Recorder:
    """_C.memcpy_async and _C.StreamOrder stand-ins: the copies and stream orders asked for."""

    def __init__(self):
        self.copies, self.orders = [], []

    def memcpy_async(self, dst, src, num_bytes, stream):
        self.copies.append((dst, src, num_bytes, stream))

    def stream_order(self, device):
        recorder = self

        class Order:
            def order(self, later, earlier):
                recorder.orders.append((later, earlier))
        return Order()


@pytest.fixture
def env(monkeypatch):
    torch.install(monkeypatch)
    monkeypatch.setattr(_ep_types, "_torch_marker", [])
    rec = Recorder()
    monkeypatch.setattr(ep_module._C, "memcpy_async", rec.memcpy_async)
    monkeypatch.setattr(ep_module._C, "StreamOrder", rec.stream_order)
    buf = symmoe.ElasticBuffer._validation_only(R, T_MAX, H, K, E)
    buf._state.new_native_handle = FakeNative
    for key in (("bf16", "none"), ("fp8", "fp32_per128")):
        buf._state.natives[key] = FakeEpBuffer(R, E, K, T_MAX, RECV, EXPANDED, CAPACITY)
    return buf, rec


def inputs(fp8=False):
    x = torch.Tensor((T, H), torch.float8_e4m3fn if fp8 else torch.bfloat16)
    sf = torch.Tensor((T, H // 128), torch.float32) if fp8 else None
    return ((x, sf) if fp8 else x), torch.Tensor((T, K), torch.int64), torch.Tensor((T, K), torch.float32)


def test_cpu_sync_outputs_are_new_tensors_with_the_exact_rows_copied(env):
    buf, rec = env
    x, idx, w = inputs(fp8=True)
    (recv_x, recv_sf), recv_idx, recv_w, handle, event = buf.dispatch(x, topk_idx=idx, topk_weights=w)
    assert (recv_x.shape, recv_x.dtype, recv_sf.shape, recv_sf.dtype) == ((RECV, H), torch.float8_e4m3fn,
                                                                          (RECV, H // 128), torch.float32)
    assert recv_idx.shape == (RECV, K) and recv_idx.dtype == torch.int64 and recv_w.shape == (RECV, K)
    legacy = _checks.CUDA_STREAM_LEGACY  # torch's default stream
    assert rec.copies == [(recv_x.data_ptr(), 0x1000, RECV * H, legacy),
                          (recv_sf.data_ptr(), 0x2000, RECV * H // 128 * 4, legacy),
                          (recv_idx.data_ptr(), 0x3000, RECV * K * 8, legacy),
                          (recv_w.data_ptr(), 0x4000, RECV * K * 4, legacy)]
    assert buf._state.natives[("fp8", "fp32_per128")].out_addresses == (0, 0, 0, 0, 0)
    assert event.event is None and rec.orders == [] and torch.set_stream_calls == []
    # combine: the kernel writes the new tensors directly (their addresses go to the runtime)
    y = torch.Tensor((RECV, H), torch.bfloat16)
    combined_x, combined_w, _ = buf.combine(y, handle=handle, topk_weights=recv_w)
    call = buf._state.natives[("fp8", "fp32_per128")].calls[-1]
    assert call[-2:] == (combined_x.data_ptr(), combined_w.data_ptr())
    assert combined_x.shape == (T, H) and combined_w.shape == (T, K) and len(rec.copies) == 4


@pytest.mark.parametrize("expand", [False, True])
def test_without_cpu_sync_the_kernels_write_the_new_tensors(env, expand):
    buf, rec = env
    x, idx, w = inputs(fp8=True)
    (recv_x, recv_sf), recv_idx, recv_w, handle, _ = buf.dispatch(x, topk_idx=idx, topk_weights=w, do_cpu_sync=False,
                                                                  do_expand=expand)
    impl = buf._state.natives[("fp8", "fp32_per128")]
    assert impl.out_addresses == (recv_x.data_ptr(), recv_sf.data_ptr(), 0 if expand else recv_idx.data_ptr(),
                                  recv_w.data_ptr(), CAPACITY)
    assert recv_x.shape == (CAPACITY, H) and rec.copies == [] and (recv_idx is None) == expand
    assert recv_w.shape == ((CAPACITY,) if expand else (CAPACITY, K))
    again = buf.dispatch(x, topk_idx=idx, topk_weights=w, do_cpu_sync=False, do_expand=expand)
    assert again[0][0].data_ptr() != recv_x.data_ptr()  # every call its own tensors


def test_column_major_scales(env):
    buf, rec = env
    x, idx, w = inputs(fp8=True)
    (recv_x, recv_sf), _, _, _, _ = buf.dispatch(x, topk_idx=idx, topk_weights=w, do_expand=True,
                                                 use_tma_aligned_col_major_sf=True)
    assert recv_sf.shape == (EXPANDED, H // 128) and recv_sf.stride() == (1, 72)  # 70 rows aligned to 4
    op, src, stream = recv_sf.ops[0]
    assert op == "copy_" and src.data_ptr() == 0x2000 and src.shape == (EXPANDED, H // 128)
    assert [c[1] for c in rec.copies] == [0x1000, 0x4000]  # x and weights copied, scales transposed by copy_


def test_async_runs_on_the_comm_stream_and_records_the_tensors(env):
    buf, rec = env
    legacy = _checks.CUDA_STREAM_LEGACY
    x, idx, w = inputs()
    recv_x, recv_idx, recv_w, handle, event = buf.dispatch(x, topk_idx=idx, topk_weights=w,
                                                           async_with_compute_stream=True)
    comm = buf.get_comm_stream()
    impl = buf._state.natives[("bf16", "none")]
    assert impl.calls[-1][6] == comm.cuda_stream  # launched on the communication stream
    assert rec.orders == [(comm.cuda_stream, legacy)]  # after the compute stream's work; no join back
    assert event.event.event.recorded_on is comm
    for t in (x, idx, w, recv_x, recv_idx, recv_w):
        assert t.recorded_streams == [torch._default, comm]
    assert all(c[3] == comm.cuda_stream for c in rec.copies)
    assert recv_x.allocated_on is torch._default  # allocate_on_comm_stream=False: the compute stream's
    # the next call, on the compute stream, is ordered after the communication stream
    buf.combine(torch.Tensor((RECV, H), torch.bfloat16), handle=handle)
    assert rec.orders[-1] == (legacy, comm.cuda_stream)
    assert impl.calls[-1][5] == legacy


def test_allocate_on_comm_stream_and_previous_event(env):
    buf, rec = env
    legacy = _checks.CUDA_STREAM_LEGACY
    x, idx, w = inputs()
    previous = buf.capture()
    recv_x, _, _, handle, event = buf.dispatch(x, topk_idx=idx, topk_weights=w, previous_event=previous,
                                               allocate_on_comm_stream=True)
    comm = buf.get_comm_stream()
    assert comm.waited == [previous.event]  # previous_event instead of the compute stream
    assert (comm.cuda_stream, legacy) not in rec.orders
    assert recv_x.allocated_on is comm and torch.cuda.current_stream() is torch._default  # restored
    assert torch.set_stream_calls == [comm, torch._default]
    assert rec.orders[-1] == (legacy, comm.cuda_stream) and event.event is None  # not async: compute waits
    with pytest.raises(ValueError, match="allocate_on_comm_stream=True"):
        buf.dispatch(x, topk_idx=idx, topk_weights=w, previous_event=buf.capture())


def test_a_failing_call_restores_the_current_stream(env):
    buf, _ = env
    x, idx, w = inputs()
    buf._state.natives[("bf16", "none")].fail = "bad expert id"
    with pytest.raises(RuntimeError, match="bad expert id"):
        buf.dispatch(x, topk_idx=idx, topk_weights=w, allocate_on_comm_stream=True)
    assert torch.cuda.current_stream() is torch._default


def test_calls_from_another_stream_are_ordered_except_under_graph_capture(env):
    buf, rec = env
    legacy = _checks.CUDA_STREAM_LEGACY
    x, idx, w = inputs()
    buf.dispatch(x, topk_idx=idx, topk_weights=w)
    side = torch.Stream()
    with torch.cuda.stream(side):
        buf.dispatch(x, topk_idx=idx, topk_weights=w)
    assert rec.orders == [(side.cuda_stream, legacy)]
    capture = torch.Stream()
    torch._capturing[0] = True
    with torch.cuda.stream(capture):
        buf.dispatch(x, topk_idx=idx, topk_weights=w, do_cpu_sync=False)
    assert rec.orders == [(side.cuda_stream, legacy)]  # no event on a stream outside the capture


def test_stats_and_shared_topk_idx_on_the_comm_stream(env):
    buf, rec = env
    x, idx, w = inputs()
    stats = torch.Tensor((E // R,), torch.int32)
    _, _, _, handle, event = buf.dispatch(x, topk_idx=idx, topk_weights=w, cumulative_local_expert_recv_stats=stats,
                                          do_handle_copy=False, async_with_compute_stream=True)
    comm = buf.get_comm_stream()
    assert stats.ops[0][0] == "add_" and stats.ops[0][2] is comm  # added on the communication stream
    assert handle.topk_idx is idx
    event.current_stream_wait()
    buf.combine(torch.Tensor((RECV, H), torch.bfloat16), handle=handle)
    assert rec.copies[-1][:3] == (handle.native.ptrs["topk_idx"], idx.data_ptr(), T * K * 8)
