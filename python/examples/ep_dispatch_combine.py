"""DeepEP-style expert parallelism with symmoe.ElasticBuffer, one process per GPU.
Ran on nvidia-h200-x2, 2026-11-29 (python/tests_gpu/run_device.sh): BF16 and --fp8, rel. error 1.9e-03.

    torchrun --nproc-per-node 2 python/examples/ep_dispatch_combine.py [--fp8]

Each rank routes its tokens to top-k experts, dispatches them (expand layout: one contiguous, aligned segment per
local expert - what a grouped GEMM consumes), runs a toy "expert" (scale by expert id + 1, times the routing
weight), and combines the rows back. The result is checked against the same toy computed locally.
"""
import argparse
import os

import torch
import torch.distributed as dist

import symmoe


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--topk", type=int, default=6)
    ap.add_argument("--fp8", action="store_true", help="FP8 E4M3 payload with fp32 per-128 scales")
    args = ap.parse_args()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    T, H, E, K = args.tokens, args.hidden, args.experts, args.topk
    El = E // world

    buffer = symmoe.ElasticBuffer(dist.group.WORLD, num_max_tokens_per_rank=T, hidden=H, num_topk=K,
                                  num_experts=E, use_fp8_dispatch=args.fp8)
    if rank == 0:
        hint = symmoe.ElasticBuffer.get_buffer_size_hint(world, T, H, K, args.fp8, num_experts=E)
        print(f"EP buffer: {hint / 2**20:.1f} MiB per rank")

    # Router: softmax over the top-k logits.
    x = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
    logits = torch.randn(T, E, device="cuda")
    topk_logits, topk_idx = logits.topk(K, dim=1)
    topk_weights = topk_logits.softmax(dim=1)

    payload = x
    if args.fp8:  # per-token per-128-channel scales (DeepSeek-V3 activations)
        blocks = x.float().view(T, H // 128, 128)
        scales = (blocks.abs().amax(dim=2).clamp_min(1e-4) / 448.0)
        payload = ((blocks / scales[..., None]).view(T, H).to(torch.float8_e4m3fn), scales.contiguous())

    recv_x, recv_topk_idx, recv_topk_weights, handle, event = buffer.dispatch(
        payload, topk_idx=topk_idx, topk_weights=topk_weights, num_experts=E, do_expand=True,
        expert_alignment=128, async_with_compute_stream=True)
    event.current_stream_wait()

    # Toy experts on the expanded rows: local expert e scales its segment by (global id + 1) * weight.
    if args.fp8:
        rows, sf = recv_x
        h = (rows.float().view(-1, H // 128, 128) * sf[..., None]).view(-1, H)
    else:
        h = recv_x.float()
    valid = recv_topk_idx >= 0
    factor = torch.where(valid, (recv_topk_idx + rank * El + 1).float() * recv_topk_weights, torch.zeros_like(h[:, 0]))
    y = (h * factor[:, None]).to(torch.bfloat16)

    combined_x, _, _ = buffer.combine(y, handle=handle)

    # The same toy locally: sum over routed lanes of (expert + 1) * weight * x (dequantised x for FP8).
    x_seen = x.float() if not args.fp8 else (payload[0].float().view(T, H // 128, 128) * payload[1][..., None]).view(T, H)
    want = x_seen * ((topk_idx + 1).float() * topk_weights).sum(dim=1, keepdim=True)
    err = (combined_x.float() - want).norm() / want.norm()
    print(f"[rank {rank}] received {handle.num_recv_tokens} tokens, {handle.num_expanded_tokens} expanded rows; "
          f"combine rel. error vs local toy: {err:.2e}", flush=True)
    assert err < 2e-2, "combine does not match the local computation"
    dist.barrier()
    buffer.destroy()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
