"""The eager fast path of ElasticBuffer.dispatch (fresh or cached, no CPU sync) and combine: torch tensors, outputs
allocated per call on the compute stream, no events, called from the stream of the previous EP call. Same checks,
outputs, handle and stream order as the general path in symmoe.ep, in a few C calls per tensor and no Python call
per check. Anything else, and any argument that a check would refuse, returns None before anything is allocated or
enqueued: the general path then makes the call and words the error.

Both functions take the buffer's EpState and fill / read EPHandle's record (symmoe._ep_types: the one definition of
the state, the handle, the scale-format rule and the output shapes); this module does not import symmoe.ep.

NOTES: hot path (the Python of a dispatch + combine pair within 10 us of the C++ call). The remaining torch calls are
the floor: per input tensor is_cuda, get_device, is_contiguous, dtype, shape, data_ptr; per output torch.empty and
data_ptr. python/tests/bench_ep_host.py measures the Python around them.
The same two functions in C++ (symmoe._torch_ep, python/src/torch_ext/torch_ep.cpp: the outputs of one call from one
allocation of torch's caching allocator, sharing its storage; no Python in between) are used instead when that
optional libtorch extension is built (python/tests_gpu/build_torch_ext.sh): implementation() picks one per torch
module, native_status() says which and why. Once it loads, ElasticBuffer.dispatch / combine themselves are its C entry
points (bind_buffer_class), so an eager call runs no Python frame at all.
"""
import importlib
import sys
import warnings

from . import _C, _checks, _ep_types
from ._ep_types import (BF16_PAYLOAD, EPHandle, EventOverlap, FP8_X_DTYPES, MAX_EXPERT_ALIGNMENT, framework_marker,
                        new_dispatch_outputs)


def _routing(handle):
    """(num_tokens, num_topk, do_expand, known rows (-1: unknown), expert_alignment) of a filled handle, read from
    its native handle once after each dispatch that writes it (the general path resets EPHandle.routing)."""
    info = handle.routing
    if info is None:
        h = handle.native
        info = handle.routing = (h.num_tokens, h.num_topk, h.do_expand,
                                 h.num_expanded_tokens if h.do_expand else h.num_recv_tokens, h.expert_alignment)
    return info


def dispatch(state, x, topk_idx, topk_weights, expert_alignment, num_sms, do_expand, do_zero_padding, do_handle_copy,
             handle):
    """ElasticBuffer.dispatch(x, topk_idx, topk_weights, do_cpu_sync=False, ...) of the buffer whose EpState is
    `state`, fresh (handle None) or cached (topk_idx None, a handle whose rows are unknown), with the defaults of the
    other arguments, or None (not this case, or an argument the general path refuses)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    tensor, name, dev, H = torch.Tensor, _checks.torch_dtype_name, state.device, state.hidden
    if type(x) is tuple:
        if len(x) != 2:
            return None
        x, sf = x
        if not (isinstance(sf, tensor) and sf.is_cuda and sf.get_device() == dev and sf.is_contiguous()):
            return None
        sf_shape, sf_dtype = sf.shape, sf.dtype
        if len(sf_shape) != 2:
            return None
        sf_cols = sf_shape[1]
        key = state.scale_formats.get((name(sf_dtype), sf_cols))
        if key is None or not isinstance(x, tensor):
            return None
        x_dtype = x.dtype
        if name(x_dtype) not in FP8_X_DTYPES:
            return None
    else:
        sf, sf_shape, sf_dtype, sf_cols = None, None, None, 0
        key = BF16_PAYLOAD
        if not isinstance(x, tensor):
            return None
        x_dtype = x.dtype
        if name(x_dtype) != "bfloat16":
            return None
    # Each tensor: a contiguous CUDA tensor on this rank's GPU (dtypes and shapes below); written out, not a call.
    if not (isinstance(topk_weights, tensor) and x.is_cuda and x.get_device() == dev and x.is_contiguous()
            and topk_weights.is_cuda and topk_weights.get_device() == dev and topk_weights.is_contiguous()):
        return None
    x_shape = x.shape
    if len(x_shape) != 2 or x_shape[1] != H:
        return None
    T = x_shape[0]
    cached = handle is not None
    if cached:  # the handle's routing, expand mode and alignment
        if (topk_idx is not None or not isinstance(handle, EPHandle) or handle.owner is not state
                or not handle.filled or handle.shared_topk_idx is not None):
            return None
        num_tokens, K, expand, known, alignment = _routing(handle)
        if known >= 0 or num_tokens != T or (expert_alignment is not None and expert_alignment != alignment):
            return None  # rows known: the general path copies exactly those
        expert_alignment, idx_ptr = alignment, handle.topk_idx_ptr
        if idx_ptr is None:
            idx_ptr = handle.topk_idx_ptr = handle.native.ptrs["topk_idx"]
    else:
        K, expand = state.num_topk, bool(do_expand)
        if not (isinstance(topk_idx, tensor) and topk_idx.is_cuda and topk_idx.get_device() == dev
                and topk_idx.is_contiguous() and name(topk_idx.dtype) == "int64" and topk_idx.shape == (T, K)):
            return None
        if expert_alignment is None:
            expert_alignment = 1
        elif type(expert_alignment) is not int or not 1 <= expert_alignment <= MAX_EXPERT_ALIGNMENT:
            return None
        idx_ptr = None
    if (T > state.num_max_tokens_per_rank or K == 0 or (sf is not None and sf_shape[0] != T)
            or name(topk_weights.dtype) != "float32" or topk_weights.shape != (T, K)):
        return None
    if type(num_sms) is not int or num_sms < 0 or state.num_experts is None or state.num_topk == 0:
        return None
    impl = state.natives.get(key)
    if impl is None:  # the general path allocates the payload's buffer
        return None
    stream = _checks.raw_stream_getter(torch)(dev) or _checks.CUDA_STREAM_LEGACY
    last = state.last_stream
    if last is not None and last != stream:  # ordered after another stream (or graph capture): general path
        return None
    capacity = state.row_capacities.get((impl, expand, expert_alignment))  # inline: hot path
    if capacity is None:
        capacity = state.row_capacity(impl, expand, expert_alignment)
    device = state.torch_device
    if device is None:
        device = state.torch_device = x.device
    marker = _ep_types._torch_marker
    marker = marker[0] if marker else framework_marker(x)
    native = None
    try:
        if cached:
            handle.like = marker
        recv_x, recv_sf, recv_idx, recv_w = new_dispatch_outputs(torch.empty, capacity, H, x_dtype, sf_dtype, sf_cols,
                                                                 K, expand, True, device, torch.int64, torch.float32)
        if cached:
            native = handle.native
        else:
            native, idx_ptr = state.take_native_handle(), topk_idx.data_ptr()
        result = impl.dispatch_one(T, x.data_ptr(), sf.data_ptr() if sf is not None else 0, idx_ptr,
                                   topk_weights.data_ptr(), stream, native, expand, expert_alignment,
                                   bool(do_zero_padding), cached, num_sms, False, recv_x.data_ptr(),
                                   recv_sf.data_ptr() if sf is not None else 0,
                                   0 if expand else recv_idx.data_ptr(), recv_w.data_ptr(), capacity)
    except BaseException:
        state.last_stream = stream
        if native is not None and not cached:
            state.give_back_native_handle(native)
        raise
    state.last_stream = stream
    if cached:  # a cached dispatch without CPU sync leaves the handle's counts as they were (routing holds)
        handle.row_capacity = result[5]
    else:
        handle = EPHandle.of_dispatch(state, native, key, result[5], num_sms, marker,
                                      None if do_handle_copy else topk_idx, (T, K, expand, -1, expert_alignment))
    return ((recv_x, recv_sf) if sf is not None else recv_x), recv_idx, recv_w, handle, EventOverlap.__new__(
        EventOverlap)


def combine(state, x, handle, topk_weights, num_sms, do_cpu_sync):
    """ElasticBuffer.combine(x, handle, topk_weights, num_sms=num_sms, do_cpu_sync=do_cpu_sync) of the buffer whose
    EpState is `state`, without biases, events or reduce_local_experts, or None (not this case, or an argument the
    general path refuses)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(x, torch.Tensor) or not isinstance(handle, EPHandle):
        return None
    if handle.owner is not state or not handle.filled or handle.shared_topk_idx is not None:
        return None
    info = handle.routing
    T, K, expand, known, _ = info if info is not None else _routing(handle)
    dev, H, name = state.device, state.hidden, _checks.torch_dtype_name
    if not (x.is_cuda and x.get_device() == dev and x.is_contiguous()) or name(x.dtype) != "bfloat16":
        return None
    x_shape = x.shape
    if len(x_shape) != 2 or x_shape[1] != H:
        return None
    rows = x_shape[0]
    if rows > handle.row_capacity or (known >= 0 and rows < known):
        return None
    w_ptr = 0
    if topk_weights is not None:
        if (not isinstance(topk_weights, torch.Tensor) or not topk_weights.is_cuda
                or topk_weights.get_device() != dev or not topk_weights.is_contiguous()
                or name(topk_weights.dtype) != "float32"
                or topk_weights.shape != ((rows,) if expand else (rows, K))):
            return None
        w_ptr = topk_weights.data_ptr()
    if type(num_sms) is not int or num_sms < 0:
        return None
    impl = state.natives.get(handle.payload)
    if impl is None:
        return None
    stream = _checks.raw_stream_getter(torch)(dev) or _checks.CUDA_STREAM_LEGACY
    last = state.last_stream
    if last is not None and last != stream:
        return None
    device = state.torch_device
    if device is None:
        device = state.torch_device = x.device
    try:
        combined_x = torch.empty((T, H), dtype=torch.bfloat16, device=device)
        combined_w = torch.empty((T, K), dtype=torch.float32, device=device) if topk_weights is not None else None
        impl.combine_one(x.data_ptr(), w_ptr, 0, 0, stream, handle.native, expand and state.allow_multiple_reduction,
                         num_sms or handle.num_sms, bool(do_cpu_sync), combined_x.data_ptr(),
                         combined_w.data_ptr() if combined_w is not None else 0)
    except BaseException:
        state.last_stream = stream
        raise
    state.last_stream = stream
    return combined_x, combined_w, EventOverlap.__new__(EventOverlap)


# ---- the implementation: symmoe._torch_ep when it is built and usable, else the functions above ----
# NOTES: chosen once per torch module object (the CPU tests swap a fake torch in and out of sys.modules): the
# extension only for the real torch it was built against (its tensor_type() is that torch.Tensor).
_NATIVE_NAME = __name__.rpartition(".")[0] + "._torch_ep"
_native = []  # [module or None] once an import was tried
_buffer_classes = []  # classes whose dispatch / combine the extension's C entry points take (bind_buffer_class)
_native_why = ["not tried yet (no eager call with torch imported)"]
_use_native = [True]
_chosen = [object(), None]  # (torch module, implementation) of the last choice; symmoe.ep reads it per call
# (updated in place: the list object is never replaced)


def implementation(torch):
    """The module whose dispatch / combine make the eager calls for `torch` (sys.modules' torch, or None):
    symmoe._torch_ep, or this module."""
    if torch is _chosen[0]:
        return _chosen[1]
    impl = sys.modules[__name__]
    if torch is not None and _use_native[0]:
        native = _load_native()
        if native is not None and native.tensor_type() is getattr(torch, "Tensor", None):
            impl = native
    _chosen[:] = [torch, impl]
    return impl


def use_native(flag):
    """Whether the extension may be used (tests and timing compare both paths); returns the previous setting."""
    previous, _use_native[0] = _use_native[0], bool(flag)
    _chosen[:] = [object(), None]
    return previous


def bind_buffer_class(cls):
    """symmoe.ep registers ElasticBuffer here (this module does not import symmoe.ep). Once the extension loads,
    cls.dispatch / cls.combine become its C entry points (method descriptors): they evaluate the same fast-path
    condition as cls._dispatch_python / _combine_python, call the extension's dispatch / combine while it is the
    chosen implementation for sys.modules' torch (_chosen), then cls._dispatch_general / _combine_general when it
    returns None, and hand every other call (another choice, unusual arguments) to the Python functions unchanged:
    no Python frame in an eager call. Their signatures (inspect.signature) are the Python functions'."""
    if cls not in _buffer_classes:
        _buffer_classes.append(cls)
    if _native and _native[0] is not None:
        _bind(_native[0], cls)


def _text_signature(name, fn):
    """`name(<fn's signature, self as $self>)` + the docstring: a C method's __text_signature__ and __doc__."""
    import inspect
    sig = str(inspect.signature(fn))
    assert sig.startswith("(self"), sig
    return f"{name}($self{sig[len('(self'):]}\n--\n\n{inspect.getdoc(fn) or ''}"


def _bind(module, cls):
    dispatch_m, combine_m = module.bind_buffer(cls, _chosen, module,
                                               _text_signature("dispatch", cls._dispatch_python),
                                               _text_signature("combine", cls._combine_python))
    cls.dispatch, cls.combine = dispatch_m, combine_m


def native_status():
    """'loaded', or why symmoe._torch_ep is not used ('not built', or the import / init error)."""
    return _native_why[0]


def _load_native():
    """symmoe._torch_ep, imported and bound to symmoe._C once; None (and the reason in native_status()) when it is
    not built or does not load. Tried only once the real torch is imported (its torch._C loaded): the extension
    links against libtorch."""
    if _native:
        return _native[0]
    if "torch._C" not in sys.modules:
        return None
    module = None
    try:
        module = importlib.import_module(_NATIVE_NAME)
        module.init(_C._ep_capi, _ep_types)
        for cls in _buffer_classes:
            _bind(module, cls)
        _native_why[0] = "loaded"
    except ModuleNotFoundError as e:
        if e.name != _NATIVE_NAME:
            raise
        module, _native_why[0] = None, "not built (python/tests_gpu/build_torch_ext.sh builds it)"
    except Exception as e:  # built but unusable (another torch, a stale build): the Python path, said once
        module, _native_why[0] = None, f"{_NATIVE_NAME} does not load: {type(e).__name__}: {e}"
        warnings.warn(f"{_native_why[0]}; using the Python path", RuntimeWarning, stacklevel=3)
    _native.append(module)
    return module
