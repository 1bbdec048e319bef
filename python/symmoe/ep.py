"""DeepEP-shaped expert-parallel dispatch / combine over symmoe's EpBuffer (include/symmoe/ep.hpp).

    buffer = symmoe.ElasticBuffer(group, num_max_tokens_per_rank=4096, hidden=7168)
    recv_x, recv_topk_idx, recv_topk_weights, handle, event = buffer.dispatch(
        (x_fp8, x_scales), topk_idx=topk_idx, topk_weights=topk_weights, num_experts=256)
    combined_x, combined_topk_weights, event = buffer.combine(y, handle=handle)

Argument names, positional order, defaults, return values and their semantics follow DeepEP V2
(deep_ep.ElasticBuffer / EPHandle / EventOverlap), so a DeepEP V2 script runs with `import symmoe as deep_ep`
(DeepEP's own tests/elastic/test_ep.py does: python/tests_gpu/run_deepep_test.sh). In particular:
- The payload dtype is chosen per dispatch call: x bf16 [T, H], or an (x, sf) pair of float8_e4m3fn (or its uint8
  bytes) [T, H] with scales "fp32_per128" float32 [T, H/128], "ue8m0_per32" int32 [T, H/128] (4 UE8M0 bytes per
  int32) or "ue8m0_per128" int32 [T, ceil(H/512)], recognised from the scales' dtype and width.
- Returned tensors are the caller's: allocated per call (torch's allocator, on the compute stream, or on the
  communication stream with allocate_on_comm_stream=True) and stay valid after later calls. Shapes: with CPU sync
  exact row counts (num_recv_tokens, or num_expanded_tokens in expand mode, masked tokens not counted), without
  (and for a cached dispatch of a handle made without) the worst case. An expand dispatch returns recv_topk_idx None
  and recv_topk_weights [rows]; use_tma_aligned_col_major_sf=True returns the scales column-major with the row
  stride aligned to 4 (the layout DeepGEMM's SM90 GEMMs read through TMA).
- do_handle_copy=False: handle.topk_idx is the caller's tensor (combine and cached dispatches read it as it is then).
- Streams: every call runs after the compute stream's work, or only after previous_event (which needs
  allocate_on_comm_stream=True). Calls with async_with_compute_stream, allocate_on_comm_stream or previous_event
  run on the buffer's communication stream (get_comm_stream()); async_with_compute_stream=True returns an
  EventOverlap to wait on (the tensors used are record_stream'ed on both streams), otherwise the compute stream
  waits for the call. Other calls run on the compute stream itself (the same order, without the two event round
  trips). EP calls are ordered among themselves whatever streams they are made from.
- combine: num_sms=0 reuses the dispatch's; biases start the fp32 sum (bias_0 + bias_1, then the rows), rounded
  once; allow_multiple_reduction=True makes each rank reduce its own experts' rows of an expand handle first (one
  bf16 rounding there), False sends every expert row to the source (one rounding in all).
- capture() returns an EventHandle on the current stream; EventOverlap.current_stream_wait / `with` as DeepEP.

What still differs from DeepEP V2 (one NVLink domain, no RDMA):
- Scale-out / hybrid / RDMA arguments are accepted and unused: allow_hybrid_mode, num_bytes (the buffer is sized
  from the MoE settings), sl_idx, num_allocated_qps, num_qps, num_cpu_timeout_secs; num_cpu_bytes must be 0.
  get_logical_domain_size / get_physical_domain_size return (1, num_ranks); get_theoretical_num_qps returns 0;
  EPHandle has no token_metadata_at_forward / channel_linked_list.
- get_theoretical_num_sms returns the EP plan's dispatch SM count (symmoe.plan), not DeepEP's bandwidth model.
- num_experts may be given at construction (keyword) or, as DeepEP, with the first dispatch; the symmetric buffer
  of a payload dtype is allocated by the first dispatch of that dtype (collective, as every dispatch is); num_topk
  (0 at construction: from the first dispatch) and num_experts are then fixed for the buffer.
- The GPU order is always deterministic (rows by source token; expand: by expert, then source token), so
  `deterministic` changes nothing and EPHandle has no deterministic_sort.
- do_zero_padding defaults to True (the expand padding rows are zeroed unless told not to).
- num_gpu_timeout_secs defaults to None: SYMMOE_TIMEOUT_MS (10 s) bounds every cross-rank wait; a stalled peer
  raises symmoe.PeerTimeout naming it.
- Extras: constructor keywords num_experts, fp8_scales (the scales of the payload allocated at construction),
  timeout_ms, communicator, zero_copy_outputs=True (outputs are views of buffer memory, valid until the next call
  of the same kind: no allocation and no copy per call); combine's reduce_local_experts (overrides
  allow_multiple_reduction for one call) and do_cpu_sync (True: the host waits for the combine and raises what
  the GPU found; default False, as DeepEP: errors surface at the next synchronizing call or synchronize()).
- Inputs must be contiguous (DeepEP also takes strided scales). Non-torch inputs (DLPack producers such as cupy)
  get zero-copy DeviceView outputs and run on the communicator's stream.
- One rank per process (DeepEP's model). For in-process virtual ranks use symmoe._C.EpBuffer directly.
Every tensor argument is checked (device, dtype, shape, contiguity) before anything is launched; errors are
ValueError / TypeError naming the argument, expected and got. Errors the GPU finds (bad expert ids, duplicates)
are symmoe.Error naming rank, token, lane and value.
"""
import contextlib
import sys

from . import _C, _ep_eager
from ._checks import caller_stream, check as _check, check_int as _check_positive_int, device_tensor, is_torch
from ._ep_types import (BF16_PAYLOAD, EPHandle, EpState, EventHandle, EventOverlap, FP8_SCALE_FORMATS,
                        FP8_X_DTYPES, MAX_EXPERT_ALIGNMENT, cuda_event as _cuda_event,
                        framework_marker as _framework_marker, new_dispatch_outputs)
from .dlpack import DeviceView, as_framework_like, tensor_info, torch_dtype_name
from .distributed import Communicator

__all__ = ["ElasticBuffer", "EPHandle", "EventHandle", "EventOverlap"]
_SF_ALIGN = 4  # rows of a TMA-aligned column-major scale tensor: 16 bytes of 4-byte scale packs (DeepGEMM)


def _align(x, a):
    return -(-x // a) * a


def _dtype_and_shape(obj, name):
    """(dtype name, shape) of a tensor-like: torch read directly, others through DLPack."""
    if is_torch(obj):
        return torch_dtype_name(obj.dtype), obj.shape
    try:
        info = tensor_info(obj)
    except TypeError as e:
        raise TypeError(f"{name}: {e}") from None
    return info.dtype, info.shape


def _out_addresses(outputs):
    """dispatch_one's trailing arguments: the caller-owned output addresses and their rows (zeros: none)."""
    if outputs is None:
        return 0, 0, 0, 0, 0
    return tuple(t.data_ptr() if t is not None else 0 for t in outputs) + (outputs[0].shape[0],)


def _capturing():
    """Whether torch's current stream is capturing a CUDA graph (False without torch)."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def _check_previous_event(previous_event, allocate_on_comm_stream):
    if previous_event is not None and not allocate_on_comm_stream:
        raise ValueError("previous_event needs allocate_on_comm_stream=True (DeepEP): the call then does not wait "
                         "for the compute stream, so its outputs must belong to the communication stream")


class _ViewOwner:
    """What zero-copy output views keep alive: the native EpBuffers owning their memory. Not the ElasticBuffer
    itself, whose cache holds those views: no reference cycle. destroy() empties it."""
    __slots__ = ("natives",)

    def __init__(self, natives):
        self.natives = natives


def _hint_experts(num_ranks):
    """E assumed where num_experts is not known yet: 256 rounded up to a multiple of the ranks."""
    return -(-256 // num_ranks) * num_ranks


class _Call:
    """The streams of one call (ElasticBuffer._begin): `run` is the raw stream the work goes to."""
    __slots__ = ("run", "compute_raw", "compute", "comm", "on_comm", "alloc_on_comm", "async_")

    def __init__(self, run, compute_raw, compute=None, comm=None, alloc_on_comm=False, async_=False):
        self.run, self.compute_raw, self.compute, self.comm = run, compute_raw, compute, comm
        self.on_comm, self.alloc_on_comm, self.async_ = comm is not None, alloc_on_comm, async_

    def torch_ops(self):
        """Context for torch ops that must run on `run` (the comm stream when it is not current)."""
        if self.on_comm and not self.alloc_on_comm:
            import torch
            return torch.cuda.stream(self.comm)
        return contextlib.nullcontext()


def _state_field(name):
    """An ElasticBuffer attribute kept in its EpState (symmoe._ep_types), the record every call path reads."""
    return property(lambda self: getattr(self._state, name), lambda self, value: setattr(self._state, name, value),
                    doc=f"EpState.{name} of this buffer")


class ElasticBuffer:
    """DeepEP-shaped EP buffer over a symmetric NVLink allocation (see the module docstring for the contract)."""
    device = _state_field("device")
    hidden = _state_field("hidden")
    num_max_tokens_per_rank = _state_field("num_max_tokens_per_rank")
    num_topk = _state_field("num_topk")
    num_experts = _state_field("num_experts")
    allow_multiple_reduction = _state_field("allow_multiple_reduction")

    def __init__(self, group=None, num_bytes=None, num_cpu_bytes=0, num_max_tokens_per_rank=0, hidden=0, num_topk=0,
                 use_fp8_dispatch=False, deterministic=False, allow_hybrid_mode=True, allow_multiple_reduction=True,
                 prefer_overlap_with_compute=True, sl_idx=3, num_allocated_qps=0, num_cpu_timeout_secs=300,
                 num_gpu_timeout_secs=None, explicitly_destroy=False, *, num_experts=None, fp8_scales="fp32_per128",
                 timeout_ms=-1, communicator=None, zero_copy_outputs=False):
        """DeepEP V2's constructor arguments, in its order. group: a torch.distributed process group (None: the world
        group if torch.distributed is initialised, else a single in-process rank). num_topk: 0 (DeepEP's default)
        takes it from the first dispatch. use_fp8_dispatch / fp8_scales: the payload whose symmetric buffer is
        allocated at construction when num_experts (keyword) and num_topk are given; every dispatch may carry
        either payload. Scale-out arguments (allow_hybrid_mode, num_bytes, sl_idx, num_allocated_qps,
        num_cpu_timeout_secs) are accepted and unused; num_cpu_bytes must be 0. Timeouts: timeout_ms bounds every
        cross-rank wait (-1: SYMMOE_TIMEOUT_MS, default 10 s), or num_gpu_timeout_secs when given.
        zero_copy_outputs: outputs are views of buffer memory valid until the next call (no copy per call).
        communicator: a symmoe.Communicator to use instead of the group."""
        _check(num_cpu_bytes == 0, ValueError,
               f"num_cpu_bytes must be 0 (symmoe has no CPU buffer), got {num_cpu_bytes}")
        _check(num_bytes is None or (isinstance(num_bytes, int) and num_bytes >= 0), ValueError,
               f"num_bytes must be None or a non-negative int, got {num_bytes!r}")
        if num_gpu_timeout_secs is not None and timeout_ms == -1:
            timeout_ms = int(num_gpu_timeout_secs * 1000)
        if communicator is None:
            communicator = Communicator.for_group(group, timeout_ms)
        self._configure(communicator.num_ranks, num_max_tokens_per_rank, hidden, num_topk, num_experts,
                        use_fp8_dispatch, deterministic, fp8_scales)
        _check(len(communicator.local_ranks) == 1, ValueError,
               f"ElasticBuffer drives one rank per process; this communicator drives "
               f"{len(communicator.local_ranks)} (use symmoe._C.EpBuffer for in-process virtual ranks)")
        self.communicator = communicator
        local = communicator.local_ranks[0]
        self.rank, self.device = local["rank"], local["device"]
        self._init_state(group, local["rank"], explicitly_destroy, allow_hybrid_mode, allow_multiple_reduction,
                         prefer_overlap_with_compute, num_allocated_qps, num_bytes, zero_copy_outputs)
        self._fallback_stream = communicator.stream(self.rank)
        if num_experts is not None and self.num_topk > 0:
            self._native(self._dtype, self._scales)

    def _init_state(self, group, rank, explicitly_destroy, allow_hybrid_mode, allow_multiple_reduction,
                    prefer_overlap_with_compute, num_allocated_qps, num_bytes, zero_copy_outputs):
        self.group, self.explicitly_destroy = group, explicitly_destroy
        self.rank_idx = rank
        self.allow_hybrid_mode, self.allow_multiple_reduction = bool(allow_hybrid_mode), bool(allow_multiple_reduction)
        self.prefer_overlap_with_compute = bool(prefer_overlap_with_compute)
        self.num_allocated_qps, self.num_bytes = num_allocated_qps, num_bytes
        self.num_scaleout_ranks, self.num_scaleup_ranks = 1, self.num_ranks
        self.scaleout_rank_idx, self.scaleup_rank_idx = 0, rank
        self.num_rdma_ranks, self.num_nvlink_ranks = 1, self.num_ranks
        self.zero_copy_outputs = bool(zero_copy_outputs)
        self._view_owner, self._torch_views = _ViewOwner(self._state.natives), {}
        self._zero_weights = None
        self._comm_stream = None  # torch.cuda.Stream, made by the first call that needs it
        self._stream_order = None  # _C.StreamOrder, made by the first call from another stream

    @property
    def _impl(self):
        """The native EpBuffer of the construction payload (None until allocated)."""
        return self._state.natives.get((self._dtype, self._scales))

    def _native(self, dtype, scales):
        """The native EpBuffer for a payload, allocated on first use (collective)."""
        impl = self._state.natives.get((dtype, scales))
        if impl is None:
            self._require_runtime("dispatch")
            _C.ep_validate_config(self.num_ranks, self.num_max_tokens_per_rank, self.hidden, self.num_topk,
                                  self.num_experts, dtype, scales)
            impl = _C.EpBuffer(self.communicator.native, self.num_max_tokens_per_rank, self.hidden, self.num_topk,
                               self.num_experts, dtype, scales)
            self._state.natives[(dtype, scales)] = impl
        return impl

    def _configure(self, num_ranks, num_max_tokens_per_rank, hidden, num_topk, num_experts, use_fp8_dispatch,
                   deterministic, fp8_scales):
        for name, v in (("num_max_tokens_per_rank", num_max_tokens_per_rank), ("hidden", hidden)) + \
                ((("num_experts", num_experts),) if num_experts is not None else ()):
            _check_positive_int(name, v)
        _check_positive_int("num_topk", num_topk, low=0)
        _check(fp8_scales in FP8_SCALE_FORMATS, ValueError,
               f"fp8_scales must be one of {FP8_SCALE_FORMATS}, got {fp8_scales!r}")
        self.num_ranks = num_ranks
        self._state = EpState(None, hidden, num_max_tokens_per_rank, num_topk, num_experts)
        self.use_fp8_dispatch, self.deterministic = bool(use_fp8_dispatch), bool(deterministic)
        self._dtype = "fp8" if use_fp8_dispatch else "bf16"
        self._scales = fp8_scales if use_fp8_dispatch else "none"
        _C.ep_validate_config(num_ranks, num_max_tokens_per_rank, hidden, num_topk or 1,
                              num_experts if num_experts is not None else _hint_experts(num_ranks), self._dtype,
                              self._scales)

    @classmethod
    def _validation_only(cls, num_ranks, num_max_tokens_per_rank, hidden, num_topk, num_experts,
                         use_fp8_dispatch=False, fp8_scales="fp32_per128", device=0, **state):
        """A buffer with every argument check but no GPU runtime (CPU tests): calls that pass validation then
        raise RuntimeError('... no GPU runtime ...'). state: _init_state keywords (allow_multiple_reduction, ...)."""
        self = cls.__new__(cls)
        self._configure(num_ranks, num_max_tokens_per_rank, hidden, num_topk, num_experts, use_fp8_dispatch,
                        True, fp8_scales)
        self.communicator, self.rank, self.device = None, 0, device
        kw = dict(explicitly_destroy=False, allow_hybrid_mode=True, allow_multiple_reduction=True,
                  prefer_overlap_with_compute=True, num_allocated_qps=0, num_bytes=None, zero_copy_outputs=False)
        kw.update(state)
        self._init_state(None, 0, **kw)
        self._fallback_stream = None
        return self

    @staticmethod
    def get_buffer_size_hint(group, num_max_tokens_per_rank, hidden, num_topk=0, use_fp8_dispatch=False,
                             allow_hybrid_mode=True, allow_multiple_reduction=True, *, num_experts=None,
                             fp8_scales="fp32_per128"):
        """Bytes of one rank's symmetric buffer for one payload dtype (no GPU needed). group: a process group or
        the number of ranks. num_topk 0 sizes for 8; num_experts (keyword) None sizes for _hint_experts(ranks)."""
        if isinstance(group, int):
            num_ranks = group
        else:
            import torch.distributed as dist
            num_ranks = dist.get_world_size(group)
        return _C.ep_buffer_size_hint(num_ranks, num_max_tokens_per_rank, hidden, num_topk or 8,
                                      num_experts if num_experts is not None else _hint_experts(num_ranks),
                                      "fp8" if use_fp8_dispatch else "bf16",
                                      fp8_scales if use_fp8_dispatch else "none")

    # ---- DeepEP V2 helpers (single NVLink domain) ----
    def get_logical_domain_size(self):
        """(num_scaleout_ranks, num_scaleup_ranks): one NVLink domain."""
        return 1, self.num_ranks

    def get_physical_domain_size(self):
        """(num_rdma_ranks, num_nvlink_ranks): one NVLink domain."""
        return 1, self.num_ranks

    def get_theoretical_num_sms(self, num_experts, num_topk, *args, **kwargs):
        """The EP plan's dispatch SM count for this configuration (symmoe.plan; 0 would mean the same)."""
        shape = _C.MoeShape(self.hidden, 128, num_experts, num_topk, self.num_ranks, self.num_max_tokens_per_rank)
        return _C.plan_ep(shape, self._dtype).dispatch_sms

    def get_theoretical_num_qps(self, num_sms):
        return 0  # no RDMA

    def get_comm_stream(self):
        """The communication stream (async_with_compute_stream / allocate_on_comm_stream calls run on it)."""
        return self._get_comm_stream()

    @staticmethod
    def capture():
        """An EventHandle recorded on the current stream (DeepEP)."""
        return EventHandle()

    def barrier(self, use_comm_stream=True, with_cpu_sync=False, sequential=True):
        """Host barrier of the group after this rank's GPU work (stronger than DeepEP's GPU-level barrier)."""
        self.synchronize()
        self.communicator.host_barrier()

    # ---- streams ----
    # NOTES: a call without async_with_compute_stream / allocate_on_comm_stream / previous_event runs on the compute
    # stream itself (the same order DeepEP's comm stream gives, without two event round trips). EP calls share the
    # symmetric buffer, so each call is ordered after the previous one's stream (_order_after_last).
    def _get_comm_stream(self):
        if self._comm_stream is None:
            import torch
            self._comm_stream = torch.cuda.Stream(device=self.device)
        return self._comm_stream

    def _order(self, later, earlier):
        if later == earlier:
            return
        if self._stream_order is None:
            self._stream_order = _C.StreamOrder(self.device)
        self._stream_order.order(later or 0, earlier or 0)

    def _begin(self, like, previous_event, previous_event_before_epilogue, async_, alloc_on_comm):
        """Streams of a call (DeepEP's stream_control_prologue). Checks are done; nothing is enqueued before."""
        compute_raw = caller_stream(like, self.device, self._fallback_stream)
        last = self._state.last_stream
        if last is not None and last != compute_raw and _capturing():
            last = None  # under CUDA-graph capture only the capturing stream (and streams it forks) may be used;
            # torch.cuda.graph makes the capture stream wait for the stream that was current before it
        if not (is_torch(like) and (async_ or alloc_on_comm or previous_event is not None)):
            if last is not None:
                self._order(compute_raw, last)
            if previous_event_before_epilogue is not None:
                import torch
                torch.cuda.current_stream(self.device).wait_event(_cuda_event(previous_event_before_epilogue))
            return _Call(compute_raw, compute_raw)
        import torch
        comm = self._get_comm_stream()
        run = comm.cuda_stream
        if last is not None:
            self._order(run, last)
        if previous_event is not None:
            comm.wait_event(_cuda_event(previous_event))
        else:
            self._order(run, compute_raw)
        if previous_event_before_epilogue is not None:  # one fused kernel: waited before it
            comm.wait_event(_cuda_event(previous_event_before_epilogue))
        call = _Call(run, compute_raw, torch.cuda.current_stream(self.device), comm, alloc_on_comm, async_)
        if alloc_on_comm:
            torch.cuda.set_stream(comm)
        return call

    def _end(self, call, tensors):
        """DeepEP's stream_control_epilogue: -> EventOverlap (an event only for async_with_compute_stream)."""
        if not call.on_comm:
            self._state.last_stream = call.run
            return EventOverlap(None)
        import torch
        if call.alloc_on_comm:
            torch.cuda.set_stream(call.compute)
        if call.async_:
            event = EventHandle(call.comm)
            for t in tensors:
                if t is not None and is_torch(t):
                    t.record_stream(call.compute)
                    t.record_stream(call.comm)
            self._state.last_stream = call.run
            return EventOverlap(event)
        self._order(call.compute_raw, call.run)
        self._state.last_stream = call.compute_raw
        return EventOverlap(None)

    def _abort(self, call):
        """Restores the current stream after a failed call (the call's work, if any, stays ordered)."""
        if call.on_comm and call.alloc_on_comm:
            import torch
            torch.cuda.set_stream(call.compute)
        self._state.last_stream = call.run

    # ---- outputs ----
    # NOTES: zero-copy outputs live at fixed addresses of buffer-owned memory. A torch tensor made through DLPack
    # costs ~10 us, so one tensor per (address, row capacity, dtype) is made once and cached; each call returns it,
    # or its first `rows` rows (a slice). Views without torch are DeviceViews owned by the buffer.
    _MAX_CACHED_VIEWS = 64

    def _view(self, ptr, rows, capacity, trailing, dtype, like):
        if not is_torch(like):
            return DeviceView(ptr, (rows,) + trailing, dtype, self.device, owner=self._view_owner)
        key = (ptr, capacity, trailing, dtype, like.dtype)
        full = self._torch_views.get(key)
        if full is None:
            if len(self._torch_views) >= self._MAX_CACHED_VIEWS:
                self._torch_views.clear()
            view = DeviceView(ptr, (capacity,) + trailing, dtype, self.device, owner=self._view_owner)
            full = self._torch_views[key] = as_framework_like(view, like)
        return full if rows == capacity else full[:rows]

    def _copy(self, call, ptr, rows, trailing, torch_dtype, item_bytes, device):
        """A new torch tensor [rows, *trailing] (allocated on the call's allocation stream) with the rows at ptr."""
        import torch
        out = torch.empty((rows,) + trailing, dtype=torch_dtype, device=device)
        n = rows
        for d in trailing:
            n *= d
        _C.memcpy_async(out.data_ptr(), ptr, n * item_bytes, call.run)
        return out

    def _copy_col_major(self, call, ptr, rows, capacity, cols, dtype, like):
        """Scales [rows, cols] column-major, row stride aligned to _SF_ALIGN (DeepGEMM's TMA layout)."""
        import torch
        out = torch.empty_strided((rows, cols), (1, _align(rows, _SF_ALIGN)), dtype=like.dtype, device=like.device)
        if rows:
            src = self._view(ptr, rows, capacity, (cols,), dtype, like)
            with call.torch_ops():
                out.copy_(src)
        return out

    # ---- argument checks (no GPU work before they pass) ----
    def _tensor(self, obj, name, stream, dtypes, shape):
        """(data_ptr, shape) of a contiguous CUDA tensor on this rank's device with one of `dtypes` and `shape`
        (None = any extent): symmoe._checks.device_tensor."""
        return device_tensor(obj, name, self.device, stream, dtypes, shape)

    def _require_runtime(self, what):
        _check(self.communicator is not None, RuntimeError,
               f"ElasticBuffer.{what}: arguments are valid but this buffer has no GPU runtime (validation-only)")

    def _payload(self, x):
        """(x_data, sf, dtype, scales, x_dtypes, sf_dtype, sf_cols) of a dispatch payload; the scale format is
        recognised from the scales' dtype and width."""
        if isinstance(x, tuple):
            if len(x) != 2:
                raise ValueError(f"x must be a tensor or an (x, sf) pair, got a tuple of {len(x)}")
            x_data, sf = x
            sf_dtype, sf_shape = _dtype_and_shape(sf, "sf")
            cols = sf_shape[1] if len(sf_shape) == 2 else None
            if sf_dtype not in ("float32", "int32"):
                raise TypeError(f"sf must have dtype float32 (fp32 per 128 channels) or int32 (packed UE8M0), "
                                f"got {sf_dtype}")
            formats = self._state.scale_formats  # the one rule: (dtype, columns) -> payload
            key = formats.get((sf_dtype, cols))
            if key is None:
                widths = {k[1]: c for (d, c), k in formats.items() if d == sf_dtype}
                if sf_dtype == "float32" and widths:  # the one float32 format: the shape check words the width
                    key, cols = ("fp8", "fp32_per128"), widths["fp32_per128"]
                elif sf_dtype == "float32":
                    raise ValueError(f"sf: float32 scales (fp32 per 128 channels) do not fit hidden {self.hidden}")
                else:
                    raise ValueError(f"sf: int32 (packed UE8M0) scales must have {widths.get('ue8m0_per32')} "
                                     f"columns (per 32 channels) or {widths.get('ue8m0_per128')} (per 128) for "
                                     f"hidden {self.hidden}, got shape {list(sf_shape)}")
            return x_data, sf, "fp8", key[1], FP8_X_DTYPES, sf_dtype, cols
        x_dtype = _dtype_and_shape(x, "x")[0] if (is_torch(x) or hasattr(x, "__dlpack__")) else None
        if x_dtype in FP8_X_DTYPES:
            raise ValueError(f"x is {x_dtype}: an FP8 payload must be an (x, sf) pair with its scales")
        return x, None, BF16_PAYLOAD[0], BF16_PAYLOAD[1], ("bfloat16",), None, 0

    # ---- dispatch ----
    def dispatch(self, x, topk_idx=None, topk_weights=None, cumulative_local_expert_recv_stats=None, num_experts=None,
                 num_max_tokens_per_rank=None, expert_alignment=None, num_sms=0, num_qps=0, previous_event=None,
                 previous_event_before_epilogue=None, async_with_compute_stream=False, allocate_on_comm_stream=False,
                 handle=None, do_handle_copy=True, do_cpu_sync=None, do_expand=False, do_zero_padding=True,
                 use_tma_aligned_col_major_sf=False):
        """-> (recv_x, recv_topk_idx, recv_topk_weights, handle, event). recv_x is (recv_x, recv_sf) for FP8;
        recv_topk_idx is None in expand mode; recv_topk_weights None without topk_weights.
        With the libtorch extension symmoe._torch_ep, an eager call's outputs share one storage (one allocation of
        torch's caching allocator, each output a contiguous tensor of its own at a 256-byte aligned offset): the
        memory goes back when the last of them is dropped."""
        # NOTES: hot path (~1 call per layer and step). The common eager call goes through symmoe._ep_eager (same
        # semantics, None when it is not that case or an argument is wrong); the rest: plain ifs, messages formatted
        # only on failure, torch tensors checked with a few C calls each (symmoe._checks). With the libtorch
        # extension loaded, ElasticBuffer.dispatch / combine are its C entry points instead of these two functions
        # (same condition, same fast path, then _dispatch_general / _combine_general; _ep_eager.bind_buffer_class).
        if ((do_cpu_sync is False or (do_cpu_sync is None and handle is not None)) and previous_event is None
                and topk_weights is not None
                and previous_event_before_epilogue is None and not async_with_compute_stream
                and not allocate_on_comm_stream and cumulative_local_expert_recv_stats is None
                and not use_tma_aligned_col_major_sf and not self.zero_copy_outputs
                and (num_experts is None or num_experts == self.num_experts)
                and (num_max_tokens_per_rank is None or num_max_tokens_per_rank == self.num_max_tokens_per_rank)):
            torch_mod, chosen = sys.modules.get("torch"), _ep_eager._chosen  # (torch, implementation) last chosen
            out = (chosen[1] if torch_mod is chosen[0] else _ep_eager.implementation(torch_mod)).dispatch(
                self._state, x, topk_idx, topk_weights, expert_alignment, num_sms, do_expand, do_zero_padding,
                do_handle_copy, handle)
            if out is not None:
                return out
        return self._dispatch_general(x, topk_idx, topk_weights, cumulative_local_expert_recv_stats, num_experts,
                                      num_max_tokens_per_rank, expert_alignment, num_sms, num_qps, previous_event,
                                      previous_event_before_epilogue, async_with_compute_stream,
                                      allocate_on_comm_stream, handle, do_handle_copy, do_cpu_sync, do_expand,
                                      do_zero_padding, use_tma_aligned_col_major_sf)

    _dispatch_python = dispatch  # the Python entry (symmoe._torch_ep's C entry falls back to it, see _ep_eager)

    def _dispatch_general(self, x, topk_idx, topk_weights, cumulative_local_expert_recv_stats, num_experts,
                          num_max_tokens_per_rank, expert_alignment, num_sms, num_qps, previous_event,
                          previous_event_before_epilogue, async_with_compute_stream, allocate_on_comm_stream, handle,
                          do_handle_copy, do_cpu_sync, do_expand, do_zero_padding, use_tma_aligned_col_major_sf):
        """dispatch() without the eager fast path: every argument (dispatch's, in its order), checked here."""
        x_data, sf, dtype, scales, x_dtypes, sf_dtype, sf_cols = self._payload(x)
        if num_experts is not None and num_experts != self.num_experts:
            if self.num_experts is None and self.communicator is not None:
                _C.ep_validate_config(self.num_ranks, self.num_max_tokens_per_rank, self.hidden, self.num_topk or 1,
                                      num_experts, "bf16", "none")
                self.num_experts = num_experts  # DeepEP-style construction without num_experts: first dispatch
            else:
                raise ValueError(f"num_experts {num_experts} differs from the buffer's {self.num_experts} "
                                 f"(fixed by the first dispatch or at construction)")
        if num_max_tokens_per_rank is not None and num_max_tokens_per_rank != self.num_max_tokens_per_rank:
            raise ValueError(f"num_max_tokens_per_rank {num_max_tokens_per_rank} differs from the buffer's "
                             f"{self.num_max_tokens_per_rank}")
        cached = handle is not None
        if cached:
            if not isinstance(handle, EPHandle) or handle.owner is not self._state:
                raise ValueError("handle must be an EPHandle returned by this buffer's dispatch")
            if not handle.filled:
                raise ValueError("handle is empty (no dispatch has filled it)")
            if expert_alignment is not None and expert_alignment != handle.native.expert_alignment:
                raise ValueError(f"expert_alignment {expert_alignment} differs from the handle's "
                                 f"{handle.native.expert_alignment}")
            do_expand, expert_alignment = handle.native.do_expand, handle.native.expert_alignment
        if expert_alignment is None:
            expert_alignment = 1
        elif type(expert_alignment) is not int or not 1 <= expert_alignment <= MAX_EXPERT_ALIGNMENT:
            _check_positive_int("expert_alignment", expert_alignment)
            raise ValueError(f"expert_alignment must be <= {MAX_EXPERT_ALIGNMENT}, got {expert_alignment}")
        if type(num_sms) is not int or num_sms < 0:
            _check_positive_int("num_sms", num_sms, low=0)
        if do_cpu_sync is None:
            do_cpu_sync = not cached  # DeepEP: exact counts for a fresh dispatch, none for a cached one
        _check_previous_event(previous_event, allocate_on_comm_stream)
        if use_tma_aligned_col_major_sf and sf is not None and (self.zero_copy_outputs or not is_torch(x_data)):
            raise ValueError("use_tma_aligned_col_major_sf needs torch inputs and zero_copy_outputs=False (the "
                             "buffer keeps its scales row-major; the column-major copy is made per call)")

        stream = caller_stream(x_data, self.device, self._fallback_stream)
        H, T_max = self.hidden, self.num_max_tokens_per_rank
        x_ptr, x_shape = self._tensor(x_data, "x", stream, x_dtypes, (None, H))
        T = x_shape[0]
        if T > T_max:
            raise ValueError(f"x has {T} tokens, more than num_max_tokens_per_rank = {T_max}")
        sf_ptr = 0
        if sf is not None:
            sf_ptr = self._tensor(sf, f"sf ({scales})", stream, (sf_dtype,), (T, sf_cols))[0]
        K = handle.native.num_topk if cached else self.num_topk
        shared_idx = None
        if topk_idx is None and cached:
            if handle.native.num_tokens != T:
                raise ValueError(f"cached dispatch: x has {T} tokens but the handle was made for "
                                 f"{handle.native.num_tokens}")
            idx_ptr = handle.native.ptrs["topk_idx"]
            shared_idx = handle.shared_topk_idx
        else:
            if topk_idx is None:
                raise ValueError("topk_idx is required for a fresh dispatch")
            if K == 0:  # DeepEP's num_topk=0: the first dispatch fixes it
                K = _dtype_and_shape(topk_idx, "topk_idx")[1][-1]
                _check_positive_int("num_topk (topk_idx.shape[1])", K)
            idx_ptr = self._tensor(topk_idx, "topk_idx", stream, ("int64",), (T, K))[0]
        if topk_weights is not None:
            w_ptr = self._tensor(topk_weights, "topk_weights", stream, ("float32",), (T, K))[0]
        else:  # DeepEP allows none: zeros travel and recv_topk_weights is None
            w_ptr = self._zeros_for_weights(x_data, K)
        stats = cumulative_local_expert_recv_stats
        if stats is not None and self.num_experts is not None:
            El = self.num_experts // self.num_ranks
            self._tensor(stats, "cumulative_local_expert_recv_stats", stream, ("int32", "int64"), (El,))
        if self.num_topk == 0 and self.communicator is not None:
            _C.ep_validate_config(self.num_ranks, T_max, H, K, self.num_experts or _hint_experts(self.num_ranks),
                                  dtype, scales)
            self.num_topk = K
        if self.num_experts is None:
            self._require_runtime("dispatch")
            raise ValueError("num_experts is required (at construction or with the first dispatch)")
        impl = self._native(dtype, scales)

        call = self._begin(x_data, previous_event, previous_event_before_epilogue, async_with_compute_stream,
                           allocate_on_comm_stream)
        state, native, like = self._state, None, _framework_marker(x_data)
        try:
            if cached:
                native = handle.native
                handle.like = like
            else:
                native = state.take_native_handle()
            if shared_idx is not None:  # do_handle_copy=False: the caller's topk_idx as it is now
                _C.memcpy_async(idx_ptr, self._tensor(shared_idx, "handle.topk_idx", call.run, ("int64",),
                                                      (T, K))[0], T * K * 8, call.run)
            # Without a CPU sync the rows are the capacity, known now: the kernels write into the new tensors
            # directly. With one, the row count comes back with the call and the rows are copied (exact shapes).
            direct = None
            if not do_cpu_sync and is_torch(x_data) and not self.zero_copy_outputs and not (
                    use_tma_aligned_col_major_sf and sf is not None):
                known = -1
                if cached:
                    known = native.num_expanded_tokens if do_expand else native.num_recv_tokens
                if known < 0:
                    import torch
                    direct = new_dispatch_outputs(
                        torch.empty, state.row_capacity(impl, bool(do_expand), expert_alignment), H, x_data.dtype,
                        sf.dtype if sf is not None else None, sf_cols, K, do_expand, topk_weights is not None,
                        x_data.device, torch.int64, torch.float32)
            out_ptrs = _out_addresses(direct)
            if cached:
                handle.routing = None  # the dispatch may rewrite the native handle's counts
            p_x, p_sf, p_idx, p_w, num_rows, capacity = impl.dispatch_one(
                T, x_ptr, sf_ptr, idx_ptr, w_ptr, call.run or 0, native, bool(do_expand), expert_alignment,
                bool(do_zero_padding), cached, num_sms, bool(do_cpu_sync), *out_ptrs)
            if cached:
                handle.row_capacity = capacity
            else:
                handle = EPHandle.of_dispatch(state, native, (dtype, scales), capacity, num_sms, like,
                                              None if do_handle_copy else topk_idx, None)
            if do_cpu_sync and num_rows >= 0:
                rows = num_rows
            else:
                known = handle.native.num_expanded_tokens if do_expand else handle.native.num_recv_tokens
                rows = known if cached and known >= 0 else capacity
            outs = direct if direct is not None else self._dispatch_outputs(
                call, x_data, sf, sf_dtype, sf_cols, topk_weights is not None, do_expand, K, p_x, p_sf, p_idx, p_w,
                rows, capacity, use_tma_aligned_col_major_sf)
            if stats is not None:
                with call.torch_ops():
                    stats.add_(handle.num_unaligned_recv_tokens_per_expert)
        except BaseException:
            if native is not None and not cached and not isinstance(handle, EPHandle):
                state.give_back_native_handle(native)  # no handle took it
            self._abort(call)
            raise
        recv_x, recv_sf, recv_topk_idx, recv_topk_weights = outs
        event = self._end(call, (x_data, sf, topk_idx, topk_weights, stats, recv_x, recv_sf, recv_topk_idx,
                                 recv_topk_weights) if call.async_ else ())
        return ((recv_x, recv_sf) if sf is not None else recv_x), recv_topk_idx, recv_topk_weights, handle, event

    def _dispatch_outputs(self, call, x_data, sf, sf_dtype, sf_cols, with_weights, expand, K, p_x, p_sf, p_idx, p_w,
                          rows, capacity, col_major_sf):
        """(recv_x, recv_sf, recv_topk_idx, recv_topk_weights): new tensors (torch inputs), else views."""
        H, fp8 = self.hidden, sf is not None
        lanes = () if expand else (K,)
        if self.zero_copy_outputs or not is_torch(x_data):
            recv_x = self._view(p_x, rows, capacity, (H,), "uint8" if fp8 else "bfloat16", x_data)
            recv_sf = self._view(p_sf, rows, capacity, (sf_cols,), sf_dtype, sf) if fp8 else None
            recv_idx = None if expand else self._view(p_idx, rows, capacity, lanes, "int64", x_data)
            recv_w = self._view(p_w, rows, capacity, lanes, "float32", x_data) if with_weights else None
            return recv_x, recv_sf, recv_idx, recv_w
        # Allocated on the current stream: the communication stream with allocate_on_comm_stream (_begin made it
        # current), else the compute stream.
        import torch
        dev = x_data.device
        recv_x = self._copy(call, p_x, rows, (H,), x_data.dtype, 1 if fp8 else 2, dev)
        recv_sf = None
        if fp8:
            recv_sf = (self._copy_col_major(call, p_sf, rows, capacity, sf_cols, sf_dtype, sf) if col_major_sf
                       else self._copy(call, p_sf, rows, (sf_cols,), sf.dtype, 4, dev))
        recv_idx = None if expand else self._copy(call, p_idx, rows, lanes, torch.int64, 8, dev)
        recv_w = self._copy(call, p_w, rows, lanes, torch.float32, 4, dev) if with_weights else None
        return recv_x, recv_sf, recv_idx, recv_w

    def _zeros_for_weights(self, like, K):
        """Address of fp32 zeros [T_max, K] on this device (torch inputs only), for a dispatch without weights."""
        if self._zero_weights is None or self._zero_weights.shape[1] != K:
            _check(self.communicator is not None and is_torch(like), ValueError,
                   "topk_weights is required (fp32 [num_tokens, num_topk]) unless the inputs are torch tensors")
            import torch
            self._zero_weights = torch.zeros(self.num_max_tokens_per_rank, K, dtype=torch.float32,
                                             device=f"cuda:{self.device}")
        return self._zero_weights.data_ptr()

    # ---- combine ----
    def combine(self, x, handle=None, topk_weights=None, bias=None, num_sms=0, num_qps=0, previous_event=None,
                previous_event_before_epilogue=None, async_with_compute_stream=False, allocate_on_comm_stream=False,
                reduce_local_experts=None, do_cpu_sync=False):
        """-> (combined_x bf16 [T, H], combined_topk_weights fp32 [T, K] or None, event).
        With the libtorch extension symmoe._torch_ep, an eager call's two outputs share one storage (as dispatch's)."""
        if (bias is None and previous_event is None and previous_event_before_epilogue is None
                and not async_with_compute_stream and not allocate_on_comm_stream and reduce_local_experts is None
                and not self.zero_copy_outputs):
            torch_mod, chosen = sys.modules.get("torch"), _ep_eager._chosen
            out = (chosen[1] if torch_mod is chosen[0] else _ep_eager.implementation(torch_mod)).combine(
                self._state, x, handle, topk_weights, num_sms, do_cpu_sync)
            if out is not None:
                return out
        return self._combine_general(x, handle, topk_weights, bias, num_sms, num_qps, previous_event,
                                     previous_event_before_epilogue, async_with_compute_stream,
                                     allocate_on_comm_stream, reduce_local_experts, do_cpu_sync)

    _combine_python = combine  # the Python entry (symmoe._torch_ep's C entry falls back to it, see _ep_eager)

    def _combine_general(self, x, handle, topk_weights, bias, num_sms, num_qps, previous_event,
                         previous_event_before_epilogue, async_with_compute_stream, allocate_on_comm_stream,
                         reduce_local_experts, do_cpu_sync):
        """combine() without the eager fast path: every argument (combine's, in its order), checked here."""
        if not isinstance(handle, EPHandle) or handle.owner is not self._state:
            raise ValueError("handle must be the EPHandle of this buffer's dispatch")
        if not handle.filled:
            raise ValueError("handle is empty (no dispatch has filled it)")
        if type(num_sms) is not int or num_sms < 0:
            _check_positive_int("num_sms", num_sms, low=0)
        _check_previous_event(previous_event, allocate_on_comm_stream)
        if num_sms == 0:
            num_sms = handle.num_sms  # DeepEP: the dispatch's SM count
        h = handle.native
        do_expand = h.do_expand
        if reduce_local_experts is None:
            reduce_local_experts = do_expand and self.allow_multiple_reduction
        elif reduce_local_experts and not do_expand:
            raise ValueError("reduce_local_experts needs a handle from an expand dispatch (do_expand=True)")
        stream = caller_stream(x, self.device, self._fallback_stream)
        H, K, T = self.hidden, h.num_topk, h.num_tokens
        x_ptr, x_shape = self._tensor(x, "x", stream, ("bfloat16",), (None, H))
        rows = x_shape[0]
        known = h.num_expanded_tokens if do_expand else h.num_recv_tokens
        if rows > handle.row_capacity or (known >= 0 and rows < known):
            raise ValueError(f"x has {rows} rows; the dispatch of this handle received "
                             f"{known if known >= 0 else 'unknown'} (capacity {handle.row_capacity})")
        w_ptr = 0
        if topk_weights is not None:
            w_ptr = self._tensor(topk_weights, "topk_weights", stream, ("float32",),
                                 (rows,) if do_expand else (rows, K))[0]
        b_ptrs, biases = [0, 0], (None, None)
        if bias is not None:
            biases = bias if isinstance(bias, tuple) else (bias, None)
            if len(biases) != 2:
                raise ValueError(f"bias must be a tensor or a pair, got a tuple of {len(biases)}")
            for i, b in enumerate(biases):
                if b is not None:
                    b_ptrs[i] = self._tensor(b, f"bias_{i}", stream, ("bfloat16",), (T, H))[0]
        impl = self._state.natives.get(handle.payload)
        if impl is None:
            self._require_runtime("combine")
            raise RuntimeError("combine: the buffer that dispatched this handle has been destroyed")

        call = self._begin(x, previous_event, previous_event_before_epilogue, async_with_compute_stream,
                           allocate_on_comm_stream)
        try:
            shared_idx = handle.shared_topk_idx
            if shared_idx is not None:  # do_handle_copy=False: the caller's topk_idx as it is now
                _C.memcpy_async(h.ptrs["topk_idx"], self._tensor(shared_idx, "handle.topk_idx", call.run, ("int64",),
                                                                 (T, K))[0], T * K * 8, call.run)
            if self.zero_copy_outputs or not is_torch(x):
                p_x, p_w = impl.combine_one(x_ptr, w_ptr, b_ptrs[0], b_ptrs[1], call.run or 0, h,
                                            bool(reduce_local_experts), num_sms, bool(do_cpu_sync), 0, 0)
                T_max = self.num_max_tokens_per_rank
                combined_x = self._view(p_x, T, T_max, (H,), "bfloat16", x)
                combined_w = self._view(p_w, T, T_max, (K,), "float32", x) if p_w else None
            else:  # the kernel writes straight into the caller's new tensors
                import torch
                combined_x = torch.empty((T, H), dtype=torch.bfloat16, device=x.device)
                combined_w = (torch.empty((T, K), dtype=torch.float32, device=x.device) if topk_weights is not None
                              else None)
                impl.combine_one(x_ptr, w_ptr, b_ptrs[0], b_ptrs[1], call.run or 0, h, bool(reduce_local_experts),
                                 num_sms, bool(do_cpu_sync), combined_x.data_ptr(),
                                 combined_w.data_ptr() if combined_w is not None else 0)
        except BaseException:
            self._abort(call)
            raise
        event = self._end(call, (x, topk_weights, biases[0], biases[1], combined_x, combined_w)
                          if call.async_ else ())
        return combined_x, combined_w, event

    def destroy(self):
        """Collective: frees the symmetric buffers and the communicator now (every rank must call it). Every
        zero-copy output view and handle of this buffer becomes invalid; copied outputs stay valid. Without it,
        they are freed when the last reference goes, which at interpreter exit may happen in a different order on
        different ranks."""
        if self._comm_stream is not None or self._state.natives:
            torch = sys.modules.get("torch")
            if torch is not None and torch.cuda.is_initialized():
                torch.cuda.synchronize(self.device)  # copies out of the buffers are done before they go
        self._state.clear()
        self._torch_views = {}
        self._stream_order = None
        self.communicator = None

    def synchronize(self):
        """Waits for this rank's work; raises device-detected input errors and peer timeouts (do_cpu_sync=False)."""
        self._require_runtime("synchronize")
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            # The calls ran on torch's streams; the C++ side synchronises only the communicator's own stream.
            torch.cuda.synchronize(self.device)
        for impl in list(self._state.natives.values()):
            impl.synchronize()


# The extension's C entry points take ElasticBuffer.dispatch / combine once it loads (no Python frame per call).
_ep_eager.bind_buffer_class(ElasticBuffer)
