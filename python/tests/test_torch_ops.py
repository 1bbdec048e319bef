"""symmoe.torch_ops on the CPU, with fake_torch standing in for torch (custom ops become plain calls, their fake
implementations kept aside): the fused-layer ops symmoe::mega_moe (FP8 weights) and symmoe::mega_moe_fp4 (FP4
triples) are defined with their fake implementations, copy the call's inputs into the layer's buffer, pass their
arguments to fp8_mega_moe / fp8_fp4_mega_moe in the right places (a valid call passes every check of the layer and
stops at the missing GPU runtime) and map activation_clamp <= 0 to None. The GPU half, torch.compile included, is
python/tests_gpu/test_torch_compile.py."""
import importlib
import sys

import pytest

import fake_torch as torch

import symmoe

R, E, T_MAX, K, H, I = 2, 32, 64, 6, 512, 256
EL = E // R
T = 24


class InputView:
    """A buffer input view: buf.x[:t].copy_(src) is logged as (name, t, src)."""

    def __init__(self, name, log):
        self.name, self.log = name, log

    def __getitem__(self, rows):
        view = self

        class Rows:
            def copy_(self, src):
                view.log.append((view.name, rows.stop, src))
        return Rows()


@pytest.fixture
def ops(monkeypatch):
    torch.install(monkeypatch)
    sys.modules.pop("symmoe.torch_ops", None)
    module = importlib.import_module("symmoe.torch_ops")
    yield module
    sys.modules.pop("symmoe.torch_ops", None)  # defined over fake_torch: never reused
    if "torch_ops" in vars(symmoe):
        delattr(symmoe, "torch_ops")


@pytest.fixture
def layer(ops):
    buf = symmoe.SymmBuffer._validation_only(R, E, T_MAX, K, H, I)
    log = []
    buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights = (InputView(n, log)
                                                       for n in ("x", "x_sf", "topk_idx", "topk_weights"))
    layer_id = ops.register_mega_layer(buf)
    yield buf, layer_id, log
    ops.unregister(layer_id)


def inputs(t=T):
    return (torch.Tensor((t, H), torch.float8_e4m3fn), torch.Tensor((t, H // 128), torch.float32),
            torch.Tensor((t, K), torch.int64), torch.Tensor((t, K), torch.float32))


def fp8_weights():
    return (torch.Tensor((EL, 2 * I, H), torch.float8_e4m3fn), torch.Tensor((EL, I // 128, H // 128, 2), torch.float32),
            torch.Tensor((EL, H, I), torch.float8_e4m3fn), torch.Tensor((EL, H // 128, I // 128), torch.float32))


def fp4_weights():
    """w1, w1_codes, w1_base, w2, w2_codes, w2_base: the op's argument order (transformed triples)."""
    return (torch.Tensor((EL, 2 * I, H // 2), torch.uint8), torch.Tensor((EL, H // 128, 2 * I), torch.int32),
            torch.Tensor((EL, I // 128, H // 128, 2), torch.float32),
            torch.Tensor((EL, H, I // 2), torch.uint8), torch.Tensor((EL, I // 128, H), torch.int32),
            torch.Tensor((EL, H // 128, I // 128), torch.float32))


OPS = {"symmoe::mega_moe": fp8_weights, "symmoe::mega_moe_fp4": fp4_weights}


def test_the_fused_ops_are_defined_with_fake_implementations(ops):
    for name in ("symmoe::ep_dispatch", "symmoe::ep_combine", *OPS):
        op = torch.custom_ops[name]
        assert op.fake is not None and op.mutates_args == (), name
    assert torch.custom_ops["symmoe::mega_moe_fp4"] is ops.mega_moe_fp4


@pytest.mark.parametrize("name", list(OPS))
def test_fake_implementation_gives_y(layer, name):
    _, layer_id, log = layer
    y = torch.custom_ops[name].fake(layer_id, *inputs(), *OPS[name](), 0.0)
    assert y.shape == (T, H) and y.dtype is torch.bfloat16
    assert log == []  # the fake implementation touches nothing


@pytest.mark.parametrize("name", list(OPS))
@pytest.mark.parametrize("clamp, passed", [(0.0, None), (-1.0, None), (2.5, 2.5)])
def test_op_copies_the_inputs_and_calls_the_layer(ops, layer, monkeypatch, name, clamp, passed):
    buf, layer_id, log = layer
    calls = []
    target = "fp8_fp4_mega_moe" if name.endswith("fp4") else "fp8_mega_moe"
    monkeypatch.setattr(ops, target, lambda *args, **kw: calls.append((args, kw)) or args[0])
    x = inputs()
    w = OPS[name]()
    y = torch.custom_ops[name](layer_id, *x, *w, clamp)
    assert log == [(n, T, src) for n, src in zip(("x", "x_sf", "topk_idx", "topk_weights"), x)]
    (args, kw), = calls
    assert args[0] is y and y.shape == (T, H) and y.dtype is torch.bfloat16
    half = len(w) // 2
    assert args[1] == w[:half] and args[2] == w[half:] and args[3] is buf
    assert kw == {"activation_clamp": passed}


@pytest.mark.parametrize("name", list(OPS))
def test_valid_op_call_passes_the_layer_checks(layer, name):
    """The real layer call behind the op: every weight in its place passes the checks (swapped arguments would
    fail them), then the validation-only buffer has no runtime."""
    _, layer_id, _ = layer
    with pytest.raises(RuntimeError, match="no GPU runtime"):
        torch.custom_ops[name](layer_id, *inputs(), *OPS[name](), 0.0)


def test_fp4_op_refuses_a_misplaced_triple(layer):
    _, layer_id, _ = layer
    w1, c1, b1, w2, c2, b2 = fp4_weights()
    with pytest.raises(TypeError, match="l1 base scales must have dtype float32, got int32"):
        torch.custom_ops["symmoe::mega_moe_fp4"](layer_id, *inputs(), w1, b1, c1, w2, c2, b2, 0.0)
    with pytest.raises(ValueError, match="activation_clamp must be None or >= 0"):
        symmoe.fp8_fp4_mega_moe(torch.Tensor((T, H), torch.bfloat16), (w1, c1, b1), (w2, c2, b2), layer[0],
                                activation_clamp=-1.0)


def test_unregistered_layer_is_refused(ops):
    with pytest.raises(ValueError, match="layer id 12345 is not registered"):
        torch.custom_ops["symmoe::mega_moe_fp4"](12345, *inputs(), *fp4_weights(), 0.0)
