"""symmoe.fp8_fp4_mega_moe on one GPU (one in-process rank, all experts local), on DeepGEMM-shaped FP4 pairs (E2M1
two per byte, four UE8M0 codes per int32) through transform_weights_for_mega_moe: BITWISE equal to fp8_mega_moe on
the FP8 experts the fold makes of the same weights (each 128x128 block's E4M3 values relative to its base scale
2^(max(largest code - 6, 1) - 127), include/symmoe/fp4_fold.hpp, written out here in numpy), on the same buffer
(so the layer rebinds FP8 <-> FP4 weights between the calls)."""
import numpy as np
import pytest
import torch

import symmoe
from golden import assert_bitwise, bits, layer_tokens, poison_

T_MAX, H, I, E, K = 96, 512, 256, 32, 6
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float32)


def deepgemm_fp4(rng, rows, cols, lo=110, hi=124):
    """DeepGEMM's FP4 pair of one layer: E2M1 int8 [E, rows, cols/2], codes int32 [E, rows, cols/128]."""
    w = rng.integers(-128, 128, (E, rows, cols // 2), dtype=np.int8)
    codes = rng.integers(lo, hi + 1, (E, rows, cols // 32), dtype=np.uint8)
    if rows == 2 * I:  # L1: the up rows' blocks lower than the gate rows', so their bases differ
        codes[:, rows // 2:] -= 7
    return w, codes.view(np.int32)


def folded_fp8(w, codes, rows, cols):
    """The FP8 expert (e4m3 [E, rows, cols] on cuda, fp32 block scales [E, rows/128, cols/128]) of an FP4 pair."""
    b = w.view(np.uint8)
    nib = np.stack([b & 0xF, b >> 4], axis=-1).reshape(E, rows, cols)  # column 2j in the low nibble
    value = np.where(nib & 8, -1.0, 1.0).astype(np.float32) * E2M1[nib & 7]
    c = codes.view(np.uint8).astype(np.int64)  # [E, rows, cols/32]
    base = np.maximum(c.reshape(E, rows // 128, 128, cols // 128, 4).max(axis=(2, 4)) - 6, 1)  # [E, rows/128, cols/128]
    shift = np.repeat(c, 32, axis=2) - np.repeat(np.repeat(base, 128, axis=1), 128, axis=2)
    q = torch.from_numpy(np.ldexp(value, shift).astype(np.float32)).to(torch.float8_e4m3fn)  # exact: the fold's range
    sf = np.ldexp(np.float32(1), base - 127).astype(np.float32)
    return q.cuda(), torch.from_numpy(sf).cuda()


@pytest.fixture(scope="module")
def layer():
    buf = symmoe.get_symm_buffer_for_mega_moe(None, E, T_MAX, K, H, I)
    rng = np.random.default_rng(17)
    (w1, s1), (w2, s2) = deepgemm_fp4(rng, 2 * I, H), deepgemm_fp4(rng, H, I)
    l1, l2 = symmoe.transform_weights_for_mega_moe((w1, s1), (w2, s2))  # host: numpy triples
    to_cuda = lambda a: torch.from_numpy(a.view(np.int32) if a.dtype == np.uint32 else a).cuda()
    fp4 = (tuple(to_cuda(a) for a in l1), tuple(to_cuda(a) for a in l2))
    fp8 = symmoe.transform_weights_for_mega_moe(folded_fp8(w1, s1, 2 * I, H), folded_fp8(w2, s2, H, I))
    yield buf, fp4, fp8
    torch.cuda.synchronize()


def tokens(t, kind, seed):
    return layer_tokens(t, H, E, K, kind, seed)


@pytest.mark.parametrize("kind, t", [("uniform", T_MAX), ("zipf", 37), ("hot", 64), ("uniform", 1), ("zipf", 8)])
@pytest.mark.parametrize("clamp", [None, 2.0])
def test_fp4_fused_equals_fp8_fused_on_folded_weights(layer, kind, t, clamp):
    buf, fp4, fp8 = layer
    x, sf, idx, w = tokens(t, kind, seed=31 + t)
    buf.x[:t].copy_(x)
    buf.x_sf[:t].copy_(sf)
    buf.topk_idx[:t].copy_(idx)
    buf.topk_weights[:t].copy_(w)
    y8 = poison_(torch.empty(t, H, dtype=torch.bfloat16, device="cuda"))
    symmoe.fp8_mega_moe(y8, *fp8, buf, activation_clamp=clamp)
    buf.synchronize()
    y4 = poison_(torch.empty(t, H, dtype=torch.bfloat16, device="cuda"))
    assert symmoe.fp8_fp4_mega_moe(y4, *fp4, buf, activation_clamp=clamp) is y4
    buf.synchronize()
    assert "weights=fp4" in str(buf.plan)
    assert torch.count_nonzero(y4[0].float()) == 0, "a token routed nowhere must give zeros"
    assert_bitwise(bits(y8), bits(y4), f"{kind} T={t} clamp={clamp}: fp8_fp4_mega_moe vs fp8_mega_moe (folded)")
