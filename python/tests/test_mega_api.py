"""The DeepGEMM-shaped fused-layer API on the CPU: the L1 weight transform against the C++ one
(include/symmoe/weight_transform.hpp), and every argument check of get_symm_buffer_for_mega_moe / fp8_mega_moe
before any GPU work (fake CUDA tensors that are never dereferenced)."""
import numpy as np
import pytest

import symmoe
from symmoe import _C
from symmoe.dlpack import DeviceView, KDL_CUDA, tensor_info

from fake_cuda import FakeCuda

R, E, T_MAX, K, H, I = 2, 32, 64, 6, 512, 256
EL = E // R


@pytest.mark.parametrize("experts, inter, hidden", [(1, 128, 128), (3, 256, 384), (2, 512, 256)])
def test_transform_matches_the_cpp_transform(experts, inter, hidden):
    rng = np.random.default_rng(experts * 1000 + inter + hidden)
    w = rng.integers(0, 256, (experts, 2 * inter, hidden), dtype=np.uint8)
    sf = rng.random((experts, 2 * inter // 128, hidden // 128), dtype=np.float32)
    w2 = rng.integers(0, 256, (experts, hidden, inter), dtype=np.uint8)
    w2_sf = rng.random((experts, hidden // 128, inter // 128), dtype=np.float32)
    (got_w, got_sf), (got_w2, got_w2_sf) = symmoe.transform_weights_for_mega_moe((w, sf), (w2, w2_sf))
    want_w, want_sf = _C.transform_l1_weights(w, sf)
    assert got_w.shape == want_w.shape and np.array_equal(got_w, want_w)
    assert got_sf.shape == want_sf.shape == (experts, inter // 128, hidden // 128, 2)
    assert np.array_equal(got_sf, want_sf)
    assert got_w2 is w2 and got_w2_sf is w2_sf  # L2 is used as it is
    # The interleave itself: row 16q + j is gate row 8q + j (j < 8), up row 8q + j - 8 otherwise.
    assert np.array_equal(got_w[:, 8:16], w[:, inter:inter + 8])
    assert np.array_equal(got_w[:, 16:24], w[:, 8:16])


def test_transform_refuses_bad_weights():
    w = np.zeros((2, 512, 256), np.uint8)
    sf = np.zeros((2, 4, 2), np.float32)
    with pytest.raises(TypeError, match=r"l1_weights must be a \(weights, scales\) pair, FP8 or FP4 \(BF16"):
        symmoe.transform_weights_for_mega_moe(w, (w, sf))
    with pytest.raises(ValueError, match=r"l1 scales must be \[2, 4, 2\].*got \[2, 2, 2, 2\]"):
        symmoe.transform_weights_for_mega_moe((w, np.zeros((2, 2, 2, 2), np.float32)), (w, sf))
    with pytest.raises(ValueError, match=r"l1 weights must be \[E_local, 2I, H\]"):
        symmoe.transform_weights_for_mega_moe((np.zeros((2, 384, 256), np.uint8), sf), (w, sf))
    with pytest.raises(ValueError, match="activation must be 'swiglu'"):
        symmoe.transform_weights_for_mega_moe((w, sf), (w, sf), activation="gelu")


def test_buffer_arguments():
    for mma_type in ("bf16xbf16", "fp4xfp4"):
        with pytest.raises(ValueError, match=f"mma_type must be 'fp8xfp4' or 'fp8xfp8'.*got '{mma_type}'"):
            symmoe.get_symm_buffer_for_mega_moe(None, E, T_MAX, K, H, I, mma_type=mma_type)
    for mma_type in ("fp8xfp4", "fp8xfp8"):  # accepted (one workspace for both layer calls): the shape check is next
        with pytest.raises(symmoe.Error, match="hidden must be a positive multiple of 128, got 500"):
            symmoe.get_symm_buffer_for_mega_moe(None, E, T_MAX, K, 500, I, mma_type=mma_type)
    with pytest.raises(ValueError, match="use_fp8_dispatch must be True or None"):
        symmoe.get_symm_buffer_for_mega_moe(None, E, T_MAX, K, H, I, use_fp8_dispatch=False)
    with pytest.raises(ValueError, match="activation must be 'swiglu'"):
        symmoe.get_symm_buffer_for_mega_moe(None, E, T_MAX, K, H, I, activation="relu")
    with pytest.raises(symmoe.Error, match="hidden must be a positive multiple of 128, got 500"):
        symmoe.SymmBuffer._validation_only(R, E, T_MAX, K, 500, I)
    with pytest.raises(symmoe.Error, match=r"num_experts \(33\) must be a positive multiple of num_ranks \(2\)"):
        symmoe.SymmBuffer._validation_only(R, 33, T_MAX, K, H, I)
    with pytest.raises(TypeError, match="num_topk must be an int, got float"):
        symmoe.SymmBuffer._validation_only(R, E, T_MAX, 6.0, H, I)
    with pytest.raises(ValueError, match="num_max_tokens_per_rank must be >= 1, got 0"):
        symmoe.SymmBuffer._validation_only(R, E, 0, K, H, I)
    _C.mega_check_shape(symmoe.SymmBuffer._validation_only(R, E, T_MAX, K, H, I).shape)


def weights(experts=EL, inter=I, hidden=H):
    return ((FakeCuda((experts, 2 * inter, hidden), "float8_e4m3fn"),
             FakeCuda((experts, inter // 128, hidden // 128, 2), "float32")),
            (FakeCuda((experts, hidden, inter), "float8_e4m3fn"),
             FakeCuda((experts, hidden // 128, inter // 128), "float32")))


def call(**kw):
    buf = kw.pop("buf", None) or symmoe.SymmBuffer._validation_only(R, E, T_MAX, K, H, I)
    l1, l2 = weights()
    args = dict(y=FakeCuda((32, H), "bfloat16"), l1_weights=l1, l2_weights=l2, sym_buffer=buf)
    args.update(kw)
    return symmoe.fp8_mega_moe(**args)


def test_valid_call_reaches_the_runtime():
    with pytest.raises(RuntimeError, match="no GPU runtime"):
        call()
    with pytest.raises(RuntimeError, match="no GPU runtime"):  # uint8 weights, T = T_max, clamp, stats
        l1, l2 = weights()
        call(y=FakeCuda((T_MAX, H), "bfloat16"), l1_weights=(FakeCuda((EL, 2 * I, H), "uint8"), l1[1]),
             activation_clamp=7.0)
    for clamp in (0.0, float("inf"), 1e-40):  # DeepGEMM's meaning at every value >= 0 (0: every activation 0)
        with pytest.raises(RuntimeError, match="no GPU runtime"):
            call(activation_clamp=clamp)


def test_activation_clamp_has_deepgemms_meaning():
    """None / +inf: no clamp (the kernels' 0); c > 0: c; 0: DeepGEMM's clamp to 0, as the smallest positive float32
    (include/symmoe/activation_clamp.hpp); negative or NaN: ValueError naming DeepGEMM's meaning."""
    to_kernel = _C.swiglu_clamp_for_activation_clamp
    assert to_kernel(float("inf")) == 0.0
    assert to_kernel(7.0) == 7.0
    assert to_kernel(0.0) == np.nextafter(np.float32(0), np.float32(1))
    for bad in (-1.0, float("nan"), float("-inf")):
        with pytest.raises(ValueError, match=r"activation_clamp must be None or >= 0 \(DeepGEMM's meaning: None or "
                                             r"\+inf = no clamp, c >= 0 clamps gate to <= c and up to \[-c, c\]"):
            to_kernel(bad)


L1, L2 = weights()


@pytest.mark.parametrize("kw, exc, pattern", [
    (dict(y=np.zeros((32, H), np.uint16)), ValueError, r"y must be on cuda:0 .*got cpu"),
    (dict(y=FakeCuda((32, H), "bfloat16", device=1)), ValueError, r"y must be on cuda:0 .*got cuda:1"),
    (dict(y=FakeCuda((32, H), "float32")), TypeError, r"y must have dtype bfloat16, got float32"),
    (dict(y=FakeCuda((32, H + 128), "bfloat16")), ValueError, r"y must have shape \['\*', 512\], got \[32, 640\]"),
    (dict(y=FakeCuda((T_MAX + 1, H), "bfloat16")), ValueError, r"y has 65 tokens, more than num_max_tokens_per_rank"),
    (dict(y="not a tensor"), TypeError, r"y: expected a tensor with __dlpack__"),
    (dict(l1_weights=(L1[0], FakeCuda((EL, 2 * I // 128, H // 128), "float32"))), ValueError,
     r"l1 scales \(transformed\) must have shape \[16, 2, 4, 2\], got \[16, 4, 4\]"),
    (dict(l1_weights=(FakeCuda((EL, 2 * I, H), "bfloat16"), L1[1])), TypeError,
     r"l1 weights must have dtype float8_e4m3fn or uint8, got bfloat16"),
    (dict(l1_weights=(FakeCuda((EL + 1, 2 * I, H), "uint8"), L1[1])), ValueError,
     r"l1 weights must have shape \[16, 512, 512\], got \[17, 512, 512\]"),
    (dict(l2_weights=(FakeCuda((EL, I, H), "uint8"), L2[1])), ValueError,
     r"l2 weights must have shape \[16, 512, 256\], got \[16, 256, 512\]"),
    (dict(l2_weights=(L2[0], FakeCuda((EL, H // 128, I // 128), "float16"))), TypeError,
     r"l2 scales must have dtype float32, got float16"),
    (dict(l2_weights=L2[0]), TypeError, r"l2_weights must be a \(weights, scales\) pair"),
    (dict(recipe=(1, 1, 32)), ValueError, r"recipe must be \(128, 128, 128\), got \(1, 1, 32\)"),
    (dict(activation="gelu"), ValueError, r"activation must be 'swiglu'"),
    (dict(activation_clamp=-1.0), ValueError, r"activation_clamp must be None or >= 0 \(DeepGEMM's meaning.*got -1"),
    (dict(activation_clamp=float("nan")), ValueError, r"activation_clamp must be None or >= 0 \(DeepGEMM.*got nan"),
    (dict(sym_buffer=object()), TypeError, r"sym_buffer must come from symmoe.get_symm_buffer_for_mega_moe"),
    (dict(cumulative_local_expert_recv_stats=FakeCuda((EL + 1,), "int32")), ValueError,
     r"cumulative_local_expert_recv_stats must have shape \[16\], got \[17\]"),
    (dict(cumulative_local_expert_recv_stats=FakeCuda((EL,), "int32")), TypeError,
     r"cumulative_local_expert_recv_stats must be a torch tensor"),
])
def test_bad_arguments_are_refused_before_the_runtime(kw, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call(**kw)


def test_strided_device_view():
    # buffer.x_sf is such a view: rows `stride` floats apart in the workspace.
    v = DeviceView(0x7F0000001000, (64, 4), "float32", 0, strides=(8, 1))
    info = tensor_info(v)
    assert info.shape == (64, 4) and info.strides == (8, 1) and info.device_type == KDL_CUDA
    assert not info.is_contiguous()
    with pytest.raises(ValueError, match="1 strides for shape"):
        DeviceView(0, (2, 2), "float32", 0, strides=(1,))


# ---- fp8_fp4_mega_moe: the FP4 triples (transform_weights_for_mega_moe of DeepGEMM's FP4 pairs, on the device) ----

def fp4_weights(experts=EL, inter=I, hidden=H):
    return ((FakeCuda((experts, 2 * inter, hidden // 2), "uint8"),
             FakeCuda((experts, hidden // 128, 2 * inter), "int32"),
             FakeCuda((experts, inter // 128, hidden // 128, 2), "float32")),
            (FakeCuda((experts, hidden, inter // 2), "uint8"),
             FakeCuda((experts, inter // 128, hidden), "uint32"),
             FakeCuda((experts, hidden // 128, inter // 128), "float32")))


def call_fp4(**kw):
    buf = symmoe.SymmBuffer._validation_only(R, E, T_MAX, K, H, I)
    l1, l2 = fp4_weights()
    args = dict(y=FakeCuda((32, H), "bfloat16"), l1_weights=l1, l2_weights=l2, sym_buffer=buf)
    args.update(kw)
    return symmoe.fp8_fp4_mega_moe(**args)


def test_fp4_valid_call_reaches_the_runtime():
    with pytest.raises(RuntimeError, match="no GPU runtime"):
        call_fp4()


F1, F2 = fp4_weights()


@pytest.mark.parametrize("kw, exc, pattern", [
    (dict(recipe=(128, 128, 128)), ValueError, r"recipe must be \(1, 1, 32\) \(FP4 weights\), got \(128, 128, 128\)"),
    (dict(l1_weights=L1), TypeError, r"l1_weights must be a \(weights, scale codes, base scales\) triple"),
    (dict(l1_weights=(FakeCuda((EL, 2 * I, H), "uint8"), F1[1], F1[2])), ValueError,
     r"l1 weights \(fp4\) must have shape \[16, 512, 256\], got \[16, 512, 512\]"),
    (dict(l1_weights=(F1[0], FakeCuda((EL, 2 * I, H // 128), "int32"), F1[2])), ValueError,
     r"l1 scale codes must have shape \[16, 4, 512\], got \[16, 512, 4\]"),
    (dict(l2_weights=(F2[0], FakeCuda((EL, I // 128, H), "float32"), F2[2])), TypeError,
     r"l2 scale codes must have dtype int32 or uint32, got float32"),
    (dict(l2_weights=(F2[0], F2[1], FakeCuda((EL, H // 128, I // 128, 2), "float32"))), ValueError,
     r"l2 base scales must have shape \[16, 4, 2\], got \[16, 4, 2, 2\]"),
    (dict(activation="gelu"), ValueError, r"activation must be 'swiglu'"),
    (dict(sym_buffer=object()), TypeError, r"sym_buffer must come from symmoe.get_symm_buffer_for_mega_moe"),
])
def test_fp4_bad_arguments_are_refused_before_the_runtime(kw, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call_fp4(**kw)
