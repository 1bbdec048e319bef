"""The planner from Python: objects with attributes, str() as the CLI prints, self-checks, clear errors."""
import pytest

import symmoe


def test_plans_for_v3_have_attributes_and_print():
    p = symmoe.plan("v3", ranks=8, tokens=4096)
    p.validate()
    assert p.shape.hidden == 7168 and p.shape.num_local_experts == 32
    assert p.mega.block_m in (16, 32, 64, 128) and p.mega.smem_bytes <= 232448
    assert p.l1.epilogue == "swiglu_fp8" and p.l2.epilogue == "bf16"
    assert p.l1.n == 2 * 2048 and p.l1.k == 7168
    assert 0 < p.ep.dispatch_sms <= 132 and p.ep.buffer_bytes > 0
    text = str(p)
    assert f"BLOCK_M={p.mega.block_m}" in text and "EP dispatch/combine" in text
    assert str(p.ep) in repr(p.ep)


@pytest.mark.parametrize("name, dims", [("qwen3-30b-a3b", (2048, 768, 128, 8)),
                                        ("qwen3-235b-a22b", (4096, 1536, 128, 8)),
                                        ("mixtral-8x7b", (4096, 14336, 8, 2))])
def test_model_presets_plan(name, dims):
    p = symmoe.plan(name, ranks=8, tokens=512)
    p.validate()
    s = p.shape
    assert (s.hidden, s.intermediate, s.num_experts, s.num_topk) == dims
    assert p.l1.n == 2 * s.intermediate and p.l2.k == s.intermediate
    if name == "mixtral-8x7b":  # the composed layer runs it; the fused kernel's intermediate limit is 8192
        assert p.mega is None and "intermediate 14336 exceeds 8192" in p.mega_problem
        assert "not available for this shape" in str(p)
    else:
        assert p.mega is not None and p.mega_problem is None


def test_any_shape_plans():
    shape = symmoe.MoeShape(hidden=1536, intermediate=384, num_experts=24, num_topk=3, num_ranks=4,
                            num_max_tokens_per_rank=64)
    p = symmoe.plan(shape)
    assert p.mega is not None and p.l1.n == 768


def test_more_tokens_never_shrink_block_m():
    small = symmoe.plan("flash", ranks=8, tokens=8).mega.block_m
    large = symmoe.plan("flash", ranks=8, tokens=8192).mega.block_m
    assert small <= large


def test_buffer_size_hint_matches_the_plan():
    shape = symmoe.named_shape("v3", 8, 1024)
    ep = symmoe._C.plan_ep(shape, "fp8")
    hint = symmoe.ElasticBuffer.get_buffer_size_hint(8, 1024, 7168, 8, use_fp8_dispatch=True, num_experts=256)
    assert hint == ep.buffer_bytes


def test_bad_shapes_raise_the_cpp_message():
    with pytest.raises(symmoe.Error, match="num_experts .* multiple of num_ranks"):
        symmoe.MoeShape(hidden=256, intermediate=256, num_experts=10, num_topk=2, num_ranks=4)
    with pytest.raises(symmoe.Error, match="unknown shape 'nope'"):
        symmoe.plan("nope")
    with pytest.raises(TypeError):
        symmoe.plan(3.5)


def test_hybrid_plan_for_v3_ep64_on_8_nodes():
    h = symmoe.plan("v3", ranks=64, tokens=4096, nodes=8)
    h.validate()
    assert (h.num_ranks, h.num_nodes, h.ranks_per_node) == (64, 8, 8)
    assert h.record_bytes == 7504 and h.combine_row_bytes == 2 * 7168
    # Buffers follow their formulas (worst case, per rank).
    assert h.scaleout_send_bytes == 4096 * 7504
    assert h.scaleout_recv_bytes == 8 * 4096 * 7504
    assert h.scaleup_recv_bytes == 64 * 4096 * 7504
    assert h.source_combine_recv_bytes == 4096 * 8 * 2 * 7168
    parts = (h.scaleout_send_bytes, h.scaleout_recv_bytes, h.scaleup_recv_bytes, h.forward_combine_recv_bytes,
             h.forward_reduce_bytes, h.source_combine_recv_bytes, h.signal_bytes)
    assert h.total_bytes == sum(parts)
    # Traffic: expected records/rows per token from the routing probabilities.
    assert h.dispatch_rdma_bytes == pytest.approx(4096 * 7 * h.p_node * 7504)
    assert h.dispatch_nvlink_bytes == pytest.approx(4096 * (64 - 8) * h.p_rank * 7504)
    assert h.combine_rdma_bytes == pytest.approx(4096 * (64 - 8) * h.p_rank * 2 * 7168)
    assert h.dispatch_rdma_bytes < h.dispatch_direct_rdma_bytes
    assert h.combine_reduced_rdma_bytes < h.combine_rdma_bytes
    # Time: the network hop dominates at EP64 (50 GB/s NIC vs 363 GB/s NVLink).
    assert h.dispatch_us > h.dispatch_rdma_bytes / (h.nic_gbps * 1e3)
    assert h.combine_reduced_us <= h.combine_us
    text = str(h)
    assert "64 ranks = 8 nodes x 8 GPUs" in text and "estimate: dispatch" in text
    table = h.sweep([128, 4096])
    assert "V1 normal: 51 / 50 GB/s" in table and "deepseek-ai/DeepEP" in table


def test_hybrid_plan_beyond_72_ranks_and_from_a_shape():
    big = symmoe.plan("v3", ranks=256, tokens=128, nodes=32)
    assert big.ranks_per_node == 8 and big.dispatch_us > 0
    shape = symmoe.named_shape("flash", 16, 512)
    h = symmoe.plan(shape, nodes=2, dispatch_dtype="bf16")
    assert (h.num_ranks, h.num_max_tokens_per_rank, h.dtype) == (16, 512, "bf16")
    assert h.record_bytes > 2 * 4096


def test_hybrid_plan_node_limit_cuts_network_bytes():
    free = symmoe.plan("v3", ranks=64, tokens=4096, nodes=8)
    limited = symmoe.plan("v3", ranks=64, tokens=4096, nodes=8, node_limit=4)
    assert limited.nodes_per_token <= 4 < free.nodes_per_token
    assert limited.dispatch_rdma_bytes < free.dispatch_rdma_bytes


def test_hybrid_plan_bad_arguments_name_the_argument():
    with pytest.raises(symmoe.Error, match=r"nodes \(3\) must be >= 1 and divide ranks \(64\)"):
        symmoe.plan("v3", ranks=64, tokens=128, nodes=3)
    with pytest.raises(symmoe.Error, match=r"16 GPUs per node, expected <= 8"):
        symmoe.plan("v3", ranks=64, tokens=128, nodes=4)
    with pytest.raises(symmoe.Error, match=r"node_limit must be in \[0, nodes = 2\], got 3"):
        symmoe.plan("v3", ranks=16, tokens=128, nodes=2, node_limit=3)
    with pytest.raises(ValueError, match="node_limit needs nodes"):
        symmoe.plan("v3", ranks=8, tokens=128, node_limit=2)
