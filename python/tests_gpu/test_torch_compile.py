"""symmoe's torch.library ops (symmoe.torch_ops) under torch.compile(fullgraph=True) on one GPU (one in-process rank,
all experts local): a small MoE block (ep_dispatch -> per-expert SwiGLU MLP -> ep_combine) and the fused layer
(mega_moe with FP8 weights, mega_moe_fp4 with FP4 weights, on the same layer) trace without graph breaks and give the
eager results.
- backend "aot_eager" traces with the fake implementations and runs the same kernels; AOTAutograd may decompose the
  torch MLP between the ops (e.g. silu), so the block is compared within bf16 rounding and the ops' own outputs
  bitwise (dispatch given the same inputs; combine given the same expert outputs).
- the default backend (Inductor) also generates the MLP's kernels: the ops' own outputs stay bitwise equal (they
  are opaque to Inductor), the MLP in between within bf16 rounding.
- opcheck: test_schema compares inputs before and after with arithmetic that float8_e4m3fn lacks, so ops with FP8
  tensor arguments are checked with test_faketensor only.
Needs torch >= 2.4 (torch.library.custom_op)."""
import pytest
import torch
import torch.nn.functional as F

import symmoe
import symmoe.torch_ops as ops
from symmoe import reference as ref
from symmoe.torch_reference import make_fp4_experts, make_fp8_experts, make_fp8_tokens

T_MAX, H, I, E, K = 64, 256, 128, 16, 4


def routing(t, seed):
    idx, w = ref.routing(t, E, K, kind="uniform", mask_prob=0.1, seed=seed)
    idx[0, :] = -1  # one token routed nowhere: zeros
    w[0, :] = 0
    return torch.from_numpy(idx).cuda(), torch.from_numpy(w).cuda()


@pytest.fixture(scope="module")
def ep():
    buffer = symmoe.ElasticBuffer(None, num_max_tokens_per_rank=T_MAX, hidden=H, num_topk=K, num_experts=E,
                                  use_fp8_dispatch=False)
    buffer_id = ops.register_buffer(buffer)
    g = torch.Generator(device="cuda").manual_seed(5)
    w13 = (torch.randn(E, 2 * I, H, device="cuda", generator=g) / H ** 0.5).to(torch.bfloat16)
    w2 = (torch.randn(E, H, I, device="cuda", generator=g) / I ** 0.5).to(torch.bfloat16)
    yield buffer_id, w13, w2
    torch.cuda.synchronize()
    ops.unregister(buffer_id)


def make_moe_block(buffer_id, w13, w2):
    """dispatch (non-expand, bf16) -> each local expert's SwiGLU MLP on every received row, weighted by the lanes
    that chose it (combine does not weight) -> combine."""
    def block(x, topk_idx, topk_weights):
        recv_x, _, recv_idx, recv_w = torch.ops.symmoe.ep_dispatch(buffer_id, x, None, topk_idx, topk_weights, E, 1,
                                                                   False)
        xf = recv_x.float()
        y = torch.zeros_like(xf)
        for e in range(E):  # one rank: every expert is local, local id == global id
            gate, up = (xf @ w13[e].float().t()).chunk(2, dim=1)
            lane_weight = torch.where(recv_idx == e, recv_w, torch.zeros_like(recv_w)).sum(dim=1, keepdim=True)
            y = y + lane_weight * ((F.silu(gate) * up) @ w2[e].float().t())
        return torch.ops.symmoe.ep_combine(buffer_id, y.to(torch.bfloat16), topk_idx)
    return block


def moe_inputs(t, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(t, H, device="cuda", generator=g).to(torch.bfloat16)
    return (x,) + routing(t, seed)


@pytest.mark.parametrize("t", [1, 17, T_MAX])
def test_moe_block_aot_eager_matches_eager(ep, t):
    buffer_id = ep[0]
    block = make_moe_block(*ep)
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    for seed in (1, 2):  # a second call reuses the compiled graph on new inputs
        args = moe_inputs(t, seed)
        eager = block(*args)
        got = compiled(*args)
        torch.cuda.synchronize()
        assert got.dtype == torch.bfloat16 and got.shape == (t, H)
        torch.testing.assert_close(got.float(), eager.float(), rtol=2e-2, atol=2e-2, msg=f"t={t} seed={seed}")
        assert torch.count_nonzero(eager[0]) == 0 and torch.count_nonzero(got[0]) == 0  # the token routed nowhere
        if t > 1:
            assert torch.count_nonzero(eager[1:]) > 0

    # The ops themselves, compiled on their own: bitwise equal to eager on the same inputs.
    x, idx, w = moe_inputs(t, 3)

    def pair(x, idx, w, y_scale):
        recv_x, _, _, _ = torch.ops.symmoe.ep_dispatch(buffer_id, x, None, idx, w, E, 1, False)
        return recv_x, torch.ops.symmoe.ep_combine(buffer_id, recv_x * y_scale, idx)

    two = torch.tensor(2.0, dtype=torch.bfloat16, device="cuda")  # exact: the expert output is 2 * recv_x
    eager_x, eager_y = [o.clone() for o in pair(x, idx, w, two)]
    got_x, got_y = torch.compile(pair, fullgraph=True, backend="aot_eager")(x, idx, w, two)
    torch.cuda.synchronize()
    n = int(ops._BUFFERS[buffer_id].handle.device_counts[0].item())  # received rows (the rest hold no data)
    assert torch.equal(got_x[:n].view(torch.int16), eager_x[:n].view(torch.int16)), f"dispatch t={t}"
    assert torch.equal(got_y.view(torch.int16), eager_y.view(torch.int16)), f"combine t={t}"


def test_moe_block_inductor(ep):
    block = make_moe_block(*ep)
    compiled = torch.compile(block, fullgraph=True)
    args = moe_inputs(T_MAX, 3)
    eager = block(*args)
    got = compiled(*args)
    torch.cuda.synchronize()
    torch.testing.assert_close(got.float(), eager.float(), rtol=2e-2, atol=2e-2)

    # The ops alone (opaque to Inductor): bitwise.
    buffer_id = ep[0]

    def dispatch_only(x, idx, w):
        return torch.ops.symmoe.ep_dispatch(buffer_id, x, None, idx, w, E, 1, False)

    x, idx, w = args
    eager_out = [o.clone() for o in dispatch_only(x, idx, w)]
    rows = eager_out[0].shape[0]
    assert rows == ops.dispatch_rows(ep_buffer(buffer_id), 1, False)
    got_out = torch.compile(dispatch_only, fullgraph=True)(x, idx, w)
    torch.cuda.synchronize()
    # Rows past the received ones hold no data: compare the received rows (the handle's count).
    handle = ops._BUFFERS[buffer_id].handle
    n = int(handle.device_counts[0].item())
    for a, b in zip(eager_out[:1] + eager_out[2:], got_out[:1] + got_out[2:]):
        assert torch.equal(a[:n].view(torch.uint8), b[:n].view(torch.uint8))


def ep_buffer(buffer_id):
    return ops._BUFFERS[buffer_id].buffer


def test_fake_shapes_match_real(ep):
    buffer_id = ep[0]
    x, idx, w = moe_inputs(9, 4)
    for expand, alignment in ((False, 1), (True, 1), (True, 16)):
        torch.library.opcheck(torch.ops.symmoe.ep_dispatch.default,
                              (buffer_id, x, None, idx, w, E, alignment, expand),
                              test_utils=("test_schema", "test_faketensor"))


@pytest.fixture(scope="module")
def mega():
    sym = symmoe.get_symm_buffer_for_mega_moe(None, E, T_MAX, K, H, I)
    l1, l2 = symmoe.transform_weights_for_mega_moe(*make_fp8_experts(E, H, I, seed=7))
    layer_id = ops.register_mega_layer(sym)
    yield sym, layer_id, l1, l2
    torch.cuda.synchronize()
    ops.unregister(layer_id)


def check_compiled_layer_is_bitwise_eager(sym, op, eager, backend, t):
    """torch.compile of a block calling the custom op `op(x, sf, idx, w)` against the DeepGEMM-shaped eager call
    `eager(y, sym)` on the same tokens (copied into the buffer), for two seeds: bitwise; token 0 is all-masked."""

    def block(x, sf, idx, w):
        return op(x, sf, idx, w).float() * 2.0  # exact: the comparison stays bitwise

    compiled = torch.compile(block, fullgraph=True, backend=backend)
    for seed in (1, 2):
        x, sf = make_fp8_tokens(t, H, seed=seed)
        idx, w = routing(t, seed)
        sym.x[:t].copy_(x)
        sym.x_sf[:t].copy_(sf)
        sym.topk_idx[:t].copy_(idx)
        sym.topk_weights[:t].copy_(w)
        expected = eager(torch.empty(t, H, dtype=torch.bfloat16, device="cuda"), sym).float() * 2.0
        got = compiled(x, sf, idx, w)
        sym.synchronize()
        assert torch.equal(got, expected), f"backend={backend} t={t} seed={seed}"
        assert torch.count_nonzero(expected[0]) == 0
        if t > 1:
            assert torch.count_nonzero(expected[1:]) > 0


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("t", [1, 33, T_MAX])
def test_fused_layer_compiled_is_bitwise_eager(mega, backend, t):
    sym, layer_id, l1, l2 = mega
    check_compiled_layer_is_bitwise_eager(
        sym, lambda x, sf, idx, w: torch.ops.symmoe.mega_moe(layer_id, x, sf, idx, w, *l1, *l2, 0.0),
        lambda y, buf: symmoe.fp8_mega_moe(y, l1, l2, buf), backend, t)


def test_fused_fake_shapes_match_real(mega):
    sym, layer_id, l1, l2 = mega
    x, sf = make_fp8_tokens(5, H, seed=9)
    idx, w = routing(5, 9)
    torch.library.opcheck(torch.ops.symmoe.mega_moe.default,
                          (layer_id, x, sf, idx, w, l1[0], l1[1], l2[0], l2[1], 0.0),
                          test_utils=("test_faketensor",))  # FP8 arguments: no test_schema (module docstring)


@pytest.fixture(scope="module")
def mega_fp4(mega):
    """The FP8 fixture's layer with FP4 weights: DeepGEMM's pairs on cuda -> triples on cuda (the layer rebinds)."""
    sym, layer_id, _, _ = mega
    l1, l2 = symmoe.transform_weights_for_mega_moe(*make_fp4_experts(E, H, I, seed=11))
    assert l1[0].is_cuda and l1[1].dtype == torch.int32 and l1[2].dtype == torch.float32
    return sym, layer_id, l1, l2


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("t", [1, 33, T_MAX])
def test_fused_fp4_layer_compiled_is_bitwise_eager(mega_fp4, backend, t):
    sym, layer_id, l1, l2 = mega_fp4
    check_compiled_layer_is_bitwise_eager(
        sym, lambda x, sf, idx, w: torch.ops.symmoe.mega_moe_fp4(layer_id, x, sf, idx, w, *l1, *l2, 0.0),
        lambda y, buf: symmoe.fp8_fp4_mega_moe(y, l1, l2, buf), backend, t)


def test_fused_fp4_fake_shapes_match_real(mega_fp4):
    sym, layer_id, l1, l2 = mega_fp4
    x, sf = make_fp8_tokens(5, H, seed=9)
    idx, w = routing(5, 9)
    torch.library.opcheck(torch.ops.symmoe.mega_moe_fp4.default, (layer_id, x, sf, idx, w, *l1, *l2, 0.0),
                          test_utils=("test_faketensor",))  # FP8 arguments: no test_schema (module docstring)


def test_unregistered_id_is_refused():
    x = torch.zeros(1, H, dtype=torch.bfloat16, device="cuda")
    idx = torch.zeros(1, K, dtype=torch.int64, device="cuda")
    with pytest.raises(ValueError, match="not registered"):
        torch.ops.symmoe.ep_combine(12345, x, idx)
