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
- Everything runs on the caller's current CUDA stream (torch.cuda.current_stream()); there is no separate
  communication stream, so async_with_compute_stream only decides whether an EventOverlap with a recorded event
  is returned; current_stream_wait() is then always correct and cheap.
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
from .dlpack import KDL_CUDA, DeviceView, as_framework_like, tensor_info
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
        self.native = _C.EpHandle()
        self.row_capacity = 0
        self._like = None  # _framework_marker of the dispatch input: device views follow its framework

    def __getattr__(self, name):
        if name in EPHandle._HOST_FIELDS:
            return getattr(self.native, name)
        if name in EPHandle._DEVICE_FIELDS:
            if self.native.rank < 0:
                raise RuntimeError(f"EPHandle.{name}: the handle is empty (no dispatch has filled it)")
            dtype, shape = EPHandle._DEVICE_FIELDS[name]
            view = DeviceView(self.native.ptrs[name], shape(self.native), dtype, self.native.device, owner=self)
            return as_framework_like(view, self._like)
        raise AttributeError(name)

    @property
    def is_filled(self):
        return self.native.rank >= 0

    def __repr__(self):
        h = self.native
        return (f"<symmoe.EPHandle rank={h.rank}/{h.num_ranks} expand={h.do_expand} "
                f"num_recv_tokens={h.num_recv_tokens} num_expanded_tokens={h.num_expanded_tokens}>")


def _framework_marker(tensor):
    """An empty tensor of the input's framework (views of handle metadata follow it; the input is not retained)."""
    torch = sys.modules.get("torch")
    return torch.empty(0) if torch is not None and isinstance(tensor, torch.Tensor) else None


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

    # ---- argument checks (no GPU work before they pass) ----
    def _tensor(self, obj, name, stream, dtypes, shape):
        """TensorInfo of a CUDA tensor on this rank's device with one of `dtypes` and `shape` (None = any)."""
        try:
            info = tensor_info(obj, stream)
        except TypeError as e:
            raise TypeError(f"{name}: {e}") from None
        _check(info.device_type == KDL_CUDA and info.device_id == self.device, ValueError,
               f"{name} must be on cuda:{self.device} (this rank's GPU), got {info.device}")
        _check(info.dtype in dtypes, TypeError, f"{name} must have dtype {' or '.join(dtypes)}, got {info.dtype}")
        _check(len(info.shape) == len(shape) and all(e is None or e == g for e, g in zip(shape, info.shape)),
               ValueError, f"{name} must have shape {list('*' if e is None else e for e in shape)}, "
                           f"got {list(info.shape)}")
        _check(info.is_contiguous(), ValueError, f"{name} must be contiguous (row-major), got strides "
                                                 f"{list(info.strides)} for shape {list(info.shape)}")
        return info

    def _stream(self, like):
        """The caller's current CUDA stream when the inputs are torch tensors, else the communicator's."""
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(like, torch.Tensor) and like.is_cuda:
            return torch.cuda.current_stream(like.device).cuda_stream
        return self.communicator.stream(self.rank) if self.communicator is not None else None

    def _require_runtime(self, what):
        _check(self._impl is not None, RuntimeError,
               f"ElasticBuffer.{what}: arguments are valid but this buffer has no GPU runtime (validation-only)")

    def _event(self, stream, wanted):
        torch = sys.modules.get("torch")
        if not wanted or torch is None or stream is None:
            return EventOverlap(None)
        ev = torch.cuda.Event()
        ev.record(torch.cuda.ExternalStream(stream) if stream else torch.cuda.default_stream(self.device))
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

        stream = self._stream(x_data)
        H, K, T_max = self.hidden, self.num_topk, self.num_max_tokens_per_rank
        xi = self._tensor(x_data, "x", stream, ("float8_e4m3fn", "uint8") if self.use_fp8_dispatch else ("bfloat16",),
                          (None, H))
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
        args = {"num_tokens": T, "x": xi.data_ptr, "x_scales": sfi.data_ptr if sfi else 0, "topk_idx": idx_ptr,
                "topk_weights": wi.data_ptr, "stream": stream or 0}
        res = self._impl.dispatch([args], [handle.native], do_expand, expert_alignment, do_zero_padding, cached,
                                  num_sms, do_cpu_sync)[0]
        handle.row_capacity = res["row_capacity"]
        rows = res["num_rows"] if do_cpu_sync else res["row_capacity"]
        lanes = (rows,) if do_expand else (rows, K)

        def view(key, shape, dtype):
            return as_framework_like(DeviceView(res[key], shape, dtype, self.device, owner=self), x_data)

        recv_x = view("recv_x", (rows, H), "uint8" if self.use_fp8_dispatch else "bfloat16")
        if sf is not None:
            sf_dtype, sf_cols = _scale_shape(self._scales, H)
            recv_x = (recv_x, view("recv_x_scales", (rows, sf_cols), sf_dtype))
        recv_topk_idx = view("recv_topk_idx", lanes, "int64")
        recv_topk_weights = view("recv_topk_weights", lanes, "float32")
        return recv_x, recv_topk_idx, recv_topk_weights, handle, self._event(stream, async_with_compute_stream)

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
        stream = self._stream(x)
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
        args = {"x": xi.data_ptr, "topk_weights": wi.data_ptr if wi else 0,
                "bias_0": bi[0].data_ptr if bi[0] else 0, "bias_1": bi[1].data_ptr if bi[1] else 0,
                "stream": stream or 0}
        res = self._impl.combine([args], [handle.native], reduce_local_experts, num_sms, do_cpu_sync)[0]
        combined_x = as_framework_like(DeviceView(res["combined_x"], (T, H), "bfloat16", self.device, owner=self), x)
        combined_w = None
        if res["combined_topk_weights"]:
            combined_w = as_framework_like(
                DeviceView(res["combined_topk_weights"], (T, K), "float32", self.device, owner=self), x)
        return combined_x, combined_w, self._event(stream, async_with_compute_stream)

    def destroy(self):
        """Collective: frees the symmetric buffer and the communicator now (every rank must call it). Every
        output view and handle of this buffer becomes invalid. Without it, they are freed when the last
        reference goes, which at interpreter exit may happen in a different order on different ranks."""
        self._impl = None
        self.communicator = None

    def synchronize(self):
        """Waits for this rank's work; raises device-detected input errors and peer timeouts (do_cpu_sync=False)."""
        self._require_runtime("synchronize")
        self._impl.synchronize()
