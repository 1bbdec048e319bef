"""symmoe's layer calls as torch.library custom ops, so torch.compile(fullgraph=True) traces models that call them.

    import symmoe.torch_ops as ops                      # imports torch; `import symmoe` alone never does
    buf_id = ops.register_buffer(buffer)                # a symmoe.ElasticBuffer
    recv_x, recv_sf, recv_idx, recv_w = torch.ops.symmoe.ep_dispatch(buf_id, x, x_sf, topk_idx, topk_weights,
                                                                     num_experts, 1, False)
    y = expert_mlp(recv_x, recv_sf, recv_idx, recv_w)   # weighted, as DeepEP V2: combine does not weight
    out = torch.ops.symmoe.ep_combine(buf_id, y, topk_idx)

    layer_id = ops.register_mega_layer(sym_buffer)      # from symmoe.get_symm_buffer_for_mega_moe
    y = torch.ops.symmoe.mega_moe(layer_id, x, x_sf, topk_idx, topk_weights, w1, w1_sf, w2, w2_sf, 0.0)
    (w1, c1, b1), (w2, c2, b2) = symmoe.transform_weights_for_mega_moe(fp4_l1, fp4_l2)   # DeepGEMM's FP4 pairs
    y = torch.ops.symmoe.mega_moe_fp4(layer_id, x, x_sf, topk_idx, topk_weights, w1, c1, b1, w2, c2, b2, 0.0)

The ops (schemas in the decorators below):
- symmoe::ep_dispatch(buffer_id, x, x_sf?, topk_idx, topk_weights, num_experts, expert_alignment, do_expand)
  -> (recv_x, recv_sf, recv_topk_idx, recv_topk_weights). Always without CPU sync, so every output has the call's
  worst-case row count (dispatch_rows: R*T_max, or with do_expand R*T_max*min(K, E_local) + E_local*(alignment-1));
  rows past the received ones hold no data and combine never reads them. recv_sf is float32 [rows, 0] for a bf16
  buffer (x_sf None). recv_topk_idx / recv_topk_weights are [rows, K] (non-expand) or [rows] (expand; there
  recv_topk_idx is each row's local expert, -1 past the received rows, where DeepEP's buffer returns None).
- symmoe::ep_combine(buffer_id, x, topk_idx) -> combined_x bf16 [T, H], with the handle of the buffer's latest
  ep_dispatch; topk_idx is that dispatch's [T, K] input (it gives T to the fake implementation).
- symmoe::mega_moe(layer_id, x, x_sf, topk_idx, topk_weights, w1, w1_sf, w2, w2_sf, activation_clamp) -> y bf16
  [T, H]: copies the inputs into the layer's symmetric buffer and runs symmoe.fp8_mega_moe (weights transformed by
  transform_weights_for_mega_moe; activation_clamp <= 0: none).
- symmoe::mega_moe_fp4(layer_id, x, x_sf, topk_idx, topk_weights, w1, w1_codes, w1_base, w2, w2_codes, w2_base,
  activation_clamp) -> y bf16 [T, H]: the same with FP4 weights, symmoe.fp8_fp4_mega_moe on the triples
  transform_weights_for_mega_moe makes of DeepGEMM's FP4 pairs. Either op may use the same layer (it rebinds the
  weights when they change).
Buffers and layers are Python objects, which op schemas cannot carry: they are registered here and named by an
int. Outputs are fresh tensors (the ops clone the buffer's zero-copy views, which the next call would overwrite:
one device copy per output), so compiled graphs may keep them. One stream, as the wrapped calls: torch's current.
The fake (meta) implementations give the same shapes and dtypes without touching a GPU, which is all that
torch.compile needs to trace through; the real ones run under the compiled graph as under eager.
"""
from typing import Optional

import torch
from torch import Tensor

from .ep import ElasticBuffer
from .mega import SymmBuffer, fp8_fp4_mega_moe, fp8_mega_moe

_BUFFERS = {}  # buffer id -> _BufferState
_LAYERS = {}   # layer id -> SymmBuffer


class _BufferState:
    def __init__(self, buffer):
        self.buffer = buffer
        self.handle = None  # the latest ep_dispatch's EPHandle (ep_combine uses it)


def register_buffer(buffer: ElasticBuffer) -> int:
    """An id for `buffer` to pass to symmoe::ep_dispatch / ep_combine (kept alive until unregister)."""
    if not isinstance(buffer, ElasticBuffer):
        raise TypeError(f"buffer must be a symmoe.ElasticBuffer, got {type(buffer).__name__}")
    if buffer.num_experts is None:
        raise ValueError("buffer has no num_experts yet: construct it with num_experts=... to use the torch ops")
    key = id(buffer)
    _BUFFERS.setdefault(key, _BufferState(buffer))
    return key


def register_mega_layer(sym_buffer: SymmBuffer) -> int:
    """An id for `sym_buffer` (symmoe.get_symm_buffer_for_mega_moe) to pass to symmoe::mega_moe / mega_moe_fp4."""
    if not isinstance(sym_buffer, SymmBuffer):
        raise TypeError(f"sym_buffer must come from symmoe.get_symm_buffer_for_mega_moe, got "
                        f"{type(sym_buffer).__name__}")
    _LAYERS[id(sym_buffer)] = sym_buffer
    return id(sym_buffer)


def unregister(obj_id: int) -> None:
    """Forget a registered buffer or layer (the caller still owns it)."""
    _BUFFERS.pop(obj_id, None)
    _LAYERS.pop(obj_id, None)


def _state(buffer_id):
    state = _BUFFERS.get(buffer_id)
    if state is None:
        raise ValueError(f"buffer id {buffer_id} is not registered (symmoe.torch_ops.register_buffer)")
    return state


def _layer(layer_id):
    layer = _LAYERS.get(layer_id)
    if layer is None:
        raise ValueError(f"layer id {layer_id} is not registered (symmoe.torch_ops.register_mega_layer)")
    return layer


def dispatch_rows(buffer: ElasticBuffer, expert_alignment: int, do_expand: bool) -> int:
    """Rows of every ep_dispatch output: the worst case the buffer can receive (include/symmoe/ep.hpp)."""
    R, T_max, K = buffer.num_ranks, buffer.num_max_tokens_per_rank, buffer.num_topk
    if not do_expand:
        return R * T_max
    El = buffer.num_experts // R
    return R * T_max * min(K, El) + El * (expert_alignment - 1)


# ---- EP dispatch ----

@torch.library.custom_op("symmoe::ep_dispatch", mutates_args=())
def ep_dispatch(buffer_id: int, x: Tensor, x_sf: Optional[Tensor], topk_idx: Tensor, topk_weights: Tensor,
                num_experts: int, expert_alignment: int, do_expand: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    state = _state(buffer_id)
    buf = state.buffer
    state.handle = None  # releases the previous handle to the buffer's pool before the dispatch takes one
    recv_x, recv_idx, recv_w, handle, _ = buf.dispatch(
        (x, x_sf) if x_sf is not None else x, topk_idx=topk_idx, topk_weights=topk_weights, num_experts=num_experts,
        expert_alignment=expert_alignment, do_expand=do_expand, do_cpu_sync=False)
    state.handle = handle
    # The buffer's expand outputs keep the largest capacity of any call so far; this call's worst case is fewer
    # rows (and all that it can fill), so every output is cut to it: the same shape as the fake implementation.
    rows = dispatch_rows(buf, expert_alignment, do_expand)
    recv_sf = None
    if x_sf is not None:
        recv_x, recv_sf = recv_x
    if recv_x.shape[0] < rows:
        raise RuntimeError(f"ep_dispatch: the buffer returned {recv_x.shape[0]} rows, fewer than this call's "
                           f"worst case {rows}")
    if recv_x.dtype != x.dtype and recv_x.element_size() == x.element_size():
        recv_x = recv_x.view(x.dtype)  # FP8 rows come back as their bytes
    recv_sf = (recv_sf[:rows].clone() if recv_sf is not None
               else x.new_empty((rows, 0), dtype=torch.float32))
    if do_expand:  # the buffer returns None here (as DeepEP); the op returns each row's local expert
        recv_idx = _expanded_row_experts(handle, rows, topk_idx.dtype)
    else:
        recv_idx = recv_idx[:rows].clone()
    return recv_x[:rows].clone(), recv_sf, recv_idx, recv_w[:rows].clone()


def _expanded_row_experts(handle, rows: int, dtype) -> Tensor:
    """[rows] local expert of each row of an expand dispatch (rows of expert e, alignment padding included, follow
    those of e - 1); -1 past the last expert's rows."""
    ends = torch.cumsum(handle.num_recv_tokens_per_expert.to(torch.int64), 0)  # aligned counts, [El]
    expert = torch.searchsorted(ends, torch.arange(rows, device=ends.device), right=True)
    return torch.where(expert < ends.numel(), expert, torch.full_like(expert, -1)).to(dtype)


@ep_dispatch.register_fake
def _(buffer_id, x, x_sf, topk_idx, topk_weights, num_experts, expert_alignment, do_expand):
    buf = _state(buffer_id).buffer
    rows = dispatch_rows(buf, expert_alignment, do_expand)
    lanes = () if do_expand else (buf.num_topk,)
    recv_x = x.new_empty((rows, x.shape[1]))
    recv_sf = (x_sf.new_empty((rows, x_sf.shape[1])) if x_sf is not None
               else x.new_empty((rows, 0), dtype=torch.float32))
    return (recv_x, recv_sf, topk_idx.new_empty((rows,) + lanes),
            topk_weights.new_empty((rows,) + lanes))


# ---- EP combine ----

@torch.library.custom_op("symmoe::ep_combine", mutates_args=())
def ep_combine(buffer_id: int, x: Tensor, topk_idx: Tensor) -> Tensor:
    state = _state(buffer_id)
    if state.handle is None:
        raise ValueError(f"ep_combine: buffer {buffer_id} has no dispatch to combine (call ep_dispatch first)")
    combined_x, _, _ = state.buffer.combine(x, handle=state.handle, do_cpu_sync=False)
    if combined_x.shape[0] != topk_idx.shape[0]:
        raise ValueError(f"ep_combine: topk_idx has {topk_idx.shape[0]} tokens, the latest dispatch had "
                         f"{combined_x.shape[0]}")
    return combined_x.clone()


@ep_combine.register_fake
def _(buffer_id, x, topk_idx):
    return x.new_empty((topk_idx.shape[0], _state(buffer_id).buffer.hidden), dtype=torch.bfloat16)


# ---- fused layer ----

def _layer_inputs(layer_id, x, x_sf, topk_idx, topk_weights):
    """The layer with the call's inputs copied into its buffer, and a fresh y bf16 [T, H]."""
    buf = _layer(layer_id)
    t = x.shape[0]
    buf.x[:t].copy_(x)
    buf.x_sf[:t].copy_(x_sf)
    buf.topk_idx[:t].copy_(topk_idx)
    buf.topk_weights[:t].copy_(topk_weights)
    return buf, torch.empty((t, buf.hidden), dtype=torch.bfloat16, device=x.device)


def _clamp(activation_clamp):
    return activation_clamp if activation_clamp > 0 else None


def _fake_y(layer_id, x):
    return x.new_empty((x.shape[0], _layer(layer_id).hidden), dtype=torch.bfloat16)


@torch.library.custom_op("symmoe::mega_moe", mutates_args=())
def mega_moe(layer_id: int, x: Tensor, x_sf: Tensor, topk_idx: Tensor, topk_weights: Tensor, w1: Tensor,
             w1_sf: Tensor, w2: Tensor, w2_sf: Tensor, activation_clamp: float) -> Tensor:
    buf, y = _layer_inputs(layer_id, x, x_sf, topk_idx, topk_weights)
    return fp8_mega_moe(y, (w1, w1_sf), (w2, w2_sf), buf, activation_clamp=_clamp(activation_clamp))


@mega_moe.register_fake
def _(layer_id, x, x_sf, topk_idx, topk_weights, w1, w1_sf, w2, w2_sf, activation_clamp):
    return _fake_y(layer_id, x)


@torch.library.custom_op("symmoe::mega_moe_fp4", mutates_args=())
def mega_moe_fp4(layer_id: int, x: Tensor, x_sf: Tensor, topk_idx: Tensor, topk_weights: Tensor, w1: Tensor,
                 w1_codes: Tensor, w1_base: Tensor, w2: Tensor, w2_codes: Tensor, w2_base: Tensor,
                 activation_clamp: float) -> Tensor:
    buf, y = _layer_inputs(layer_id, x, x_sf, topk_idx, topk_weights)
    return fp8_fp4_mega_moe(y, (w1, w1_codes, w1_base), (w2, w2_codes, w2_base), buf,
                            activation_clamp=_clamp(activation_clamp))


@mega_moe_fp4.register_fake
def _(layer_id, x, x_sf, topk_idx, topk_weights, w1, w1_codes, w1_base, w2, w2_codes, w2_base, activation_clamp):
    return _fake_y(layer_id, x)
