"""The records that every path of ElasticBuffer.dispatch / combine shares: the general path (symmoe.ep), the eager
fast path in Python (symmoe._ep_eager) and the same fast path in C++ (symmoe._torch_ep,
python/src/torch_ext/torch_ep.cpp). This module imports neither of the others; they import it.

- EpState: one ElasticBuffer's configuration and call state (payload buffers, stream order, handle pool). The
  ElasticBuffer's own attributes of the same names (device, hidden, num_topk, ...) read and write it.
- EPHandle: DeepEP's handle; its record fields (EPHandle.RECORD) are what the three paths fill and read.
- scale_formats(hidden): the one rule that recognises an FP8 payload's scale format from its scales.
- new_dispatch_outputs(): the one rule for the shapes and dtypes of a dispatch's outputs (the C++ path allocates
  the same, checked bitwise by python/tests_gpu/test_ep_torch_ext.py).
Both classes declare their fields in __slots__ (a fixed layout): symmoe._torch_ep resolves each field it uses to
its slot once (init) and refuses a class without it, so a renamed field fails at load time, and
python/tests/test_ep_records.py checks the names the C++ uses against these declarations.
"""
import sys

from . import _C
from .dlpack import DeviceView, as_framework_like

BF16_PAYLOAD = ("bf16", "none")  # payload key (dtype, scales) of a bf16 dispatch; FP8: ("fp8", <scale format>)
FP8_SCALE_FORMATS = ("fp32_per128", "ue8m0_per128", "ue8m0_per32")
FP8_X_DTYPES = ("float8_e4m3fn", "uint8")  # dtypes of an FP8 payload's x (torch names)
MAX_EXPERT_ALIGNMENT = 1024
NATIVE_HANDLE_POOL_SIZE = 4


def scale_formats(hidden):
    """{(scales dtype, columns): FP8 payload key} for a hidden size: float32 [T, H/128] is fp32_per128; int32 (four
    UE8M0 bytes each) [T, H/128] is ue8m0_per32, [T, ceil(H/512)] ue8m0_per128 (per32 wins where both widths are
    equal). Formats the hidden size does not allow are absent."""
    table = {}
    for scales in ("fp32_per128", "ue8m0_per32", "ue8m0_per128"):  # precedence order
        try:
            cols = _C.ep_scale_row_bytes(scales, hidden) // 4
        except _C.Error:
            continue
        table.setdefault(("float32" if scales == "fp32_per128" else "int32", cols), ("fp8", scales))
    return table


def new_dispatch_outputs(empty, rows, hidden, x_dtype, sf_dtype, sf_cols, num_topk, expand, with_weights, device,
                         int64, float32):
    """(recv_x, recv_sf, recv_topk_idx, recv_topk_weights) for `rows` rows, allocated by `empty` (torch.empty):
    x [rows, H] of x's dtype, sf [rows, sf_cols] (None without scales), topk_idx int64 [rows, K] (None in expand
    mode), topk_weights float32 [rows] (expand) or [rows, K] (None without weights)."""
    return (empty((rows, hidden), dtype=x_dtype, device=device),
            empty((rows, sf_cols), dtype=sf_dtype, device=device) if sf_dtype is not None else None,
            None if expand else empty((rows, num_topk), dtype=int64, device=device),
            (empty((rows,) if expand else (rows, num_topk), dtype=float32, device=device) if with_weights
             else None))


class EpState:
    """The state of one ElasticBuffer that every dispatch / combine path reads and writes.

    device: the rank's CUDA device index. hidden, num_max_tokens_per_rank: fixed. num_topk: 0 until the first
    dispatch fixes it. num_experts: None until given. allow_multiple_reduction: combine's default for expand
    handles. natives: payload key -> symmoe._C.EpBuffer (allocated by the first dispatch of that payload).
    scale_formats: scale_formats(hidden). last_stream: the raw stream of the previous call's work (None: no call
    yet); a call from another stream is ordered after it. torch_device: torch.device of the rank's GPU (from the
    first eager call). row_capacities: (EpBuffer, expand, expert_alignment) -> rows. free_native_handles: the pool
    of released symmoe._C.EpHandle; new_native_handle: makes one when the pool is empty."""
    __slots__ = ("device", "hidden", "num_max_tokens_per_rank", "num_topk", "num_experts", "allow_multiple_reduction",
                 "natives", "scale_formats", "last_stream", "torch_device", "row_capacities", "free_native_handles",
                 "new_native_handle")

    def __init__(self, device, hidden, num_max_tokens_per_rank, num_topk, num_experts):
        self.device, self.hidden, self.num_max_tokens_per_rank = device, hidden, num_max_tokens_per_rank
        self.num_topk, self.num_experts, self.allow_multiple_reduction = num_topk, num_experts, True
        self.natives, self.scale_formats = {}, scale_formats(hidden)
        self.last_stream = self.torch_device = None
        self.row_capacities, self.free_native_handles, self.new_native_handle = {}, [], _C.EpHandle

    def fp8_payload(self, sf_dtype, cols):
        """The FP8 payload key of scales with this dtype name and column count, None if none matches."""
        return self.scale_formats.get((sf_dtype, cols))

    def row_capacity(self, native, expand, expert_alignment):
        """native.row_capacity(expand, expert_alignment), cached."""
        key = (native, expand, expert_alignment)
        rows = self.row_capacities.get(key)
        if rows is None:
            rows = self.row_capacities[key] = native.row_capacity(expand, expert_alignment)
        return rows

    # NOTES: a fresh dispatch needs a native EpHandle whose device metadata it (re)writes. Handles released by the
    # caller (the EPHandle object and every view of its fields gone) come back here; reusing one is ordered by the
    # stream (its last reader, a combine, was enqueued before the dispatch that rewrites it). At most
    # NATIVE_HANDLE_POOL_SIZE are kept; more are freed (cudaFree, which waits for the device). No cudaMalloc per
    # dispatch in steady-state loops and CUDA-graph capture. symmoe._torch_ep does the same two steps in C (its
    # take_native / give_back_native read these fields; EPHandle.__del__ is its handle_del once it loads).
    def take_native_handle(self):
        pool = self.free_native_handles
        return pool.pop() if pool else self.new_native_handle()

    def give_back_native_handle(self, native):
        pool = self.free_native_handles
        if self.natives and len(pool) < NATIVE_HANDLE_POOL_SIZE:
            pool.append(native)

    def clear(self):
        """Drops the payload buffers and the handle pool (ElasticBuffer.destroy)."""
        self.natives.clear()
        self.row_capacities = {}
        self.free_native_handles = []


class EventHandle:
    """DeepEP's EventHandle: a CUDA event recorded on `stream` (default: the current stream) at construction."""

    def __init__(self, stream=None):
        import torch
        self.event = torch.cuda.Event()
        self.event.record(stream)

    def current_stream_wait(self):
        import torch
        torch.cuda.current_stream().wait_event(self.event)


def cuda_event(event):
    """The torch.cuda.Event inside an EventHandle / EventOverlap (or the event itself)."""
    if isinstance(event, EventOverlap):
        event = event.event
    if isinstance(event, EventHandle):
        event = event.event
    return event


class EventOverlap:
    """DeepEP's EventOverlap: the event of a call made with async_with_compute_stream=True (else None)."""
    # Class defaults: the eager paths return EventOverlap.__new__(EventOverlap), an EventOverlap(None) without the
    # __init__ call (setting an attribute makes it the instance's).
    event = extra_tensors = hook_after_wait = None
    _release_handle_by_call = False

    def __init__(self, event=None, extra_tensors=None):
        self.event = event
        self.extra_tensors = extra_tensors
        self._release_handle_by_call = False
        self.hook_after_wait = None

    def current_stream_wait(self, release_handle=False):
        """The current stream waits for the event (nothing to wait for when there is none)."""
        ev = cuda_event(self.event)
        if ev is not None:
            import torch
            torch.cuda.current_stream().wait_event(ev)
        if self.hook_after_wait is not None:
            hook, self.hook_after_wait = self.hook_after_wait, None
            hook()
        if release_handle:
            self.event = None

    def register_hook_after_wait(self, hook_after_wait):
        if self.hook_after_wait is not None:
            raise RuntimeError("a hook is already registered on this EventOverlap")
        self.hook_after_wait = hook_after_wait

    def __call__(self, release_handle=False):
        self._release_handle_by_call = release_handle
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.event is not None:
            self.current_stream_wait(release_handle=self._release_handle_by_call)
        self._release_handle_by_call = False


_torch_marker = []


def framework_marker(tensor):
    """An empty tensor of the input's framework (views of handle metadata follow it; the input is not retained)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(tensor, torch.Tensor):
        return None
    if not _torch_marker:
        _torch_marker.append(torch.empty(0, device="cpu"))
    return _torch_marker[0]


class EPHandle:
    """The routing metadata of one dispatch on this rank, with DeepEP's EPHandle field names (meanings in
    include/symmoe/reference/dispatch.hpp). Host fields are ints/lists; device fields are tensors over the
    handle's own memory (torch tensors when the dispatch inputs were torch tensors), valid as long as the handle
    lives. Shapes as DeepEP: topk_idx / dst_buffer_slot_idx [num_tokens, K], recv_src_metadata
    [num_recv_tokens, 2 + K] (the worst case R * T_max rows without CPU sync), psum_num_recv_tokens_per_scaleup_rank
    [R], per-local-expert fields [El]. Fields may be reassigned (DeepEP's test trims recv_src_metadata).

    symmoe's record (RECORD, set by EPHandle.of_dispatch for every handle a dispatch returns): owner, the EpState of the
    buffer whose dispatch made it; native, its symmoe._C.EpHandle; payload, the key of the EpBuffer that filled it;
    row_capacity, that dispatch's output rows; num_sms, its num_sms (0: the plan's; combine's default); like, the
    framework marker of its input (device views follow it); filled, True once a dispatch succeeded;
    shared_topk_idx, the caller's topk_idx (do_handle_copy=False) else None; routing, (num_tokens, num_topk,
    do_expand, known rows or -1, expert_alignment) as the native holds them, None until read and again whenever a
    dispatch rewrites the native's counts; topk_idx_ptr, the native's topk_idx address (None until read)."""

    RECORD = ("owner", "native", "payload", "row_capacity", "num_sms", "like", "filled", "shared_topk_idx",
              "routing", "topk_idx_ptr")
    __slots__ = RECORD + ("__dict__", "__weakref__")

    _DEVICE_FIELDS = {  # name -> (dtype, shape function of the handle and its native)
        "num_tokens_per_rank": ("int32", lambda h, n: (n.num_ranks,)),
        "num_tokens_per_expert": ("int32", lambda h, n: (n.num_experts,)),
        "dst_buffer_slot_idx": ("int32", lambda h, n: (n.num_tokens, n.num_topk)),
        "topk_idx": ("int64", lambda h, n: (n.num_tokens, n.num_topk)),
        "psum_num_recv_tokens_per_rank": ("int32", lambda h, n: (n.num_ranks,)),
        "num_unaligned_recv_tokens_per_expert": ("int32", lambda h, n: (n.num_local_experts,)),
        "psum_num_recv_tokens_per_expert": ("int32", lambda h, n: (n.num_local_experts,)),
        "num_recv_tokens_per_expert": ("int32", lambda h, n: (n.num_local_experts,)),
        "recv_src_metadata": ("int32", lambda h, n: (h.num_recv_tokens, 2 + n.num_topk)),
        "device_counts": ("int32", lambda h, n: (2,)),
    }
    _HOST_FIELDS = ("rank", "num_ranks", "do_expand", "num_experts", "num_topk", "expert_alignment",
                    "num_max_tokens_per_rank", "num_tokens", "num_recv_tokens_per_expert_list", "num_local_experts")
    _ALIASES = {"psum_num_recv_tokens_per_scaleup_rank": "psum_num_recv_tokens_per_rank"}  # DeepEP V2 (one domain)

    def __init__(self, buffer):
        """An empty handle of `buffer` (an ElasticBuffer or its EpState) holding a native handle from its pool; a
        dispatch returns filled ones (of_dispatch)."""
        owner = getattr(buffer, "_state", buffer)
        self.owner, self.native, self.payload, self.row_capacity, self.num_sms = owner, None, None, 0, 0
        self.like, self.filled, self.shared_topk_idx, self.routing, self.topk_idx_ptr = None, False, None, None, None
        self.native = owner.take_native_handle()

    @classmethod
    def of_dispatch(cls, owner, native, payload, row_capacity, num_sms, like, shared_topk_idx, routing):
        """The handle of a successful fresh dispatch (every record field set)."""
        h = cls.__new__(cls)
        h.owner, h.native, h.payload, h.row_capacity, h.num_sms = owner, native, payload, row_capacity, num_sms
        h.like, h.filled, h.shared_topk_idx, h.routing, h.topk_idx_ptr = like, True, shared_topk_idx, routing, None
        return h

    def __del__(self):
        # The native handle (and its device metadata) goes back to the buffer's pool. A handle whose record was
        # never completed (a failed construction) has nothing to give back. symmoe._torch_ep, once loaded, replaces
        # this method with the same steps in C (torch_ep.cpp, handle_del): no Python frame per released handle.
        try:
            owner, native = self.owner, self.native
        except AttributeError:
            return
        if owner is not None and native is not None:
            owner.give_back_native_handle(native)

    @property
    def num_recv_tokens(self):
        """Rows received (non-expand); the worst case R * T_max when the dispatch had no CPU sync (DeepEP)."""
        n = self.native.num_recv_tokens
        return n if n >= 0 else self.native.num_ranks * self.native.num_max_tokens_per_rank

    @property
    def num_expanded_tokens(self):
        """Rows of an expand dispatch (with alignment padding); the worst case (the row capacity) without CPU
        sync."""
        n = self.native.num_expanded_tokens
        if n >= 0:
            return n
        h = self.native
        El = h.num_local_experts
        return h.num_ranks * h.num_max_tokens_per_rank * min(h.num_topk, El) + El * (h.expert_alignment - 1)

    def __getattr__(self, name):
        if name in EPHandle.RECORD:  # an unset record slot (a handle under construction)
            raise AttributeError(name)
        name = EPHandle._ALIASES.get(name, name)
        if name in EPHandle._HOST_FIELDS:
            return getattr(self.native, name)
        if name in EPHandle._DEVICE_FIELDS:
            if not self.filled:
                raise RuntimeError(f"EPHandle.{name}: the handle is empty (no dispatch has filled it)")
            if name == "topk_idx" and self.shared_topk_idx is not None:
                return self.shared_topk_idx
            dtype, shape = EPHandle._DEVICE_FIELDS[name]
            view = DeviceView(self.native.ptrs[name], shape(self, self.native), dtype, self.native.device, owner=self)
            return as_framework_like(view, self.like)
        raise AttributeError(name)

    @property
    def is_filled(self):
        return self.filled

    def __repr__(self):
        h = self.native
        return (f"<symmoe.EPHandle rank={h.rank}/{h.num_ranks} expand={h.do_expand} "
                f"num_recv_tokens={h.num_recv_tokens} num_expanded_tokens={h.num_expanded_tokens}>")
