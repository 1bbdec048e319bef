"""The two implementations of ElasticBuffer's eager fast path (symmoe._ep_eager: its Python, or the optional libtorch
extension symmoe._torch_ep) for the GPU tests and timing scripts: choosing one, and seeing which one made a call."""
import contextlib
import sys

import torch

from symmoe import _ep_eager

PATHS = ("python", "torch_ext")


def torch_ext_or_skip():
    """symmoe._torch_ep, loaded and chosen for this torch; pytest.skip when it is not built, a failure when it is
    built but does not load (a stale build, another torch)."""
    import pytest
    previous = _ep_eager.use_native(True)
    try:
        impl = _ep_eager.implementation(torch)
    finally:
        _ep_eager.use_native(previous)
    status = _ep_eager.native_status()
    if status.startswith("not built"):
        pytest.skip(f"symmoe._torch_ep is {status}")
    assert status == "loaded", f"symmoe._torch_ep is built but unusable: {status}"
    assert impl is sys.modules["symmoe._torch_ep"], "symmoe._torch_ep loads but is not chosen for this torch"
    return impl


@contextlib.contextmanager
def eager_path(name):
    """Within: the eager calls go through `name` ('python' or 'torch_ext'); yields that implementation."""
    previous = _ep_eager.use_native(name == "torch_ext")
    try:
        impl = _ep_eager.implementation(torch)
        want = sys.modules.get("symmoe._torch_ep") if name == "torch_ext" else _ep_eager
        assert impl is want, f"eager path {name}: {impl} chosen ({_ep_eager.native_status()})"
        yield impl
    finally:
        _ep_eager.use_native(previous)


class Spy:
    """Wraps an implementation and records what its dispatch / combine returned (None: not the fast path)."""

    def __init__(self, impl):
        self.impl, self.results = impl, []

    def dispatch(self, *args):
        self.results.append(("dispatch", self.impl.dispatch(*args)))
        return self.results[-1][1]

    def combine(self, *args):
        self.results.append(("combine", self.impl.combine(*args)))
        return self.results[-1][1]

    def all_fast(self):
        return bool(self.results) and all(r is not None for _, r in self.results)


@contextlib.contextmanager
def spying(impl):
    """Within: ElasticBuffer's eager calls go to Spy(impl); yields the spy."""
    spy, real, chosen = Spy(impl), _ep_eager.implementation, list(_ep_eager._chosen)
    _ep_eager.implementation = lambda t: spy
    _ep_eager._chosen[:] = [sys.modules.get("torch"), spy]  # symmoe.ep reads the last choice first
    try:
        yield spy
    finally:
        _ep_eager.implementation = real
        _ep_eager._chosen[:] = chosen
