"""Pure-torch models of the MoE layer, for tests and examples on the GPU (imports torch; not imported by symmoe).

moe_forward_fp32: the layer in fp32 from dequantised FP8 inputs and weights, without the kernel's intermediate
roundings (no FP8 re-quantisation of the L1 output, no bf16 rounding of the L2 rows): what the fused layer
approximates. Its distance to the kernel is the FP8 error of the L1 re-quantisation (~2.7% relative Frobenius in
the golden model: ref::moe_forward_faithful vs exact) plus bf16 roundings.

make_fp8_experts: random FP8 E4M3 experts with fp32 128x128 block scales, deterministic in (seed, device type),
weights of variance ~1/fan_in (as the golden model's random experts), ORIGINAL layout (L1 gate rows then up rows).
make_fp4_experts: the same for FP4 weights, as DeepGEMM's fp8_fp4_mega_moe takes them (E2M1 + UE8M0 per row per 32
columns); fp4_experts_as_fp32 turns them into weights moe_forward_fp32 takes (exact).
quantize_tokens_fp8: bf16 / fp32 tokens -> (e4m3, fp32 scales per 128 channels), the fused layer's activations.
"""
import torch


def dequantize_blocks(codes, scales, block=128):
    """fp32 of e4m3 codes [..., M, N] with scales [..., ceil(M/block), N/block] (or [..., M, N/block] if
    scales has M rows: per-row activation scales)."""
    x = codes.float()
    s = scales.float()
    if s.shape[-2] != x.shape[-2]:
        s = s.repeat_interleave(block, dim=-2)[..., :x.shape[-2], :]
    return x * s.repeat_interleave(block, dim=-1)


def make_fp8_experts(num_experts, hidden, intermediate, seed=7, device="cuda", experts=None):
    """((w1 e4m3 [E, 2I, H], w1_sf fp32 [E, 2I/128, H/128]), (w2 e4m3 [E, H, I], w2_sf fp32 [E, H/128, I/128])) for
    the global experts `experts` (default range(num_experts)); expert e depends only on (seed, e), so every rank
    can make any subset (its local experts, or all of them for a reference)."""
    experts = list(range(num_experts)) if experts is None else list(experts)

    def one(g, rows, cols):
        codes = ((torch.rand(rows, cols, device=device, generator=g) * 2 - 1) * 448).to(torch.float8_e4m3fn)
        base = (3.0 / cols) ** 0.5 / 448
        return codes, base * (0.5 + torch.rand(rows // 128, cols // 128, device=device, generator=g))

    parts = []
    for e in experts:
        g = torch.Generator(device=device).manual_seed(seed * 1000003 + e)
        parts.append(one(g, 2 * intermediate, hidden) + one(g, hidden, intermediate))
    w1, w1_sf, w2, w2_sf = (torch.stack([p[i].view(torch.uint8) if i % 2 == 0 else p[i] for p in parts])
                            for i in range(4))  # float8 stacked as bytes (not every torch concatenates float8)
    return (w1.view(torch.float8_e4m3fn), w1_sf), (w2.view(torch.float8_e4m3fn), w2_sf)


def make_fp4_experts(num_experts, hidden, intermediate, seed=7, device="cuda", experts=None):
    """DeepGEMM's FP4 pairs ((w1 int8 [E, 2I, H/2], w1_sf int32 [E, 2I, H/128]), (w2 int8 [E, H, I/2], w2_sf int32
    [E, H, I/128])): E2M1 two per byte (column 2j in the low nibble), four UE8M0 codes per int32 (one per row per 32
    columns), ORIGINAL layout, for the global experts `experts` (default range(num_experts)). Gaussian weights of
    variance 1/fan_in quantised on the host by symmoe.quantize_weights_fp4; expert e depends only on (seed, e)."""
    import numpy as np
    from .formats import quantize_weights_fp4
    experts = list(range(num_experts)) if experts is None else list(experts)

    def one(rng, rows, cols):
        packed, codes = quantize_weights_fp4(rng.standard_normal((rows, cols), dtype=np.float32) / cols ** 0.5)
        return packed.view(np.int8), np.ascontiguousarray(codes).view(np.int32)

    parts = []
    for e in experts:
        rng = np.random.default_rng(seed * 1000003 + e)
        parts.append(one(rng, 2 * intermediate, hidden) + one(rng, hidden, intermediate))
    w1, w1_sf, w2, w2_sf = (torch.from_numpy(np.stack([p[i] for p in parts])).to(device) for i in range(4))
    return (w1, w1_sf), (w2, w2_sf)


_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def dequantize_fp4(w, sf):
    """fp32 [..., N, K] of an FP4 pair (E2M1 int8 [..., N, K/2], packed UE8M0 int32 [..., N, K/128]); exact."""
    b = w.view(torch.uint8)
    nibbles = torch.stack([b & 0xF, b >> 4], dim=-1).flatten(-2).long()  # column 2j in the low nibble
    codes = sf.contiguous().view(torch.uint8)  # [..., N, K/32]: byte j of an int32 = columns 32j..32j+31 of its 128
    scale = torch.exp2(codes.float() - 127).repeat_interleave(32, dim=-1)
    return torch.tensor(_E2M1, device=w.device)[nibbles] * scale


def fp4_experts_as_fp32(l1_weights, l2_weights):
    """make_fp4_experts' pairs as moe_forward_fp32 takes weights: (fp32 weights, unit 128x128 block scales)."""
    def one(w, sf):
        full = dequantize_fp4(w, sf)
        e, n, k = full.shape
        return full, torch.ones(e, n // 128, k // 128, device=full.device)
    return one(*l1_weights), one(*l2_weights)


def quantize_tokens_fp8(x):
    """bf16 / fp32 [T, H] -> (e4m3 [T, H], fp32 [T, H/128]) with amax scaling per 128 channels."""
    t, h = x.shape
    blocks = x.float().reshape(t, h // 128, 128)
    sf = blocks.abs().amax(dim=-1).clamp_min(1e-4) / 448
    return (blocks / sf.unsqueeze(-1)).to(torch.float8_e4m3fn).reshape(t, h), sf


def make_fp8_tokens(num_tokens, hidden, seed=1, device="cuda"):
    """x ~ N(0, 1) as (e4m3 [T, H], fp32 per-128 scales [T, H/128]) with amax scaling per 128 channels."""
    g = torch.Generator(device=device).manual_seed(seed)
    codes, sf = quantize_tokens_fp8(torch.randn(num_tokens, hidden, device=device, generator=g))
    return codes, sf.contiguous()


def moe_forward_fp32(x, x_sf, topk_idx, topk_weights, l1_weights, l2_weights, activation_clamp=None):
    """fp32 [T, H]: sum over lanes k with topk_idx[t, k] >= 0 of W2[e] . (w[t, k] * SwiGLU(W1[e] . x[t])).
    Weights: all E experts, ORIGINAL layout (untransformed), indexed by global expert id. activation_clamp as
    DeepGEMM's: None or +inf no clamp, c >= 0 clamps gate to <= c and up to [-c, c]."""
    xf = dequantize_blocks(x, x_sf)
    T, H = xf.shape
    y = torch.zeros(T, H, dtype=torch.float32, device=xf.device)
    w1, w1_sf = l1_weights
    w2, w2_sf = l2_weights
    inter = w1.shape[1] // 2
    clamp = float("inf") if activation_clamp is None else float(activation_clamp)  # DeepGEMM's: 0 clamps to 0
    for e in torch.unique(topk_idx[topk_idx >= 0]).tolist():
        t, k = torch.nonzero(topk_idx == e, as_tuple=True)
        h = xf[t] @ dequantize_blocks(w1[e], w1_sf[e]).T  # [n, 2I]
        gate, up = h[:, :inter], h[:, inter:]
        if clamp != float("inf"):
            gate, up = gate.clamp(max=clamp), up.clamp(-clamp, clamp)
        a = gate / (1 + torch.exp(-gate)) * up * topk_weights[t, k].unsqueeze(1)
        y.index_add_(0, t, a @ dequantize_blocks(w2[e], w2_sf[e]).T)
    return y


def rel_frobenius(ref, got):
    ref, got = ref.double(), got.double()
    return float((got - ref).norm() / ref.norm().clamp_min(1e-30))
