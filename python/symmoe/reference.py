"""The golden model from Python (src/reference, plain C++): the specification the GPU kernels are compared with.

All ranks run in one call; every per-rank argument is a list with one entry per rank. Arrays are numpy; bf16 is
carried as its uint16 bits (formats.float_to_bf16 / bf16_to_float).

  topk_idx, topk_weights = routing(num_tokens, num_experts, num_topk, kind="zipf", rank=r)
  outs = dispatch(xs, topk_idx=idxs, topk_weights=ws, num_experts=E, num_max_tokens_per_rank=T_max)
  recv_x, recv_topk_idx, recv_topk_weights, handle = outs[r]          # DeepEP's return order (no event)
  combined = combine(ys, handles=[o.handle for o in outs])           # [(combined_x, combined_topk_weights)]
  ys = moe_forward(shape, inputs, mode="faithful")                  # the fused layer (exact | faithful | composed)

Handles carry DeepEP's EPHandle field names (num_tokens_per_rank, dst_buffer_slot_idx, recv_src_metadata, ...);
see include/symmoe/reference/dispatch.hpp for their meaning. Bad input raises symmoe.Error naming rank, token,
lane and value before any output.
"""
import numpy as np

from . import _C

RefEPHandle = _C.RefEPHandle
LayerInput = _C.RefLayerInput


def routing(num_tokens, num_experts, num_topk, kind="uniform", zipf_s=1.2, hot_expert=0, hot_fraction=0.5,
            mask_prob=0.0, seed=1, rank=0):
    """One rank's router output: (topk_idx int64 [T, K], -1 = masked; topk_weights fp32 [T, K]).
    kind: uniform | zipf | hot. Deterministic in (seed, rank) on every machine."""
    return _C.ref_make_routing(num_tokens, num_experts, num_topk, kind, zipf_s, hot_expert, hot_fraction,
                               mask_prob, seed, rank)


def _payload(x, what):
    """(rows as uint8 [T, row_bytes], dtype, trailing shape) of one rank's payload array."""
    a = np.ascontiguousarray(x)
    if a.ndim < 1:
        raise ValueError(f"{what} must have a token dimension, got a scalar")
    rows = a.reshape(a.shape[0], -1).view(np.uint8) if a.size else np.zeros((a.shape[0], 0), np.uint8)
    return rows, a.dtype, a.shape[1:]


def _restore(rows, dtype, trailing):
    if rows.shape[0] == 0:
        return np.zeros((0,) + tuple(trailing), dtype=dtype)
    return np.ascontiguousarray(rows).view(dtype).reshape((rows.shape[0],) + tuple(trailing))


class DispatchResult:
    """One destination rank's dispatch output; unpacks as (recv_x, recv_topk_idx, recv_topk_weights, handle).
    recv_x is a (recv_x, recv_x_sf) tuple when x was given as (x, sf)."""

    def __init__(self, raw, x_meta, sf_meta):
        self.raw = raw
        self.handle = raw.handle
        x = _restore(raw.recv_x, *x_meta)
        self.recv_x = x if sf_meta is None else (x, _restore(raw.recv_x_sf, *sf_meta))
        self.recv_topk_idx = raw.recv_topk_idx
        self.recv_topk_weights = raw.recv_topk_weights

    def __iter__(self):
        return iter((self.recv_x, self.recv_topk_idx, self.recv_topk_weights, self.handle))


def _split_inputs(x):
    xs, sfs, x_meta, sf_meta = [], [], None, None
    for r, item in enumerate(x):
        if isinstance(item, tuple):
            if len(item) != 2:
                raise ValueError(f"rank {r}: x must be an array or an (x, sf) pair, got a tuple of {len(item)}")
            rows, dt, tr = _payload(item[0], f"rank {r} x")
            sf_rows, sdt, str_ = _payload(item[1], f"rank {r} sf")
            sfs.append(sf_rows)
            sf_meta = (sdt, str_)
        else:
            rows, dt, tr = _payload(item, f"rank {r} x")
            sfs.append(None)
        xs.append(rows)
        x_meta = (dt, tr)
    if len({s is None for s in sfs}) > 1:
        raise ValueError("give scales (x, sf) on every rank or on none")
    return xs, sfs, x_meta, sf_meta


def dispatch(x, topk_idx=None, topk_weights=None, num_experts=None, num_max_tokens_per_rank=None,
             expert_alignment=1, do_expand=False, do_zero_padding=True, handle=None):
    """Golden dispatch over all ranks. x[r]: [T_r, ...] array (bf16 bits, fp8 codes, anything) or (x, sf).
    handle: the list of handles of a previous dispatch with the same topk_idx -> cached dispatch (no counting).
    Returns [DispatchResult] per destination rank."""
    x = list(x)
    xs, sfs, x_meta, sf_meta = _split_inputs(x)
    if topk_idx is None or topk_weights is None:
        raise ValueError("topk_idx and topk_weights are required (one [T, K] array per rank)")
    idx = [np.asarray(i) for i in topk_idx]  # dtypes are checked (not converted) by _C: integer ids, real weights
    w = [np.asarray(i) for i in topk_weights]
    if handle is not None:
        raws = _C.ref_dispatch_cached(list(handle), xs, sfs, idx, w, do_zero_padding)
    else:
        if num_experts is None or num_max_tokens_per_rank is None:
            raise ValueError("num_experts and num_max_tokens_per_rank are required for a fresh dispatch")
        num_topk = idx[0].shape[1] if idx and idx[0].ndim == 2 else 0
        raws = _C.ref_dispatch(xs, sfs, idx, w, num_experts, num_topk, num_max_tokens_per_rank, expert_alignment,
                               do_expand, do_zero_padding)
    return [DispatchResult(r, x_meta, sf_meta) for r in raws]


def check_dispatch(x, topk_idx, topk_weights, results):
    """Every dispatch invariant (counts, slots, master lanes, prefix sums, expand segments, payload rows) checked
    without re-running the model; works on GPU results copied to numpy. Returns '' when all hold."""
    xs, sfs, _, _ = _split_inputs(list(x))
    idx = [np.asarray(i) for i in topk_idx]
    w = [np.asarray(i) for i in topk_weights]
    return _C.ref_check_dispatch(xs, sfs, idx, w, [r.raw for r in results])


def combine(x, handles, topk_weights=None, bias=None, reduce_local_experts=False):
    """Golden combine. x[r]: bf16 bits uint16 [rows, H] shaped like rank r's recv_x (float arrays raise TypeError:
    convert with formats.float_to_bf16); bias: None, one [T, H] array per rank, or a (bias_0, bias_1) pair of such
    lists. Returns [(combined_x uint16 [T, H], weights or None)]."""
    handles = list(handles)
    xs = [np.asarray(a) for a in x]  # bf16 bits (uint16) required: _C refuses floats instead of casting them
    hidden = xs[0].shape[-1] if xs and xs[0].ndim == 2 else 0
    if not hidden:
        raise ValueError("combine: x must be 2-D [rows, H] on rank 0")
    b0 = b1 = None
    if bias is not None:
        b0, b1 = bias if isinstance(bias, tuple) else (bias, None)
        b0 = None if b0 is None else [np.asarray(a) for a in b0]
        b1 = None if b1 is None else [np.asarray(a) for a in b1]
    w = None if topk_weights is None else [np.asarray(a) for a in topk_weights]
    return _C.ref_combine(handles, hidden, xs, w, b0, b1, reduce_local_experts)


def make_layer_input(shape, num_tokens, kind="uniform", seed=1, mask_prob=0.0, rank=0):
    """A rank's random fused-layer input: x ~ N(0, 1) as FP8 with per-128 fp32 scales, routing of `kind`."""
    return _C.ref_make_layer_input(shape, num_tokens, kind, seed, mask_prob, rank)


def moe_forward(shape, inputs, mode="faithful", weight_seed=7, clamp=0.0, expert_alignment=1):
    """The fused MoE layer over all ranks with the golden model's random experts (deterministic in weight_seed).
    mode: exact (fp64 [T, H]), faithful (the GPU arithmetic, bf16 bits uint16 [T, H]) or composed (dispatch
    expand -> per-expert MLP -> combine; bitwise equal to faithful)."""
    return _C.ref_moe_forward(shape, list(inputs), mode, weight_seed, clamp, expert_alignment)
