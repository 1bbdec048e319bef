"""A DeepEP V2-style dispatch/combine script that runs unchanged against symmoe (issue 8: "swapping deep_ep for
symmoe works unchanged for the documented subset"). Everything below the import uses only DeepEP V2's public names:

    torchrun --nproc-per-node 2 python/tests_gpu/deep_ep_style.py            # import symmoe as deep_ep
    torchrun --nproc-per-node 2 python/tests_gpu/deep_ep_style.py --deep-ep  # the same script on DeepEP itself

The subset it exercises: ElasticBuffer(group, num_max_tokens_per_rank=, hidden=, num_topk=,
use_fp8_dispatch=, allow_hybrid_mode=, explicitly_destroy=) without num_experts; get_buffer_size_hint,
get_theoretical_num_sms, get_logical_domain_size; deep_ep.topk_idx_t; dispatch (BF16 and FP8 (x, sf) payloads,
non-expand and expand with expert_alignment (recv_topk_idx None: the expert of a row is its segment),
cumulative_local_expert_recv_stats, a cached dispatch with the handle, async_with_compute_stream + EventOverlap, a
dispatch without topk_weights); combine (with topk_weights); EPHandle fields (num_recv_tokens_per_expert_list,
psum_num_recv_tokens_per_scaleup_rank, psum_num_recv_tokens_per_expert, num_unaligned_recv_tokens_per_expert);
destroy(). DeepEP's own test, tests/elastic/test_ep.py, runs through python/tests_gpu/run_deepep_test.sh.
Checks are against pure-torch computations on each rank (NCCL all-gather of the routing for the counts); exits 1 on
the first failure. Ran on nvidia-h200-x2, 2026-11-30 (symmoe as deep_ep): all passed. Not covered (symmoe differs, see python/symmoe/ep.py): deterministic_sort (symmoe is always
deterministic), RDMA/hybrid arguments (accepted, unused), num_bytes (accepted, unused), V1 Buffer.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist


def per_token_cast_to_fp8(x):
    """bf16 [T, H] -> (e4m3 [T, H], fp32 [T, H/128]) with amax scaling per 128 channels (SM90 recipe)."""
    t, h = x.shape
    blocks = x.float().view(t, h // 128, 128)
    sf = blocks.abs().amax(dim=2).clamp_min(1e-4) / 448.0
    return (blocks / sf[..., None]).view(t, h).to(torch.float8_e4m3fn), sf


def dequant(x):
    if isinstance(x, tuple):
        data, sf = x
        return (data.float().view(data.shape[0], -1, 128) * sf[..., None]).view(data.shape[0], -1)
    return x.float()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deep-ep", action="store_true", help="import the real deep_ep instead of symmoe")
    ap.add_argument("--num-tokens", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--num-topk", type=int, default=6)
    ap.add_argument("--num-experts", type=int, default=64)
    args = ap.parse_args()
    if args.deep_ep:
        import deep_ep
    else:
        import symmoe as deep_ep  # the swap under test

    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    rank, world, group = dist.get_rank(), dist.get_world_size(), dist.group.WORLD
    torch.manual_seed(1234 + rank)
    T, H, K, E = args.num_tokens, args.hidden, args.num_topk, args.num_experts
    El = E // world
    failures = []

    def check(ok, what):
        print(f"[rank {rank}] {what}: {'ok' if ok else 'FAILED'}", flush=True)
        if not ok:
            failures.append(what)

    # The same routing on every call: scores -> top-k.
    scores = torch.randn(T, E, device="cuda").abs() + 1
    topk_weights, topk_idx = torch.topk(scores, K, dim=-1, largest=True, sorted=False)
    topk_idx = topk_idx.to(deep_ep.topk_idx_t)
    topk_weights = topk_weights / topk_weights.sum(dim=1, keepdim=True)
    topk_idx[0, -1] = -1  # a masked lane
    topk_weights[0, -1] = 0
    all_idx = [torch.empty_like(topk_idx) for _ in range(world)]
    dist.all_gather(all_idx, topk_idx)
    all_idx = torch.cat(all_idx)
    mine = all_idx[(all_idx >= rank * El) & (all_idx < (rank + 1) * El)] - rank * El
    want_per_expert = torch.bincount(mine, minlength=El)
    x_bf16 = torch.randn(T, H, dtype=torch.bfloat16, device="cuda")

    for use_fp8 in (False, True):
        tag = "fp8" if use_fp8 else "bf16"
        hint = deep_ep.ElasticBuffer.get_buffer_size_hint(group, T, H, K, use_fp8)
        buffer = deep_ep.ElasticBuffer(group, num_max_tokens_per_rank=T, hidden=H, num_topk=K,
                                       use_fp8_dispatch=use_fp8, allow_hybrid_mode=False, explicitly_destroy=True)
        check(buffer.get_logical_domain_size()[1] == world and hint > 0, f"{tag} buffer ({hint >> 20} MiB hint)")
        num_sms = buffer.get_theoretical_num_sms(E, K)
        x = per_token_cast_to_fp8(x_bf16) if use_fp8 else x_bf16
        x_seen = dequant(x)

        # Non-expand dispatch: one row per (token, destination rank), local expert ids in recv_topk_idx.
        stats = torch.zeros(El, dtype=torch.int, device="cuda")
        recv_x, recv_topk_idx, recv_topk_weights, handle, event = buffer.dispatch(
            x, topk_idx=topk_idx, topk_weights=topk_weights, cumulative_local_expert_recv_stats=stats,
            num_experts=E, num_sms=num_sms)
        rows = dequant(recv_x)
        check(rows.shape[0] == handle.num_recv_tokens == int(handle.psum_num_recv_tokens_per_scaleup_rank[-1]),
              f"{tag} non-expand: {handle.num_recv_tokens} rows received")
        check(torch.equal(stats, want_per_expert.int()), f"{tag} cumulative_local_expert_recv_stats")
        valid = recv_topk_idx >= 0
        factor = torch.where(valid, (recv_topk_idx + rank * El + 1).float() * recv_topk_weights,
                             torch.zeros_like(recv_topk_weights)).sum(dim=1)
        y = (rows * factor[:, None]).to(torch.bfloat16)
        combined_x, _, _ = buffer.combine(y, handle)
        want = x_seen * ((topk_idx + 1).float() * topk_weights).sum(dim=1, keepdim=True)
        err = float((combined_x.float() - want).norm() / want.norm())
        check(err < 2e-2, f"{tag} non-expand dispatch -> toy experts -> combine, rel. error {err:.1e}")

        # Cached dispatch with the handle: same rows, no counting.
        recv_x2, _, _, _, _ = buffer.dispatch(x, handle=handle, topk_weights=topk_weights, num_sms=num_sms)
        rows2 = dequant(recv_x2)[:rows.shape[0]]
        check(torch.equal(rows2, rows), f"{tag} cached dispatch reproduces the rows")

        # Expand dispatch (one aligned segment per local expert), async event, then combine with weights.
        recv_x, recv_topk_idx, recv_topk_weights, handle, event = buffer.dispatch(
            x, topk_idx=topk_idx, topk_weights=topk_weights, num_experts=E, expert_alignment=128, do_expand=True,
            num_sms=num_sms, async_with_compute_stream=True)
        event.current_stream_wait()
        counts = list(handle.num_recv_tokens_per_expert_list)  # aligned to expert_alignment
        check(counts == [-(-c // 128) * 128 for c in want_per_expert.tolist()],
              f"{tag} expand: per-expert counts {counts[:4]}...")
        rows = dequant(recv_x)
        # The expert of an expand row is its segment (recv_topk_idx is None): local expert i owns rows
        # [psum[i] - count[i], psum[i]) (psum = aligned start + unaligned count); padding rows have weight 0.
        check(recv_topk_idx is None, f"{tag} expand: recv_topk_idx is None")
        psum = handle.psum_num_recv_tokens_per_expert.long()
        count = handle.num_unaligned_recv_tokens_per_expert.long()
        row_ids = torch.arange(rows.shape[0], device="cuda")
        expert = torch.zeros(rows.shape[0], dtype=torch.long, device="cuda")
        for i in range(El):
            expert[(row_ids >= psum[i] - count[i]) & (row_ids < psum[i])] = i + rank * El + 1
        y = (rows * (expert.float() * recv_topk_weights)[:, None]).to(torch.bfloat16)  # combine does not weight
        with event:
            combined_x, combined_w, _ = buffer.combine(y, handle, topk_weights=recv_topk_weights)
        err = float((combined_x.float() - want).norm() / want.norm())
        check(err < 2e-2, f"{tag} expand dispatch -> experts -> combine, rel. error {err:.1e}")
        w_err = float((combined_w - topk_weights * (topk_idx >= 0)).abs().max())
        check(w_err < 1e-6, f"{tag} combined_topk_weights (the lanes' weights back) max error {w_err:.1e}")

        # A dispatch without weights (recv_topk_weights is None).
        _, _, no_w, handle, _ = buffer.dispatch(x, topk_idx=topk_idx, num_experts=E, num_sms=num_sms)
        check(no_w is None and handle.num_recv_tokens >= 0, f"{tag} dispatch without topk_weights")
        dist.barrier()
        buffer.destroy()

    dist.barrier()
    dist.destroy_process_group()
    print(f"[rank {rank}] deep_ep-style script ({'deep_ep' if args.deep_ep else 'symmoe as deep_ep'}): "
          f"{'all checks passed' if not failures else f'{len(failures)} FAILED'}", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
