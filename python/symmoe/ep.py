"""DeepEP-shaped expert-parallel dispatch / combine over symmoe's EpBuffer (include/symmoe/ep.hpp).

    buffer = symmoe.ElasticBuffer(group, num_max_tokens_per_rank=4096, hidden=7168, num_topk=8,
                                  use_fp8_dispatch=True)
    recv_x, recv_topk_idx, recv_topk_weights, handle, event = buffer.dispatch(
        (x_fp8, x_scales), topk_idx=topk_idx, topk_weights=topk_weights, num_experts=256)
    combined_x, combined_topk_weights, event = buffer.combine(y, handle=handle)

Argument names, positional order, defaults and return order follow DeepEP V2 (deep_ep.ElasticBuffer) where the
semantics match, so a DeepEP V2 script runs with `import symmoe as deep_ep` (python/tests_gpu/deep_ep_style.py
is such a script). Differences (all deliberate):
- num_experts: give it at construction (keyword) or, as DeepEP, with the first dispatch, which then allocates
  the symmetric buffer (sized by it; collective like every dispatch). Later dispatches must use the same value.
- Constructor: num_bytes, allow_hybrid_mode, allow_multiple_reduction, prefer_overlap_with_compute, sl_idx,
  num_allocated_qps, num_cpu_timeout_secs, explicitly_destroy are accepted and unused (one NVLink domain, buffer
  sized from the MoE settings, destroy() works either way); num_cpu_bytes must be 0; num_gpu_timeout_secs bounds
  every cross-rank wait (else SYMMOE_TIMEOUT_MS, default 10 s). get_buffer_size_hint takes num_experts as a
  keyword (default: sized for 256 experts).
- dispatch: num_qps, allocate_on_comm_stream, do_handle_copy are accepted and unused (the handle always keeps its
  own topk_idx); previous_event / previous_event_before_epilogue make the current stream wait first;
  do_zero_padding defaults to True (DeepEP: False; symmoe zeroes the expand padding unless told not to);
  use_tma_aligned_col_major_sf must be False. topk_weights may be None for torch inputs (zeros travel,
  recv_topk_weights is None). do_cpu_sync=None: True for a fresh dispatch, False for a cached one (DeepEP).
- combine: num_sms=0 is the EP plan's SM count (DeepEP: the dispatch's); num_qps, allocate_on_comm_stream are
  accepted and unused; previous_event(s) as in dispatch. Extra keyword reduce_local_experts (expand handles).
- EPHandle: psum_num_recv_tokens_per_scaleup_rank is psum_num_recv_tokens_per_rank (one domain); no
  deterministic_sort (dispatch is always deterministic), no token_metadata_at_forward / channel_linked_list
  (no hybrid mode). get_theoretical_num_sms returns the EP plan's dispatch SMs, get_theoretical_num_qps 0.
- Outputs are zero-copy views of memory the buffer owns (DLPack; torch tensors when the inputs are torch
  tensors): valid until the next dispatch (recv_*) or combine (combined_*) of this buffer. .clone() to keep them.
  Torch outputs are made once per address and reused (calls may return the same tensor object, or a row slice).
- Everything runs on the caller's current CUDA stream (torch.cuda.current_stream(); torch's default stream is
  passed as cudaStreamLegacy); there is no separate communication stream, so async_with_compute_stream only
  decides whether an EventOverlap with a recorded event is returned; current_stream_wait() is then always correct.
- CUDA graphs: do_cpu_sync=False calls capture under torch.cuda.graph (default 'global' mode). Make the first call
  of each kind (and of each expand/alignment) eagerly: it allocates outputs. A fresh dispatch takes its handle's
  device metadata from the buffer's pool of released handles (up to 4); under capture, release a few dispatched
  handles first so the pool is not empty (an empty pool means cudaMalloc, which capture refuses). Replays rewrite
  those pooled handles; they stay allocated while the buffer lives.
- Torch tensors are read directly (data_ptr, shape, strides, dtype, device) instead of through __dlpack__: the
  call runs on torch's current stream, so DLPack's stream handshake would order nothing; other producers
  (cupy, numpy, capsules) go through DLPack.
- Dispatch is always deterministic (rows ordered by source token, as DeepEP's deterministic mode); the flag is
  accepted for compatibility.
- FP8: x is float8_e4m3fn (or its uint8 bytes) [T, H] with scales per fp8_scales: "fp32_per128" float32
  [T, H/128] (default), "ue8m0_per128" int32 [T, ceil(H/512)] (4 UE8M0 bytes per int32) or "ue8m0_per32" int32
  [T, H/128].
- combine does not weight (DeepEP V2 semantics): apply top-k weights before combine. bias is a tensor or a
  (bias_0, bias_1) pair, bf16 [T, H].
- do_cpu_sync=False: outputs have the worst-case row count (handle.row_capacity); the real counts stay on the
  device (handle.device_counts: [num_recv_tokens, num_expanded_tokens]); errors surface at buffer.synchronize().
- One rank per process (DeepEP's model). For in-process virtual ranks use symmoe._C.EpBuffer directly.
Every tensor argument is checked (device, dtype, shape, contiguity) before anything is launched; errors are
ValueError / TypeError naming the argument, expected and got. Errors the GPU finds (bad expert ids, duplicates)
are symmoe.Error naming rank, token, lane and value.
"""
import sys

from . import _C
from ._checks import (caller_stream, check as _check, check_int as _check_positive_int, device_tensor, is_torch,
                      torch_stream)
from .dlpack import DeviceView, as_framework_like
from .distributed import Communicator

_FP8_SCALES = ("fp32_per128", "ue8m0_per128", "ue8m0_per32")


def _scale_shape(scales, hidden):
    """(dtype, columns) of one token's scale row."""
    cols = _C.ep_scale_row_bytes(scales, hidden) // 4
    return ("float32" if scales == "fp32_per128" else "int32"), cols


class EventOverlap:
    """DeepEP's EventOverlap: holds the CUDA event recorded after a call (None when torch is absent)."""

    def __init__(self, event=None):
        self.event = event

    def current_stream_wait(self):
        if self.event is not None:
            import torch
            torch.cuda.current_stream().wait_event(self.event)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.current_stream_wait()


class EPHandle:
    """The routing metadata of one dispatch on this rank, with DeepEP's EPHandle field names (meanings in
    include/symmoe/reference/dispatch.hpp). Host fields are ints/lists; device fields are zero-copy views
    (torch tensors when the dispatch inputs were torch tensors), valid as long as the handle lives."""

    _DEVICE_FIELDS = {  # name -> (dtype, shape function of the handle)
        "num_tokens_per_rank": ("int32", lambda h: (h.num_ranks,)),
        "num_tokens_per_expert": ("int32", lambda h: (h.num_experts,)),
        "dst_buffer_slot_idx": ("int32", lambda h: (h.num_max_tokens_per_rank, h.num_topk)),
        "topk_idx": ("int64", lambda h: (h.num_max_tokens_per_rank, h.num_topk)),
        "psum_num_recv_tokens_per_rank": ("int32", lambda h: (h.num_ranks,)),
        "num_unaligned_recv_tokens_per_expert": ("int32", lambda h: (h.num_local_experts,)),
        "psum_num_recv_tokens_per_expert": ("int32", lambda h: (h.num_local_experts,)),
        "num_recv_tokens_per_expert": ("int32", lambda h: (h.num_local_experts,)),
        "recv_src_metadata": ("int32", lambda h: (h.num_ranks * h.num_max_tokens_per_rank, 2 + h.num_topk)),
        "device_counts": ("int32", lambda h: (2,)),
    }
    _HOST_FIELDS = ("rank", "num_ranks", "do_expand", "num_experts", "num_topk", "expert_alignment",
                    "num_max_tokens_per_rank", "num_tokens", "num_recv_tokens", "num_expanded_tokens",
                    "num_recv_tokens_per_expert_list", "num_local_experts")

    def __init__(self, buffer):
        self._buffer = buffer
        self.native = buffer._take_native_handle()
        self.row_capacity = 0
        self.num_sms = 0  # the dispatch's num_sms (0: the plan's)
        self._like = None  # _framework_marker of the dispatch input: device views follow its framework
        self._filled = False  # set by a successful dispatch (a pooled native keeps its previous owner's fields)

    def __del__(self):
        # The native handle (and its device metadata) goes back to the buffer's pool: no cudaMalloc/cudaFree per
        # dispatch, so steady-state loops and CUDA-graph capture allocate nothing.
        buffer, native = self.__dict__.get("_buffer"), self.__dict__.get("native")
        if buffer is not None and native is not None:
            buffer._give_back_native_handle(native)

    _ALIASES = {"psum_num_recv_tokens_per_scaleup_rank": "psum_num_recv_tokens_per_rank"}  # DeepEP V2 (one domain)

    def __getattr__(self, name):
        name = EPHandle._ALIASES.get(name, name)
        if name in EPHandle._HOST_FIELDS:
            return getattr(self.native, name)
        if name in EPHandle._DEVICE_FIELDS:
            if not self._filled:
                raise RuntimeError(f"EPHandle.{name}: the handle is empty (no dispatch has filled it)")
            dtype, shape = EPHandle._DEVICE_FIELDS[name]
            view = DeviceView(self.native.ptrs[name], shape(self.native), dtype, self.native.device, owner=self)
            return as_framework_like(view, self._like)
        raise AttributeError(name)

    @property
    def is_filled(self):
        return self._filled

    def __repr__(self):
        h = self.native
        return (f"<symmoe.EPHandle rank={h.rank}/{h.num_ranks} expand={h.do_expand} "
                f"num_recv_tokens={h.num_recv_tokens} num_expanded_tokens={h.num_expanded_tokens}>")


_torch_marker = []


def _is_torch(obj):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _framework_marker(tensor):
    """An empty tensor of the input's framework (views of handle metadata follow it; the input is not retained)."""
    if not _is_torch(tensor):
        return None
    if not _torch_marker:
        import torch
        _torch_marker.append(torch.empty(0))
    return _torch_marker[0]


class _ViewOwner:
    """What the buffer's output tensors keep alive: the native EpBuffer owning their memory. Not the ElasticBuffer
    itself, whose cache holds those tensors: no reference cycle. destroy() empties it."""
    __slots__ = ("impl",)

    def __init__(self, impl):
        self.impl = impl


def _hint_experts(num_ranks):
    """E assumed where num_experts is not known yet: 256 rounded up to a multiple of the ranks."""
    return -(-256 // num_ranks) * num_ranks


def _wait(event):
    """The current stream waits for `event` (an EventOverlap, a torch.cuda.Event, or None)."""
    if event is None:
        return
    ev = event.event if isinstance(event, EventOverlap) else event
    if ev is not None:
        import torch
        torch.cuda.current_stream().wait_event(ev)


class ElasticBuffer:
    """DeepEP-shaped EP buffer over a symmetric NVLink allocation (see the module docstring for the contract)."""

    def __init__(self, group=None, num_bytes=None, num_cpu_bytes=0, num_max_tokens_per_rank=0, hidden=0, num_topk=0,
                 use_fp8_dispatch=False, deterministic=False, allow_hybrid_mode=True, allow_multiple_reduction=True,
                 prefer_overlap_with_compute=True, sl_idx=3, num_allocated_qps=0, num_cpu_timeout_secs=300,
                 num_gpu_timeout_secs=None, explicitly_destroy=False, *, num_experts=None, fp8_scales="fp32_per128",
                 timeout_ms=-1, communicator=None):
        """DeepEP V2's constructor arguments, in its order. group: a torch.distributed process group (None: the world
        group if torch.distributed is initialised, else a single in-process rank). num_experts (keyword): E, a
        multiple of the group size; None (DeepEP's way): the symmetric buffer is allocated by the first dispatch,
        sized by its num_experts (that first dispatch is then collective, as every dispatch is).
        Accepted for DeepEP compatibility and not used: num_bytes (symmoe sizes its buffer from the MoE settings),
        allow_hybrid_mode, allow_multiple_reduction, prefer_overlap_with_compute, sl_idx, num_allocated_qps,
        num_cpu_timeout_secs, explicitly_destroy (destroy() works either way); num_cpu_bytes must be 0.
        Timeouts: timeout_ms bounds every cross-rank wait (-1: SYMMOE_TIMEOUT_MS, default 10 s), or
        num_gpu_timeout_secs when given; a stalled peer raises symmoe.PeerTimeout naming it.
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
        self.group, self.explicitly_destroy = group, explicitly_destroy
        self.communicator = communicator
        local = communicator.local_ranks[0]
        self.rank, self.device = local["rank"], local["device"]
        self.rank_idx = self.rank
        self._fallback_stream = communicator.stream(self.rank)
        self._impl = None
        self._free_native_handles = []
        self._view_owner, self._torch_views = _ViewOwner(None), {}
        self._zero_weights = None
        if num_experts is not None:
            self._allocate(num_experts)

    def _allocate(self, num_experts):
        """The symmetric buffer for num_experts (collective)."""
        _C.ep_validate_config(self.num_ranks, self.num_max_tokens_per_rank, self.hidden, self.num_topk, num_experts,
                              self._dtype, self._scales)
        self.num_experts = num_experts
        self._impl = _C.EpBuffer(self.communicator.native, self.num_max_tokens_per_rank, self.hidden, self.num_topk,
                                 num_experts, self._dtype, self._scales)
        self._view_owner.impl = self._impl

    def _configure(self, num_ranks, num_max_tokens_per_rank, hidden, num_topk, num_experts, use_fp8_dispatch,
                   deterministic, fp8_scales):
        for name, v in (("num_max_tokens_per_rank", num_max_tokens_per_rank), ("hidden", hidden),
                        ("num_topk", num_topk)) + ((("num_experts", num_experts),) if num_experts is not None else ()):
            _check_positive_int(name, v)
        _check(fp8_scales in _FP8_SCALES, ValueError, f"fp8_scales must be one of {_FP8_SCALES}, got {fp8_scales!r}")
        self.num_ranks = num_ranks
        self.num_max_tokens_per_rank, self.hidden = num_max_tokens_per_rank, hidden
        self.num_topk, self.num_experts = num_topk, num_experts
        self.use_fp8_dispatch, self.deterministic = bool(use_fp8_dispatch), bool(deterministic)
        self._dtype = "fp8" if use_fp8_dispatch else "bf16"
        self._scales = fp8_scales if use_fp8_dispatch else "none"
        self._x_dtypes = ("float8_e4m3fn", "uint8") if use_fp8_dispatch else ("bfloat16",)
        self._sf_dtype, self._sf_cols = _scale_shape(fp8_scales, hidden) if use_fp8_dispatch else (None, 0)
        _C.ep_validate_config(num_ranks, num_max_tokens_per_rank, hidden, num_topk,
                              num_experts if num_experts is not None else _hint_experts(num_ranks), self._dtype,
                              self._scales)

    @classmethod
    def _validation_only(cls, num_ranks, num_max_tokens_per_rank, hidden, num_topk, num_experts,
                         use_fp8_dispatch=False, fp8_scales="fp32_per128", device=0):
        """A buffer with every argument check but no GPU runtime (CPU tests): calls that pass validation then
        raise RuntimeError('... no GPU runtime ...')."""
        self = cls.__new__(cls)
        self._configure(num_ranks, num_max_tokens_per_rank, hidden, num_topk, num_experts, use_fp8_dispatch,
                        True, fp8_scales)
        self.communicator, self.rank, self.device, self._impl = None, 0, device, None
        self.group, self.explicitly_destroy, self.rank_idx, self._zero_weights = None, False, 0, None
        self._fallback_stream = None
        self._free_native_handles = []
        self._view_owner, self._torch_views = _ViewOwner(None), {}
        return self

    @staticmethod
    def get_buffer_size_hint(group, num_max_tokens_per_rank, hidden, num_topk=0, use_fp8_dispatch=False,
                             allow_hybrid_mode=True, allow_multiple_reduction=True, *, num_experts=None,
                             fp8_scales="fp32_per128"):
        """Bytes of one rank's symmetric buffer (no GPU needed). group: a process group or the number of ranks.
        num_experts (keyword): None sizes for _hint_experts(ranks) experts (the metadata part grows with E; the
        token payload dominates)."""
        if isinstance(group, int):
            num_ranks = group
        else:
            import torch.distributed as dist
            num_ranks = dist.get_world_size(group)
        return _C.ep_buffer_size_hint(num_ranks, num_max_tokens_per_rank, hidden, num_topk,
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
        """There is no separate communication stream: the caller's current stream."""
        import torch
        return torch.cuda.current_stream(self.device)

    @staticmethod
    def capture():
        """EventOverlap with an event recorded on the current stream (DeepEP's EventHandle)."""
        import torch
        ev = torch.cuda.Event()
        ev.record()
        return EventOverlap(ev)

    def barrier(self, use_comm_stream=True, with_cpu_sync=False, sequential=True):
        """Host barrier of the group after this rank's GPU work (stronger than DeepEP's GPU-level barrier)."""
        self.synchronize()
        self.communicator.host_barrier()

    # ---- outputs ----
    # NOTES: outputs live at fixed addresses of buffer-owned memory. A torch tensor made through DLPack costs ~10 us,
    # so one tensor per (address, row capacity, dtype) is made once and cached; each call returns it, or its first
    # `rows` rows (a slice). Views without torch are DeviceViews owned by the buffer.
    _MAX_CACHED_VIEWS = 64

    def _output(self, ptr, rows, capacity, trailing, dtype, like):
        if not _is_torch(like):
            return DeviceView(ptr, (rows,) + trailing, dtype, self.device, owner=self)
        key = (ptr, capacity, trailing, dtype, like.dtype)
        full = self._torch_views.get(key)
        if full is None:
            if len(self._torch_views) >= self._MAX_CACHED_VIEWS:
                self._torch_views.clear()
            view = DeviceView(ptr, (capacity,) + trailing, dtype, self.device, owner=self._view_owner)
            full = self._torch_views[key] = as_framework_like(view, like)
        return full if rows == capacity else full[:rows]

    # ---- native handle pool ----
    # NOTES: a fresh dispatch needs a native EpHandle whose device metadata it (re)writes. Handles released by the
    # caller (the EPHandle object and every view of its fields gone) come back here; reusing one is ordered by the
    # stream (its last reader, a combine, was enqueued before the dispatch that rewrites it). At most
    # _HANDLE_POOL_SIZE are kept; more are freed (cudaFree, which waits for the device).
    _HANDLE_POOL_SIZE = 4

    def _take_native_handle(self):
        pool = self.__dict__.get("_free_native_handles")
        return pool.pop() if pool else _C.EpHandle()

    def _give_back_native_handle(self, native):
        pool = self.__dict__.get("_free_native_handles")
        if self.__dict__.get("_impl") is not None and pool is not None and len(pool) < self._HANDLE_POOL_SIZE:
            pool.append(native)

    # ---- argument checks (no GPU work before they pass) ----
    def _tensor(self, obj, name, stream, dtypes, shape):
        """(data_ptr, shape) of a contiguous CUDA tensor on this rank's device with one of `dtypes` and `shape`
        (None = any extent): symmoe._checks.device_tensor."""
        return device_tensor(obj, name, self.device, stream, dtypes, shape)

    def _stream(self, like):
        """The caller's current CUDA stream (torch inputs), else the communicator's (symmoe._checks.caller_stream)."""
        return caller_stream(like, self.device, self._fallback_stream)

    def _require_runtime(self, what):
        _check(self._impl is not None, RuntimeError,
               f"ElasticBuffer.{what}: arguments are valid but this buffer has no GPU runtime (validation-only)")

    def _event(self, like, wanted):
        """EventOverlap with an event recorded on the stream the call ran on (torch inputs only)."""
        ts = torch_stream(like, self.device) if wanted else None
        if ts is None:
            return EventOverlap(None)
        import torch
        ev = torch.cuda.Event()
        ev.record(ts)
        return EventOverlap(ev)

    # ---- dispatch ----
    def dispatch(self, x, topk_idx=None, topk_weights=None, cumulative_local_expert_recv_stats=None, num_experts=None,
                 num_max_tokens_per_rank=None, expert_alignment=None, num_sms=0, num_qps=0, previous_event=None,
                 previous_event_before_epilogue=None, async_with_compute_stream=False, allocate_on_comm_stream=False,
                 handle=None, do_handle_copy=True, do_cpu_sync=None, do_expand=False, do_zero_padding=True,
                 use_tma_aligned_col_major_sf=False):
        """-> (recv_x, recv_topk_idx, recv_topk_weights, handle, event). recv_x is (recv_x, recv_sf) for FP8."""
        # NOTES: hot path (~1 call per layer and step): plain ifs, messages formatted only on failure; torch tensors
        # are checked with a few C calls each (symmoe._checks).
        if isinstance(x, tuple):
            if len(x) != 2:
                raise ValueError(f"x must be a tensor or an (x, sf) pair, got a tuple of {len(x)}")
            x_data, sf = x
        else:
            x_data, sf = x, None
        if (sf is not None) != self.use_fp8_dispatch:
            raise ValueError("x must be an (x, sf) pair: this buffer was built with use_fp8_dispatch=True"
                             if self.use_fp8_dispatch else
                             "x is an (x, sf) pair but this buffer was built with use_fp8_dispatch=False (bf16)")
        if num_experts is not None and num_experts != self.num_experts:
            if self.num_experts is None and self.communicator is not None:
                self._allocate(num_experts)  # DeepEP-style construction without num_experts: first dispatch
            else:
                raise ValueError(f"num_experts {num_experts} differs from the buffer's {self.num_experts} "
                                 f"(fixed by the first dispatch or at construction)")
        if num_max_tokens_per_rank is not None and num_max_tokens_per_rank != self.num_max_tokens_per_rank:
            raise ValueError(f"num_max_tokens_per_rank {num_max_tokens_per_rank} differs from the buffer's "
                             f"{self.num_max_tokens_per_rank}")
        if expert_alignment is None:
            expert_alignment = 1
        elif type(expert_alignment) is not int or not 1 <= expert_alignment <= 1024:
            _check_positive_int("expert_alignment", expert_alignment)
            raise ValueError(f"expert_alignment must be <= 1024, got {expert_alignment}")
        if type(num_sms) is not int or num_sms < 0:
            _check_positive_int("num_sms", num_sms, low=0)
        if use_tma_aligned_col_major_sf:
            raise ValueError("use_tma_aligned_col_major_sf is not supported: scales are row-major [T, H/128]")
        cached = handle is not None
        if do_cpu_sync is None:
            do_cpu_sync = not cached  # DeepEP: exact counts for a fresh dispatch, none for a cached one
        if cached:
            if not isinstance(handle, EPHandle) or handle._buffer is not self:
                raise ValueError("handle must be an EPHandle returned by this buffer's dispatch")
            if not handle._filled:
                raise ValueError("handle is empty (no dispatch has filled it)")
            do_expand, expert_alignment = handle.native.do_expand, handle.native.expert_alignment

        stream = self._stream(x_data)
        H, K, T_max = self.hidden, self.num_topk, self.num_max_tokens_per_rank
        x_ptr, x_shape = self._tensor(x_data, "x", stream, self._x_dtypes, (None, H))
        T = x_shape[0]
        if T > T_max:
            raise ValueError(f"x has {T} tokens, more than num_max_tokens_per_rank = {T_max}")
        sf_ptr = 0
        if sf is not None:
            sf_dtype, sf_cols = self._sf_dtype, self._sf_cols
            sf_ptr = self._tensor(sf, f"sf ({self._scales})", stream, (sf_dtype,), (T, sf_cols))[0]
        if topk_idx is None and cached:
            idx_ptr = handle.native.ptrs["topk_idx"]
            if handle.native.num_tokens != T:
                raise ValueError(f"cached dispatch: x has {T} tokens but the handle was made for "
                                 f"{handle.native.num_tokens}")
        else:
            if topk_idx is None:
                raise ValueError("topk_idx is required for a fresh dispatch")
            idx_ptr = self._tensor(topk_idx, "topk_idx", stream, ("int64",), (T, K))[0]
        if topk_weights is not None:
            w_ptr = self._tensor(topk_weights, "topk_weights", stream, ("float32",), (T, K))[0]
        else:  # DeepEP allows none: zeros travel and recv_topk_weights is None
            w_ptr = self._zeros_for_weights(x_data)
        stats = cumulative_local_expert_recv_stats

        if self._impl is None:
            self._require_runtime("dispatch")
        if stats is not None:
            El = self.num_experts // self.num_ranks
            self._tensor(stats, "cumulative_local_expert_recv_stats", stream, ("int32", "int64"), (El,))
        if previous_event is not None or previous_event_before_epilogue is not None:
            _wait(previous_event)  # one stream: waiting before the call covers both
            _wait(previous_event_before_epilogue)
        if not cached:
            handle = EPHandle(self)
        handle._like = _framework_marker(x_data)
        p_x, p_sf, p_idx, p_w, num_rows, capacity = self._impl.dispatch_one(
            T, x_ptr, sf_ptr, idx_ptr, w_ptr, stream or 0, handle.native, do_expand, expert_alignment,
            do_zero_padding, cached, num_sms, do_cpu_sync)
        handle.row_capacity, handle._filled, handle.num_sms = capacity, True, num_sms
        rows = num_rows if do_cpu_sync else capacity
        lanes = () if do_expand else (K,)

        recv_x = self._output(p_x, rows, capacity, (H,), "uint8" if self.use_fp8_dispatch else "bfloat16", x_data)
        if sf is not None:
            recv_x = (recv_x, self._output(p_sf, rows, capacity, (sf_cols,), sf_dtype, x_data))
        recv_topk_idx = self._output(p_idx, rows, capacity, lanes, "int64", x_data)
        recv_topk_weights = (self._output(p_w, rows, capacity, lanes, "float32", x_data)
                             if topk_weights is not None else None)
        if stats is not None:
            stats.add_(handle.num_unaligned_recv_tokens_per_expert)
        return recv_x, recv_topk_idx, recv_topk_weights, handle, self._event(x_data, async_with_compute_stream)

    def _zeros_for_weights(self, like):
        """Address of fp32 zeros [T_max, K] on this device (torch inputs only), for a dispatch without weights."""
        if self._zero_weights is None:
            _check(self._impl is not None and is_torch(like), ValueError,
                   "topk_weights is required (fp32 [num_tokens, num_topk]) unless the inputs are torch tensors")
            import torch
            self._zero_weights = torch.zeros(self.num_max_tokens_per_rank, self.num_topk, dtype=torch.float32,
                                             device=f"cuda:{self.device}")
        return self._zero_weights.data_ptr()

    # ---- combine ----
    def combine(self, x, handle=None, topk_weights=None, bias=None, num_sms=0, num_qps=0, previous_event=None,
                previous_event_before_epilogue=None, async_with_compute_stream=False, allocate_on_comm_stream=False,
                reduce_local_experts=False, do_cpu_sync=True):
        """-> (combined_x bf16 [T, H], combined_topk_weights fp32 [T, K] or None, event)."""
        if not isinstance(handle, EPHandle) or handle._buffer is not self:
            raise ValueError("handle must be the EPHandle of this buffer's dispatch")
        if not handle._filled:
            raise ValueError("handle is empty (no dispatch has filled it)")
        if type(num_sms) is not int or num_sms < 0:
            _check_positive_int("num_sms", num_sms, low=0)
        h = handle.native
        do_expand = h.do_expand
        if reduce_local_experts and not do_expand:
            raise ValueError("reduce_local_experts needs a handle from an expand dispatch (do_expand=True)")
        stream = self._stream(x)
        H, K, T = self.hidden, self.num_topk, h.num_tokens
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
        b_ptrs = [0, 0]
        if bias is not None:
            biases = bias if isinstance(bias, tuple) else (bias, None)
            if len(biases) != 2:
                raise ValueError(f"bias must be a tensor or a pair, got a tuple of {len(biases)}")
            for i, b in enumerate(biases):
                if b is not None:
                    b_ptrs[i] = self._tensor(b, f"bias_{i}", stream, ("bfloat16",), (T, H))[0]

        if self._impl is None:
            self._require_runtime("combine")
        if previous_event is not None or previous_event_before_epilogue is not None:
            _wait(previous_event)
            _wait(previous_event_before_epilogue)
        p_x, p_w = self._impl.combine_one(x_ptr, w_ptr, b_ptrs[0], b_ptrs[1], stream or 0, h, reduce_local_experts,
                                          num_sms, do_cpu_sync)
        T_max = self.num_max_tokens_per_rank
        combined_x = self._output(p_x, T, T_max, (H,), "bfloat16", x)
        combined_w = self._output(p_w, T, T_max, (K,), "float32", x) if p_w else None
        return combined_x, combined_w, self._event(x, async_with_compute_stream)

    def destroy(self):
        """Collective: frees the symmetric buffer and the communicator now (every rank must call it). Every
        output view and handle of this buffer becomes invalid. Without it, they are freed when the last
        reference goes, which at interpreter exit may happen in a different order on different ranks."""
        self._impl = None
        self._view_owner.impl = None
        self._torch_views = {}
        self._free_native_handles = []
        self.communicator = None

    def synchronize(self):
        """Waits for this rank's work; raises device-detected input errors and peer timeouts (do_cpu_sync=False)."""
        self._require_runtime("synchronize")
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            # The calls ran on torch's streams; the C++ side synchronises only the communicator's own stream.
            torch.cuda.synchronize(self.device)
        self._impl.synchronize()
