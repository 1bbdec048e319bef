"""symmoe._torch_ep (ElasticBuffer's eager dispatch / combine in C++ over libtorch) against symmoe._ep_eager's Python
on the same inputs, bitwise: outputs (their valid rows), dtypes, shapes, None positions, the EPHandle's fields and
device metadata, EventOverlap, the buffer's stream order; the extension's outputs of one call from one allocation
(contiguous, 256-byte aligned, not overlapping); arguments the fast path leaves to the general path give
the general path's errors; errors of the call come through symmoe._C's C interface as symmoe._C's. Skipped (with the
reason) only when the extension is not built (python/tests_gpu/build_torch_ext.sh)."""
import ctypes

import pytest
import torch

import symmoe
from symmoe import _C
from symmoe import reference as ref
from eager_paths import eager_path, spying, torch_ext_or_skip
from golden import assert_bitwise, bits

T_MAX, H, K, E = 96, 512, 8, 32
_META = ("num_tokens_per_rank", "num_tokens_per_expert", "dst_buffer_slot_idx", "topk_idx",
         "psum_num_recv_tokens_per_rank", "num_unaligned_recv_tokens_per_expert", "psum_num_recv_tokens_per_expert",
         "num_recv_tokens_per_expert", "device_counts")
_HOST = ("rank", "num_ranks", "do_expand", "num_experts", "num_topk", "expert_alignment", "num_max_tokens_per_rank",
         "num_tokens", "num_recv_tokens", "num_expanded_tokens")


@pytest.fixture(scope="module")
def ext():
    return torch_ext_or_skip()


@pytest.fixture(scope="module")
def buffers():
    return {fp8: symmoe.ElasticBuffer(None, num_max_tokens_per_rank=T_MAX, hidden=H, num_topk=K, num_experts=E,
                                      use_fp8_dispatch=fp8) for fp8 in (False, True)}


def inputs(t, seed, scales):
    """(payload, topk_idx, topk_weights): bf16 x, or FP8 bytes with scales of `scales` (random bits: EP moves
    bytes)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    idx, w = ref.routing(t, E, K, kind="zipf", mask_prob=0.2, seed=seed)
    idx[0, :] = -1  # one token routed nowhere
    w[0, :] = 0
    idx, w = torch.from_numpy(idx).cuda(), torch.from_numpy(w).cuda()
    if scales is None:
        return torch.randn(t, H, device="cuda", generator=g).to(torch.bfloat16), idx, w
    x = torch.randint(0, 256, (t, H), device="cuda", generator=g, dtype=torch.uint8).view(torch.float8_e4m3fn)
    if scales == "fp32_per128":
        sf = torch.rand(t, H // 128, device="cuda", generator=g) + 0.5
    else:  # UE8M0 bytes packed four per int32: per 32 channels H/32 bytes, per 128 ceil(H/128 / 4) int32
        cols = H // 128 if scales == "ue8m0_per32" else -(-H // 512)
        sf = torch.randint(-2**31, 2**31 - 1, (t, cols), device="cuda", generator=g, dtype=torch.int32)
    return (x, sf), idx, w


def warm(buf, payload, idx, w, expand, alignment):
    """General-path calls first: the payload's symmetric buffer, the expand outputs, torch's stream getter."""
    out = buf.dispatch(payload, topk_idx=idx, topk_weights=w, do_expand=expand, expert_alignment=alignment)
    rows = (out[0][0] if isinstance(out[0], tuple) else out[0]).shape[0]
    buf.combine(torch.zeros(rows, H, device="cuda", dtype=torch.bfloat16), handle=out[3])
    torch.cuda.synchronize()


def run(buf, path, payload, idx, w, expand, alignment, handle_copy, combine_weights, cpu_sync_combine):
    """A fresh dispatch without CPU sync, a cached dispatch of its handle, a combine: every call through `path`'s
    fast path (asserted). Returns the results and the buffer's EpState.last_stream."""
    with eager_path(path) as impl, spying(impl) as spy:
        fresh = buf.dispatch(payload, topk_idx=idx, topk_weights=w, do_cpu_sync=False, do_expand=expand,
                             expert_alignment=alignment, do_handle_copy=handle_copy)
        cached = buf.dispatch(payload, topk_weights=w, handle=fresh[3]) if handle_copy else None
        rows = (fresh[0][0] if isinstance(fresh[0], tuple) else fresh[0]).shape[0]
        y = (torch.arange(rows * H, device="cuda", dtype=torch.float32).reshape(rows, H) % 251 - 125).to(
            torch.bfloat16)
        comb = buf.combine(y, handle=fresh[3], topk_weights=fresh[2] if combine_weights else None,
                           do_cpu_sync=cpu_sync_combine) if handle_copy else None
        assert spy.all_fast(), f"{path}: a call left the fast path: {[r is None for _, r in spy.results]}"
        assert len(spy.results) == (3 if handle_copy else 1)
    torch.cuda.synchronize()
    buf.synchronize()
    return fresh, cached, comb, buf._state.last_stream


def same_tensor(a, b, rows, what):
    assert (a is None) == (b is None), what
    if a is None:
        return
    assert a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride() and a.device == b.device, what
    assert a.data_ptr() != b.data_ptr(), f"{what}: the two paths returned the same memory"
    assert_bitwise(bits(a[:rows]), bits(b[:rows]), what)


def same_dispatch(a, b, what):
    (x_a, idx_a, w_a, h_a, ev_a), (x_b, idx_b, w_b, h_b, ev_b) = a, b
    assert type(x_a) is type(x_b), what
    n = int(h_a.device_counts[1 if h_a.do_expand else 0])  # valid rows (no CPU sync: the rest is capacity)
    assert n == int(h_b.device_counts[1 if h_b.do_expand else 0]), what
    for i, (t_a, t_b) in enumerate(zip(x_a, x_b) if isinstance(x_a, tuple) else [(x_a, x_b)]):
        same_tensor(t_a, t_b, n, f"{what}: recv_x[{i}]")
    same_tensor(idx_a, idx_b, n, f"{what}: recv_topk_idx")
    same_tensor(w_a, w_b, n, f"{what}: recv_topk_weights")
    assert type(h_a) is type(h_b) is symmoe.EPHandle and h_a is not h_b, what
    # EPHandle's record (symmoe._ep_types): every field equal, the objects identical, but topk_idx_ptr, a cache of
    # the Python path (the extension reads the native handle)
    for field in symmoe.EPHandle.RECORD:
        a, b = getattr(h_a, field), getattr(h_b, field)
        if field in ("owner", "like", "shared_topk_idx"):
            assert a is b, f"{what}: handle.{field}"
        elif field == "native":
            assert type(a) is type(b) and a is not b, f"{what}: handle.native"
        elif field != "topk_idx_ptr":
            assert a == b, f"{what}: handle.{field} {a!r} != {b!r}"
    assert h_a.__dict__ == h_b.__dict__ == {}, f"{what}: attributes outside the record"
    for field in ("is_filled", "num_recv_tokens", "num_expanded_tokens"):
        assert getattr(h_a, field) == getattr(h_b, field), f"{what}: handle.{field}"
    for field in _HOST:
        assert getattr(h_a.native, field) == getattr(h_b.native, field), f"{what}: handle.native.{field}"
    for field in _META:
        assert_bitwise(bits(getattr(h_a, field)), bits(getattr(h_b, field)), f"{what}: handle.{field}")
    assert_bitwise(bits(h_a.recv_src_metadata)[:n], bits(h_b.recv_src_metadata)[:n], f"{what}: recv_src_metadata")
    assert type(ev_a) is type(ev_b) is symmoe.EventOverlap and ev_a.event is None and ev_b.event is None, what


def one_allocation(outputs, what):
    """The extension's outputs of one call: one storage (torch's caching allocator, one block), each output a
    contiguous tensor of its own at a 256-byte aligned offset, inside the storage, overlapping none of the others
    (written one after the other with distinct bytes, each keeps its own), record_stream accepted."""
    outs = [o for o in outputs if o is not None]
    base = outs[0].untyped_storage().data_ptr()
    size = outs[0].untyped_storage().nbytes()
    spans = []
    for o in outs:
        assert o.is_contiguous() and o.device == outs[0].device and o.untyped_storage().data_ptr() == base, what
        assert o.data_ptr() % 256 == 0 and o._base is None, f"{what}: {o.data_ptr():#x} {o._base}"
        spans.append((o.data_ptr(), o.data_ptr() + o.numel() * o.element_size()))
    spans.sort()
    assert spans[0][0] >= base and spans[-1][1] <= base + size, f"{what}: outside the storage"
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:])), f"{what}: overlapping {spans}"
    side = torch.cuda.Stream()
    for i, o in enumerate(outs):
        o.record_stream(side)
        o.view(-1).view(torch.uint8).fill_(i + 1)
    for i, o in enumerate(outs):
        assert bool((o.view(-1).view(torch.uint8) == i + 1).all()), f"{what}: output {i} overwritten by another"


@pytest.mark.parametrize("scales", [None, "fp32_per128", "ue8m0_per32", "ue8m0_per128"])
@pytest.mark.parametrize("expand, alignment", [(False, None), (True, 1), (True, 32)])
@pytest.mark.parametrize("combine_weights, cpu_sync_combine", [(True, False), (False, True)])
def test_extension_matches_python_bitwise(ext, buffers, scales, expand, alignment, combine_weights,
                                          cpu_sync_combine):
    buf = buffers[scales is not None]
    payload, idx, w = inputs(T_MAX - 7, 11 + expand + (alignment or 0), scales)
    args = (payload, idx, w, expand, alignment, True, combine_weights, cpu_sync_combine)
    warm(buf, payload, idx, w, expand, alignment)
    py = run(buf, "python", *args)
    cc = run(buf, "torch_ext", *args)
    same_dispatch(py[0], cc[0], "fresh dispatch")
    same_dispatch(py[1], cc[1], "cached dispatch")
    assert py[1][3] is py[0][3] and cc[1][3] is cc[0][3]  # a cached dispatch returns its handle
    for i, what in enumerate(("combined_x", "combined_topk_weights")):
        same_tensor(py[2][i], cc[2][i], H * T_MAX, what)
    assert type(py[2][2]) is type(cc[2][2]) is symmoe.EventOverlap
    assert py[3] == cc[3] == (torch.cuda.current_stream().cuda_stream or 1)  # last_stream: the compute stream
    for what, (x, idx, w) in (("fresh", cc[0][:3]), ("cached", cc[1][:3])):  # after the bitwise comparisons
        one_allocation([*(x if isinstance(x, tuple) else (x,)), idx, w], f"extension's {what} dispatch")
    one_allocation(cc[2][:2], "extension's combine")
    torch.cuda.synchronize()


def test_shared_topk_idx_handle(ext, buffers):
    """do_handle_copy=False: the fresh dispatch takes the fast path and shares the caller's topk_idx."""
    buf = buffers[False]
    payload, idx, w = inputs(T_MAX - 3, 5, None)
    warm(buf, payload, idx, w, False, None)
    py = run(buf, "python", payload, idx, w, False, None, False, True, False)
    cc = run(buf, "torch_ext", payload, idx, w, False, None, False, True, False)
    same_dispatch(py[0], cc[0], "shared topk_idx")
    assert py[0][3].shared_topk_idx is idx and cc[0][3].shared_topk_idx is idx


def test_refused_arguments_give_the_general_paths_errors(ext, buffers):
    buf = buffers[False]
    x, idx, w = inputs(16, 6, None)
    assert ext.dispatch(buf._state, x, idx.int(), w, None, 0, False, True, True, None) is None
    assert ext.dispatch(buf._state, x.cpu(), idx, w, None, 0, False, True, True, None) is None
    assert ext.dispatch(buf._state, x, idx, w, 2000, 0, False, True, True, None) is None
    with eager_path("torch_ext"):
        with pytest.raises(TypeError, match="topk_idx must have dtype int64"):
            buf.dispatch(x, topk_idx=idx.int(), topk_weights=w, do_cpu_sync=False)
        with pytest.raises(ValueError, match="must be on cuda"):
            buf.dispatch(x.cpu(), topk_idx=idx, topk_weights=w, do_cpu_sync=False)
        with pytest.raises(ValueError, match="expert_alignment must be <= 1024"):
            buf.dispatch(x, topk_idx=idx, topk_weights=w, do_cpu_sync=False, expert_alignment=2000)
        handle = buf.dispatch(x, topk_idx=idx, topk_weights=w, do_cpu_sync=False)[3]
        rows = handle.row_capacity
        with pytest.raises(ValueError, match="x has"):
            buf.combine(torch.zeros(rows + 1, H, device="cuda", dtype=torch.bfloat16), handle=handle)
    buf.synchronize()


def test_bad_routing_surfaces_at_synchronize_on_both_paths(ext):
    x, idx, w = inputs(16, 7, None)
    bad = idx.clone()
    bad[3, 2] = E + 7
    for path in ("python", "torch_ext"):
        buf = symmoe.ElasticBuffer(None, num_max_tokens_per_rank=T_MAX, hidden=H, num_topk=K, num_experts=E)
        warm(buf, x, idx, w, False, None)
        with eager_path(path) as impl, spying(impl) as spy:
            buf.dispatch(x, topk_idx=bad, topk_weights=w, do_cpu_sync=False)
        assert spy.all_fast(), path
        with pytest.raises(symmoe.Error, match="token 3"):
            buf.synchronize()
        buf.destroy()


def test_c_interface_raises_symmoe_errors(ext, buffers):
    """An error the C++ call throws comes through symmoe._C._ep_capi as the symmoe._C.Error the binding raises."""
    buf = buffers[False]
    x, idx, w = inputs(16, 8, None)
    handle = buf.dispatch(x, topk_idx=idx, topk_weights=w)[3]
    impl = buf._state.natives[("bf16", "none")]
    with pytest.raises(symmoe.Error) as binding:
        impl.dispatch_one(T_MAX + 1, x.data_ptr(), 0, idx.data_ptr(), w.data_ptr(), 1, handle.native, False, 1, True,
                          False, 0, False)
    api = _capi()
    call = _DispatchCall(num_tokens=T_MAX + 1, x=x.data_ptr(), topk_idx=idx.data_ptr(), topk_weights=w.data_ptr(),
                         stream=1, expert_alignment=1, zero_padding=1)
    rows, cap = ctypes.c_int(), ctypes.c_int()
    with pytest.raises(symmoe.Error) as capi:
        api.dispatch_one(impl, handle.native, ctypes.byref(call), ctypes.byref(rows), ctypes.byref(cap))
    assert str(capi.value) == str(binding.value) and capi.value.component == binding.value.component
    with pytest.raises(TypeError):
        api.dispatch_one(handle.native, impl, ctypes.byref(call), ctypes.byref(rows), ctypes.byref(cap))


class _DispatchCall(ctypes.Structure):  # python/src/ep_capi.hpp, DispatchCall
    _fields_ = ([("num_tokens", ctypes.c_int)]
                + [(f, ctypes.c_size_t) for f in ("x", "x_scales", "topk_idx", "topk_weights", "stream")]
                + [(f, ctypes.c_int) for f in ("expand", "expert_alignment", "zero_padding", "cached", "num_sms",
                                               "cpu_sync")]
                + [(f, ctypes.c_size_t) for f in ("recv_x_out", "recv_scales_out", "recv_topk_idx_out",
                                                  "recv_topk_weights_out")]
                + [("out_rows", ctypes.c_int)])


def _capi():
    """symmoe._C._ep_capi's table through ctypes (PYFUNCTYPE: the GIL held, the Python error raised on -1)."""
    f = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_void_p)

    class Api(ctypes.Structure):
        _fields_ = [("version", ctypes.c_int), ("struct_size", ctypes.c_int), ("handle_info", ctypes.c_void_p),
                    ("row_capacity", ctypes.c_void_p), ("dispatch_one", f), ("combine_one", ctypes.c_void_p)]

    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return Api.from_address(get(_C._ep_capi, b"symmoe._C._ep_capi"))
