"""Helpers shared by the GPU tests: torch <-> numpy bit views and golden-model comparisons (first mismatch)."""
import numpy as np
import torch


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
