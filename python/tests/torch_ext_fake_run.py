"""symmoe._torch_ep built against the fake libtorch of torch_stub/fake_libtorch.cpp (test_torch_ext_fake.py builds
it and runs this script in its own process, since loading it rebinds ElasticBuffer and EPHandle): the extension's C
entry points ElasticBuffer.dispatch / combine and its fast path against the Python fast path of symmoe._ep_eager, on
fake_torch tensors and the Python stand-ins of symmoe._C.EpBuffer / EpHandle of bench_ep_host.py. Checked: the same
outputs (shapes, dtypes), EPHandle records, stream order, row-capacity cache, handle pool and error clean-up; how the
entry points ended each call; reference counts over a loop; the extension's output layout (the outputs of one call
typed views of one allocation: 256-byte aligned, contiguous, inside it, not overlapping, packed; the allocations of
calls whose outputs are alive never overlapping).

    PYTHONPATH=build/python python3 python/tests/torch_ext_fake_run.py <built _torch_ep module>

Exit status 0 when every check holds; the first failed check is printed."""
import ctypes
import gc
import importlib.util
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_torch  # noqa: E402

sys.modules["torch"] = fake_torch
import symmoe  # noqa: E402
from symmoe import _ep_eager, _ep_types  # noqa: E402
from bench_ep_host import StubEpBuffer, StubNative  # noqa: E402

R, T_MAX, H, K, E, T = 1, 128, 7168, 8, 256, 128


class OddRowsStub(StubEpBuffer):
    """127 rows: output sizes that are not multiples of 256 bytes (the layout checks see the alignment)."""

    def row_capacity(self, expand, alignment):
        return 127

    def dispatch_one(self, *args):
        self.out = args[13:]  # recv_x, recv_sf, recv_topk_idx, recv_topk_weights addresses, rows
        return super().dispatch_one(*args)


class FailingStub(StubEpBuffer):
    fail = False

    def dispatch_one(self, *args):
        if self.fail:
            raise RuntimeError("stub dispatch failed")
        return super().dispatch_one(*args)


def _allocate(shape, name):
    """The fake at::detail::empty_cuda: a tensor with its own allocation `_block` (address, bytes); later
    allocations start past it (the fake allocator never reuses memory)."""
    t = fake_torch.Tensor(shape, fake_torch._DTYPES[name])
    t._block = (t._address, t.numel * t.dtype.itemsize)
    fake_torch.Tensor._next_address += t._block[1] >> 24 << 24
    return t


def _set_sizes(t, shape):
    """The fake TensorImpl::set_sizes_contiguous: shape, contiguous strides, numel."""
    c = fake_torch.Tensor(shape, t.dtype, address=1)
    t.shape, t._strides, t.numel = c.shape, c._strides, c.numel


def _view(owner, name):
    """The fake TensorImpl(Storage(owner.storage()), CUDA, dtype): an empty tensor at the start of owner's
    allocation."""
    t = fake_torch.Tensor((0,), fake_torch._DTYPES[name], address=owner._block[0])
    t._block = owner._block
    return t


def _set_offset(t, elements):
    """The fake TensorImpl::set_storage_offset."""
    t._address = t._block[0] + elements * t.dtype.itemsize


_HOOKS = types.SimpleNamespace(view=_view, set_offset=_set_offset, set_sizes=_set_sizes)


def load(path):
    lib = ctypes.PyDLL(path)
    lib.fake_setup.argtypes = [ctypes.py_object, ctypes.py_object, ctypes.py_object]
    lib.fake_capi.restype = ctypes.py_object
    lib.fake_setup(fake_torch.Tensor, _allocate, _HOOKS)
    spec = importlib.util.spec_from_file_location("symmoe._torch_ep", path)
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    sys.modules["symmoe._torch_ep"] = ext
    ext.init(lib.fake_capi(), _ep_types)
    _ep_eager._native.append(ext)
    _ep_eager._native_why[0] = "loaded"
    for cls in _ep_eager._buffer_classes:
        _ep_eager._bind(ext, cls)
    return ext


def make_buffer():
    buf = symmoe.ElasticBuffer._validation_only(R, T_MAX, H, K, E, use_fp8_dispatch=True)
    buf._state.new_native_handle = StubNative
    buf._state.natives[("fp8", "fp32_per128")] = FailingStub()
    buf._state.natives[("bf16", "none")] = FailingStub()
    return buf


def describe(o):
    if isinstance(o, tuple):
        return tuple(describe(t) for t in o)
    if isinstance(o, fake_torch.Tensor):
        return o.shape, o.dtype.name
    return None if o is None else type(o).__name__


def record(h):
    return tuple((n, type(getattr(h, n)).__name__ if n in ("owner", "native") else getattr(h, n))
                 for n in _ep_types.EPHandle.RECORD)


def run_path(ext, impl, x, sf, xb, idx, w, y):
    """The same calls with `impl` chosen: what they returned and left behind."""
    buf = make_buffer()
    _ep_eager._chosen[:] = [fake_torch, impl]
    before = ext.entry_counts()
    r = buf.dispatch((x, sf), topk_idx=idx, topk_weights=w, do_cpu_sync=False, num_sms=24)
    h = r[3]
    c = buf.combine(y, handle=h, topk_weights=w, do_cpu_sync=False)
    rc = buf.dispatch((x, sf), topk_weights=w, handle=h, num_sms=8)  # cached (do_cpu_sync None with a handle)
    re_ = buf.dispatch(xb, topk_idx=idx, topk_weights=w, do_cpu_sync=False, do_expand=True, expert_alignment=64)
    rows = re_[3].row_capacity
    c2 = buf.combine(fake_torch.Tensor((rows, H), fake_torch.bfloat16), handle=re_[3],
                     topk_weights=fake_torch.Tensor((rows,), fake_torch.float32), do_cpu_sync=False)
    out = dict(dispatch=describe(r), record=record(h), combine=describe(c),
               cached=(describe(rc), rc[3] is h, record(h)), expand=(describe(re_), record(re_[3])),
               combine_expand=describe(c2), last_stream=buf._state.last_stream,
               capacities=sorted((k[1], k[2], v) for k, v in buf._state.row_capacities.items()))
    del r, h, c, rc, re_, c2
    gc.collect()
    out["pool"] = len(buf._state.free_native_handles)
    buf._state.free_native_handles.clear()  # a failing call: its native goes back, the stream order is kept
    buf._state.last_stream = None
    buf._state.natives[("fp8", "fp32_per128")].fail = True
    try:
        buf.dispatch((x, sf), topk_idx=idx, topk_weights=w, do_cpu_sync=False, num_sms=24)
        out["error"] = None
    except RuntimeError as e:
        out["error"] = (str(e), len(buf._state.free_native_handles), buf._state.last_stream)
    after = ext.entry_counts()
    return out, {k: {m: after[k][m] - before[k][m] for m in after[k]} for k in after}


def main():
    ext = load(sys.argv[1])
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    entry = type(symmoe.ElasticBuffer.__dict__["dispatch"]).__name__
    check(entry == "method_descriptor", f"ElasticBuffer.dispatch is a {entry}, not the C entry point")
    check(type(_ep_types.EPHandle.__dict__["__del__"]).__name__ == "method_descriptor", "EPHandle.__del__ not in C")
    x = fake_torch.Tensor((T, H), fake_torch.float8_e4m3fn)
    sf = fake_torch.Tensor((T, H // 128), fake_torch.float32)
    xb = fake_torch.Tensor((T, H), fake_torch.bfloat16)
    idx, w = fake_torch.Tensor((T, K), fake_torch.int64), fake_torch.Tensor((T, K), fake_torch.float32)
    y = fake_torch.Tensor((R * T_MAX, H), fake_torch.bfloat16)
    py_out, py_entries = run_path(ext, _ep_eager, x, sf, xb, idx, w, y)
    ext_out, ext_entries = run_path(ext, ext, x, sf, xb, idx, w, y)
    for k in py_out:
        check(py_out[k] == ext_out[k], f"{k}: Python path {py_out[k]} != extension {ext_out[k]}")
    check(py_out["error"] is not None and py_out["pool"] > 0, f"the calls did not run as meant: {py_out}")
    check(py_entries == {"dispatch": dict(fast=0, general=0, python=4), "combine": dict(fast=0, general=0, python=2)},
          f"Python path's calls: {py_entries}")
    check(ext_entries == {"dispatch": dict(fast=4, general=0, python=0), "combine": dict(fast=2, general=0, python=0)},
          f"extension path's calls: {ext_entries}")

    # The extension's outputs: one allocation per call, every output a 256-byte aligned contiguous view of it, at
    # the first free aligned offset after the one before; the allocations of live calls never overlap.
    buf = make_buffer()
    for key in list(buf._state.natives):
        buf._state.natives[key] = OddRowsStub()
    _ep_eager._chosen[:] = [fake_torch, ext]
    a = buf.dispatch((x, sf), topk_idx=idx, topk_weights=w, do_cpu_sync=False, num_sms=24)
    check(buf._state.natives[("fp8", "fp32_per128")].out == (*(o.data_ptr() for o in (*a[0], a[1], a[2])), 127),
          "dispatch_one was not given the outputs' addresses")
    b = buf.dispatch((x, sf), topk_idx=idx, topk_weights=w, do_cpu_sync=False, num_sms=24)
    e = buf.dispatch(xb, topk_idx=idx, topk_weights=w, do_cpu_sync=False, do_expand=True, expert_alignment=64)
    ca = buf.combine(y, handle=a[3], topk_weights=w, do_cpu_sync=False)
    cb = buf.combine(y, handle=b[3], do_cpu_sync=False)
    calls = (("dispatch", [*a[0], a[1], a[2]]), ("second dispatch", [*b[0], b[1], b[2]]),
             ("expand dispatch", [e[0], e[2]]), ("combine with weights", list(ca[:2])), ("combine", [cb[0]]))
    blocks = []
    for what, outs in calls:
        check(all(isinstance(o, fake_torch.Tensor) for o in outs), f"{what}: outputs {describe(tuple(outs))}")
        check(len({id(o._block) for o in outs}) == 1, f"{what}: the outputs are not from one allocation")
        base, size = outs[0]._block
        blocks.append((base, size, what))
        spans = [(o.data_ptr(), o.data_ptr() + o.numel * o.dtype.itemsize) for o in outs]
        check(all(o.is_contiguous() for o in outs), f"{what}: an output is not contiguous")
        check(all(p % 256 == 0 for p, _ in spans), f"{what}: an output not 256-byte aligned: {spans}")
        check(spans[0][0] == base, f"{what}: the first output is not at the allocation's start")
        packed = [base]  # each output at the first 256-byte boundary after the one before: in order, no overlap
        for _, end in spans[:-1]:
            packed.append(-(-end // 256) * 256)
        check([p for p, _ in spans] == packed, f"{what}: offsets {[p - base for p, _ in spans]} not packed")
        want = spans[0][1] - base if len(outs) == 1 else -(-(spans[-1][1] - base) // 256) * 256
        check(size == want, f"{what}: allocation of {size} bytes for outputs ending at {spans[-1][1] - base}")
    blocks.sort()
    for (b0, s0, w0), (b1, _, w1) in zip(blocks, blocks[1:]):
        check(b0 + s0 <= b1, f"the allocations of {w0} and {w1} overlap while both are alive")
    del a, b, e, ca, cb

    # Arguments the entry points leave to the Python functions: the same errors as Python's.
    buf = make_buffer()
    for kwargs, want in ((dict(bogus=1), TypeError), (dict(x=1), TypeError),
                         (dict(topk_idx=idx, topk_weights=w, do_cpu_sync=False, num_experts=E + 1), ValueError)):
        try:
            buf.dispatch((x, sf), **kwargs)
            check(False, f"dispatch({kwargs}) did not raise")
        except want:
            pass
    try:
        buf.combine(y, handle=object(), do_cpu_sync=False)
        check(False, "combine with a foreign handle did not raise")
    except ValueError:
        pass

    # Steady loop through the C entry points: no reference leaks of the inputs, the state or the natives.
    buf = make_buffer()
    gc.collect()
    refs = [sys.getrefcount(o) for o in (idx, w, x, buf._state, StubNative)]
    for _ in range(2000):
        r = buf.dispatch((x, sf), topk_idx=idx, topk_weights=w, do_cpu_sync=False, num_sms=24)
        buf.combine(y, handle=r[3], do_cpu_sync=False)
        del r
    gc.collect()
    after = [sys.getrefcount(o) for o in (idx, w, x, buf._state, StubNative)]
    check(after[:4] == refs[:4] and after[4] - refs[4] == len(buf._state.free_native_handles),
          f"reference counts {refs} -> {after} (pool {len(buf._state.free_native_handles)})")
    for f in failures:
        print("FAILED:", f)
    verdict = "ok" if not failures else f"{len(failures)} failed"
    print(f"torch_ext_fake_run: {verdict} (entry calls {ext.entry_counts()})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
