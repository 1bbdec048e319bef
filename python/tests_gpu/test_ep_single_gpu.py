"""ElasticBuffer on one GPU (one in-process rank, all experts local) against the golden model, bitwise, and the DeepEP
V2 semantics DeepEP's own tests/elastic/test_ep.py relies on: outputs that stay valid after later calls, one buffer
for BF16 and FP8, None recv_topk_idx in expand mode, TMA-aligned column-major scales, do_handle_copy=False, exact
row counts with masked tokens (cached == fresh), the communication stream (async_with_compute_stream,
allocate_on_comm_stream, previous_event), DeepEP's bias order and allow_multiple_reduction."""
import pytest
import torch

import symmoe
from symmoe import reference as ref
from eager_paths import PATHS, eager_path, torch_ext_or_skip
from golden import assert_bitwise, bits, poison_

T_MAX, H, K, E = 96, 512, 8, 32


def routing(t, kind, seed):
    idx, w = ref.routing(t, E, K, kind=kind, mask_prob=0.1, seed=seed)
    idx[0, :] = -1  # one token routed nowhere
    w[0, :] = 0
    return idx, w


def inputs(t, kind, seed, fp8):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(t, H, device="cuda", generator=g).to(torch.bfloat16)
    idx, w = routing(t, kind, seed)
    sf = None
    if fp8:
        codes, scales = symmoe.quantize_activations(x.float().cpu().numpy(), 128, "fp32")
        x = torch.from_numpy(codes).cuda().view(torch.float8_e4m3fn)
        sf = torch.from_numpy(scales).cuda()
    return x, sf, torch.from_numpy(idx).cuda(), torch.from_numpy(w).cuda()


@pytest.fixture(autouse=True, params=PATHS)
def eager(request):
    """Every test twice: the eager fast path in Python, and in the libtorch extension symmoe._torch_ep (skipped,
    with the reason, when it is not built)."""
    if request.param == "torch_ext":
        torch_ext_or_skip()
    with eager_path(request.param):
        yield request.param


@pytest.fixture(scope="module")
def buffers():
    return {fp8: symmoe.ElasticBuffer(None, num_max_tokens_per_rank=T_MAX, hidden=H, num_topk=K, num_experts=E,
                                      use_fp8_dispatch=fp8) for fp8 in (False, True)}


def check_dispatch(out, golden, fp8, expand):
    recv_x, recv_idx, recv_w, handle, _ = out
    g_x, g_idx, g_w, g_handle = golden
    if fp8:
        assert_bitwise(g_x[0], bits(recv_x[0]), "recv_x")
        assert_bitwise(g_x[1], bits(recv_x[1]), "recv_x scales")
    else:
        assert_bitwise(g_x, bits(recv_x), "recv_x")
    if expand:
        assert recv_idx is None  # DeepEP: the expert of an expand row is its segment
    else:
        assert_bitwise(g_idx, bits(recv_idx), "recv_topk_idx")
    assert_bitwise(g_w, bits(recv_w), "recv_topk_weights")
    assert handle.num_recv_tokens == g_handle.num_recv_tokens
    assert handle.num_expanded_tokens == g_handle.num_expanded_tokens
    assert list(handle.num_recv_tokens_per_expert_list) == list(g_handle.num_recv_tokens_per_expert_list)
    assert_bitwise(g_handle.recv_src_metadata, bits(handle.recv_src_metadata), "recv_src_metadata")  # exact rows
    for name in ("num_tokens_per_rank", "num_tokens_per_expert", "psum_num_recv_tokens_per_rank",
                 "num_unaligned_recv_tokens_per_expert", "psum_num_recv_tokens_per_expert"):
        assert_bitwise(getattr(g_handle, name), bits(getattr(handle, name)), name)
    assert_bitwise(g_handle.dst_buffer_slot_idx, bits(handle.dst_buffer_slot_idx), "dst_buffer_slot_idx")


@pytest.mark.parametrize("fp8", [False, True])
@pytest.mark.parametrize("expand, alignment", [(False, 1), (True, 1), (True, 64)])
@pytest.mark.parametrize("kind", ["uniform", "zipf", "hot"])
def test_dispatch_combine_match_golden(buffers, fp8, expand, alignment, kind):
    buf = buffers[fp8]
    t = T_MAX - 5
    x, sf, idx, w = inputs(t, kind, seed=100 * fp8 + 10 * expand + alignment + len(kind), fp8=fp8)
    payload = (x, sf) if fp8 else x
    # warm-up, then poison its outputs (the next call's are new tensors)
    warm = buf.dispatch(payload, topk_idx=idx, topk_weights=w, do_expand=expand, expert_alignment=alignment)
    for tnsr in (warm[0] if fp8 else (warm[0],)) + (warm[1], warm[2]):
        if tnsr is not None:
            poison_(tnsr)
    out = buf.dispatch(payload, topk_idx=idx, topk_weights=w, num_experts=E, do_expand=expand,
                       expert_alignment=alignment)
    g_in = (bits(x), bits(sf)) if fp8 else bits(x)
    golden = ref.dispatch([g_in], topk_idx=[bits(idx)], topk_weights=[bits(w)], num_experts=E,
                          num_max_tokens_per_rank=T_MAX, expert_alignment=alignment, do_expand=expand)[0]
    check_dispatch(out, tuple(golden), fp8, expand)

    # cached dispatch: bitwise the same, with the fresh dispatch's exact row count (DeepEP)
    first = bits(out[0][0] if fp8 else out[0]).copy()
    cached = buf.dispatch(payload, topk_weights=w, handle=out[3])
    assert_bitwise(first, bits(cached[0][0] if fp8 else cached[0]), "cached dispatch recv_x")

    # combine: weights applied before combine (DeepEP V2), bf16 rows
    recv_x, _, recv_w, handle, _ = out
    rows = (recv_x[0].view(torch.uint8) if fp8 else recv_x).shape[0]
    y = torch.randn(rows, H, device="cuda").to(torch.bfloat16)
    bias = torch.randn(t, H, device="cuda").to(torch.bfloat16)
    combined_x, combined_w, event = buf.combine(y, handle=handle, topk_weights=recv_w, bias=bias,
                                                async_with_compute_stream=True)
    event.current_stream_wait()
    g_comb = ref.combine([bits(y)], handles=[golden.handle], topk_weights=[bits(recv_w)], bias=[bits(bias)],
                         reduce_local_experts=expand)[0]  # allow_multiple_reduction=True (DeepEP's default)
    assert_bitwise(g_comb[0], bits(combined_x), "combined_x")
    assert_bitwise(g_comb[1], bits(combined_w), "combined_topk_weights")


def test_no_cpu_sync_returns_capacity_rows_and_device_counts(buffers):
    buf = buffers[False]
    x, _, idx, w = inputs(40, "zipf", 3, fp8=False)
    recv_x, _, _, handle, _ = buf.dispatch(x, topk_idx=idx, topk_weights=w, do_cpu_sync=False)
    buf.synchronize()
    assert recv_x.shape[0] == handle.row_capacity >= 40
    golden = ref.dispatch([bits(x)], topk_idx=[bits(idx)], topk_weights=[bits(w)], num_experts=E,
                          num_max_tokens_per_rank=T_MAX)[0]
    counts = bits(handle.device_counts)
    assert counts[0] == golden.handle.num_recv_tokens
    assert_bitwise(golden.recv_x, bits(recv_x)[:counts[0]], "recv_x (no cpu sync)")


def test_bad_expert_id_raises_with_token_and_lane(buffers):
    buf = buffers[False]
    x, _, idx, w = inputs(16, "uniform", 5, fp8=False)
    idx[3, 2] = E + 7
    with pytest.raises(symmoe.Error, match="token 3"):
        buf.dispatch(x, topk_idx=idx, topk_weights=w)


def test_wrong_device_and_dtype_are_refused_before_launch(buffers):
    buf = buffers[False]
    x, _, idx, w = inputs(16, "uniform", 6, fp8=False)
    with pytest.raises(ValueError, match="must be on cuda"):
        buf.dispatch(x.cpu(), topk_idx=idx, topk_weights=w)
    with pytest.raises(TypeError, match="topk_idx must have dtype int64"):
        buf.dispatch(x, topk_idx=idx.int(), topk_weights=w)
    with pytest.raises(ValueError, match="contiguous"):
        buf.dispatch(x, topk_idx=idx.t().contiguous().t(), topk_weights=w)


def test_communicator_from_group_needs_torch_distributed():
    import torch.distributed as dist
    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    with pytest.raises(RuntimeError, match="not initialised"):
        symmoe.Communicator.from_group()


# ---- DeepEP V2 semantics (what DeepEP's tests/elastic/test_ep.py checks) ----

def golden_dispatch(x, sf, idx, w, expand=False, alignment=1):
    g_in = (bits(x), bits(sf)) if sf is not None else bits(x)
    return ref.dispatch([g_in], topk_idx=[bits(idx)], topk_weights=[bits(w)], num_experts=E,
                        num_max_tokens_per_rank=T_MAX, expert_alignment=alignment, do_expand=expand)[0]


def test_outputs_stay_valid_after_later_calls(buffers):
    """Every returned tensor is the caller's: later dispatches and combines (of other inputs) leave it alone."""
    buf = buffers[True]
    x, sf, idx, w = inputs(T_MAX - 9, "zipf", 21, fp8=True)
    keep = []
    for expand in (False, True):
        out = buf.dispatch((x, sf), topk_idx=idx, topk_weights=w, do_expand=expand, expert_alignment=16)
        rows = out[0][0].shape[0]
        y = torch.randn(rows, H, device="cuda").to(torch.bfloat16)
        comb = buf.combine(y, handle=out[3], topk_weights=out[2])
        tensors = [out[0][0], out[0][1], out[2], comb[0], comb[1]] + ([] if expand else [out[1]])
        keep.append((tensors, [t.clone() for t in tensors]))
    x2, sf2, idx2, w2 = inputs(T_MAX, "hot", 22, fp8=True)  # other routing, more rows: buffers grow
    for expand in (False, True):
        out = buf.dispatch((x2, sf2), topk_idx=idx2, topk_weights=w2, do_expand=expand, expert_alignment=128)
        y = torch.randn(out[0][0].shape[0], H, device="cuda").to(torch.bfloat16)
        buf.combine(y, handle=out[3], topk_weights=out[2])
    torch.cuda.synchronize()
    for tensors, snapshots in keep:
        for t, snap in zip(tensors, snapshots):
            assert torch.equal(t.view(torch.uint8), snap.view(torch.uint8))


def test_one_buffer_carries_bf16_and_fp8_with_num_topk_from_the_first_dispatch():
    """DeepEP-style construction (no num_topk, no num_experts); the payload dtype is chosen per call."""
    buf = symmoe.ElasticBuffer(None, num_max_tokens_per_rank=T_MAX, hidden=H)
    for fp8 in (False, True, False):
        x, sf, idx, w = inputs(T_MAX - 3, "uniform", 31 + fp8, fp8=fp8)
        out = buf.dispatch((x, sf) if fp8 else x, topk_idx=idx, topk_weights=w, num_experts=E)
        check_dispatch(out, tuple(golden_dispatch(x, sf, idx, w)), fp8, False)
    assert buf.num_topk == K and buf.num_experts == E and len(buf._state.natives) == 2
    buf.destroy()


@pytest.mark.parametrize("expand", [False, True])
def test_tma_aligned_column_major_scales(buffers, expand):
    buf = buffers[True]
    x, sf, idx, w = inputs(T_MAX - 2, "zipf", 41, fp8=True)
    golden = golden_dispatch(x, sf, idx, w, expand=expand, alignment=4)
    (recv_x, recv_sf), recv_idx, _, handle, _ = buf.dispatch(
        (x, sf), topk_idx=idx, topk_weights=w, do_expand=expand, expert_alignment=4, use_tma_aligned_col_major_sf=True)
    rows = recv_x.shape[0]
    assert recv_sf.shape == (rows, H // 128) and recv_sf.stride() == (1, -(-rows // 4) * 4)  # DeepGEMM's TMA layout
    assert_bitwise(golden.recv_x[1], bits(recv_sf), "column-major scales")
    assert (recv_idx is None) == expand


def test_do_handle_copy_false_shares_topk_idx(buffers):
    buf = buffers[False]
    x, _, idx, w = inputs(T_MAX - 4, "uniform", 51, fp8=False)
    golden = golden_dispatch(x, None, idx, w)
    own = buf.dispatch(x, topk_idx=idx, topk_weights=w)[3]
    recv_x, _, recv_w, shared, _ = buf.dispatch(x, topk_idx=idx, topk_weights=w, do_handle_copy=False)
    assert own.topk_idx.data_ptr() != idx.data_ptr() and torch.equal(own.topk_idx, idx)
    assert shared.topk_idx.data_ptr() == idx.data_ptr()
    cached = buf.dispatch(x, handle=shared)  # reads the caller's tensor
    assert shared.topk_idx.data_ptr() == idx.data_ptr() and torch.equal(cached[0], recv_x)
    y = torch.randn(recv_x.shape[0], H, device="cuda").to(torch.bfloat16)
    combined_x, combined_w, _ = buf.combine(y, handle=shared, topk_weights=recv_w)
    g = ref.combine([bits(y)], handles=[golden.handle], topk_weights=[bits(recv_w)])[0]
    assert_bitwise(g[0], bits(combined_x), "combined_x (shared topk_idx)")
    assert_bitwise(g[1], bits(combined_w), "combined_topk_weights (shared topk_idx)")


@pytest.mark.parametrize("cpu_sync", [True, False])
def test_masked_tokens_exact_rows_and_cached_equals_fresh(buffers, cpu_sync):
    buf = buffers[True]
    t = T_MAX - 1
    idx, w = ref.routing(t, E, K, kind="zipf", mask_prob=0.5, seed=61)
    idx[:7, :] = -1  # tokens routed nowhere
    w[idx < 0] = 0
    x, sf, _, _ = inputs(t, "uniform", 61, fp8=True)
    idx, w = torch.from_numpy(idx).cuda(), torch.from_numpy(w).cuda()
    golden = golden_dispatch(x, sf, idx, w)
    n = golden.handle.num_recv_tokens
    assert n < t
    (recv_x, recv_sf), recv_idx, recv_w, handle, _ = buf.dispatch((x, sf), topk_idx=idx, topk_weights=w,
                                                                  do_cpu_sync=cpu_sync)
    rows = n if cpu_sync else T_MAX
    assert recv_x.shape[0] == rows and handle.recv_src_metadata.shape == (rows, 2 + K)
    assert handle.psum_num_recv_tokens_per_scaleup_rank[-1].item() == n
    assert_bitwise(golden.handle.recv_src_metadata, bits(handle.recv_src_metadata)[:n], "recv_src_metadata")
    (c_x, c_sf), c_idx, _, _, _ = buf.dispatch((x, sf), handle=handle)
    assert torch.equal(recv_x[:n].view(torch.uint8), c_x[:n].view(torch.uint8)) and c_x.shape == recv_x.shape
    assert torch.equal(recv_sf[:n], c_sf[:n]) and torch.equal(recv_idx[:n], c_idx[:n])
    y = torch.randn(rows, H, device="cuda").to(torch.bfloat16)
    combined_x, _, _ = buf.combine(y, handle=handle)
    g = ref.combine([bits(y[:n])], handles=[golden.handle])[0]
    assert_bitwise(g[0], bits(combined_x), "combined_x with masked tokens")
    assert torch.all(combined_x[:7] == 0)


@pytest.mark.parametrize("mode", ["async", "alloc_on_comm", "previous_event", "async+alloc_on_comm"])
def test_communication_stream_modes(buffers, mode):
    """The call runs on the buffer's communication stream; its results equal the golden model's once the compute
    stream waited (the EventOverlap) or by itself (not async)."""
    buf = buffers[False]
    async_ = mode.startswith("async")
    alloc = "alloc_on_comm" in mode or mode == "previous_event"
    x, _, idx, w = inputs(T_MAX - 6, "hot", 71, fp8=False)
    golden = golden_dispatch(x, None, idx, w, expand=True, alignment=8)
    x_late = torch.zeros_like(x)
    torch.cuda._sleep(20_000_000)  # the compute stream is busy; x_late is written after the sleep
    x_late.copy_(x)
    kw = dict(async_with_compute_stream=async_, allocate_on_comm_stream=alloc)
    if mode == "previous_event":
        kw["previous_event"] = buf.capture()  # recorded after the copy: the dispatch waits for it
    out = buf.dispatch(x_late, topk_idx=idx, topk_weights=w, do_expand=True, expert_alignment=8, **kw)
    if async_:
        assert out[4].event is not None
        out[4].current_stream_wait()
    else:
        assert out[4].event is None
    check_dispatch(out, tuple(golden), False, True)
    y = torch.randn(out[0].shape[0], H, device="cuda").to(torch.bfloat16)
    kw.pop("previous_event", None)
    if mode == "previous_event":
        kw["previous_event"] = buf.capture()
    combined_x, _, event = buf.combine(y, handle=out[3], **kw)
    with event:  # waits when async
        g = ref.combine([bits(y)], handles=[golden.handle], reduce_local_experts=True)[0]
    assert_bitwise(g[0], bits(combined_x), "combined_x")
    assert torch.cuda.current_stream() == torch.cuda.default_stream()


def test_previous_event_needs_allocate_on_comm_stream(buffers):
    buf = buffers[False]
    x, _, idx, w = inputs(8, "uniform", 72, fp8=False)
    with pytest.raises(ValueError, match="allocate_on_comm_stream=True"):
        buf.dispatch(x, topk_idx=idx, topk_weights=w, previous_event=buf.capture())


@pytest.mark.parametrize("expand", [False, True])
def test_biases_start_the_sum(buffers, expand):
    """DeepEP's order: bf16(bias_0 + bias_1 + rows...) in fp32. Biases b and -b of magnitude 2^20 cancel exactly
    first, so the result equals the combine without biases (rows first would round to multiples of 2^-3)."""
    buf = buffers[False]
    x, _, idx, w = inputs(T_MAX - 8, "zipf", 81, fp8=False)
    out = buf.dispatch(x, topk_idx=idx, topk_weights=w, do_expand=expand)
    y = torch.randn(out[0].shape[0], H, device="cuda").to(torch.bfloat16)
    t = x.shape[0]
    big = (torch.randint(128, 256, (t, H), device="cuda").float() * 2.0 ** 13).to(torch.bfloat16)
    plain = buf.combine(y, handle=out[3])[0]
    cancelled = buf.combine(y, handle=out[3], bias=(big, -big))[0]
    assert torch.equal(plain.view(torch.int16), cancelled.view(torch.int16))
    if not expand:  # one rank: one row per routed token; the formula of DeepEP's reference, in torch
        b = torch.randn(t, H, device="cuda").to(torch.bfloat16)
        got = buf.combine(y, handle=out[3], bias=(b, big))[0]
        routed = (idx >= 0).any(dim=1)
        rows = torch.zeros(t, H, device="cuda")
        src = out[3].recv_src_metadata[:, 0].long()
        rows[src] = y.float()
        want = ((b.float() + big.float()) + rows).to(torch.bfloat16)
        assert torch.equal(got[routed], want[routed]) and torch.equal(got[~routed], (b.float() + big.float()).to(
            torch.bfloat16)[~routed])


@pytest.mark.parametrize("allow_multiple_reduction", [True, False])
def test_expand_combine_follows_allow_multiple_reduction(allow_multiple_reduction):
    buf = symmoe.ElasticBuffer(None, num_max_tokens_per_rank=T_MAX, hidden=H, num_topk=K, num_experts=E,
                               allow_multiple_reduction=allow_multiple_reduction)
    x, _, idx, w = inputs(T_MAX - 5, "zipf", 91, fp8=False)
    golden = golden_dispatch(x, None, idx, w, expand=True, alignment=4)
    out = buf.dispatch(x, topk_idx=idx, topk_weights=w, do_expand=True, expert_alignment=4)
    y = torch.randn(out[0].shape[0], H, device="cuda").to(torch.bfloat16) * 3
    combined_x, combined_w, _ = buf.combine(y, handle=out[3], topk_weights=out[2])
    g = ref.combine([bits(y)], handles=[golden.handle], topk_weights=[bits(out[2])],
                    reduce_local_experts=allow_multiple_reduction)[0]
    assert_bitwise(g[0], bits(combined_x), "combined_x")
    assert_bitwise(g[1], bits(combined_w), "combined_topk_weights")
    w_masked = torch.where(idx >= 0, w, torch.zeros_like(w))
    assert torch.equal(combined_w, w_masked)  # DeepEP's check: the weights come back as sent
    buf.destroy()
