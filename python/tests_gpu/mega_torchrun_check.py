"""The fused layer (symmoe.fp8_mega_moe) over several processes, one per GPU:

    torchrun --nproc-per-node 2 python/tests_gpu/mega_torchrun_check.py [--shape small|flash] [--tokens 64]

Every rank makes the same experts (deterministic per expert), keeps its local ones, runs the fused layer on its own
tokens (ranks differ in token count), and checks:
  - against the pure-torch fp32 model (all experts, this rank's tokens): relative Frobenius < --bound
    (default 0.06: about twice the golden model's own FP8 error, ~0.027; python/tests_gpu/test_mega_single_gpu.py
    measures it at the small shape);
  - bitwise against symmoe's composed path (ComposedMoe over the same communicator, weights and inputs);
  - a CUDA graph of fp8_mega_moe captured on every rank replays bitwise equal to eager on new inputs;
  - the received counts summed over ranks equal the routed (token, expert) pairs of all ranks.
Prints one line per check and rank; exits 1 on any failure.
Ran on nvidia-h200-x2, 2026-11-30: all passed at small and flash (errors 0.026-0.027): the first multi-process run
of MegaMoe.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import symmoe  # noqa: E402
from symmoe import _C  # noqa: E402
from symmoe import reference as ref  # noqa: E402
from symmoe.torch_reference import make_fp8_experts, make_fp8_tokens, moe_forward_fp32, rel_frobenius  # noqa: E402

SHAPES = {"small": (512, 256, 32, 6), "flash": (4096, 2048, 256, 6)}  # H, I, E, K


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="small", choices=sorted(SHAPES))
    ap.add_argument("--tokens", type=int, default=64, help="num_max_tokens_per_rank")
    ap.add_argument("--bound", type=float, default=0.06)
    ap.add_argument("--clamp", type=float, default=None)
    args = ap.parse_args()
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    H, I, E, K = SHAPES[args.shape]
    T_max, El = args.tokens, E // world
    failures = []

    def report(ok, msg):
        print(f"[rank {rank}] {args.shape}: {msg}: {'ok' if ok else 'FAILED'}", flush=True)
        if not ok:
            failures.append(msg)

    buf = symmoe.get_symm_buffer_for_mega_moe(dist.group.WORLD, E, T_max, K, H, I)
    experts = make_fp8_experts(E, H, I, seed=7)  # all experts: the reference needs them
    local = tuple((a[rank * El:(rank + 1) * El], s[rank * El:(rank + 1) * El]) for a, s in experts)
    l1, l2 = symmoe.transform_weights_for_mega_moe(*local)
    composed = _C.ComposedMoe(buf.communicator.native, buf.shape, l1[0].data_ptr(), l1[1].data_ptr(),
                              l2[0].data_ptr(), l2[1].data_ptr(),
                              _C.swiglu_clamp_for_activation_clamp(float("inf") if args.clamp is None else args.clamp))

    def inputs(t, kind, seed):
        x, sf = make_fp8_tokens(t, H, seed=seed)
        idx, w = ref.routing(t, E, K, kind=kind, mask_prob=0.05, seed=seed, rank=rank)
        return x, sf, torch.from_numpy(idx).cuda(), torch.from_numpy(w).cuda()

    def fill(x, sf, idx, w):
        t = x.shape[0]
        buf.x[:t].copy_(x)
        buf.x_sf[:t].copy_(sf)
        buf.topk_idx[:t].copy_(idx)
        buf.topk_weights[:t].copy_(w)

    def fused(t, stats=None):
        y = torch.empty(t, H, dtype=torch.bfloat16, device="cuda")
        y.view(torch.int16).fill_(-1)
        symmoe.fp8_mega_moe(y, l1, l2, buf, cumulative_local_expert_recv_stats=stats,
                            activation_clamp=args.clamp)
        buf.synchronize()
        return y

    for kind, seed in (("uniform", 31), ("zipf", 32), ("hot", 33)):
        t = T_max - 3 * rank  # ranks differ in token count
        x, sf, idx, w = inputs(t, kind, seed)
        fill(x, sf, idx, w)
        stats = torch.zeros(El, dtype=torch.int64, device="cuda")
        y = fused(t, stats)
        err = rel_frobenius(moe_forward_fp32(x, sf, idx, w, *experts, activation_clamp=args.clamp), y.float())
        report(err < args.bound, f"{kind} T={t} fused vs fp32 torch {err:.4f} (bound {args.bound})")
        y_c = torch.empty_like(y)
        y_c.view(torch.int16).fill_(0)
        composed.forward_one(t, x.data_ptr(), sf.data_ptr(), idx.data_ptr(), w.data_ptr(), y_c.data_ptr(),
                             torch.cuda.current_stream().cuda_stream or 1)
        torch.cuda.synchronize()
        composed.synchronize()
        report(torch.equal(y.view(torch.int16), y_c.view(torch.int16)), f"{kind} T={t} fused == composed bitwise")
        routed = torch.bincount(idx[idx >= 0], minlength=E)
        dist.all_reduce(routed)
        want = routed[rank * El:(rank + 1) * El]
        report(torch.equal(stats, want), f"{kind} received counts == routed pairs of all ranks")

    # CUDA graph: captured once on every rank, replayed (collectively) on new inputs.
    t = T_max - rank
    fill(*inputs(t, "uniform", 40))
    y = torch.empty(t, H, dtype=torch.bfloat16, device="cuda")
    symmoe.fp8_mega_moe(y, l1, l2, buf, activation_clamp=args.clamp)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        symmoe.fp8_mega_moe(y, l1, l2, buf, activation_clamp=args.clamp)
    for seed in (41, 42):
        new = inputs(t, "zipf", seed)
        fill(*new)
        want = fused(t).clone()
        y.view(torch.int16).fill_(-1)
        dist.barrier()
        graph.replay()
        torch.cuda.synchronize()
        buf.synchronize()
        report(torch.equal(want.view(torch.int16), y.view(torch.int16)), f"graph replay (seed {seed}) == eager")
    del graph
    dist.barrier()
    del composed
    buf.destroy()
    dist.barrier()
    dist.destroy_process_group()
    print(f"[rank {rank}] {args.shape}: {'all checks passed' if not failures else f'{len(failures)} FAILED'}",
          flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
