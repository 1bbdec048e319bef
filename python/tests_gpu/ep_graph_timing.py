"""ElasticBuffer from Python under CUDA-graph capture, and its timing next to the C++ `symmoe bench ep`.
One process per GPU:

    torchrun --nproc-per-node 2 python/tests_gpu/ep_graph_timing.py [--shape v3] [--tokens 128] [--sms 8,16,24,32]
                                                                     [--out DIR]

Same configuration as `symmoe bench ep` (FP8 E4M3 x + fp32 scales per 128, fresh non-expand dispatch, bf16 combine,
do_cpu_sync=False, uniform routing with the bench's seed, T = num_max_tokens_per_rank = --tokens).
Check (exit 1 on failure): a graph of dispatch + combine captured from Python replays to the bits of the eager calls
(outputs poisoned before the replay).
Times (rank 0's stream, CUDA events, medians; rank 0 prints them):
  graph_dispatch_us, graph_combine_us   one call, from graphs of --calls calls (how `symmoe bench ep` times them)
  graph_pair_us     dispatch + combine from one graph of --calls pairs
  eager_pair_us     dispatch + combine called from Python in a loop (GPU time per pair; host-bound if host > GPU)
  host_pair_us      CPU time of one Python dispatch + combine (checks, DLPack, launches), no GPU wait
  host_native_pair_us   the same through symmoe._C directly (addresses precomputed): the binding + C++ floor
Rank 0 appends one JSON line per SM count to <out>/python-ep.jsonl.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import symmoe  # noqa: E402
from symmoe import reference as ref  # noqa: E402

BENCH_ROUTING_SEED = 1234  # bench/ep.cu


def start_buffer(args):
    """torchrun's process for this GPU: the NCCL process group and an FP8 ElasticBuffer of named_shape(--shape, world
    size, --tokens). Returns (rank, world, buf). ep_host_breakdown.py starts the same way."""
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    shape = symmoe.named_shape(args.shape, world, args.tokens)
    buf = symmoe.ElasticBuffer(dist.group.WORLD, num_max_tokens_per_rank=args.tokens, hidden=shape.hidden,
                               num_topk=shape.num_topk, num_experts=shape.num_experts, use_fp8_dispatch=True)
    return rank, world, buf


def finish_buffer(buf, exit_code):
    """Collective end of start_buffer(): destroys the buffer and the process group, then exits with exit_code."""
    dist.barrier()
    buf.destroy()
    dist.destroy_process_group()
    sys.exit(exit_code)


def median_us(fn, reps, warmup=2):
    """Median of `reps` event-timed runs of fn() on the current stream, in microseconds."""
    for _ in range(warmup):
        fn()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in events)


class Case:
    """Inputs of one rank and the calls under test."""

    def __init__(self, buf, rank, tokens):
        H, K, E = buf.hidden, buf.num_topk, buf.num_experts
        g = torch.Generator(device="cuda").manual_seed(7 + rank)
        self.buf = buf
        self.x = torch.randn(tokens, H, device="cuda", generator=g).to(torch.float8_e4m3fn)
        self.sf = torch.rand(tokens, H // 128, device="cuda", generator=g) + 0.5
        idx, w = ref.routing(tokens, E, K, kind="uniform", seed=BENCH_ROUTING_SEED, rank=rank)
        self.idx, self.w = torch.from_numpy(idx).cuda(), torch.from_numpy(w).cuda()
        rows = buf.num_ranks * buf.num_max_tokens_per_rank  # non-expand row capacity (do_cpu_sync=False)
        self.y = torch.randn(rows, H, device="cuda", generator=g).to(torch.bfloat16)

    def dispatch(self, sms):
        return self.buf.dispatch((self.x, self.sf), topk_idx=self.idx, topk_weights=self.w, do_cpu_sync=False,
                                 num_sms=sms)

    def combine(self, handle, sms):
        return self.buf.combine(self.y, handle=handle, do_cpu_sync=False, num_sms=sms)

    def pair(self, sms):
        recv_x, _, _, handle, _ = self.dispatch(sms)
        combined_x, _, _ = self.combine(handle, sms)
        return recv_x, handle, combined_x

    def native_args(self, sms):
        """What symmoe._C's dispatch_one and combine_one take for this case, addresses precomputed: (handle, ins, y,
        stream), with handle a fresh dispatch's (keep it while calling), ins = (T, x, sf, idx, w, stream,
        handle.native) the leading arguments of dispatch_one and y the combine input's address."""
        _, _, _, handle, _ = self.dispatch(sms)
        stream = torch.cuda.current_stream().cuda_stream or 1
        ins = (self.x.shape[0], self.x.data_ptr(), self.sf.data_ptr(), self.idx.data_ptr(), self.w.data_ptr(), stream,
               handle.native)
        return handle, ins, self.y.data_ptr(), stream

    def native_host_us(self, sms, iters):
        """CPU time of one dispatch + combine through symmoe._C with precomputed addresses (no Python checks)."""
        handle, args, y, stream = self.native_args(sms)
        impl, native = self.buf._impl, handle.native
        start = time.perf_counter()
        for _ in range(iters):
            impl.dispatch_one(*args, False, 1, True, False, sms, False)
            impl.combine_one(y, 0, 0, 0, stream, native, False, sms, False)
        return (time.perf_counter() - start) / iters * 1e6

    def prime_handle_pool(self, sms, n=3):
        """n handles with device metadata, released to the buffer's pool: a dispatch under capture then takes one
        instead of allocating (cudaMalloc is not capturable in torch's default 'global' capture mode)."""
        held = [self.dispatch(sms) for _ in range(n)]
        torch.cuda.synchronize()
        del held


def capture(fn, calls, mode, keep=False):
    """A torch CUDA graph of `calls` calls of fn(); returns (graph, what the calls returned if keep). Results not
    kept release their handles at once, so the calls reuse pooled handles (the graph writes their metadata; the
    pool keeps them allocated while the buffer lives)."""
    graph, kept = torch.cuda.CUDAGraph(), []
    torch.cuda.synchronize()
    with torch.cuda.graph(graph, capture_error_mode=mode):
        for _ in range(calls):
            result = fn()
            if keep:
                kept.append(result)
            del result
    return graph, kept


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="v3")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--sms", default="8,16,24,32")
    ap.add_argument("--calls", type=int, default=20, help="calls per captured graph (bench ep: 20 below 4096 tokens)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--eager-iters", type=int, default=200)
    ap.add_argument("--out", default=None)
    ap.add_argument("--profile", action="store_true",
                    help="cProfile of the eager loop at the last SM count (rank 0 prints the top functions)")
    args = ap.parse_args()
    rank, world, buf = start_buffer(args)
    case = Case(buf, rank, args.tokens)
    sms_list = [int(s) for s in args.sms.split(",")]
    failures, rows = [], []

    # ---- graph capture check (first SM count) ----
    sms = sms_list[0]
    for _ in range(3):  # eager warm-up: outputs allocated
        case.pair(sms)
    case.prime_handle_pool(sms)
    recv_x, handle, combined_x = case.pair(sms)
    torch.cuda.synchronize()
    want_recv = recv_x[0][:handle.device_counts[0].item()].view(torch.uint8).clone()
    want_comb = combined_x.clone()
    del recv_x, handle, combined_x
    mode = "global"
    try:
        graph, kept = capture(lambda: case.pair(sms), 1, mode, keep=True)
    except Exception as e:  # noqa: BLE001 - report and retry with the relaxed mode
        print(f"[rank {rank}] capture_error_mode=global failed: {type(e).__name__}: {e}", flush=True)
        mode = "relaxed"
        graph, kept = capture(lambda: case.pair(sms), 1, mode, keep=True)
    g_recv_x, g_handle, g_comb = kept[0]
    g_recv_x[0].view(torch.uint8).fill_(0xFF)
    g_comb.view(torch.int16).fill_(-1)
    torch.cuda.synchronize()
    dist.barrier()
    graph.replay()
    torch.cuda.synchronize()
    buf.synchronize()
    n = g_handle.device_counts[0].item()
    got_recv = g_recv_x[0][:n].view(torch.uint8)
    ok = n == want_recv.shape[0] and torch.equal(got_recv, want_recv) and torch.equal(g_comb, want_comb)
    if not ok:
        failures.append(f"rank {rank}: graph replay differs from eager (recv rows {n} vs {want_recv.shape[0]})")
    print(f"[rank {rank}] CUDA graph (capture_error_mode={mode}) of dispatch+combine replays bitwise equal to eager: "
          f"{'ok' if ok else 'FAILED'} ({n} rows received)", flush=True)
    del graph, kept, g_recv_x, g_handle, g_comb, got_recv

    # ---- timing ----
    for sms in sms_list:
        for _ in range(3):
            case.pair(sms)
        _, _, _, fixed_handle, _ = case.dispatch(sms)  # handle for the combine-only graph
        case.prime_handle_pool(sms)
        dist.barrier()
        t = {}
        for name, fn in (("graph_dispatch_us", lambda: case.dispatch(sms)),
                         ("graph_combine_us", lambda: case.combine(fixed_handle, sms)),
                         ("graph_pair_us", lambda: case.pair(sms))):
            graph, kept = capture(fn, args.calls, mode)
            dist.barrier()
            t[name] = median_us(graph.replay, args.reps) / args.calls
            torch.cuda.synchronize()
            del graph, kept
        dist.barrier()
        iters = args.eager_iters

        def eager_loop():
            for _ in range(iters):
                case.pair(sms)

        t["eager_pair_us"] = median_us(eager_loop, 5, warmup=1) / iters
        torch.cuda.synchronize()
        dist.barrier()
        start = time.perf_counter()
        eager_loop()
        t["host_pair_us"] = (time.perf_counter() - start) / iters * 1e6
        torch.cuda.synchronize()
        dist.barrier()
        t["host_native_pair_us"] = case.native_host_us(sms, iters)
        torch.cuda.synchronize()
        buf.synchronize()
        dist.barrier()
        rows.append(dict(sms=sms, **t))

    if args.profile:  # where the Python host time of an eager dispatch + combine goes (every rank runs the loop)
        import cProfile
        import io
        import pstats
        prof = cProfile.Profile()
        dist.barrier()
        prof.enable()
        for _ in range(args.eager_iters):
            case.pair(sms_list[-1])
        prof.disable()
        torch.cuda.synchronize()
        dist.barrier()
        if rank == 0:
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(14)
            print(f"cProfile of {args.eager_iters} eager dispatch+combine pairs (rank 0, tottime):\n"
                  + text.getvalue(), flush=True)

    if rank == 0:
        print(f"\nPython ElasticBuffer, {args.shape} FP8, {args.tokens} tokens/rank, {world} ranks (rank 0's stream)")
        print(f"{'sms':>4} {'graph_disp':>10} {'graph_comb':>10} {'graph_d+c':>10} {'graph_pair':>10} "
              f"{'eager_pair':>10} {'host_pair':>10} {'host_native':>11}   (us)")
        for r in rows:
            print(f"{r['sms']:>4} {r['graph_dispatch_us']:>10.2f} {r['graph_combine_us']:>10.2f} "
                  f"{r['graph_dispatch_us'] + r['graph_combine_us']:>10.2f} {r['graph_pair_us']:>10.2f} "
                  f"{r['eager_pair_us']:>10.2f} {r['host_pair_us']:>10.2f} {r['host_native_pair_us']:>11.2f}")
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, "python-ep.jsonl"), "a") as f:
                for r in rows:
                    # Strict JSON (allow_nan=False raises rather than writing NaN); version and the commit the
                    # device scripts export (SYMMOE_COMMIT), torch's CUDA and NCCL, as the C++ benches record.
                    f.write(json.dumps(dict(date=time.strftime("%Y-%m-%d", time.gmtime()),
                                            gpu=os.environ.get("SYMMOE_GPU_KIND", "unknown"), bench="python-ep",
                                            version=symmoe.__version__,
                                            commit=os.environ.get("SYMMOE_COMMIT", "unknown"),
                                            cuda=torch.version.cuda,
                                            nccl=".".join(map(str, torch.cuda.nccl.version())),
                                            shape=args.shape, ranks=world, tokens=args.tokens,
                                            dtype="fp8_e4m3+fp32_per128", capture_error_mode=mode, **r),
                                       allow_nan=False) + "\n")
    for f in failures:
        print(f, flush=True)
    finish_buffer(buf, 1 if failures else 0)


if __name__ == "__main__":
    main()
