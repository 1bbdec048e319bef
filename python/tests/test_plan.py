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
