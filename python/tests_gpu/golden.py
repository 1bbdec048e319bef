"""Helpers shared by the GPU tests: torch <-> numpy bit views, golden-model comparisons (first mismatch) and the
fused-layer tests' inputs."""
import numpy as np
import torch

from symmoe import reference as ref
from symmoe.torch_reference import make_fp8_tokens


def bits(t):
    """A torch tensor's bytes as numpy, bitwise (bf16 -> uint16, float8/uint8 -> uint8, others as their dtype)."""
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    if t.element_size() == 1 and t.dtype != torch.uint8:
        return t.view(torch.uint8).numpy()
    return t.numpy()


def assert_bitwise(expected, got, what):
    expected, got = np.asarray(expected), np.asarray(got)
    assert expected.shape == got.shape, f"{what}: shape {got.shape}, expected {expected.shape}"
    a = expected.reshape(-1).view(np.uint8) if expected.dtype.kind == "f" else expected.reshape(-1)
    b = got.reshape(-1).view(np.uint8) if got.dtype.kind == "f" else got.reshape(-1)
    diff = np.nonzero(a != b)[0]
    if len(diff):
        i = np.unravel_index(diff[0] // (a.size // expected.size), expected.shape)
        raise AssertionError(f"{what}: {len(diff)} mismatching elements/bytes; first at {i}: expected "
                             f"{expected[i]}, got {got[i]}")


def poison_(t):
    """Fill with a NaN-like pattern so stale memory is never mistaken for output."""
    t.view(torch.uint8).fill_(0xFF)
    return t


def layer_tokens(t, hidden, num_experts, num_topk, kind, seed):
    """A fused-layer call's inputs on the GPU: FP8 tokens with fp32 scales and a routing of `kind` with 10% masked
    lanes, token 0 routed nowhere (its output must be zeros): (x, x_sf, topk_idx, topk_weights)."""
    x, sf = make_fp8_tokens(t, hidden, seed=seed)
    idx, w = ref.routing(t, num_experts, num_topk, kind=kind, mask_prob=0.1, seed=seed)
    idx[0, :] = -1
    w[0, :] = 0
    return x, sf, torch.from_numpy(idx).cuda(), torch.from_numpy(w).cuda()
