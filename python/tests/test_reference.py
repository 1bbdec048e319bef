"""The golden model from Python: routing, a DeepEP-style dispatch/combine script, invariants, the fused layer."""
import numpy as np
import pytest

import symmoe
from symmoe import reference as ref

R, E, K, T_MAX, H = 4, 16, 4, 24, 256


def make_rank_inputs(kind, mask_prob=0.0, seed=11):
    """Per rank: bf16 x whose rows encode (rank, token) exactly, and a routing of `kind`."""
    xs, idxs, ws = [], [], []
    for r in range(R):
        t = T_MAX - r  # ranks hold different token counts
        idx, w = ref.routing(t, E, K, kind=kind, mask_prob=mask_prob, seed=seed, rank=r)
        vals = np.zeros((t, H), np.float32)
        vals[:, 0], vals[:, 1] = r, np.arange(t)  # payload says where it came from
        vals[:, 2:] = np.random.default_rng(r).integers(-8, 8, (t, H - 2))
        xs.append(symmoe.float_to_bf16(vals))
        idxs.append(idx)
        ws.append(w)
    return xs, idxs, ws


@pytest.mark.parametrize("kind", ["uniform", "zipf", "hot"])
def test_routing_invariants(kind):
    idx, w = ref.routing(64, E, K, kind=kind, mask_prob=0.2, seed=3)
    assert idx.shape == (64, K) and idx.dtype == np.int64 and w.dtype == np.float32
    for row, wrow in zip(idx, w):
        routed = row[row >= 0]
        assert len(set(routed.tolist())) == len(routed) and np.all(routed < E)
        assert np.all(wrow[row < 0] == 0) and np.all(wrow[row >= 0] > 0)
    again, _ = ref.routing(64, E, K, kind=kind, mask_prob=0.2, seed=3)
    assert np.array_equal(idx, again)


@pytest.mark.parametrize("do_expand", [False, True])
def test_dispatch_invariants_and_payload_sources(do_expand):
    xs, idxs, ws = make_rank_inputs("zipf", mask_prob=0.1)
    outs = ref.dispatch(xs, topk_idx=idxs, topk_weights=ws, num_experts=E, num_max_tokens_per_rank=T_MAX,
                        expert_alignment=8, do_expand=do_expand)
    assert ref.check_dispatch(xs, idxs, ws, outs) == ""
    El = E // R
    # a token counts once per destination rank
    sent = sum(o.handle.num_tokens_per_rank for o in outs)
    assert [o.handle.num_recv_tokens for o in outs] == sent.tolist()
    for d, (recv_x, recv_topk_idx, recv_topk_weights, handle) in enumerate(outs):
        meta = handle.recv_src_metadata
        assert meta.shape == (handle.num_recv_tokens, 2 + K)
        assert handle.psum_num_recv_tokens_per_rank[-1] == handle.num_recv_tokens
        assert all(c % 8 == 0 for c in handle.num_recv_tokens_per_expert_list)
        if not do_expand:
            src = meta[:, 0]
            rows = symmoe.bf16_to_float(recv_x)
            assert np.array_equal(rows[:, 0], src // T_MAX) and np.array_equal(rows[:, 1], src % T_MAX)
            assert np.array_equal(np.sort(src), src)  # deterministic order: by src_token_global_idx
            local = recv_topk_idx[recv_topk_idx >= 0]
            assert np.all(local < El)
        else:
            assert recv_x.shape == (handle.num_expanded_tokens, H) and recv_topk_idx.shape == (handle.num_expanded_tokens,)


def test_cached_dispatch_is_bitwise_the_same():
    xs, idxs, ws = make_rank_inputs("uniform")
    fresh = ref.dispatch(xs, topk_idx=idxs, topk_weights=ws, num_experts=E, num_max_tokens_per_rank=T_MAX,
                         do_expand=True, expert_alignment=4)
    cached = ref.dispatch(xs, topk_idx=idxs, topk_weights=ws, handle=[o.handle for o in fresh])
    for a, b in zip(fresh, cached):
        assert np.array_equal(a.recv_x, b.recv_x) and np.array_equal(a.recv_topk_idx, b.recv_topk_idx)


def test_deepep_style_dispatch_combine_script():
    """Dispatch bf16 tokens, 'compute' on each rank (weights applied before combine, as DeepEP V2), combine."""
    xs, idxs, ws = make_rank_inputs("hot", mask_prob=0.1)
    outs = ref.dispatch(xs, topk_idx=idxs, topk_weights=ws, num_experts=E, num_max_tokens_per_rank=T_MAX,
                        do_expand=True)
    ys = []
    for recv_x, recv_topk_idx, recv_topk_weights, handle in outs:
        y = symmoe.bf16_to_float(recv_x) * 2.0  # the "expert": doubling is exact in bf16
        ys.append(symmoe.float_to_bf16(y))
    combined = ref.combine(ys, handles=[o.handle for o in outs], topk_weights=[o.recv_topk_weights for o in outs])
    for r, (cx, cw) in enumerate(combined):
        x = symmoe.bf16_to_float(xs[r]).astype(np.float64)
        lanes = (idxs[r] >= 0).sum(axis=1)
        want = symmoe.bf16_to_float(symmoe.float_to_bf16((x * 2 * lanes[:, None]).astype(np.float32)))
        assert np.array_equal(symmoe.bf16_to_float(cx), want)
        assert np.array_equal(cw, np.where(idxs[r] >= 0, ws[r], 0).astype(np.float32))


def test_combine_of_zero_rows_is_the_bias():
    xs, idxs, ws = make_rank_inputs("uniform")
    outs = ref.dispatch(xs, topk_idx=idxs, topk_weights=ws, num_experts=E, num_max_tokens_per_rank=T_MAX)
    zeros = [np.zeros_like(o.recv_x) for o in outs]
    bias = [symmoe.float_to_bf16(np.full((x.shape[0], H), 3.0, np.float32)) for x in xs]
    combined = ref.combine(zeros, handles=[o.handle for o in outs], bias=bias)
    for (cx, cw) in combined:
        assert cw is None and np.all(symmoe.bf16_to_float(cx) == 3.0)


def test_bad_routing_reaches_python_with_rank_token_lane():
    xs, idxs, ws = make_rank_inputs("uniform")
    idxs[2] = idxs[2].copy()
    idxs[2][5, 1] = idxs[2][5, 0]  # duplicate expert in one token
    with pytest.raises(symmoe.Error, match="rank 2") as e:
        ref.dispatch(xs, topk_idx=idxs, topk_weights=ws, num_experts=E, num_max_tokens_per_rank=T_MAX)
    assert "token 5" in str(e.value)
    idxs[2][5, 1] = E  # out of range
    with pytest.raises(symmoe.Error, match=str(E)):
        ref.dispatch(xs, topk_idx=idxs, topk_weights=ws, num_experts=E, num_max_tokens_per_rank=T_MAX)


def test_fused_layer_faithful_equals_composed_and_tracks_exact():
    shape = symmoe.MoeShape(hidden=256, intermediate=256, num_experts=8, num_topk=2, num_ranks=2,
                            num_max_tokens_per_rank=6)
    inputs = [ref.make_layer_input(shape, 6 - r, kind="zipf", seed=4, mask_prob=0.1, rank=r) for r in range(2)]
    faithful = ref.moe_forward(shape, inputs, mode="faithful")
    composed = ref.moe_forward(shape, inputs, mode="composed", expert_alignment=4)
    exact = ref.moe_forward(shape, inputs, mode="exact")
    for f, c, x in zip(faithful, composed, exact):
        assert f.dtype == np.uint16 and np.array_equal(f, c)
        got = symmoe.bf16_to_float(f).astype(np.float64)
        assert np.linalg.norm(got - x) <= 0.05 * np.linalg.norm(x) + 1e-12
    with pytest.raises(symmoe.Error, match="mode"):
        ref.moe_forward(shape, inputs, mode="fast")
