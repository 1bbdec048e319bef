"""ElasticBuffer on one GPU (one in-process rank, all experts local) against the golden model, bitwise.
Ran on nvidia-h200-x2, 2026-11-29: all passed."""
import pytest
import torch

import symmoe
from symmoe import reference as ref
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
    assert_bitwise(g_idx, bits(recv_idx), "recv_topk_idx")
    assert_bitwise(g_w, bits(recv_w), "recv_topk_weights")
    assert handle.num_recv_tokens == g_handle.num_recv_tokens
    assert handle.num_expanded_tokens == g_handle.num_expanded_tokens
    assert list(handle.num_recv_tokens_per_expert_list) == list(g_handle.num_recv_tokens_per_expert_list)
    n = g_handle.num_recv_tokens
    assert_bitwise(g_handle.recv_src_metadata, bits(handle.recv_src_metadata)[:n], "recv_src_metadata")
    for name in ("num_tokens_per_rank", "num_tokens_per_expert", "psum_num_recv_tokens_per_rank",
                 "num_unaligned_recv_tokens_per_expert", "psum_num_recv_tokens_per_expert"):
        assert_bitwise(getattr(g_handle, name), bits(getattr(handle, name)), name)
    t = g_handle.num_tokens
    assert_bitwise(g_handle.dst_buffer_slot_idx, bits(handle.dst_buffer_slot_idx)[:t], "dst_buffer_slot_idx")


@pytest.mark.parametrize("fp8", [False, True])
@pytest.mark.parametrize("expand, alignment", [(False, 1), (True, 1), (True, 64)])
@pytest.mark.parametrize("kind", ["uniform", "zipf", "hot"])
def test_dispatch_combine_match_golden(buffers, fp8, expand, alignment, kind):
    buf = buffers[fp8]
    t = T_MAX - 5
    x, sf, idx, w = inputs(t, kind, seed=100 * fp8 + 10 * expand + alignment + len(kind), fp8=fp8)
    payload = (x, sf) if fp8 else x
    # warm-up, then poison the outputs the next call writes (same buffer memory)
    warm = buf.dispatch(payload, topk_idx=idx, topk_weights=w, do_expand=expand, expert_alignment=alignment)
    for tnsr in (warm[0] if fp8 else (warm[0],)) + (warm[1], warm[2]):
        poison_(tnsr)
    out = buf.dispatch(payload, topk_idx=idx, topk_weights=w, num_experts=E, do_expand=expand,
                       expert_alignment=alignment)
    g_in = (bits(x), bits(sf)) if fp8 else bits(x)
    golden = ref.dispatch([g_in], topk_idx=[bits(idx)], topk_weights=[bits(w)], num_experts=E,
                          num_max_tokens_per_rank=T_MAX, expert_alignment=alignment, do_expand=expand)[0]
    check_dispatch(out, tuple(golden), fp8, expand)

    # cached dispatch: bitwise the same (outputs are views of the buffer: snapshot, poison, dispatch again)
    first = bits(out[0][0] if fp8 else out[0]).copy()
    poison_(out[0][0] if fp8 else out[0])
    cached = buf.dispatch(payload, topk_idx=idx, topk_weights=w, handle=out[3])  # no cpu sync: capacity rows
    assert_bitwise(first, bits(cached[0][0] if fp8 else cached[0])[:first.shape[0]], "cached dispatch recv_x")

    # combine: weights applied before combine (DeepEP V2), bf16 rows
    recv_x, _, recv_w, handle, _ = out
    rows = (recv_x[0].view(torch.uint8) if fp8 else recv_x).shape[0]
    y = torch.randn(rows, H, device="cuda").to(torch.bfloat16)
    bias = torch.randn(t, H, device="cuda").to(torch.bfloat16)
    combined_x, combined_w, event = buf.combine(y, handle=handle, topk_weights=recv_w, bias=bias,
                                                async_with_compute_stream=True)
    event.current_stream_wait()
    g_comb = ref.combine([bits(y)], handles=[golden.handle], topk_weights=[bits(recv_w)], bias=[bits(bias)])[0]
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
