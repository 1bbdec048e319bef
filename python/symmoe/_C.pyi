"""symmoe C++ core (formats, planner, golden model, EP runtime); use the `symmoe` package instead.

Type stubs of the extension module, written from python/src/bind_*.cpp; python/tests/test_c_stubs.py checks that
the names, parameter names and kinds (function, method, static method, property) match the built module.
Device memory, CUDA streams and events cross as integer addresses.
"""
from collections.abc import Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

_Capsule = Any  # a PyCapsule named "dltensor" (types.CapsuleType from Python 3.13)

# ---- errors (bind_errors.cpp) ----

class Error(RuntimeError):
    """symmoe::Error: the C++ message with its component and site."""

    component: str
    site: str

class PeerTimeout(Error):
    """A bounded device wait timed out: `rank` waited for `peer` (-1: its own CTAs) at `wait_site`."""

    rank: int
    peer: int
    wait_site: str

# ---- numeric formats (bind_formats.cpp) ----

E4M3_MAX: float
E5M2_MAX: float
E2M1_MAX: float
AMAX_FLOOR: float

def float_to_e4m3(x: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    """fp32 -> E4M3 codes (RNE, saturating)."""

def e4m3_to_float(x: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """E4M3 codes (integers 0..255) -> fp32 (exact)."""

def float_to_e5m2(x: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    """fp32 -> E5M2 codes (RNE, saturating)."""

def e5m2_to_float(x: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """E5M2 codes (integers 0..255) -> fp32 (exact)."""

def float_to_e2m1(x: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    """fp32 -> E2M1 nibbles, one per byte."""

def e2m1_to_float(x: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """E2M1 nibbles (one per byte, 0..15) -> fp32."""

def float_to_bf16(x: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    """fp32 -> bf16 bits as uint16 (RNE)."""

def bf16_to_float(x: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """bf16 bits (integers 0..65535) -> fp32 (exact)."""

def ue8m0_to_float(x: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """UE8M0 exponent bytes -> fp32 powers of two."""

def ue8m0_from_scale(x: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    """Power-of-two fp32 scales -> UE8M0 bytes."""

def scale_for_amax(amax: npt.ArrayLike, fmt_max: float = 448.0, scale_format: str = "fp32") -> npt.NDArray[np.float32]:
    """Block scale from amax (floored at AMAX_FLOOR); scale_format 'fp32' or 'ue8m0'."""

def quantize_activations(
    x: npt.ArrayLike, block: int = 128, scale_format: str = "fp32"
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float32]]:
    """x fp32 [M, K] -> (E4M3 codes [M, K], fp32 scales [M, K/block])."""

def quantize_weights_128x128(
    w: npt.ArrayLike, scale_format: str = "fp32"
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float32]]:
    """w fp32 [N, K] -> (E4M3 codes [N, K], fp32 scales [ceil(N/128), ceil(K/128)])."""

def quantize_weights_fp4(w: npt.ArrayLike) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
    """w fp32 [N, K] -> (packed E2M1 [N, K/2], UE8M0 scales [N, K/32])."""

# ---- planner (bind_plan.cpp); the plan_* functions apply the SYMMOE_* overrides ----

DEFAULT_NUM_SMS: int

class MoeShape:
    def __init__(
        self,
        hidden: int,
        intermediate: int,
        num_experts: int,
        num_topk: int,
        num_ranks: int = 1,
        num_max_tokens_per_rank: int = 1,
    ) -> None:
        """Validated at construction (symmoe._C.Error names the bad field)."""
    @property
    def hidden(self) -> int: ...
    @property
    def intermediate(self) -> int: ...
    @property
    def num_experts(self) -> int: ...
    @property
    def num_topk(self) -> int: ...
    @property
    def num_ranks(self) -> int: ...
    @property
    def num_max_tokens_per_rank(self) -> int: ...
    @property
    def num_local_experts(self) -> int: ...
    def validate(self) -> None: ...

def named_shape(name: str, num_ranks: int, num_max_tokens_per_rank: int) -> MoeShape:
    """A preset of include/symmoe/shape.hpp (flash, pro, v3, tiny, qwen3-30b-a3b, qwen3-235b-a22b, mixtral-8x7b)
    with the given ranks and max tokens per rank (validated)."""

class EpPlan:
    @property
    def shape(self) -> MoeShape: ...
    @property
    def dtype(self) -> str:
        """'bf16' or 'fp8_e4m3'."""
    @property
    def num_sms(self) -> int: ...
    @property
    def dispatch_sms(self) -> int: ...
    @property
    def combine_sms(self) -> int: ...
    @property
    def dispatch_warps_per_cta(self) -> int: ...
    @property
    def combine_warps_per_cta(self) -> int: ...
    @property
    def buffer_bytes(self) -> int: ...
    def validate(self) -> None: ...

class GemmPlan:
    @property
    def n(self) -> int: ...
    @property
    def k(self) -> int: ...
    @property
    def num_experts(self) -> int: ...
    @property
    def epilogue(self) -> str:
        """'bf16' or 'swiglu_fp8'."""
    @property
    def block_m(self) -> int: ...
    @property
    def block_n(self) -> int: ...
    @property
    def block_k(self) -> int: ...
    @property
    def cluster_size(self) -> int: ...
    @property
    def num_stages(self) -> int: ...
    @property
    def smem_bytes(self) -> int: ...
    @property
    def num_sms(self) -> int: ...
    @property
    def num_threads(self) -> int: ...
    def validate(self) -> None: ...

class MegaPlan:
    @property
    def shape(self) -> MoeShape: ...
    @property
    def num_sms(self) -> int: ...
    @property
    def expected_tokens_per_expert(self) -> float: ...
    @property
    def block_m(self) -> int: ...
    @property
    def l1_block_n(self) -> int: ...
    @property
    def l2_block_n(self) -> int: ...
    @property
    def block_k(self) -> int: ...
    @property
    def num_experts_per_wave(self) -> int: ...
    @property
    def num_waves(self) -> int: ...
    @property
    def num_threads(self) -> int: ...
    @property
    def num_stages(self) -> int: ...
    @property
    def smem_bytes(self) -> int: ...
    @property
    def workspace_bytes(self) -> int: ...
    def validate(self) -> None: ...

class HybridPlan:
    """Scale-out plan: num_nodes nodes of ranks_per_node GPUs; bytes per rank, modelled times and bandwidths."""

    @property
    def num_ranks(self) -> int: ...
    @property
    def num_nodes(self) -> int: ...
    @property
    def ranks_per_node(self) -> int: ...
    @property
    def hidden(self) -> int: ...
    @property
    def num_experts(self) -> int: ...
    @property
    def num_topk(self) -> int: ...
    @property
    def num_max_tokens_per_rank(self) -> int: ...
    @property
    def node_limit(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def p_rank(self) -> float: ...
    @property
    def p_node(self) -> float: ...
    @property
    def ranks_per_token(self) -> float: ...
    @property
    def nodes_per_token(self) -> float: ...
    @property
    def nic_gbps(self) -> float: ...
    @property
    def nvlink_gbps(self) -> float: ...
    @property
    def record_bytes(self) -> int: ...
    @property
    def combine_row_bytes(self) -> int: ...
    @property
    def scaleout_send_bytes(self) -> int: ...
    @property
    def scaleout_recv_bytes(self) -> int: ...
    @property
    def scaleup_recv_bytes(self) -> int: ...
    @property
    def forward_combine_recv_bytes(self) -> int: ...
    @property
    def forward_reduce_bytes(self) -> int: ...
    @property
    def source_combine_recv_bytes(self) -> int: ...
    @property
    def signal_bytes(self) -> int: ...
    @property
    def total_bytes(self) -> int: ...
    @property
    def dispatch_rdma_bytes(self) -> float: ...
    @property
    def dispatch_nvlink_bytes(self) -> float: ...
    @property
    def dispatch_direct_rdma_bytes(self) -> float: ...
    @property
    def combine_nvlink_bytes(self) -> float: ...
    @property
    def combine_rdma_bytes(self) -> float: ...
    @property
    def combine_reduced_rdma_bytes(self) -> float: ...
    @property
    def dispatch_us(self) -> float: ...
    @property
    def combine_us(self) -> float: ...
    @property
    def combine_reduced_us(self) -> float: ...
    @property
    def dispatch_logical_rdma_gbps(self) -> float: ...
    @property
    def combine_logical_rdma_gbps(self) -> float: ...
    @property
    def combine_reduced_logical_rdma_gbps(self) -> float: ...
    def sweep(self, tokens: Sequence[int] = [128, 4096, 8192]) -> str:
        """The EP16-EP256 table (8 GPUs per node) of this shape next to DeepEP's published numbers."""
    def validate(self) -> None: ...

def plan_ep(shape: MoeShape, dtype: str = "fp8", num_sms: int = 132) -> EpPlan:
    """dtype 'fp8' or 'bf16'."""

def plan_grouped_gemm(
    m_per_expert: float, n: int, k: int, num_experts: int, num_sms: int = 132, epilogue: str = "bf16"
) -> GemmPlan:
    """epilogue 'bf16' or 'swiglu_fp8'."""

def plan_mega_moe(shape: MoeShape, num_sms: int = 132) -> MegaPlan: ...
@overload
def plan_hybrid(
    shape: str, num_ranks: int, tokens: int, num_nodes: int, dtype: str = "fp8", node_limit: int = 0
) -> HybridPlan:
    """A named shape (not limited to 72 ranks); node_limit 0 = unlimited."""

@overload
def plan_hybrid(shape: MoeShape, num_nodes: int, dtype: str = "fp8", node_limit: int = 0) -> HybridPlan: ...
def expected_tokens_per_expert(shape: MoeShape, tokens_per_rank: int) -> float: ...

# ---- golden model (bind_reference.cpp); payload rows cross as uint8 [rows, row_bytes] ----

def ref_make_routing(
    num_tokens: int,
    num_experts: int,
    num_topk: int,
    kind: str = "uniform",
    zipf_s: float = 1.2,
    hot_expert: int = 0,
    hot_fraction: float = 0.5,
    mask_prob: float = 0.0,
    seed: int = 1,
    rank: int = 0,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """-> (topk_idx int64 [T, K] (-1 = masked), topk_weights fp32 [T, K])."""

class RefEPHandle:
    """Golden-model EPHandle of one rank (DeepEP field names; arrays are copies)."""

    @property
    def rank(self) -> int: ...
    @property
    def num_ranks(self) -> int: ...
    @property
    def do_expand(self) -> bool: ...
    @property
    def num_experts(self) -> int: ...
    @property
    def num_topk(self) -> int: ...
    @property
    def expert_alignment(self) -> int: ...
    @property
    def num_max_tokens_per_rank(self) -> int: ...
    @property
    def num_tokens(self) -> int: ...
    @property
    def num_recv_tokens(self) -> int: ...
    @property
    def num_expanded_tokens(self) -> int: ...
    @property
    def num_recv_tokens_per_expert_list(self) -> list[int]: ...
    @property
    def num_local_experts(self) -> int: ...
    @property
    def num_tokens_per_rank(self) -> npt.NDArray[np.int32]: ...
    @property
    def num_tokens_per_expert(self) -> npt.NDArray[np.int32]: ...
    @property
    def dst_buffer_slot_idx(self) -> npt.NDArray[np.int32]: ...
    @property
    def topk_idx(self) -> npt.NDArray[np.int64]: ...
    @property
    def psum_num_recv_tokens_per_rank(self) -> npt.NDArray[np.int32]: ...
    @property
    def num_unaligned_recv_tokens_per_expert(self) -> npt.NDArray[np.int32]: ...
    @property
    def psum_num_recv_tokens_per_expert(self) -> npt.NDArray[np.int32]: ...
    @property
    def recv_src_metadata(self) -> npt.NDArray[np.int32]: ...
    def expert_start(self, local_expert: int) -> int:
        """Exclusive start of a local expert's segment in the expanded rows."""

class RefDispatchOutput:
    """One destination rank's golden-model dispatch result."""

    @property
    def recv_x(self) -> npt.NDArray[np.uint8]: ...
    @property
    def recv_x_sf(self) -> npt.NDArray[np.uint8] | None: ...
    @property
    def recv_topk_idx(self) -> npt.NDArray[np.int64]: ...
    @property
    def recv_topk_weights(self) -> npt.NDArray[np.float32]: ...
    @property
    def handle(self) -> RefEPHandle: ...

def ref_dispatch(
    x: Sequence[npt.ArrayLike],
    x_sf: Sequence[npt.ArrayLike | None],
    topk_idx: Sequence[npt.ArrayLike],
    topk_weights: Sequence[npt.ArrayLike],
    num_experts: int,
    num_topk: int,
    num_max_tokens_per_rank: int,
    expert_alignment: int = 1,
    do_expand: bool = False,
    zero_padding: bool = True,
) -> list[RefDispatchOutput]:
    """Fresh dispatch over all ranks (one list entry per rank); returns one output per destination rank."""

def ref_dispatch_cached(
    handles: Sequence[RefEPHandle],
    x: Sequence[npt.ArrayLike],
    x_sf: Sequence[npt.ArrayLike | None],
    topk_idx: Sequence[npt.ArrayLike],
    topk_weights: Sequence[npt.ArrayLike],
    zero_padding: bool = True,
) -> list[RefDispatchOutput]: ...
def ref_check_dispatch(
    x: Sequence[npt.ArrayLike],
    x_sf: Sequence[npt.ArrayLike | None],
    topk_idx: Sequence[npt.ArrayLike],
    topk_weights: Sequence[npt.ArrayLike],
    outputs: Sequence[RefDispatchOutput],
) -> str:
    """Every dispatch invariant checked without re-running the model: '' when all hold, else a report."""

def ref_combine(
    handles: Sequence[RefEPHandle],
    hidden: int,
    x: Sequence[npt.ArrayLike],
    topk_weights: Sequence[npt.ArrayLike] | None = None,
    bias_0: Sequence[npt.ArrayLike] | None = None,
    bias_1: Sequence[npt.ArrayLike] | None = None,
    reduce_local_experts: bool = False,
) -> list[tuple[npt.NDArray[np.uint16], npt.NDArray[np.float32] | None]]:
    """Per source rank: (combined_x bf16 bits [T, H], combined_topk_weights or None)."""

class RefLayerInput:
    """One rank's fused-layer input: FP8 x (per-128 scales) + routing."""

    def __init__(
        self, x: npt.ArrayLike, x_scales: npt.ArrayLike, topk_idx: npt.ArrayLike, topk_weights: npt.ArrayLike
    ) -> None: ...
    @property
    def x(self) -> npt.NDArray[np.uint8]: ...
    @property
    def x_scales(self) -> npt.NDArray[np.float32]: ...
    @property
    def topk_idx(self) -> npt.NDArray[np.int64]: ...
    @property
    def topk_weights(self) -> npt.NDArray[np.float32]: ...

def ref_make_layer_input(
    shape: MoeShape, num_tokens: int, kind: str = "uniform", seed: int = 1, mask_prob: float = 0.0, rank: int = 0
) -> RefLayerInput: ...
def ref_moe_forward(
    shape: MoeShape,
    inputs: Sequence[RefLayerInput],
    mode: str = "faithful",
    weight_seed: int = 7,
    clamp: float = 0.0,
    expert_alignment: int = 1,
) -> list[npt.NDArray[np.float64]] | list[npt.NDArray[np.uint16]]:
    """Fused layer on all ranks: 'exact' -> fp64 [T, H]; 'faithful' / 'composed' -> bf16 bits uint16 [T, H]."""

# ---- DLPack (bind_dlpack.cpp) ----

def dlpack_describe(capsule: _Capsule) -> tuple[int, tuple[int, ...], tuple[int, ...], str, int, int]:
    """(data_ptr, shape, strides in elements, dtype name, device_type, device_id); the capsule is not consumed."""

def dlpack_make_capsule(
    data_ptr: int,
    shape: Sequence[int],
    dtype: str,
    device_type: int,
    device_id: int,
    owner: object = None,
    strides: Sequence[int] = [],
) -> _Capsule:
    """A 'dltensor' capsule viewing data_ptr (strides in elements; empty: C-contiguous); keeps `owner` alive."""

# ---- EP runtime (bind_runtime.cpp; GPU) ----

def nccl_unique_id_hex() -> str:
    """A fresh NCCL unique id as hex (rank 0 makes it; the group shares it)."""

def ep_buffer_size_hint(
    num_ranks: int,
    num_max_tokens_per_rank: int,
    hidden: int,
    num_topk: int,
    num_experts: int,
    dtype: str = "bf16",
    scales: str = "none",
) -> int:
    """Bytes of one rank's symmetric EP buffer (the EpBuffer also allocates small workspaces)."""

def ep_validate_config(
    num_ranks: int,
    num_max_tokens_per_rank: int,
    hidden: int,
    num_topk: int,
    num_experts: int,
    dtype: str = "bf16",
    scales: str = "none",
) -> None:
    """EpBufferConfig::validate: raises symmoe._C.Error naming the bad field (no GPU needed)."""

def ep_scale_row_bytes(scales: str, hidden: int) -> int:
    """scales: none | fp32_per128 | ue8m0_per32 | ue8m0_per128."""

class EpHandle:
    """Device EPHandle of one local rank (DeepEP field names; pointers as ints)."""

    def __init__(self) -> None: ...
    @property
    def rank(self) -> int: ...
    @property
    def num_ranks(self) -> int: ...
    @property
    def do_expand(self) -> bool: ...
    @property
    def num_experts(self) -> int: ...
    @property
    def num_topk(self) -> int: ...
    @property
    def expert_alignment(self) -> int: ...
    @property
    def num_max_tokens_per_rank(self) -> int: ...
    @property
    def num_tokens(self) -> int: ...
    @property
    def num_recv_tokens(self) -> int:
        """-1 until known (cpu_sync)."""
    @property
    def num_expanded_tokens(self) -> int:
        """-1 until known (cpu_sync)."""
    @property
    def num_recv_tokens_per_expert_list(self) -> list[int]: ...
    @property
    def device(self) -> int: ...
    @property
    def num_local_experts(self) -> int: ...
    @property
    def ptrs(self) -> dict[str, int]:
        """Metadata array name -> device address."""

class Communicator:
    @staticmethod
    def in_process(num_ranks: int, timeout_ms: int = -1) -> Communicator:
        """num_ranks virtual ranks over the visible GPUs of this process."""
    @staticmethod
    def multi_process(
        rank: int, world_size: int, local_rank: int, unique_id_hex: str, timeout_ms: int = -1
    ) -> Communicator:
        """This process is `rank`; every process passes the same unique id."""
    @property
    def num_ranks(self) -> int: ...
    @property
    def backend(self) -> str:
        """'in_process' or 'multi_process'."""
    @property
    def local_ranks(self) -> list[dict[str, int]]:
        """One dict (rank, device, num_sms) per rank this process drives."""
    def stream(self, rank: int) -> int: ...
    def host_barrier(self) -> None: ...
    def synchronize(self) -> None: ...
    def reset_sync_state(self) -> None: ...

class EpBuffer:
    def __init__(
        self,
        comm: Communicator,
        num_max_tokens_per_rank: int,
        hidden: int,
        num_topk: int,
        num_experts: int,
        dtype: str = "bf16",
        scales: str = "none",
    ) -> None:
        """Collective; keeps `comm` alive."""
    @property
    def x_row_bytes(self) -> int: ...
    @property
    def scale_row_bytes(self) -> int: ...
    def dispatch(
        self,
        args: Sequence[dict[str, int]],
        handles: Sequence[EpHandle],
        expand: bool = False,
        expert_alignment: int = 1,
        zero_padding: bool = True,
        cached: bool = False,
        num_sms: int = 0,
        cpu_sync: bool = True,
    ) -> list[dict[str, int]]:
        """Per local rank: args {num_tokens, x, x_scales, topk_idx, topk_weights, stream} -> addresses and rows."""
    def combine(
        self,
        args: Sequence[dict[str, int]],
        handles: Sequence[EpHandle],
        reduce_local_experts: bool = False,
        num_sms: int = 0,
        cpu_sync: bool = True,
    ) -> list[dict[str, int]]:
        """Per local rank: args {x, topk_weights, bias_0, bias_1, stream} -> {combined_x, combined_topk_weights}."""
    def dispatch_one(
        self,
        num_tokens: int,
        x: int,
        x_scales: int,
        topk_idx: int,
        topk_weights: int,
        stream: int,
        handle: EpHandle,
        expand: bool,
        expert_alignment: int,
        zero_padding: bool,
        cached: bool,
        num_sms: int,
        cpu_sync: bool,
        recv_x_out: int = 0,
        recv_scales_out: int = 0,
        recv_topk_idx_out: int = 0,
        recv_topk_weights_out: int = 0,
        out_rows: int = 0,
    ) -> tuple[int, int, int, int, int, int]:
        """-> (recv_x, recv_x_scales, recv_topk_idx, recv_topk_weights addresses, num_rows, row_capacity)."""
    def row_capacity(self, expand: bool, expert_alignment: int) -> int:
        """Rows of every dispatch output of this mode (the worst case)."""
    def combine_one(
        self,
        x: int,
        topk_weights: int,
        bias_0: int,
        bias_1: int,
        stream: int,
        handle: EpHandle,
        reduce_local_experts: bool,
        num_sms: int,
        cpu_sync: bool,
        combined_x_out: int = 0,
        combined_topk_weights_out: int = 0,
    ) -> tuple[int, int]:
        """-> (combined_x, combined_topk_weights addresses; 0 when no topk_weights were given)."""
    def synchronize(self) -> None: ...

class StreamOrder:
    """Orders one CUDA stream after another with a reusable event."""

    def __init__(self, device: int) -> None: ...
    def order(self, later: int, earlier: int) -> None:
        """Work enqueued on `later` from now on waits for the work enqueued on `earlier` so far."""

def memcpy_async(dst: int, src: int, num_bytes: int, stream: int) -> None:
    """Device-to-device copy of num_bytes on `stream`."""

# ---- fused layer (bind_mega.cpp; GPU except the host transforms and mega_check_shape) ----

def transform_l1_weights(
    data: npt.ArrayLike, scales: npt.ArrayLike
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float32]]:
    """(E4M3 [E, 2I, H], fp32 [E, 2I/128, H/128]) -> (interleaved data, scales [E, I/128, H/128, 2])."""

def transform_l1_weights_fp4(
    data: npt.ArrayLike, scales: npt.ArrayLike
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint32], npt.NDArray[np.float32]]:
    """(E2M1 [E, 2I, H/2], UE8M0 uint32 [E, 2I, H/128]) -> (data, MN-major scales, fp32 base scales)."""

def transform_l2_weights_fp4(
    data: npt.ArrayLike, scales: npt.ArrayLike
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint32], npt.NDArray[np.float32]]:
    """(E2M1 [E, H, I/2], UE8M0 uint32 [E, H, I/128]) -> (data, MN-major scales, fp32 base scales)."""

def mega_check_shape(shape: MoeShape, num_sms: int = 132) -> None:
    """MoeShape::validate and the fused kernel's plan (raises symmoe.Error naming the field; no GPU needed)."""

def swiglu_clamp_for_activation_clamp(activation_clamp: float) -> float:
    """DeepGEMM's activation_clamp (+inf for None) as the SwiGLU clamp of MegaMoe.set_clamp
    (include/symmoe/activation_clamp.hpp); raises ValueError for a negative or NaN value."""

class MegaMoe:
    """The fused MoE layer of one rank per process."""

    def __init__(
        self, comm: Communicator, shape: MoeShape, clamp: float = 0.0, num_sms: int = 0, count_received: bool = False
    ) -> None:
        """Collective; keeps `comm` alive."""
    @property
    def shape(self) -> MoeShape: ...
    @property
    def clamp(self) -> float: ...
    def plan(self) -> MegaPlan: ...
    def input_one(self) -> tuple[int, int, int, int, int]:
        """-> (x, x_scales, x_scales_stride in floats, topk_idx, topk_weights): device addresses of the inputs."""
    def bind_fp8_weights_one(self, w1: int, w1_scales: int, w2: int, w2_scales: int) -> None:
        """FP8 weights: E4M3 w1 / w2 with their fp32 block scales (w1's transformed)"""
    def bind_fp4_weights_one(
        self, w1: int, w1_base_scales: int, w2: int, w2_base_scales: int, w1_scale_codes: int, w2_scale_codes: int
    ) -> None:
        """FP4 weights: packed E2M1 w1 / w2, their fp32 base scales and UE8M0 scale codes (transform_*_weights_fp4)"""
    def set_clamp(self, clamp: float) -> None: ...
    def forward_one(
        self, num_tokens: int, x: int, x_scales: int, topk_idx: int, topk_weights: int, y: int, stream: int
    ) -> int:
        """-> address of y (the layer's own buffer when y is 0)."""
    def received_counts(self) -> int: ...
    def synchronize(self) -> None: ...

class ComposedMoe:
    """The composed MoE layer (EP -> GEMMs -> combine) of one rank per process, for comparisons."""

    def __init__(
        self,
        comm: Communicator,
        shape: MoeShape,
        w1: int,
        w1_scales: int,
        w2: int,
        w2_scales: int,
        clamp: float = 0.0,
        expert_alignment: int = 128,
    ) -> None: ...
    def forward_one(
        self, num_tokens: int, x: int, x_scales: int, topk_idx: int, topk_weights: int, y: int, stream: int
    ) -> int: ...
    def synchronize(self) -> None: ...
