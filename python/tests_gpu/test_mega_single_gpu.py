"""The DeepGEMM-shaped fused layer (symmoe.fp8_mega_moe) on one GPU (one in-process rank, all experts local):
against a pure-torch fp32 model within the FP8 error (bound from the golden model's own error at the same shape),
bitwise against symmoe's composed path (ComposedMoe, same weights and inputs), received counts exactly, weight
rebinding, clamp per call, and a CUDA graph of fp8_mega_moe replaying on new inputs."""
import numpy as np
import pytest
import torch

import symmoe
from symmoe import _C
from symmoe import reference as ref
from symmoe.torch_reference import make_fp8_experts, moe_forward_fp32, rel_frobenius
from golden import assert_bitwise, bits, layer_tokens, poison_

T_MAX, H, I, E, K = 96, 512, 256, 32, 6
CLAMP = 2.0


@pytest.fixture(scope="module")
def layer():
    buf = symmoe.get_symm_buffer_for_mega_moe(None, E, T_MAX, K, H, I)
    experts = make_fp8_experts(E, H, I, seed=7)
    l1, l2 = symmoe.transform_weights_for_mega_moe(*experts)
    composed = {clamp: _C.ComposedMoe(buf.communicator.native, buf.shape, l1[0].data_ptr(), l1[1].data_ptr(),
                                      l2[0].data_ptr(), l2[1].data_ptr(), clamp)
                for clamp in (0.0, CLAMP)}
    yield buf, experts, (l1, l2), composed
    torch.cuda.synchronize()


@pytest.fixture(scope="module")
def error_bound():
    """Twice the golden model's own FP8 error (faithful vs exact, relative Frobenius) at this shape: the fused
    layer makes the same roundings (L1 output to e4m3 with UE8M0 scales per 128, bf16 L2 rows and y)."""
    shape = symmoe.MoeShape(H, I, E, K, 1, T_MAX)
    inputs = [ref.make_layer_input(shape, T_MAX, kind="uniform", seed=3)]
    exact = np.asarray(ref.moe_forward(shape, inputs, mode="exact")[0], np.float64)
    faithful = symmoe.bf16_to_float(np.asarray(ref.moe_forward(shape, inputs, mode="faithful")[0]))
    e = float(np.linalg.norm(faithful - exact) / np.linalg.norm(exact))
    print(f"golden model faithful vs exact at H={H} I={I} E={E} K={K}: {e:.4f}")
    assert 0.005 < e < 0.06, f"golden model's own FP8 error {e} is not the expected ~0.027"
    return 2 * e


def tokens(t, kind, seed):
    return layer_tokens(t, H, E, K, kind, seed)


def fill(buf, x, sf, idx, w):
    t = x.shape[0]
    buf.x[:t].copy_(x)
    buf.x_sf[:t].copy_(sf)
    buf.topk_idx[:t].copy_(idx)
    buf.topk_weights[:t].copy_(w)


def run_fused(buf, weights, t, clamp=None, stats=None):
    y = poison_(torch.empty(t, H, dtype=torch.bfloat16, device="cuda"))
    out = symmoe.fp8_mega_moe(y, *weights, buf, cumulative_local_expert_recv_stats=stats, activation_clamp=clamp)
    assert out is y
    buf.synchronize()
    return y


def run_composed(layer, x, sf, idx, w):
    t = x.shape[0]
    y = poison_(torch.empty(t, H, dtype=torch.bfloat16, device="cuda"))
    stream = torch.cuda.current_stream().cuda_stream or 1
    layer.forward_one(t, x.data_ptr(), sf.data_ptr(), idx.data_ptr(), w.data_ptr(), y.data_ptr(), stream)
    torch.cuda.synchronize()
    layer.synchronize()
    return y


def test_views(layer):
    buf = layer[0]
    assert buf.x.dtype == torch.float8_e4m3fn and tuple(buf.x.shape) == (T_MAX, H)
    assert buf.x_sf.dtype == torch.float32 and tuple(buf.x_sf.shape) == (T_MAX, H // 128)
    assert buf.topk_idx.dtype == torch.int64 and tuple(buf.topk_idx.shape) == (T_MAX, K)
    assert buf.topk_weights.dtype == torch.float32 and tuple(buf.topk_weights.shape) == (T_MAX, K)
    assert "mega" in str(buf.plan)


@pytest.mark.parametrize("kind, t", [("uniform", T_MAX), ("zipf", 37), ("hot", 64)])
@pytest.mark.parametrize("clamp", [None, CLAMP])
def test_fused_vs_torch_and_composed(layer, error_bound, kind, t, clamp):
    buf, experts, weights, composed = layer
    x, sf, idx, w = tokens(t, kind, seed=11 + t)
    fill(buf, x, sf, idx, w)
    y = run_fused(buf, weights, t, clamp)
    want = moe_forward_fp32(x, sf, idx, w, *experts, activation_clamp=clamp)
    err = rel_frobenius(want, y.float())
    print(f"{kind} T={t} clamp={clamp}: fused vs fp32 torch {err:.4f} (bound {error_bound:.4f})")
    assert err < error_bound, f"{kind} T={t}: fused layer vs fp32 torch model {err} >= {error_bound}"
    assert torch.count_nonzero(y[0].float()) == 0, "a token routed nowhere must give zeros"
    y_composed = run_composed(composed[clamp or 0.0], x, sf, idx, w)
    assert_bitwise(bits(y_composed), bits(y), f"{kind} T={t} clamp={clamp}: fused vs composed")


def test_received_counts_accumulate(layer):
    buf, _, weights, _ = layer
    x, sf, idx, w = tokens(T_MAX, "zipf", seed=5)
    fill(buf, x, sf, idx, w)
    for dtype in (torch.int32, torch.int64):
        stats = torch.full((E,), 3, dtype=dtype, device="cuda")
        run_fused(buf, weights, T_MAX, stats=stats)
        run_fused(buf, weights, T_MAX, stats=stats)
        valid = idx[idx >= 0]
        want = 3 + 2 * torch.bincount(valid, minlength=E).to(dtype)
        assert torch.equal(stats, want), f"{dtype}: {stats.tolist()} != {want.tolist()}"


def test_weights_rebind_when_they_change(layer, error_bound):
    buf, experts, weights, _ = layer
    other = make_fp8_experts(E, H, I, seed=8)
    other_t = symmoe.transform_weights_for_mega_moe(*other)
    x, sf, idx, w = tokens(48, "uniform", seed=9)
    fill(buf, x, sf, idx, w)
    y_a = run_fused(buf, weights, 48).clone()
    y_b = run_fused(buf, other_t, 48).clone()
    assert rel_frobenius(moe_forward_fp32(x, sf, idx, w, *other), y_b.float()) < error_bound
    assert not torch.equal(y_a, y_b)
    y_a2 = run_fused(buf, weights, 48)  # back to the first set: the same bits
    assert_bitwise(bits(y_a), bits(y_a2), "rebound weights")


def test_cuda_graph_replays_on_new_inputs(layer):
    buf, _, weights, _ = layer
    t = 80
    first = tokens(t, "uniform", seed=21)
    fill(buf, *first)
    y = torch.empty(t, H, dtype=torch.bfloat16, device="cuda")
    symmoe.fp8_mega_moe(y, *weights, buf)  # eager first call (binds these weights)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        symmoe.fp8_mega_moe(y, *weights, buf)
    for seed in (22, 23):
        inputs = tokens(t, "hot" if seed == 23 else "zipf", seed=seed)
        fill(buf, *inputs)
        want = run_fused(buf, weights, t).clone()
        fill(buf, *inputs)
        poison_(y)
        graph.replay()
        torch.cuda.synchronize()
        buf.synchronize()
        assert_bitwise(bits(want), bits(y), f"graph replay (seed {seed}) vs eager")
