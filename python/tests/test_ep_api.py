"""ElasticBuffer's argument checks on the CPU: every bad tensor is refused with a clear error before any GPU work.
Fake CUDA tensors are DLPack producers that describe device memory which does not exist (never dereferenced)."""
import numpy as np
import pytest

import symmoe
from symmoe import _C, _ep_types

from fake_cuda import FakeCuda, FakeEpBuffer, FakeNative

T_MAX, H, K, E = 64, 256, 4, 16


def buffer(fp8=False, scales="fp32_per128"):
    return symmoe.ElasticBuffer._validation_only(2, T_MAX, H, K, E, use_fp8_dispatch=fp8, fp8_scales=scales)


def good(t=32):
    return dict(x=FakeCuda((t, H), "bfloat16"), topk_idx=FakeCuda((t, K), "int64"),
                topk_weights=FakeCuda((t, K), "float32"))


def dispatch(buf, **kw):
    args = good()
    args.update(kw)
    x = args.pop("x")
    return buf.dispatch(x, **args)


def test_valid_arguments_reach_the_runtime():
    with pytest.raises(RuntimeError, match="no GPU runtime"):
        dispatch(buffer())
    with pytest.raises(RuntimeError, match="no GPU runtime"):
        dispatch(buffer(fp8=True), x=(FakeCuda((32, H), "float8_e4m3fn"), FakeCuda((32, H // 128), "float32")))
    with pytest.raises(RuntimeError, match="no GPU runtime"):  # UE8M0 per 32: H/32 bytes = H/128 int32
        dispatch(buffer(fp8=True, scales="ue8m0_per32"), x=(FakeCuda((32, H), "uint8"), FakeCuda((32, 2), "int32")))


@pytest.mark.parametrize("kw, exc, pattern", [
    (dict(x=np.zeros((32, H), np.uint16)), ValueError, r"x must be on cuda:0 .*got cpu"),
    (dict(x=FakeCuda((32, H), "bfloat16", device=1)), ValueError, r"x must be on cuda:0 .*got cuda:1"),
    (dict(x=FakeCuda((32, H), "float32")), TypeError, r"x must have dtype bfloat16, got float32"),
    (dict(x=FakeCuda((32, H + 128), "bfloat16")), ValueError, r"x must have shape \['\*', 256\], got \[32, 384\]"),
    (dict(x=FakeCuda((T_MAX + 1, H), "bfloat16"), topk_idx=FakeCuda((T_MAX + 1, K), "int64"),
          topk_weights=FakeCuda((T_MAX + 1, K), "float32")), ValueError, r"more than num_max_tokens_per_rank = 64"),
    (dict(topk_idx=FakeCuda((32, K), "int32")), TypeError, r"topk_idx must have dtype int64, got int32"),
    (dict(topk_idx=FakeCuda((31, K), "int64")), ValueError, r"topk_idx must have shape \[32, 4\]"),
    (dict(topk_weights=FakeCuda((32, K), "bfloat16")), TypeError, r"topk_weights must have dtype float32"),
    (dict(topk_weights=None), ValueError, r"topk_weights is required"),
    (dict(topk_idx=None), ValueError, r"topk_idx is required"),
    (dict(x=[[1, 2]]), TypeError, r"x: expected a tensor with __dlpack__"),
    (dict(num_experts=32), ValueError, r"num_experts 32 differs from the buffer's 16"),
    (dict(num_max_tokens_per_rank=8), ValueError, r"num_max_tokens_per_rank 8 differs"),
    (dict(expert_alignment=0), ValueError, r"expert_alignment must be >= 1"),
    (dict(expert_alignment=2048), ValueError, r"expert_alignment must be <= 1024"),
    (dict(num_sms=-1), ValueError, r"num_sms must be >= 0"),
    (dict(x=(FakeCuda((32, H), "bfloat16"), FakeCuda((32, 2), "float32"))), TypeError, r"float8_e4m3fn or uint8"),
    (dict(previous_event=object()), ValueError, r"previous_event needs allocate_on_comm_stream=True"),
])
def test_bad_dispatch_arguments(kw, exc, pattern):
    with pytest.raises(exc, match=pattern):
        dispatch(buffer(), **kw)


@pytest.mark.parametrize("x, exc, pattern", [
    (FakeCuda((32, H), "float8_e4m3fn"), ValueError, r"must be an \(x, sf\) pair"),
    ((FakeCuda((32, H), "bfloat16"), FakeCuda((32, 2), "float32")), TypeError, r"float8_e4m3fn or uint8"),
    ((FakeCuda((32, H), "uint8"), FakeCuda((32, 3), "int32")), ValueError, r"int32 \(packed UE8M0\) scales must have 2"),
    ((FakeCuda((32, H), "uint8"), FakeCuda((32, 2), "float16")), TypeError, r"sf must have dtype float32 .* or int32"),
    ((FakeCuda((32, H), "uint8"), FakeCuda((32, 3), "float32")), ValueError, r"sf \(fp32_per128\) must have shape \[32, 2\]"),
])
def test_bad_fp8_payloads(x, exc, pattern):
    with pytest.raises(exc, match=pattern):
        dispatch(buffer(fp8=True), x=x)


def test_combine_needs_a_handle_of_this_buffer():
    buf = buffer()
    with pytest.raises(ValueError, match="EPHandle of this buffer"):
        buf.combine(FakeCuda((4, H), "bfloat16"), handle=None)
    other = symmoe.EPHandle(buffer())
    with pytest.raises(ValueError, match="EPHandle of this buffer"):
        buf.combine(FakeCuda((4, H), "bfloat16"), handle=other)
    with pytest.raises(ValueError, match="empty"):
        buf.combine(FakeCuda((4, H), "bfloat16"), handle=symmoe.EPHandle(buf))
    with pytest.raises(RuntimeError, match="handle is empty"):
        symmoe.EPHandle(buf).recv_src_metadata


def test_bad_buffer_configuration():
    with pytest.raises(symmoe.Error, match="hidden must be a positive multiple of 128"):
        symmoe.ElasticBuffer._validation_only(2, T_MAX, 100, K, E)
    with pytest.raises(symmoe.Error, match=r"num_experts \(15\) must be a positive multiple of num_ranks \(2\)"):
        symmoe.ElasticBuffer._validation_only(2, T_MAX, H, K, 15)
    with pytest.raises(TypeError, match="num_topk must be an int"):
        symmoe.ElasticBuffer._validation_only(2, T_MAX, H, 2.0, E)
    with pytest.raises(ValueError, match="fp8_scales"):
        symmoe.ElasticBuffer._validation_only(2, T_MAX, H, K, E, use_fp8_dispatch=True, fp8_scales="fp16")


def test_payload_tuples_of_the_wrong_length():
    with pytest.raises(ValueError, match="tuple of 3"):
        dispatch(buffer(fp8=True), x=(FakeCuda((32, H), "uint8"),) * 3)


def test_runtime_entry_points_check_their_arguments_first():
    uid = _C.nccl_unique_id_hex()
    assert len(uid) == 256 and all(c in "0123456789abcdef" for c in uid)
    with pytest.raises(symmoe.Error, match="unique_id_hex must be 256 hex digits"):
        _C.Communicator.multi_process(0, 2, 0, "zz" * 128)
    with pytest.raises(symmoe.Error, match=r"rank 2 outside \[0, world_size = 2\)"):
        _C.Communicator.multi_process(2, 2, 0, uid)


def test_a_real_buffer_without_a_gpu_fails_with_the_cuda_error():
    """On a machine without a usable GPU the runtime reports the CUDA error; with one, the buffer works."""
    try:
        buf = symmoe.ElasticBuffer(None, num_max_tokens_per_rank=8, hidden=128, num_topk=2, num_experts=4)
    except symmoe.Error as e:
        assert "[cuda]" in str(e) and "(at " in str(e)
    else:
        assert buf.num_ranks == 1 and buf.communicator.backend == "in_process"
        buf.destroy()


def test_released_handles_are_pooled_and_start_empty():
    """A fresh dispatch reuses the native handle of a released EPHandle (no device allocation per dispatch); the
    new EPHandle is empty until its dispatch succeeds, whatever the pooled native held."""
    buf = buffer()
    buf._state.natives[("bf16", "none")] = object()  # pooling is on only while the buffer has a runtime
    first = symmoe.EPHandle(buf)
    native = first.native
    first.filled = True
    del first
    second = symmoe.EPHandle(buf)
    assert second.native is native and not second.is_filled
    with pytest.raises(RuntimeError, match="handle is empty"):
        second.recv_src_metadata
    others = [symmoe.EPHandle(buf) for _ in range(2 * _ep_types.NATIVE_HANDLE_POOL_SIZE)]
    del others
    assert len(buf._state.free_native_handles) == _ep_types.NATIVE_HANDLE_POOL_SIZE
    buf.destroy()  # drops the pool; handles released afterwards are freed, not pooled
    del second
    assert buf._state.free_native_handles == []


@pytest.mark.parametrize("cpu_sync", [True, False])
def test_outputs_view_the_runtime_addresses_with_the_right_shapes(cpu_sync):
    """Non-torch inputs: outputs are zero-copy views of the runtime's addresses (no framework to allocate with)."""
    buf = buffer(fp8=True)
    buf._state.new_native_handle = FakeNative
    buf._state.natives[("fp8", "fp32_per128")] = FakeEpBuffer(2, E, K, T_MAX, recv=40, expanded=50, capacity=2 * T_MAX)
    x, sf = FakeCuda((32, H), "uint8"), FakeCuda((32, H // 128), "float32")
    idx, w = FakeCuda((32, K), "int64"), FakeCuda((32, K), "float32")
    (recv_x, recv_sf), recv_idx, recv_w, handle, event = buf.dispatch((x, sf), topk_idx=idx, topk_weights=w,
                                                                     num_sms=8, do_cpu_sync=cpu_sync)
    call = buf._impl.calls[0]
    assert call[:6] == ("dispatch", 32, x.ptr, sf.ptr, idx.ptr, w.ptr)
    assert call[7] is handle.native and call[-2:] == (8, cpu_sync)
    rows = 40 if cpu_sync else 2 * T_MAX
    assert (recv_x.data_ptr, recv_x.shape, recv_x.dtype) == (0x1000, (rows, H), "uint8")
    assert (recv_sf.data_ptr, recv_sf.shape, recv_sf.dtype) == (0x2000, (rows, H // 128), "float32")
    assert (recv_idx.data_ptr, recv_idx.shape, recv_w.shape) == (0x3000, (rows, K), (rows, K))
    assert handle.is_filled and handle.row_capacity == 2 * T_MAX and event.event is None
    y = FakeCuda((rows, H), "bfloat16")
    combined_x, combined_w, _ = buf.combine(y, handle=handle, topk_weights=FakeCuda((rows, K), "float32"))
    assert buf._impl.calls[1][1] == y.ptr and buf._impl.calls[1][6] is handle.native
    assert (combined_x.data_ptr, combined_x.shape) == (0x5000, (handle.num_tokens, H))
    assert (combined_w.data_ptr, combined_w.shape) == (0x6000, (handle.num_tokens, K))


def test_deep_ep_v2_arguments_are_accepted():
    """DeepEP V2's names reach the runtime: None defaults (expert_alignment, do_cpu_sync), the ignored RDMA and
    stream-ownership arguments, and a dispatch without topk_weights on torch inputs only."""
    buf = buffer()
    with pytest.raises(RuntimeError, match="no GPU runtime"):
        dispatch(buf, expert_alignment=None, do_cpu_sync=None, num_qps=4, allocate_on_comm_stream=True,
                 do_handle_copy=False, previous_event=None)
    with pytest.raises(ValueError, match="topk_weights is required .* unless the inputs are torch tensors"):
        dispatch(buf, topk_weights=None)
    with pytest.raises(ValueError, match="use_tma_aligned_col_major_sf needs torch inputs"):
        dispatch(buffer(fp8=True), x=(FakeCuda((32, H), "uint8"), FakeCuda((32, 2), "float32")),
                 use_tma_aligned_col_major_sf=True)
    with pytest.raises(ValueError, match="cumulative_local_expert_recv_stats must have shape \\[8\\], got \\[9\\]"):
        buf._state.natives[("bf16", "none")] = FakeEpBuffer(2, E, K, T_MAX, recv=8, expanded=8, capacity=2 * T_MAX)
        dispatch(buf, cumulative_local_expert_recv_stats=FakeCuda((E // 2 + 1,), "int32"))
    assert buf.get_logical_domain_size() == (1, 2) and buf.get_physical_domain_size() == (1, 2)
    assert buf.get_theoretical_num_qps(24) == 0
    assert buf.get_theoretical_num_sms(E, K) > 0


def test_deep_ep_v2_buffer_size_hint_and_lazy_experts():
    with_e = symmoe.ElasticBuffer.get_buffer_size_hint(2, T_MAX, H, K, True, num_experts=E)
    without = symmoe.ElasticBuffer.get_buffer_size_hint(2, T_MAX, H, K, use_fp8_dispatch=True)
    assert with_e > 0 and without >= with_e  # sized for 256 experts when E is not known
    buf = symmoe.ElasticBuffer._validation_only(2, T_MAX, H, K, None)  # DeepEP-style: E comes with dispatch
    assert buf.num_experts is None
    with pytest.raises(ValueError, match="differs from the buffer's None"):
        dispatch(buf, num_experts=E)  # no runtime to allocate on: refused, not silently accepted


def test_handle_has_deep_ep_v2_names():
    buf = buffer()
    h = symmoe.EPHandle(buf)
    assert h.num_sms == 0
    with pytest.raises(RuntimeError, match="handle is empty"):
        h.psum_num_recv_tokens_per_scaleup_rank  # DeepEP V2's name of psum_num_recv_tokens_per_rank
