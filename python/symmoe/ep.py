"""DeepEP-shaped expert-parallel dispatch / combine over symmoe's EpBuffer (include/symmoe/ep.hpp).

    buffer = symmoe.ElasticBuffer(group, num_max_tokens_per_rank=4096, hidden=7168, num_topk=8, num_experts=256,
                                  use_fp8_dispatch=True)
    recv_x, recv_topk_idx, recv_topk_weights, handle, event = buffer.dispatch(
        (x_fp8, x_scales), topk_idx=topk_idx, topk_weights=topk_weights, num_experts=256)
    combined_x, combined_topk_weights, event = buffer.combine(y, handle=handle)

Argument names and return order follow DeepEP V2 where the semantics match. Differences (all deliberate):
- num_experts is fixed at construction (the symmetric buffer is sized by it); dispatch's num_experts and
  num_max_tokens_per_rank are optional and must match the buffer's if given.
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
from .dlpack import KDL_CUDA, DeviceView, as_framework_like, tensor_info, torch_tensor_info
from .distributed import Communicator

_FP8_SCALES = ("fp32_per128", "ue8m0_per128", "ue8m0_per32")
_CUDA_STREAM_LEGACY = 1  # cudaStreamLegacy


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
        self._like = None  # _framework_marker of the dispatch input: device views follow its framework
        self._filled = False  # set by a successful dispatch (a pooled native keeps its previous owner's fields)

    def __del__(self):
        # The native handle (and its device metadata) goes back to the buffer's pool: no cudaMalloc/cudaFree per
        # dispatch, so steady-state loops and CUDA-graph capture allocate nothing.
        buffer, native = self.__dict__.get("_buffer"), self.__dict__.get("native")
        if buffer is not None and native is not None:
            buffer._give_back_native_handle(native)

    def __getattr__(self, name):
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


def _check(cond, exc, msg):
    if not cond:
        raise exc(msg)


def _check_positive_int(name, value, low=1):
    _check(isinstance(value, int) and not isinstance(value, bool), TypeError,
           f"{name} must be an int, got {type(value).__name__}")
    _check(value >= low, ValueError, f"{name} must be >= {low}, got {value}")


class ElasticBuffer:
    """DeepEP-shaped EP buffer over a symmetric NVLink allocation (see the module docstring for the contract)."""

    def __init__(self, group=None, num_max_tokens_per_rank=0, hidden=0, num_topk=0, use_fp8_dispatch=False,
                 deterministic=True, *, num_experts, fp8_scales="fp32_per128", timeout_ms=-1, communicator=None):
        """group: a torch.distributed process group (None: the world group if torch.distributed is initialised,
        else a single in-process rank). num_experts (keyword, required): E, a multiple of the group size.
        communicator: a symmoe.Communicator to use instead of the group. timeout_ms: bound of every cross-rank
        wait (-1: SYMMOE_TIMEOUT_MS, default 10 s); a stalled peer raises symmoe.PeerTimeout naming it."""
        if communicator is None:
            communicator = self._communicator_for(group, timeout_ms)
        self._configure(communicator.num_ranks, num_max_tokens_per_rank, hidden, num_topk, num_experts,
                        use_fp8_dispatch, deterministic, fp8_scales)
        _check(len(communicator.local_ranks) == 1, ValueError,
               f"ElasticBuffer drives one rank per process; this communicator drives "
               f"{len(communicator.local_ranks)} (use symmoe._C.EpBuffer for in-process virtual ranks)")
        self.communicator = communicator
        local = communicator.local_ranks[0]
        self.rank, self.device = local["rank"], local["device"]
        self._impl = _C.EpBuffer(communicator.native, num_max_tokens_per_rank, hidden, num_topk, num_experts,
                                 self._dtype, self._scales)
        self._free_native_handles = []
        self._view_owner, self._torch_views = _ViewOwner(self._impl), {}

    @staticmethod
    def _communicator_for(group, timeout_ms):
        dist = sys.modules.get("torch.distributed")
        dist_ready = dist is not None and dist.is_available() and dist.is_initialized()
        if group is not None or dist_ready:
            return Communicator.from_group(group, timeout_ms)
        return Communicator.in_process(1, timeout_ms)

    def _configure(self, num_ranks, num_max_tokens_per_rank, hidden, num_topk, num_experts, use_fp8_dispatch,
                   deterministic, fp8_scales):
        for name, v in (("num_max_tokens_per_rank", num_max_tokens_per_rank), ("hidden", hidden),
                        ("num_topk", num_topk), ("num_experts", num_experts)):
            _check_positive_int(name, v)
        _check(fp8_scales in _FP8_SCALES, ValueError, f"fp8_scales must be one of {_FP8_SCALES}, got {fp8_scales!r}")
        self.num_ranks = num_ranks
        self.num_max_tokens_per_rank, self.hidden = num_max_tokens_per_rank, hidden
        self.num_topk, self.num_experts = num_topk, num_experts
        self.use_fp8_dispatch, self.deterministic = bool(use_fp8_dispatch), bool(deterministic)
        self._dtype = "fp8" if use_fp8_dispatch else "bf16"
        self._scales = fp8_scales if use_fp8_dispatch else "none"
        self._x_dtypes = ("float8_e4m3fn", "uint8") if use_fp8_dispatch else ("bfloat16",)
        _C.ep_validate_config(num_ranks, num_max_tokens_per_rank, hidden, num_topk, num_experts, self._dtype,
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
        self._free_native_handles = []
        self._view_owner, self._torch_views = _ViewOwner(None), {}
        return self

    @staticmethod
    def get_buffer_size_hint(group_or_num_ranks, num_max_tokens_per_rank, hidden, num_topk, num_experts,
                             use_fp8_dispatch=False, fp8_scales="fp32_per128"):
        """Bytes of one rank's symmetric buffer for this configuration (no GPU needed)."""
        if isinstance(group_or_num_ranks, int):
            num_ranks = group_or_num_ranks
        else:
            import torch.distributed as dist
            num_ranks = dist.get_world_size(group_or_num_ranks)
        return _C.ep_buffer_size_hint(num_ranks, num_max_tokens_per_rank, hidden, num_topk, num_experts,
                                      "fp8" if use_fp8_dispatch else "bf16",
                                      fp8_scales if use_fp8_dispatch else "none")

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
        """TensorInfo of a CUDA tensor on this rank's device with one of `dtypes` and `shape` (None = any)."""
        if _is_torch(obj):  # the call launches on torch's current stream: read the tensor directly
            info = torch_tensor_info(obj)
        else:
            try:
                info = tensor_info(obj, stream)
            except TypeError as e:
                raise TypeError(f"{name}: {e}") from None
        # NOTES: hot path (4 tensors a call): messages are formatted only on failure.
        if info.device_type != KDL_CUDA or info.device_id != self.device:
            raise ValueError(f"{name} must be on cuda:{self.device} (this rank's GPU), got {info.device}")
        if info.dtype not in dtypes:
            raise TypeError(f"{name} must have dtype {' or '.join(dtypes)}, got {info.dtype}")
        if len(info.shape) != len(shape) or any(e is not None and e != g for e, g in zip(shape, info.shape)):
            raise ValueError(f"{name} must have shape {list('*' if e is None else e for e in shape)}, "
                             f"got {list(info.shape)}")
        if not info.is_contiguous():
            raise ValueError(f"{name} must be contiguous (row-major), got strides {list(info.strides)} for shape "
                             f"{list(info.shape)}")
        return info

    def _stream(self, like):
        """(handle, torch stream or None): the caller's current CUDA stream when the inputs are torch tensors, else
        the communicator's. torch's default stream is the legacy default stream (handle 0); it is passed as
        cudaStreamLegacy (1), because 0 tells the C++ side to use the communicator's own stream, which does not
        wait for work on the legacy stream."""
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(like, torch.Tensor) and like.is_cuda:
            ts = torch.cuda.current_stream(like.device)
            return (ts.cuda_stream or _CUDA_STREAM_LEGACY), ts
        return (self.communicator.stream(self.rank) if self.communicator is not None else None), None

    def _require_runtime(self, what):
        _check(self._impl is not None, RuntimeError,
               f"ElasticBuffer.{what}: arguments are valid but this buffer has no GPU runtime (validation-only)")

    @staticmethod
    def _event(torch_stream, wanted):
        """EventOverlap with an event recorded on the stream the call ran on (torch inputs only)."""
        if not wanted or torch_stream is None:
            return EventOverlap(None)
        import torch
        ev = torch.cuda.Event()
        ev.record(torch_stream)
        return EventOverlap(ev)

    # ---- dispatch ----
    def dispatch(self, x, topk_idx=None, topk_weights=None, num_experts=None, num_max_tokens_per_rank=None,
                 expert_alignment=1, num_sms=0, handle=None, do_cpu_sync=True, do_expand=False,
                 do_zero_padding=True, async_with_compute_stream=False):
        """-> (recv_x, recv_topk_idx, recv_topk_weights, handle, event). recv_x is (recv_x, recv_sf) for FP8."""
        if isinstance(x, tuple):
            _check(len(x) == 2, ValueError, f"x must be a tensor or an (x, sf) pair, got a tuple of {len(x)}")
        x_data, sf = x if isinstance(x, tuple) else (x, None)
        _check((sf is not None) == self.use_fp8_dispatch, ValueError,
               "x must be an (x, sf) pair: this buffer was built with use_fp8_dispatch=True" if self.use_fp8_dispatch
               else "x is an (x, sf) pair but this buffer was built with use_fp8_dispatch=False (bf16)")
        _check(num_experts is None or num_experts == self.num_experts, ValueError,
               f"num_experts {num_experts} differs from the buffer's {self.num_experts} (fixed at construction)")
        _check(num_max_tokens_per_rank is None or num_max_tokens_per_rank == self.num_max_tokens_per_rank,
               ValueError, f"num_max_tokens_per_rank {num_max_tokens_per_rank} differs from the buffer's "
                           f"{self.num_max_tokens_per_rank}")
        _check_positive_int("expert_alignment", expert_alignment)
        _check(expert_alignment <= 1024, ValueError, f"expert_alignment must be <= 1024, got {expert_alignment}")
        _check_positive_int("num_sms", num_sms, low=0)
        cached = handle is not None
        if cached:
            _check(isinstance(handle, EPHandle) and handle._buffer is self, ValueError,
                   "handle must be an EPHandle returned by this buffer's dispatch")
            _check(handle.is_filled, ValueError, "handle is empty (no dispatch has filled it)")
            do_expand, expert_alignment = handle.do_expand, handle.expert_alignment

        stream, torch_stream = self._stream(x_data)
        H, K, T_max = self.hidden, self.num_topk, self.num_max_tokens_per_rank
        xi = self._tensor(x_data, "x", stream, self._x_dtypes, (None, H))
        T = xi.shape[0]
        _check(T <= T_max, ValueError, f"x has {T} tokens, more than num_max_tokens_per_rank = {T_max}")
        sfi = None
        if sf is not None:
            sf_dtype, sf_cols = _scale_shape(self._scales, H)
            sfi = self._tensor(sf, f"sf ({self._scales})", stream, (sf_dtype,), (T, sf_cols))
        if topk_idx is None and cached:
            idx_ptr = handle.native.ptrs["topk_idx"]
            _check(handle.num_tokens == T, ValueError,
                   f"cached dispatch: x has {T} tokens but the handle was made for {handle.num_tokens}")
        else:
            _check(topk_idx is not None, ValueError, "topk_idx is required for a fresh dispatch")
            idx_ptr = self._tensor(topk_idx, "topk_idx", stream, ("int64",), (T, K)).data_ptr
        _check(topk_weights is not None, ValueError, "topk_weights is required (fp32 [num_tokens, num_topk])")
        wi = self._tensor(topk_weights, "topk_weights", stream, ("float32",), (T, K))

        self._require_runtime("dispatch")
        if not cached:
            handle = EPHandle(self)
        handle._like = _framework_marker(x_data)
        p_x, p_sf, p_idx, p_w, num_rows, capacity = self._impl.dispatch_one(
            T, xi.data_ptr, sfi.data_ptr if sfi else 0, idx_ptr, wi.data_ptr, stream or 0, handle.native, do_expand,
            expert_alignment, do_zero_padding, cached, num_sms, do_cpu_sync)
        handle.row_capacity, handle._filled = capacity, True
        rows = num_rows if do_cpu_sync else capacity
        lanes = () if do_expand else (K,)

        recv_x = self._output(p_x, rows, capacity, (H,), "uint8" if self.use_fp8_dispatch else "bfloat16", x_data)
        if sf is not None:
            recv_x = (recv_x, self._output(p_sf, rows, capacity, (sf_cols,), sf_dtype, x_data))
        recv_topk_idx = self._output(p_idx, rows, capacity, lanes, "int64", x_data)
        recv_topk_weights = self._output(p_w, rows, capacity, lanes, "float32", x_data)
        return recv_x, recv_topk_idx, recv_topk_weights, handle, self._event(torch_stream, async_with_compute_stream)

    # ---- combine ----
    def combine(self, x, handle=None, topk_weights=None, bias=None, num_sms=0, reduce_local_experts=False,
                do_cpu_sync=True, async_with_compute_stream=False):
        """-> (combined_x bf16 [T, H], combined_topk_weights fp32 [T, K] or None, event)."""
        _check(isinstance(handle, EPHandle) and handle._buffer is self, ValueError,
               "handle must be the EPHandle of this buffer's dispatch")
        _check(handle.is_filled, ValueError, "handle is empty (no dispatch has filled it)")
        _check_positive_int("num_sms", num_sms, low=0)
        _check(not reduce_local_experts or handle.do_expand, ValueError,
               "reduce_local_experts needs a handle from an expand dispatch (do_expand=True)")
        stream, torch_stream = self._stream(x)
        H, K, T = self.hidden, self.num_topk, handle.num_tokens
        xi = self._tensor(x, "x", stream, ("bfloat16",), (None, H))
        known = handle.num_expanded_tokens if handle.do_expand else handle.num_recv_tokens
        rows = xi.shape[0]
        _check(rows <= handle.row_capacity and (known < 0 or rows >= known), ValueError,
               f"x has {rows} rows; the dispatch of this handle received {known if known >= 0 else 'unknown'} "
               f"(capacity {handle.row_capacity})")
        wi = None
        if topk_weights is not None:
            wi = self._tensor(topk_weights, "topk_weights", stream, ("float32",),
                              (rows,) if handle.do_expand else (rows, K))
        biases = bias if isinstance(bias, tuple) else (bias, None)
        _check(len(biases) == 2, ValueError, f"bias must be a tensor or a pair, got a tuple of {len(biases)}")
        bi = [None if b is None else self._tensor(b, f"bias_{i}", stream, ("bfloat16",), (T, H))
              for i, b in enumerate(biases)]

        self._require_runtime("combine")
        p_x, p_w = self._impl.combine_one(xi.data_ptr, wi.data_ptr if wi else 0, bi[0].data_ptr if bi[0] else 0,
                                          bi[1].data_ptr if bi[1] else 0, stream or 0, handle.native,
                                          reduce_local_experts, num_sms, do_cpu_sync)
        T_max = self.num_max_tokens_per_rank
        combined_x = self._output(p_x, T, T_max, (H,), "bfloat16", x)
        combined_w = self._output(p_w, T, T_max, (K,), "float32", x) if p_w else None
        return combined_x, combined_w, self._event(torch_stream, async_with_compute_stream)

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
