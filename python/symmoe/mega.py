"""DeepGEMM-shaped fused MoE layer over symmoe's MegaMoe (include/symmoe/mega_moe.hpp): one persistent kernel per
call that dispatches, runs L1 GEMM + SwiGLU + FP8 re-quantisation, L2 GEMM and combines.

    buffer = symmoe.get_symm_buffer_for_mega_moe(group, num_experts, num_max_tokens_per_rank, num_topk, hidden,
                                                 intermediate_hidden)
    l1, l2 = symmoe.transform_weights_for_mega_moe((w1, w1_sf), (w2, w2_sf))     # once
    buffer.x[:T].copy_(x_fp8); buffer.x_sf[:T].copy_(x_sf)                       # before each call
    buffer.topk_idx[:T].copy_(topk_idx); buffer.topk_weights[:T].copy_(topk_weights)
    y = torch.empty(T, hidden, dtype=torch.bfloat16, device="cuda")
    symmoe.fp8_mega_moe(y, l1, l2, buffer)          # FP8 weights: w1 e4m3 [E_local, 2I, H], w1_sf fp32 128x128
    symmoe.fp8_fp4_mega_moe(y, l1, l2, buffer)      # FP4 weights: w1 int8 [E_local, 2I, H/2], w1_sf int32 packed UE8M0

Semantics (the composed path's function, bitwise): y[t] = bf16(sum over routed lanes k, ascending, of
bf16(W2[e] . Q8(w[t,k] * SwiGLU(W1[e] . x[t])))), Q8 = e4m3 with UE8M0 scales per 128 channels; zeros for a token
whose lanes are all -1. The top-k weight multiplies the L1 output (before the re-quantisation), not the L2 output.
FP4 weights are upconverted to E4M3 in the kernel exactly, so fp8_fp4_mega_moe gives bitwise what fp8_mega_moe gives
on the expanded FP8 weights.

Names, argument order and defaults are DeepGEMM's (deepseek-ai/DeepGEMM deep_gemm/mega, read at 54e2261,
2026-06-23: get_symm_buffer_for_mega_moe, transform_weights_for_mega_moe, fp8_fp4_mega_moe; fp8_mega_moe as its SM90
forks have it: fp8_fp4_mega_moe's arguments with recipe (128, 128, 128)). Differences from DeepGEMM, all of them:
- Activations: buffer.x_sf is float32 [T_max, H/128], one scale per token per 128 channels (any fp32 value), for
  both layer calls; DeepGEMM's FP4 layer takes int32 [T_max, H/128], four UE8M0 codes per int32, one per 32
  channels (per_token_cast_to_fp8(x, use_ue8m0=True, gran_k=32, use_packed_ue8m0=True)). Such int32 scales raise
  TypeError when copied in: quantise x per 128 channels (the kernel's activation blocks are 128 wide; recipe
  (1, 1, 32) describes the FP4 weights only). buffer.x_sf is a strided view (rows x_scales_stride floats apart).
- The input views check what is copied into them (copy_ or slice assignment): x takes float8_e4m3fn only, x_sf
  float32 only, topk_idx int64 or int32, topk_weights float32, each of the exact shape of the rows written;
  TypeError / ValueError otherwise. They cover num_max_tokens_per_rank rows: not rounded up to
  get_token_alignment_for_mega_moe() (none is needed).
- get_symm_buffer_for_mega_moe: mma_type 'fp8xfp4' (the default) or 'fp8xfp8': one workspace serves both layer
  calls; 'bf16xbf16' and 'fp4xfp4' raise (no bf16_mega_moe, no FP4 activations). use_fp8_dispatch True or None (no
  deprecation warning). Keyword-only additions: num_sms, timeout_ms, communicator. The group is used once, to build
  the communicator (NCCL unique id); group=None without torch.distributed: one in-process rank. The workspace is
  symmoe's own symmetric allocation (CUDA IPC), not torch symmetric memory: SymmBuffer has no buffer, handle,
  num_ring_tokens, l1_acts, l1_acts_sf, l2_acts or l2_acts_sf; it adds synchronize(), plan, num_ranks,
  num_local_experts, rank, device and communicator.
- transform_weights_for_mega_moe, FP8 pairs (w1 e4m3 [E_local, 2I, H], w1_sf fp32 [E_local, 2I/128, H/128], w2 e4m3
  [E_local, H, I], w2_sf fp32 [E_local, H/128, I/128]: the SM90 recipe (128, 128, 128)): L1 data rows interleaved by 8
  as DeepGEMM, L1 scales re-laid as fp32 [E_local, I/128, H/128, 2] (gate, up) pairs (DeepGEMM keeps
  [E_local, 2I/128, H/128]); L2 returned as it is (the same objects). torch tensors transformed on their device,
  numpy arrays on the CPU.
- transform_weights_for_mega_moe, FP4 pairs (DeepGEMM's: int8 [E_local, N, K/2] E2M1, int32 [E_local, N, K/128]
  packed UE8M0 per row per 32 columns, any strides): each layer comes back as a TRIPLE (data, scale codes, base
  scales) where DeepGEMM returns pairs; the data's sign bits are permuted within each 32-bit word, the codes are
  MN-major [E_local, K/128, N] with no UTCCP transposition (a Blackwell tensor-memory layout), and the fp32 base
  scales (one per 128x128 block, the reference of the in-kernel fold) are symmoe's addition (symmoe/mega_fp4.py).
  Done on the host: CUDA tensors are copied there and the triples copied back to the weights' device. A 128x128
  block whose codes span more than 14 binades, or that holds the NaN code 0xFF, raises symmoe.Error (the E4M3 fold
  would not be exact); DeepGEMM takes any codes.
- BF16 weights (a bare tensor per layer) raise TypeError.
- fp8_mega_moe / fp8_fp4_mega_moe return y (DeepGEMM returns None).
- cumulative_local_expert_recv_stats: a torch tensor, int32 or int64 [E_local] (DeepGEMM: int32).
- activation_clamp: as DeepGEMM at every value (None or +inf: no clamp; c >= 0: gate <= c, up in [-c, c], so 0 makes
  every activation and y zero); negative or NaN raise ValueError naming that meaning (DeepGEMM asserts >= 0).
  `fast_math` is accepted and ignored (one math mode: the golden model's).
- Errors are ValueError / TypeError naming the argument, expected and got, raised before anything is launched
  (DeepGEMM asserts in C++); device-side timeouts surface as symmoe.PeerTimeout at buffer.synchronize().
Behaviour (as DeepGEMM unless a difference above says otherwise): calls run on torch's current stream; one rank per
process; activation_clamp is a host-side parameter of the next launch (under CUDA-graph capture the value at capture
time is baked into the graph). Weights are bound (TMA descriptors rebuilt on the host, no GPU work) when their
addresses change, FP8 <-> FP4 included (same workspace, re-planned); the buffer keeps the last bound tensors alive.
Rebinding while a captured graph still references the old weights is the caller's business (as in DeepGEMM, where
the graph captures the pointers). cumulative_local_expert_recv_stats costs one extra add on the stream. NOTES: weight
tensors that are the same objects as the previous call's are not re-checked (the hot path is then one stream query,
the y check and one C++ call).
Verified on nvidia-h200-x2, 2026-11-30: 1 GPU and 2 processes, small shape and Flash: within 0.026-0.027 relative
Frobenius of an fp32 torch model, bitwise equal to the composed path, CUDA-graph replays bitwise
(python/tests_gpu/test_mega_single_gpu.py, mega_torchrun_check.py).
"""
import sys

from . import _C
from ._checks import caller_stream, check, check_int, device_tensor, is_torch
from .dlpack import DeviceView, tensor_info, torch_dtype_name
from .distributed import Communicator
from .mega_fp4 import is_fp4_pair, transform_fp4_weights

_W8 = ("float8_e4m3fn", "uint8")
_INF = float("inf")


class _LayerOwner:
    """What the buffer's input views keep alive: the native MegaMoe (not the SymmBuffer: no cycle)."""
    __slots__ = ("native",)

    def __init__(self, native):
        self.native = native


class SymmBuffer:
    """The fused layer's symmetric workspace and kernel for one rank (see the module docstring). Fields as DeepGEMM's
    SymmBuffer: group, num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden and the input
    views x (float8_e4m3fn [T_max, H]), x_sf (float32 [T_max, H/128]), topk_idx (int64 [T_max, K]),
    topk_weights (float32 [T_max, K]), torch tensors when torch is importable (else DLPack DeviceViews)."""

    def __init__(self, group, num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden, *,
                 num_sms=0, timeout_ms=-1, communicator=None):
        num_ranks = self._configure(group, num_experts, num_max_tokens_per_rank, num_topk, hidden,
                                    intermediate_hidden, communicator)
        check_int("num_sms", num_sms, low=0)
        if communicator is None:
            communicator = Communicator.for_group(group, timeout_ms)
        check(communicator.num_ranks == num_ranks, ValueError,
              f"communicator has {communicator.num_ranks} ranks, the group {num_ranks}")
        check(len(communicator.local_ranks) == 1, ValueError,
              f"the fused layer drives one rank per process; this communicator drives "
              f"{len(communicator.local_ranks)}")
        self.communicator = communicator
        local = communicator.local_ranks[0]
        self.rank, self.device = local["rank"], local["device"]
        self._fallback_stream = communicator.stream(self.rank)
        self.native = _C.MegaMoe(communicator.native, self.shape, 0.0, num_sms, True)
        self._owner = _LayerOwner(self.native)
        self._clamp, self._activation_clamp = 0.0, None  # the kernels' clamp (0: off) of this activation_clamp
        self._bound_ptrs, self._bound_tensors = None, None
        self._make_views()

    def _configure(self, group, num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden,
                   communicator):
        for name, v in (("num_experts", num_experts), ("num_max_tokens_per_rank", num_max_tokens_per_rank),
                        ("num_topk", num_topk), ("hidden", hidden), ("intermediate_hidden", intermediate_hidden)):
            check_int(name, v)
        if communicator is not None:
            num_ranks = communicator.num_ranks
        elif isinstance(group, int):  # validation-only buffers (CPU tests)
            num_ranks = group
        else:
            num_ranks = _group_size(group)
        self.group = group
        self.num_ranks, self.num_experts, self.num_topk = num_ranks, num_experts, num_topk
        self.num_max_tokens_per_rank, self.hidden, self.intermediate_hidden = (
            num_max_tokens_per_rank, hidden, intermediate_hidden)
        self.num_local_experts = num_experts // num_ranks
        self.shape = _C.MoeShape(hidden, intermediate_hidden, num_experts, num_topk, num_ranks,
                                 num_max_tokens_per_rank)  # validates (symmoe.Error naming the field)
        return num_ranks

    @classmethod
    def _validation_only(cls, num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden,
                         intermediate_hidden, device=0):
        """Every argument check, no GPU runtime (CPU tests): calls that pass validation raise RuntimeError."""
        self = cls.__new__(cls)
        self._configure(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden, None)
        self.communicator, self.native, self.rank, self.device = None, None, 0, device
        self._fallback_stream = 0
        self._owner, self._clamp, self._bound_ptrs, self._bound_tensors = _LayerOwner(None), 0.0, None, None
        self._activation_clamp = None
        self.x = self.x_sf = self.topk_idx = self.topk_weights = None
        self._inputs = None
        return self

    def _make_views(self):
        x, xs, xs_stride, idx, w = self.native.input_one()
        self._inputs = (x, xs, idx, w)
        T, H, K = self.num_max_tokens_per_rank, self.hidden, self.num_topk
        d, o = self.device, self._owner
        views = (DeviceView(x, (T, H), "uint8", d, owner=o),
                 DeviceView(xs, (T, H // 128), "float32", d, owner=o, strides=(xs_stride, 1)),
                 DeviceView(idx, (T, K), "int64", d, owner=o),
                 DeviceView(w, (T, K), "float32", d, owner=o),
                 DeviceView(self.native.received_counts(), (self.num_local_experts,), "int32", d, owner=o))
        torch = _import_torch()
        if torch is not None:
            views = tuple(torch.from_dlpack(v) for v in views)
            views = (views[0].view(torch.float8_e4m3fn),) + views[1:]
            views = tuple(input_view(torch, name, v) for name, v in zip(_INPUT_NAMES, views[:4])) + views[4:]
        self.x, self.x_sf, self.topk_idx, self.topk_weights, self._received = views

    @property
    def plan(self):
        """The fused kernel's launch plan on this rank (str() as `symmoe plan`)."""
        self._require_runtime("plan")
        return self.native.plan()

    def _require_runtime(self, what):
        check(self.native is not None, RuntimeError,
              f"symmoe.{what}: arguments are valid but this buffer has no GPU runtime (validation-only or destroyed)")

    def synchronize(self):
        """Waits for this rank's work; raises peer timeouts the kernel detected."""
        self._require_runtime("synchronize")
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            torch.cuda.synchronize(self.device)  # the calls ran on torch's streams
        self.native.synchronize()

    def destroy(self):
        """Collective: frees the workspace now (every rank must call it); the input views become invalid."""
        self.native = None
        self._owner.native = None
        self.x = self.x_sf = self.topk_idx = self.topk_weights = self._received = None
        self._bound_tensors = None
        self.communicator = None

    def __repr__(self):
        return (f"<symmoe.SymmBuffer rank={self.rank}/{self.num_ranks} E={self.num_experts} K={self.num_topk} "
                f"H={self.hidden} I={self.intermediate_hidden} T_max={self.num_max_tokens_per_rank}>")


# ---- the input views: what may be copied into them ----

_INPUT_NAMES = ("x", "x_sf", "topk_idx", "topk_weights")
# Per input view: the source dtypes whose values keep their meaning when torch converts them into the view's dtype,
# and what the view holds. Anything else (a bf16 x cast to FP8 without its scales, an int32 packed-UE8M0 x_sf turned
# into float "scales", float expert ids) is refused.
_INPUT_SOURCES = {
    "x": (("float8_e4m3fn",), "FP8 E4M3 activations (quantise bf16 / fp32 x per 128 channels first; the scales go "
                              "to x_sf; E4M3 codes held as uint8: .view(torch.float8_e4m3fn))"),
    "x_sf": (("float32",), "fp32 scales, one per token per 128 channels (packed UE8M0 int32 scales are not "
                           "accepted: pass 2**(e - 127) as float32)"),
    "topk_idx": (("int64", "int32"), "integer expert ids (-1 = masked)"),
    "topk_weights": (("float32",), "fp32 top-k weights"),
}


def check_input_source(name, src, dst_shape):
    """Raises TypeError / ValueError naming buffer.<name> when `src` (a tensor or DLPack producer; Python numbers
    fill and pass) has a dtype whose conversion into the view would change its meaning, or a shape other than
    `dst_shape` (no broadcasting into the layer's inputs)."""
    dtypes, holds = _INPUT_SOURCES[name]
    if isinstance(src, (int, float)) and not isinstance(src, bool):
        return
    if is_torch(src):
        dtype, shape = torch_dtype_name(src.dtype), tuple(src.shape)
    elif hasattr(src, "__dlpack__"):
        info = tensor_info(src)
        dtype, shape = info.dtype, tuple(info.shape)
    else:
        raise TypeError(f"buffer.{name}: the source must be a tensor of {' or '.join(dtypes)} ({holds}), got "
                        f"{type(src).__name__}")
    if dtype not in dtypes:
        raise TypeError(f"buffer.{name}: the source must have dtype {' or '.join(dtypes)} ({holds}), got {dtype}")
    if shape != tuple(dst_shape):
        raise ValueError(f"buffer.{name}: the source must have shape {list(dst_shape)} (the rows it is copied into), "
                         f"got {list(shape)}")


_input_view_types = {}


def input_view(torch, name, tensor):
    """`tensor` as a torch.Tensor subclass whose copy_ and slice assignment check their source
    (check_input_source) before torch converts it. Indexing keeps the subclass (buffer.x[:T].copy_(x) is checked);
    every other op returns plain tensors. NOTES: ~2 Python calls per copy; the layer call reads the buffer's raw
    addresses, never these objects."""
    cls = _input_view_types.get(name)
    if cls is None:
        class InputView(torch.Tensor):
            input_name = name

            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                fname = getattr(func, "__name__", "")
                if fname == "copy_" and args:
                    src = args[1] if len(args) > 1 else kwargs.get("src")
                    check_input_source(cls.input_name, src, tuple(args[0].shape))
                elif fname == "__setitem__" and len(args) == 3:
                    with torch._C.DisableTorchFunctionSubclass():
                        target = args[0][args[1]]
                    check_input_source(cls.input_name, args[2], tuple(target.shape))
                with torch._C.DisableTorchFunctionSubclass():
                    out = func(*args, **kwargs)
                if fname == "__getitem__" and isinstance(out, torch.Tensor):
                    out = out.as_subclass(cls)
                return out

        InputView.__name__ = InputView.__qualname__ = f"SymmBufferInput_{name}"
        cls = _input_view_types.setdefault(name, InputView)
    return tensor.as_subclass(cls)


def _import_torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


def _group_size(group):
    if group is None:
        dist = sys.modules.get("torch.distributed")
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return 1
    import torch.distributed as dist
    return dist.get_world_size(group)


def get_symm_buffer_for_mega_moe(group, num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden,
                                 use_fp8_dispatch=None, mma_type="fp8xfp4", activation="swiglu", *, num_sms=0,
                                 timeout_ms=-1, communicator=None):
    """Collective over `group`: the fused layer's workspace and kernel for this rank (a SymmBuffer), for
    fp8_mega_moe and fp8_fp4_mega_moe alike (mma_type 'fp8xfp4' or 'fp8xfp8': the same workspace).
    num_sms: persistent CTAs (0: every SM). timeout_ms: bound of every cross-rank wait (-1: SYMMOE_TIMEOUT_MS)."""
    check(use_fp8_dispatch in (None, True), ValueError,
          "use_fp8_dispatch must be True or None: symmoe's fused layer dispatches FP8 E4M3 only")
    check(mma_type in _MMA_TYPES, ValueError,
          f"mma_type must be 'fp8xfp4' or 'fp8xfp8' (FP8 activations; FP4 or FP8 weights), got {mma_type!r}")
    check(activation == "swiglu", ValueError, f"activation must be 'swiglu', got {activation!r}")
    return SymmBuffer(group, num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden,
                      num_sms=num_sms, timeout_ms=timeout_ms, communicator=communicator)


_MMA_TYPES = ("fp8xfp4", "fp8xfp8")


# ---- weights ----

def _permuted(a, perm, shape):
    """a permuted by `perm` into a fresh contiguous array of `shape` (torch on its device, or numpy)."""
    if is_torch(a):
        return a.permute(*perm).contiguous().reshape(shape)
    import numpy as np
    return np.ascontiguousarray(a.transpose(perm)).reshape(shape)


def transform_weights_for_mega_moe(l1_weights, l2_weights, activation="swiglu"):
    """FP8 pairs (w1 e4m3 [E_local, 2I, H] gate rows then up rows, w1_sf fp32 [E_local, 2I/128, H/128]),
    (w2 e4m3 [E_local, H, I], w2_sf fp32 [E_local, H/128, I/128]) -> (transformed l1, l2) pairs for fp8_mega_moe:
    the layout of include/symmoe/weight_transform.hpp (L1 rows interleaved by 8, scales as (gate, up) pairs). torch
    tensors are transformed on their device with torch ops; numpy arrays on the CPU. l2 comes back unchanged.
    FP4 pairs (DeepGEMM's fp8_fp4_mega_moe weights: int8 E2M1 [E_local, N, K/2], int32 packed UE8M0 [E_local, N,
    K/128]) -> (data, scale codes, base scales) triples for fp8_fp4_mega_moe, on the weights' device: see
    symmoe/mega_fp4.py."""
    check(activation == "swiglu", ValueError, f"activation must be 'swiglu', got {activation!r}")
    if is_fp4_pair(l1_weights) or is_fp4_pair(l2_weights):
        return transform_fp4_weights(l1_weights, l2_weights)
    for name, pair in (("l1_weights", l1_weights), ("l2_weights", l2_weights)):
        check(isinstance(pair, tuple) and len(pair) == 2, TypeError,
              f"{name} must be a (weights, scales) pair, FP8 or FP4 (BF16 weights, bf16_mega_moe: not supported)")
    w1, w1_sf = l1_weights
    check(len(w1.shape) == 3 and w1.shape[1] % 256 == 0 and w1.shape[2] % 128 == 0, ValueError,
          f"l1 weights must be [E_local, 2I, H] with I and H multiples of 128, got {list(w1.shape)}")
    E, two_i, H = (int(d) for d in w1.shape)
    I = two_i // 2
    check(tuple(int(d) for d in w1_sf.shape) == (E, two_i // 128, H // 128), ValueError,
          f"l1 scales must be [{E}, {two_i // 128}, {H // 128}] (untransformed, per 128x128 block), got "
          f"{list(w1_sf.shape)}")
    # Interleaved row 16q + j = (gate, up)[j // 8] row 8q + j % 8: [E, 2, I/8, 8, H] -> [E, I/8, 2, 8, H].
    if is_torch(w1):
        import torch
        data = w1.view(torch.uint8) if w1.element_size() == 1 else w1
        out = _permuted(data.reshape(E, 2, I // 8, 8, H), (0, 2, 1, 3, 4), (E, two_i, H)).view(w1.dtype)
    else:
        out = _permuted(w1.reshape(E, 2, I // 8, 8, H), (0, 2, 1, 3, 4), (E, two_i, H))
    # Scale blocks (gate t, up t) side by side: [E, 2, I/128, H/128] -> [E, I/128, H/128, 2].
    sf = _permuted(w1_sf.reshape(E, 2, I // 128, H // 128), (0, 2, 3, 1), (E, I // 128, H // 128, 2))
    return (out, sf), l2_weights


# ---- the layer call ----

def fp8_mega_moe(y, l1_weights, l2_weights, sym_buffer, cumulative_local_expert_recv_stats=None,
                 recipe=(128, 128, 128), activation="swiglu", activation_clamp=None, fast_math=True):
    """y (bf16 [T, H], T = y.shape[0] <= num_max_tokens_per_rank) = the fused MoE layer of the T tokens in
    sym_buffer's inputs, on torch's current stream. l1_weights, l2_weights: transformed (see
    transform_weights_for_mega_moe). Collective: every rank calls it. Returns y."""
    b = sym_buffer
    # NOTES: hot path: plain ifs, messages formatted only on failure.
    if not isinstance(b, SymmBuffer):
        raise TypeError(f"sym_buffer must come from symmoe.get_symm_buffer_for_mega_moe, got {type(b).__name__}")
    if recipe != (128, 128, 128) and tuple(recipe) != (128, 128, 128):
        raise ValueError(f"recipe must be (128, 128, 128), got {tuple(recipe)}")
    return _forward("fp8_mega_moe", y, _weight_tensors(l1_weights, l2_weights), _check_weights, b,
                    cumulative_local_expert_recv_stats, activation, activation_clamp)


def fp8_fp4_mega_moe(y, l1_weights, l2_weights, sym_buffer, cumulative_local_expert_recv_stats=None,
                     recipe=(1, 1, 32), activation="swiglu", activation_clamp=None, fast_math=True):
    """fp8_mega_moe with FP4 E2M1 weights (DeepGEMM's fp8_fp4_mega_moe, same arguments): l1_weights, l2_weights are
    the triples (data, scale codes, base scales) transform_weights_for_mega_moe returns for DeepGEMM's FP4 pairs, on
    the buffer's device; x and x_sf as for fp8_mega_moe (fp32 scales per 128 channels: the module docstring lists
    the differences). Collective: every rank calls it. Returns y."""
    b = sym_buffer
    if not isinstance(b, SymmBuffer):
        raise TypeError(f"sym_buffer must come from symmoe.get_symm_buffer_for_mega_moe, got {type(b).__name__}")
    if recipe != (1, 1, 32) and tuple(recipe) != (1, 1, 32):
        raise ValueError(f"recipe must be (1, 1, 32) (FP4 weights), got {tuple(recipe)}")
    return _forward("fp8_fp4_mega_moe", y, _weight_tensors_fp4(l1_weights, l2_weights), _check_weights_fp4, b,
                    cumulative_local_expert_recv_stats, activation, activation_clamp)


def _forward(what, y, tensors, check_weights, b, stats, activation, activation_clamp):
    """The checks and the launch both layer calls share; tensors: the weight tensors in check_weights' order."""
    if activation != "swiglu":
        raise ValueError(f"activation must be 'swiglu', got {activation!r}")
    if activation_clamp == b._activation_clamp:  # the last call's value (NaN never equals: always checked)
        clamp = b._clamp
    else:  # DeepGEMM's meaning at every value, 0 included, as the kernels' SwiGLU clamp; negative or NaN: ValueError
        clamp = _C.swiglu_clamp_for_activation_clamp(_INF if activation_clamp is None else float(activation_clamp))
    dev, H, I, El = b.device, b.hidden, b.intermediate_hidden, b.num_local_experts
    stream = caller_stream(y, dev, b._fallback_stream)
    y_ptr, y_shape = device_tensor(y, "y", dev, stream, ("bfloat16",), (None, H))
    T = y_shape[0]
    if T > b.num_max_tokens_per_rank:
        raise ValueError(f"y has {T} tokens, more than num_max_tokens_per_rank = {b.num_max_tokens_per_rank}")
    if (b._bound_tensors is None or len(tensors) != len(b._bound_tensors)
            or any(t is not u for t, u in zip(tensors, b._bound_tensors))):
        ptrs = check_weights(tensors, dev, stream, H, I, El)
    else:
        ptrs = b._bound_ptrs  # the same tensor objects as the last call: checked then
    if stats is not None:
        device_tensor(stats, "cumulative_local_expert_recv_stats", dev, stream, ("int32", "int64"), (El,))
        check(is_torch(stats), TypeError, "cumulative_local_expert_recv_stats must be a torch tensor")

    if b.native is None:
        b._require_runtime(what)
    if ptrs != b._bound_ptrs:
        (b.native.bind_fp4_weights_one if len(ptrs) == 6 else b.native.bind_fp8_weights_one)(*ptrs)
        b._bound_ptrs = ptrs
    b._bound_tensors = tensors  # the layer reads them: keep them alive
    if clamp != b._clamp:
        b.native.set_clamp(clamp)
        b._clamp = clamp
    b._activation_clamp = activation_clamp
    x, xs, idx, w = b._inputs
    b.native.forward_one(T, x, xs, idx, w, y_ptr, stream)
    if stats is not None:
        stats.add_(b._received)
    return y


def _weight_tensors(l1_weights, l2_weights):
    for name, pair in (("l1_weights", l1_weights), ("l2_weights", l2_weights)):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"{name} must be a (weights, scales) pair")
    return (l1_weights[0], l1_weights[1], l2_weights[0], l2_weights[1])


def _weight_tensors_fp4(l1_weights, l2_weights):
    for name, triple in (("l1_weights", l1_weights), ("l2_weights", l2_weights)):
        if not isinstance(triple, (tuple, list)) or len(triple) != 3:
            raise TypeError(f"{name} must be a (weights, scale codes, base scales) triple (FP4: "
                            "transform_weights_for_mega_moe of DeepGEMM's FP4 pairs)")
    return tuple(l1_weights) + tuple(l2_weights)


def _check_weights_fp4(tensors, dev, stream, H, I, El):
    """-> the addresses in bind_fp4_weights_one's order: w1, w1 base scales, w2, w2 base scales, w1 codes, w2
    codes."""
    w1, c1, b1, w2, c2, b2 = tensors
    codes = ("int32", "uint32")
    return (device_tensor(w1, "l1 weights (fp4)", dev, stream, ("uint8", "int8"), (El, 2 * I, H // 2))[0],
            device_tensor(b1, "l1 base scales", dev, stream, ("float32",), (El, I // 128, H // 128, 2))[0],
            device_tensor(w2, "l2 weights (fp4)", dev, stream, ("uint8", "int8"), (El, H, I // 2))[0],
            device_tensor(b2, "l2 base scales", dev, stream, ("float32",), (El, H // 128, I // 128))[0],
            device_tensor(c1, "l1 scale codes", dev, stream, codes, (El, H // 128, 2 * I))[0],
            device_tensor(c2, "l2 scale codes", dev, stream, codes, (El, I // 128, H))[0])


def _check_weights(tensors, dev, stream, H, I, El):
    w1, w1_sf, w2, w2_sf = tensors
    return (device_tensor(w1, "l1 weights", dev, stream, _W8, (El, 2 * I, H))[0],
            device_tensor(w1_sf, "l1 scales (transformed)", dev, stream, ("float32",),
                          (El, I // 128, H // 128, 2))[0],
            device_tensor(w2, "l2 weights", dev, stream, _W8, (El, H, I))[0],
            device_tensor(w2_sf, "l2 scales", dev, stream, ("float32",), (El, H // 128, I // 128))[0])
