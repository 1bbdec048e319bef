"""Multi-process ElasticBuffer check against the golden model, one process per GPU.

    torchrun --nproc-per-node 2 python/tests_gpu/ep_torchrun_check.py [--tokens 128] [--fp8 | --dtypes bf16,fp8]

Every rank all-gathers every rank's inputs (numpy), runs the golden model over all ranks, and compares its own
dispatch outputs, handle metadata and combine outputs bitwise. Exits non-zero on the first mismatch.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import symmoe  # noqa: E402
from symmoe import reference as ref  # noqa: E402
from golden import assert_bitwise, bits  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--experts", type=int, default=32)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--fp8", action="store_true", help="same as --dtypes fp8")
    ap.add_argument("--dtypes", default="bf16", help="comma list of payloads, each with its own buffer: bf16, fp8")
    args = ap.parse_args()
    dtypes = ["fp8"] if args.fp8 else args.dtypes.split(",")
    for d in dtypes:
        if d not in ("bf16", "fp8"):
            ap.error(f"--dtypes: unknown payload {d!r} (bf16 or fp8)")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    for dtype in dtypes:
        check(args, rank, world, fp8=dtype == "fp8")
    dist.barrier()
    dist.destroy_process_group()


def check(args, rank, world, fp8):
    T_max, H, E, K = args.tokens, args.hidden, args.experts, args.topk
    buf = symmoe.ElasticBuffer(dist.group.WORLD, num_max_tokens_per_rank=T_max, hidden=H, num_topk=K,
                               num_experts=E, use_fp8_dispatch=fp8)
    for kind, expand, alignment in (("uniform", False, 1), ("zipf", True, 1), ("hot", True, 128)):
        t = T_max - rank  # ranks differ in token count
        idx, w = ref.routing(t, E, K, kind=kind, mask_prob=0.05, seed=17, rank=rank)
        x = torch.randn(t, H, device="cuda").to(torch.bfloat16)
        payload, g_in = x, bits(x)
        if fp8:
            codes, scales = symmoe.quantize_activations(x.float().cpu().numpy(), 128, "fp32")
            payload = (torch.from_numpy(codes).cuda().view(torch.float8_e4m3fn), torch.from_numpy(scales).cuda())
            g_in = (codes, scales)
        recv_x, recv_idx, recv_w, handle, _ = buf.dispatch(
            payload, topk_idx=torch.from_numpy(idx).cuda(), topk_weights=torch.from_numpy(w).cuda(),
            do_expand=expand, expert_alignment=alignment)
        everyone = [None] * world
        dist.all_gather_object(everyone, (g_in, idx, w))
        golden = ref.dispatch([e[0] for e in everyone], topk_idx=[e[1] for e in everyone],
                              topk_weights=[e[2] for e in everyone], num_experts=E, num_max_tokens_per_rank=T_max,
                              expert_alignment=alignment, do_expand=expand)
        g_x, g_idx, g_w, g_handle = golden[rank]
        what = f"rank {rank} {kind} expand={expand}"
        if fp8:
            assert_bitwise(g_x[0], bits(recv_x[0]), what + " recv_x")
            assert_bitwise(g_x[1], bits(recv_x[1]), what + " recv_x scales")
        else:
            assert_bitwise(g_x, bits(recv_x), what + " recv_x")
        if expand:
            assert recv_idx is None, what + " recv_topk_idx must be None in expand mode (DeepEP)"
        else:
            assert_bitwise(g_idx, bits(recv_idx), what + " recv_topk_idx")
        assert_bitwise(g_w, bits(recv_w), what + " recv_topk_weights")
        assert_bitwise(g_handle.recv_src_metadata, bits(handle.recv_src_metadata), what + " recv_src_metadata")
        assert_bitwise(g_handle.psum_num_recv_tokens_per_rank, bits(handle.psum_num_recv_tokens_per_rank),
                       what + " psum_num_recv_tokens_per_rank")

        y = torch.randn((recv_x[0] if fp8 else recv_x).shape[0], H, device="cuda").to(torch.bfloat16)
        combined_x, combined_w, _ = buf.combine(y, handle=handle, topk_weights=recv_w)
        ys = [None] * world
        dist.all_gather_object(ys, (bits(y), bits(recv_w)))
        g_comb = ref.combine([e[0] for e in ys], handles=[g.handle for g in golden],
                             topk_weights=[e[1] for e in ys], reduce_local_experts=expand)[rank]
        assert_bitwise(g_comb[0], bits(combined_x), what + " combined_x")
        assert_bitwise(g_comb[1], bits(combined_w), what + " combined_topk_weights")
        print(f"[rank {rank}] {'fp8' if fp8 else 'bf16'} {kind} expand={expand} alignment={alignment}: "
              f"dispatch + combine bitwise OK", flush=True)
    dist.barrier()
    buf.destroy()


if __name__ == "__main__":
    main()
