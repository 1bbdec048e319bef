"""The fused layer's torch input views check what is copied into them (symmoe.mega.input_view): copy_ and slice
assignment refuse sources whose conversion would change their meaning; indexing keeps the check. Needs torch (the
GPU machine's python3); the views here wrap CPU tensors, the check is the same for the buffer's CUDA views."""
import pytest
import torch

from symmoe.mega import input_view

T, H, K = 8, 512, 6


def views():
    return dict(x=input_view(torch, "x", torch.zeros(T, H, dtype=torch.uint8).view(torch.float8_e4m3fn)),
                x_sf=input_view(torch, "x_sf", torch.zeros(T, H // 128)),
                topk_idx=input_view(torch, "topk_idx", torch.zeros(T, K, dtype=torch.int64)),
                topk_weights=input_view(torch, "topk_weights", torch.zeros(T, K)))


def test_good_copies_land():
    v = views()
    v["x"][:4].copy_(torch.full((4, H), 2.0).to(torch.float8_e4m3fn))
    v["x_sf"][:4].copy_(torch.full((4, H // 128), 0.5))
    v["topk_idx"][:4].copy_(torch.arange(24, dtype=torch.int32).reshape(4, K))  # int32 ids convert exactly
    v["topk_weights"][:4] = torch.full((4, K), 0.25)
    v["topk_idx"][4:] = -1
    assert v["x"][:4].float().eq(2.0).all() and v["x"][4:].float().eq(0).all()
    assert v["x_sf"][:4].eq(0.5).all()
    assert v["topk_idx"][3, 5].item() == 23 and v["topk_idx"][4:].eq(-1).all()
    assert v["topk_weights"][:4].eq(0.25).all()
    # Other ops give plain tensors (x_sf.float() would return x_sf itself: it is float32 already).
    assert type(v["x_sf"] * 2) is torch.Tensor and type(v["x"][:4].float()) is torch.Tensor


@pytest.mark.parametrize("name, src, exc, pattern", [
    ("x", torch.ones(4, H, dtype=torch.bfloat16), TypeError, r"buffer\.x: the source must have dtype float8_e4m3fn"),
    ("x_sf", torch.ones(4, H // 512, dtype=torch.int32), TypeError, r"buffer\.x_sf: .*got int32"),
    ("topk_idx", torch.ones(4, K), TypeError, r"buffer\.topk_idx: .*got float32"),
    ("topk_weights", torch.ones(4, K, dtype=torch.bfloat16), TypeError, r"buffer\.topk_weights: .*got bfloat16"),
    ("topk_weights", torch.ones(1, K), ValueError, r"must have shape \[4, 6\].*got \[1, 6\]"),
])
def test_bad_copies_raise_and_write_nothing(name, src, exc, pattern):
    v = views()
    before = v[name].clone()
    with pytest.raises(exc, match=pattern):
        v[name][:4].copy_(src)
    with pytest.raises(exc, match=pattern):
        v[name][:4] = src
    assert torch.equal(v[name].view(torch.uint8) if name == "x" else v[name],
                       before.view(torch.uint8) if name == "x" else before)
