"""The CPU helpers convert, never reinterpret: codes and bit patterns must be integers in range, expert ids integer,
quantiser inputs finite; every error names the argument, expected and got."""
import numpy as np
import pytest

import symmoe
from symmoe import formats
from symmoe import reference as ref

R, E, K, T, H = 2, 8, 2, 5, 128


@pytest.mark.parametrize("fn, good, bad, pattern", [
    (symmoe.e4m3_to_float, [0, 255], [300], r"x must be E4M3 codes \(uint8, 0\.\.255\) \(values in \[0, 255\]\), "
                                            r"got 300 at flat index 0"),
    (symmoe.e4m3_to_float, [1], [-1], r"got -1 at flat index 0"),
    (symmoe.e5m2_to_float, np.array([3, 7], np.int32), np.array([7, 256], np.uint16), r"got 256 at flat index 1"),
    (symmoe.e2m1_to_float, np.arange(16, dtype=np.uint8), np.array([16], np.uint8), r"0\.\.15.*got 16"),
    (symmoe.bf16_to_float, [0x3FC0], [70000], r"bf16 bit patterns .*got 70000"),
    (symmoe.ue8m0_to_float, [127], [1 << 40], r"UE8M0 .*got 1099511627776"),
])
def test_codes_out_of_range_raise(fn, good, bad, pattern):
    fn(good)
    with pytest.raises(ValueError, match=pattern):
        fn(bad)


@pytest.mark.parametrize("fn", [symmoe.e4m3_to_float, symmoe.e5m2_to_float, symmoe.e2m1_to_float,
                                symmoe.bf16_to_float, symmoe.ue8m0_to_float])
def test_float_codes_raise(fn):
    with pytest.raises(TypeError, match=r"x must be .*an integer array\), got dtype float64: floats are not "
                                        r"reinterpreted"):
        fn([1.5])
    with pytest.raises(TypeError, match=r"got dtype float32"):
        fn(np.ones(3, np.float32))
    with pytest.raises(TypeError, match=r"got dtype bool"):
        fn(np.ones(3, bool))
    assert fn(np.zeros((0,), np.float64)).shape == (0,)  # nothing to reinterpret


def test_codes_keep_their_values():
    assert symmoe.bf16_to_float([0x3FC0])[0] == 1.5
    assert symmoe.e4m3_to_float(np.array([0x38], np.int64))[0] == 1.0
    assert symmoe.float_to_bf16(np.array([1, 2], np.int32)).tolist() == [0x3F80, 0x4000]  # ints are real values
    with pytest.raises(TypeError, match=r"x must be a real \(float or integer\) array, got dtype bool"):
        symmoe.float_to_e4m3(np.ones(2, bool))
    with pytest.raises(TypeError, match=r"packed must be packed E2M1 bytes of dtype uint8, got dtype float64"):
        formats.unpack_e2m1(np.zeros((2, 2)))


@pytest.mark.parametrize("bad, where", [(np.inf, "row 1, column 130 (column block 1 of 128"),
                                        (-np.inf, "row 1, column 130"), (np.nan, "nan at row 1, column 130")])
def test_quantize_activations_refuses_non_finite(bad, where):
    x = np.ones((3, 256), np.float32)
    x[1, 130] = bad
    with pytest.raises(ValueError, match=r"x must be finite, got .*" + where.replace("(", r"\(")):
        symmoe.quantize_activations(x, 128)
    with pytest.raises(ValueError, match=r"w must be finite"):
        symmoe.quantize_weights_128x128(x)
    with pytest.raises(ValueError, match=r"w must be finite, got .* \(column block 4 of 32"):
        symmoe.quantize_weights_fp4(x)


def rank_inputs():
    xs, idxs, ws = [], [], []
    for r in range(R):
        idx, w = ref.routing(T, E, K, seed=5, rank=r)
        xs.append(symmoe.float_to_bf16(np.full((T, H), r, np.float32)))
        idxs.append(idx)
        ws.append(w)
    return xs, idxs, ws


def test_float_expert_ids_raise():
    xs, idxs, ws = rank_inputs()
    idxs[1] = idxs[1].astype(np.float64) + 0.7  # used to be truncated to valid ids
    with pytest.raises(TypeError, match=r"rank 1 topk_idx must be expert ids \(int64, -1 = masked\) \(an integer "
                                        r"array\), got dtype float64"):
        ref.dispatch(xs, topk_idx=idxs, topk_weights=ws, num_experts=E, num_max_tokens_per_rank=T)
    idxs[1] = idxs[1].astype(np.int32)  # integer ids of any width are fine
    ref.dispatch(xs, topk_idx=idxs, topk_weights=ws, num_experts=E, num_max_tokens_per_rank=T)
    with pytest.raises(TypeError, match=r"topk_idx must be expert ids"):
        symmoe.reference.LayerInput(np.zeros((1, 128), np.uint8), np.ones((1, 1), np.float32),
                                    np.zeros((1, K), np.float32), np.ones((1, K), np.float32))


def test_row_mismatch_names_both_arguments():
    xs, idxs, ws = rank_inputs()
    xs[0] = xs[0][:T - 1]  # x is the short one: the message must not blame topk_idx alone
    with pytest.raises(symmoe.Error, match=r"rank 0: x has 4 rows \(tokens\) but topk_idx has 5; x, topk_idx and "
                                           r"topk_weights need one row per token"):
        ref.dispatch(xs, topk_idx=idxs, topk_weights=ws, num_experts=E, num_max_tokens_per_rank=T)
    xs, idxs, ws = rank_inputs()
    ws[1] = ws[1][:, :1]
    with pytest.raises(symmoe.Error, match=r"rank 1: topk_weights must have num_topk = 2 columns \(as topk_idx\), "
                                           r"got 1"):
        ref.dispatch(xs, topk_idx=idxs, topk_weights=ws, num_experts=E, num_max_tokens_per_rank=T)
    with pytest.raises(symmoe.Error, match=r"x has 2 rows \(tokens\) but topk_idx has 1"):
        symmoe.reference.LayerInput(np.zeros((2, 128), np.uint8), np.ones((2, 1), np.float32),
                                    np.zeros((1, K), np.int64), np.ones((1, K), np.float32))


def test_combine_refuses_float_rows():
    xs, idxs, ws = rank_inputs()
    outs = ref.dispatch(xs, topk_idx=idxs, topk_weights=ws, num_experts=E, num_max_tokens_per_rank=T,
                        do_expand=True)
    handles = [o.handle for o in outs]
    ys = [symmoe.bf16_to_float(o.recv_x) for o in outs]  # float32 rows: used to become garbage bf16 bits
    with pytest.raises(TypeError, match=r"rank 0 x must be bf16 bit patterns \(uint16, as float_to_bf16 gives\) "
                                        r"\(an integer array\), got dtype float32"):
        ref.combine(ys, handles=handles)
    ys = [symmoe.float_to_bf16(y) for y in ys]
    bias = [np.full((T, H), 2.0, np.float32) for _ in range(R)]
    with pytest.raises(TypeError, match=r"rank 0 bias_0 must be bf16 bit patterns"):
        ref.combine(ys, handles=handles, bias=bias)
    combined = ref.combine(ys, handles=handles, bias=[symmoe.float_to_bf16(b) for b in bias])
    for r, (cx, _) in enumerate(combined):
        lanes = (idxs[r] >= 0).sum(axis=1)
        assert np.array_equal(symmoe.bf16_to_float(cx), (r * lanes + 2.0)[:, None].repeat(H, axis=1))


def test_routing_generator_refuses_bad_parameters():
    with pytest.raises(symmoe.Error, match=r"hot_fraction must be in \[0, 1\], got 2"):
        ref.routing(4, E, K, kind="hot", hot_fraction=2.0)
    with pytest.raises(symmoe.Error, match=r"zipf_s must be >= 0 .* got -1"):
        ref.routing(4, E, K, kind="zipf", zipf_s=-1.0)
    with pytest.raises(symmoe.Error, match=r"zipf_s must be >= 0 .* got nan"):
        ref.routing(4, E, K, kind="zipf", zipf_s=float("nan"))
    ref.routing(4, E, K, kind="zipf", zipf_s=0.0)


def test_host_l1_transform_refuses_float_codes():
    from symmoe import _C
    sf = np.ones((1, 2, 1), np.float32)
    with pytest.raises(TypeError, match=r"data must be E4M3 codes \(uint8\) \(an integer array\), got dtype float32"):
        _C.transform_l1_weights(np.ones((1, 256, 128), np.float32), sf)
    with pytest.raises(ValueError, match=r"data must be E4M3 codes .*got 256"):
        _C.transform_l1_weights(np.full((1, 256, 128), 256, np.int32), sf)
