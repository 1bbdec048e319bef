"""What may be copied into the fused layer's input views (buffer.x, x_sf, topk_idx, topk_weights): sources whose
conversion would change their meaning are refused, naming the view, expected and got (symmoe.mega
check_input_source; the torch views call it from copy_ and slice assignment, python/tests_gpu/test_mega_inputs.py)."""
import numpy as np
import pytest

from symmoe.mega import check_input_source

from fake_cuda import FakeCuda

T, H, K = 8, 512, 6


@pytest.mark.parametrize("name, src, shape", [
    ("x", FakeCuda((T, H), "float8_e4m3fn"), (T, H)),
    ("x_sf", FakeCuda((T, H // 128), "float32"), (T, H // 128)),
    ("topk_idx", FakeCuda((T, K), "int64"), (T, K)),
    ("topk_idx", np.zeros((T, K), np.int32), (T, K)),  # host tensors are fine: torch copies them over
    ("topk_weights", FakeCuda((T, K), "float32"), (T, K)),
    ("topk_idx", -1, (T, K)),  # fills
    ("x_sf", 1.0, (T, H // 128)),
])
def test_sources_that_keep_their_meaning_pass(name, src, shape):
    check_input_source(name, src, shape)


@pytest.mark.parametrize("name, src, shape, exc, pattern", [
    ("x", FakeCuda((T, H), "bfloat16"), (T, H), TypeError,
     r"buffer\.x: the source must have dtype float8_e4m3fn \(FP8 E4M3 activations \(quantise bf16 / fp32 x per 128 "
     r"channels first.*got bfloat16"),
    ("x", FakeCuda((T, H), "uint8"), (T, H), TypeError, r"\.view\(torch\.float8_e4m3fn\).*got uint8"),
    ("x_sf", FakeCuda((T, H // 512), "int32"), (T, H // 128), TypeError,
     r"buffer\.x_sf: the source must have dtype float32 \(fp32 scales, one per token per 128 channels \(packed UE8M0 "
     r"int32 scales are not accepted.*got int32"),
    ("x_sf", FakeCuda((T, H // 128), "bfloat16"), (T, H // 128), TypeError, r"buffer\.x_sf: .*got bfloat16"),
    ("topk_idx", FakeCuda((T, K), "float32"), (T, K), TypeError,
     r"buffer\.topk_idx: the source must have dtype int64 or int32 \(integer expert ids \(-1 = masked\)\), "
     r"got float32"),
    ("topk_idx", FakeCuda((T, K), "uint8"), (T, K), TypeError, r"got uint8"),
    ("topk_weights", FakeCuda((T, K), "bfloat16"), (T, K), TypeError,
     r"buffer\.topk_weights: the source must have dtype float32 .*got bfloat16"),
    ("topk_weights", FakeCuda((T, K - 1), "float32"), (T, K), ValueError,
     r"buffer\.topk_weights: the source must have shape \[8, 6\] \(the rows it is copied into\), got \[8, 5\]"),
    ("x", FakeCuda((H,), "float8_e4m3fn"), (T, H), ValueError, r"must have shape \[8, 512\].*got \[512\]"),
    ("topk_idx", "0,1", (T, K), TypeError,
     r"buffer\.topk_idx: the source must be a tensor of int64 or int32 .*got str"),
    ("topk_idx", True, (T, K), TypeError, r"got bool"),
])
def test_sources_that_would_be_reinterpreted_raise(name, src, shape, exc, pattern):
    with pytest.raises(exc, match=pattern):
        check_input_source(name, src, shape)
