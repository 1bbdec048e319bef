"""FP4 weights through transform_weights_for_mega_moe on the host: DeepGEMM-shaped numpy inputs (int8 E2M1 bytes,
int32 packed UE8M0 scales) against the layout of include/symmoe/weight_transform_fp4.hpp (and the word layout of
src/kernels/gemm/fp4_word_layout.hpp) written out here, the refusals (each names the argument; nothing is
returned), and torch tensors (a numpy-backed stand-in): the same triples, back on the weights' device."""
import sys
import types

import numpy as np
import pytest

import symmoe


def _deepgemm_fp4(rng, experts, rows, cols, lo=110, hi=124):
    w = rng.integers(-128, 128, (experts, rows, cols // 2), dtype=np.int8)
    codes = rng.integers(lo, hi + 1, (experts, rows, cols // 32), dtype=np.uint8)
    if rows % 256 == 0:  # L1: the up rows' 128x128 blocks lower than the gate rows', so their bases differ
        codes[:, rows // 2:] -= 7
    return w, codes.view(np.int32)  # four codes per int32, byte j = columns [128kb + 32j, +32)


def _packed_here(data):
    """E2M1 bytes [E, rows, K/2] (column 2j in the low nibble) -> the kernels' layout (src/kernels/gemm/fp4_word_layout.hpp):
    in each 128-column K block of row r, slot 4 (t ^ (r / 2 % 4)) + s (a 32-bit word of 8 elements) holds columns
    32 s + 4 t + i (element i < 4) and 32 s + 16 + 4 t + i (element 4 + i); per word the magnitudes stay, the sign of
    element i < 4 moves to bit 8i + 7, that of element 4 + i to bit 8i + 3; rows in pairs, K block by K block (the
    even row's 64 B, then the odd row's)."""
    data = np.ascontiguousarray(data)
    E, rows, half = data.shape
    cols = 2 * half
    nib = np.empty((E, rows, cols), np.uint32)
    nib[..., 0::2] = data & 0xF
    nib[..., 1::2] = data >> 4
    pos = np.arange(128)  # position slot * 8 + element within the K block -> source column
    slot, elem = pos // 8, pos % 8
    src = np.empty((rows, cols), np.int64)
    for r in range(rows):
        t, s_ = (slot // 4) ^ (r // 2 % 4), slot % 4
        col = 32 * s_ + np.where(elem < 4, 0, 16) + 4 * t + elem % 4
        src[r] = (np.arange(cols) // 128 * 128).reshape(-1) + np.tile(col, cols // 128)
    ordered = np.take_along_axis(nib, np.broadcast_to(src, nib.shape), axis=2)
    words = ordered.reshape(E, rows, cols // 8, 8)
    w = np.zeros((E, rows, cols // 8), np.uint32)
    for i in range(8):
        w |= words[..., i] << np.uint32(4 * i)
    out = w & np.uint32(0x77777777)
    for i in range(8):
        dst = 8 * i + 7 if i < 4 else 8 * (i - 4) + 3
        out |= ((w >> np.uint32(4 * i + 3)) & np.uint32(1)) << np.uint32(dst)
    blocks = out.astype("<u4").view(np.uint8).reshape(E, rows // 2, 2, cols // 128, 64)
    return np.ascontiguousarray(blocks.transpose(0, 1, 3, 2, 4)).reshape(E, rows, half)


def _bases_here(codes, rows, cols):
    """The fold base of every 128x128 block (fp4_fold.hpp): 2^(max(max code - 6, 1) - 127)."""
    E = codes.shape[0]
    blocks = codes.reshape(E, rows // 128, 128, cols // 128, 4).max(axis=(2, 4)).astype(np.int64)
    return np.ldexp(np.float32(1), np.maximum(blocks - 6, 1) - 127).astype(np.float32)


@pytest.mark.parametrize("experts, inter, hidden", [(1, 128, 128), (2, 256, 384)])
def test_fp4_transform_layout(experts, inter, hidden):
    rng = np.random.default_rng(experts + inter + hidden)
    w1, s1 = _deepgemm_fp4(rng, experts, 2 * inter, hidden)
    w2, s2 = _deepgemm_fp4(rng, experts, hidden, inter)
    (d, s, b), (d2, s2_out, b2) = symmoe.transform_weights_for_mega_moe((w1, s1), (w2, s2))
    assert d.dtype == np.uint8 and d.shape == (experts, 2 * inter, hidden // 2)
    assert s.dtype == np.uint32 and s.shape == (experts, hidden // 128, 2 * inter)
    assert b.dtype == np.float32 and b.shape == (experts, inter // 128, hidden // 128, 2)
    # Row 16q + j is gate row 8q + j (j < 8), up row inter + 8q + j - 8 otherwise; scales move with their rows.
    rows = np.arange(2 * inter)
    src = np.where(rows % 16 < 8, 8 * (rows // 16) + rows % 16, inter + 8 * (rows // 16) + rows % 16 - 8)
    assert np.array_equal(d, _packed_here(w1.view(np.uint8)[:, src]))
    assert np.array_equal(s, s1.view(np.uint32)[:, src].transpose(0, 2, 1))  # MN-major
    base = _bases_here(s1.view(np.uint8), 2 * inter, hidden)  # [E, 2I/128, H/128] gate blocks then up blocks
    assert np.array_equal(b[..., 0], base[:, :inter // 128]) and np.array_equal(b[..., 1], base[:, inter // 128:])
    assert np.array_equal(d2, _packed_here(w2.view(np.uint8)))
    assert np.array_equal(s2_out, s2.view(np.uint32).transpose(0, 2, 1))
    assert np.array_equal(b2, _bases_here(s2.view(np.uint8), hidden, inter))


def test_fp4_transform_refuses_bad_inputs():
    rng = np.random.default_rng(7)
    w1, s1 = _deepgemm_fp4(rng, 2, 256, 256)
    w2, s2 = _deepgemm_fp4(rng, 2, 256, 128)
    ok1, ok2 = (w1, s1), (w2, s2)
    with pytest.raises(TypeError, match="l2_weights must be an FP4"):
        symmoe.transform_weights_for_mega_moe(ok1, (w2, np.zeros((2, 2, 1), np.float32)))
    with pytest.raises(TypeError, match="l1 weights must be int8 or uint8, got float32"):
        symmoe.transform_weights_for_mega_moe((w1.astype(np.float32), s1), ok2)
    with pytest.raises(ValueError, match=r"l1 weights must be \[E_local, 2I, H/2\]"):
        symmoe.transform_weights_for_mega_moe((w1[:, :200], s1), ok2)
    with pytest.raises(ValueError, match=r"l1 scales must be \[2, 256, 2\].*got \[2, 256, 8\]"):
        symmoe.transform_weights_for_mega_moe((w1, s1.view(np.uint8).astype(np.int32)), ok2)
    with pytest.raises(ValueError, match=r"l2 weights must be \[2, 256, 64\]"):
        symmoe.transform_weights_for_mega_moe(ok1, (w2[:, :, :32], s2))
    with pytest.raises(ValueError, match=r"l2 scales must be \[2, 256, 1\]"):
        symmoe.transform_weights_for_mega_moe(ok1, (w2, s2[:, :128]))
    wide = s1.view(np.uint8).copy()
    wide[1, 3, 5] = 140  # expert 1: its block now spans 30 binades
    with pytest.raises(symmoe.Error, match="l1 scales of expert 1.*largest code 140"):
        symmoe.transform_weights_for_mega_moe((w1, wide.view(np.int32)), ok2)
    nan = s2.view(np.uint8).copy()
    nan[0, 9, 2] = 0xFF
    with pytest.raises(symmoe.Error, match=r"l2 scales of expert 0: scale code 0xFF \(NaN\)"):
        symmoe.transform_weights_for_mega_moe(ok1, (w2, nan.view(np.int32)))


def test_fp4_transform_takes_mn_major_scales():
    """DeepGEMM's transformed FP4 scales are MN-major (strides [N * K/128, 1, N]): same values, same result."""
    rng = np.random.default_rng(3)
    w1, s1 = _deepgemm_fp4(rng, 2, 256, 256)
    w2, s2 = _deepgemm_fp4(rng, 2, 256, 128)
    mn_major = lambda s: np.ascontiguousarray(s.transpose(0, 2, 1)).transpose(0, 2, 1)
    want = symmoe.transform_weights_for_mega_moe((w1, s1), (w2, s2))
    got = symmoe.transform_weights_for_mega_moe((w1, mn_major(s1)), (w2, mn_major(s2)))
    assert not mn_major(s1).flags.c_contiguous
    for a, b in zip(want[0] + want[1], got[0] + got[1]):
        assert np.array_equal(a, b)


class _Dtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


_DTYPES = {n: _Dtype(n) for n in ("int8", "uint8", "int32", "uint32", "float32")}


class _Tensor:
    """Just enough of a torch tensor for the FP4 transform's torch path, over numpy."""

    def __init__(self, array, device):
        self.array, self.device = array, device

    @property
    def dtype(self):
        return _DTYPES[self.array.dtype.name]

    def detach(self):
        return self

    def cpu(self):
        return _Tensor(self.array, "cpu")

    def numpy(self):
        assert self.device == "cpu", "numpy() of a device tensor"
        return self.array

    def to(self, device):
        return _Tensor(self.array, device)

    def view(self, dtype):
        return _Tensor(self.array.view(dtype.name), self.device)


_NUMPY_TORCH = types.SimpleNamespace(Tensor=_Tensor, from_numpy=lambda a: _Tensor(a, "cpu"))


def test_fp4_transform_takes_torch_tensors(monkeypatch):
    """DeepGEMM's CUDA tensors: the same triples as from numpy, back on the weights' device, data of the input's
    dtype, codes int32 (DeepGEMM's), base scales float32."""
    monkeypatch.setitem(sys.modules, "torch", _NUMPY_TORCH)
    rng = np.random.default_rng(5)
    w1, s1 = _deepgemm_fp4(rng, 2, 256, 256)
    w2, s2 = _deepgemm_fp4(rng, 2, 256, 128)
    want = symmoe.transform_weights_for_mega_moe((w1, s1), (w2, s2))
    dev = "cuda:1"
    on = lambda a: _Tensor(a, dev)
    got = symmoe.transform_weights_for_mega_moe((on(w1), on(s1)), (on(w2.view(np.uint8)), on(s2)))
    for layer, data_dtype in ((0, "int8"), (1, "uint8")):
        (d, c, b), (wd, wc, wb) = got[layer], want[layer]
        assert all(isinstance(t, _Tensor) and t.device == dev for t in (d, c, b))
        assert (d.dtype.name, c.dtype.name, b.dtype.name) == (data_dtype, "int32", "float32")
        assert np.array_equal(d.array.view(np.uint8), wd) and np.array_equal(c.array.view(np.uint32), wc)
        assert np.array_equal(b.array, wb)
    with pytest.raises(TypeError, match="l1 weights must be int8 or uint8, got float32"):
        symmoe.transform_weights_for_mega_moe((on(w1.astype(np.float32)), on(s1)), (on(w2), on(s2)))
