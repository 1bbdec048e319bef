"""The fused MoE layer with the DeepGEMM-shaped API (symmoe.fp8_mega_moe, or symmoe.fp8_fp4_mega_moe with
--weights fp4), one process per GPU. FP8 ran on nvidia-h200-x2, 2026-11-30 (python/tests_gpu/run_device.sh): rel.
error 0.027, 164.6 us eager, 162.2 us graph. FP4 has not run as this example yet (the layer has: tests_gpu).

    torchrun --nproc-per-node 2 python/examples/mega_moe.py [--weights fp8|fp4] [--tokens 256] [--hidden 2048]
                                                            [--intermediate 1024] [--experts 64] [--topk 6]
                                                            [--clamp 10]

Each rank makes the experts (the same global set on every rank; FP8: E4M3 with 128 x 128 scales; FP4: DeepGEMM's
pairs, E2M1 int8 [E, N, K/2] with four UE8M0 codes per int32 [E, N, K/128], the checkpoint format of recipe (1, 1,
32)), transforms its local slice with symmoe.transform_weights_for_mega_moe, routes its bf16 tokens with a softmax
router, quantises them to FP8 with fp32 scales per 128 channels, copies them into the symmetric buffer, runs the
layer and compares y with a pure-torch fp32 model of the same layer on the (dequantised) weights (expected: a few %
relative, the FP8 re-quantisation of the L1 output; the FP4 -> E4M3 conversion in the kernel is exact). Then it
times the layer eagerly and under a CUDA graph.
"""
import argparse
import os

import torch
import torch.distributed as dist

import symmoe
from symmoe.torch_reference import (fp4_experts_as_fp32, make_fp4_experts, make_fp8_experts, moe_forward_fp32,
                                    quantize_tokens_fp8, rel_frobenius)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", choices=("fp8", "fp4"), default="fp8", help="expert weight format")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--intermediate", type=int, default=1024)
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--topk", type=int, default=6)
    ap.add_argument("--clamp", type=float, default=None, help="SwiGLU activation clamp")
    args = ap.parse_args()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    T, H, I, E, K = args.tokens, args.hidden, args.intermediate, args.experts, args.topk
    El = E // world

    fp4 = args.weights == "fp4"
    layer = symmoe.fp8_fp4_mega_moe if fp4 else symmoe.fp8_mega_moe
    buffer = symmoe.get_symm_buffer_for_mega_moe(dist.group.WORLD, E, T, K, H, I)  # one buffer for either format
    experts = (make_fp4_experts if fp4 else make_fp8_experts)(E, H, I, seed=1)  # all of them: the reference
    local = tuple((w[rank * El:(rank + 1) * El], s[rank * El:(rank + 1) * El]) for w, s in experts)
    l1, l2 = symmoe.transform_weights_for_mega_moe(*local)  # FP4: (data, scale codes, base scales) per layer

    torch.manual_seed(100 + rank)
    x = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
    router = torch.randn(H, E, device="cuda") / H ** 0.5
    topk_weights, topk_idx = torch.topk(torch.softmax(x.float() @ router, dim=-1), K, dim=-1)
    x_fp8, x_sf = quantize_tokens_fp8(x)

    buffer.x[:T].copy_(x_fp8)
    buffer.x_sf[:T].copy_(x_sf)
    buffer.topk_idx[:T].copy_(topk_idx)
    buffer.topk_weights[:T].copy_(topk_weights)
    y = torch.empty(T, H, dtype=torch.bfloat16, device="cuda")
    layer(y, l1, l2, buffer, activation_clamp=args.clamp)
    buffer.synchronize()

    reference = fp4_experts_as_fp32(*experts) if fp4 else experts
    want = moe_forward_fp32(x_fp8, x_sf, topk_idx, topk_weights, *reference, activation_clamp=args.clamp)
    err = rel_frobenius(want, y.float())

    def time_us(fn, iters=50):
        fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        dist.barrier()
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) * 1e3 / iters

    eager = time_us(lambda: layer(y, l1, l2, buffer, activation_clamp=args.clamp))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        layer(y, l1, l2, buffer, activation_clamp=args.clamp)
    graphed = time_us(graph.replay)
    buffer.synchronize()
    print(f"[rank {rank}] fused MoE layer, {args.weights} weights, T={T} H={H} I={I} E={E} K={K} ranks={world}: rel. "
          f"error vs fp32 torch {err:.4f}; {eager:.1f} us eager, {graphed:.1f} us per CUDA-graph replay", flush=True)
    del graph
    dist.barrier()
    buffer.destroy()
    dist.destroy_process_group()
    if err > 0.06:
        raise SystemExit(f"rank {rank}: relative error {err:.4f} > 0.06")


if __name__ == "__main__":
    main()
