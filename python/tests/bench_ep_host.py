"""Host cost of symmoe.ElasticBuffer's own Python in an eager dispatch + combine pair, on the CPU (not a test:
pytest collects test_*.py only). The configuration of python/tests_gpu/ep_graph_timing.py: V3 shape (H 7168,
top-8 of 256 experts), 1 rank, 128 tokens, FP8 x + fp32 scales, fresh non-expand dispatch with do_cpu_sync=False,
then combine; torch tensors, no events.

    PYTHONPATH=build/python python3 python/tests/bench_ep_host.py [--iters 20000] [--profile]

torch is fake_torch and the native EpBuffer a stub that only fills the handle, so the time is symmoe's Python plus
the fakes. Printed:
  pair_us          wall time of one pair (best of --repeats runs of --iters pairs)
  symmoe_us        pair_us times the share of the profiled time spent in symmoe's own code (its functions and the
                   builtins they call directly), i.e. without the fakes' and stubs' own time
  calls_per_pair   Python-level calls per pair (cProfile), and of those, calls into (fake) torch and the native stub
The GPU number (real torch and the real binding) is ep_graph_timing.py's host_pair_us - host_native_pair_us.
"""
import argparse
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_torch  # noqa: E402

sys.modules["torch"] = fake_torch
import symmoe  # noqa: E402

R, T_MAX, H, K, E, T, SMS = 1, 128, 7168, 8, 256, 128, 24
_STUB_FILES = ("fake_torch.py", "fake_cuda.py", os.path.basename(__file__))


class StubNative:
    """symmoe._C.EpHandle stand-in (the host fields a dispatch fills; device metadata at fake addresses)."""

    def __init__(self):
        self.num_recv_tokens = self.num_expanded_tokens = -1
        self.ptrs = {"topk_idx": 0x10000000}


class StubEpBuffer:
    """symmoe._C.EpBuffer stand-in doing as little as possible: fills a fresh handle, returns fixed addresses."""
    _result = (0x1000, 0x2000, 0x3000, 0x4000, -1, R * T_MAX)

    def row_capacity(self, expand, alignment):
        return R * T_MAX

    def dispatch_one(self, num_tokens, x, sf, idx, w, stream, native, expand, alignment, zero_padding, cached,
                     num_sms, cpu_sync, *out):
        if not cached:
            native.rank, native.num_ranks, native.do_expand, native.num_experts = 0, R, expand, E
            native.num_topk, native.expert_alignment, native.num_max_tokens_per_rank = K, alignment, T_MAX
            native.num_tokens, native.num_local_experts = num_tokens, E // R
        return self._result

    def combine_one(self, *args):
        return 0x5000, 0


def make_case():
    buf = symmoe.ElasticBuffer._validation_only(R, T_MAX, H, K, E, use_fp8_dispatch=True)
    buf._state.new_native_handle = StubNative
    buf._state.natives[("fp8", "fp32_per128")] = StubEpBuffer()
    x = fake_torch.Tensor((T, H), fake_torch.float8_e4m3fn)
    sf = fake_torch.Tensor((T, H // 128), fake_torch.float32)
    idx = fake_torch.Tensor((T, K), fake_torch.int64)
    w = fake_torch.Tensor((T, K), fake_torch.float32)
    y = fake_torch.Tensor((R * T_MAX, H), fake_torch.bfloat16)

    def pair():
        recv_x, _, _, handle, _ = buf.dispatch((x, sf), topk_idx=idx, topk_weights=w, do_cpu_sync=False,
                                               num_sms=SMS)
        buf.combine(y, handle=handle, do_cpu_sync=False, num_sms=SMS)
    return pair


def is_stub(func):
    return os.path.basename(func[0]) in _STUB_FILES


def is_symmoe(func):
    return os.sep + "symmoe" + os.sep in func[0]


def split(stats):
    """(seconds in symmoe's code, in the fakes/stubs, calls, calls into the fakes/stubs) of a pstats.Stats."""
    own = fake = 0.0
    calls = fake_calls = 0
    for func, (cc, nc, tt, ct, callers) in stats.stats.items():
        calls += nc
        if is_symmoe(func):
            own += tt
        elif is_stub(func):
            fake += tt
            fake_calls += nc
        else:  # a builtin or library function: charged to its callers
            for caller, (_, c_nc, c_tt, _) in callers.items():
                if is_symmoe(caller):
                    own += c_tt
                else:
                    fake += c_tt
                    if is_stub(caller):
                        continue
                    fake_calls += c_nc if caller[0] == "~" else 0
    return own, fake, calls, fake_calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--profile", action="store_true", help="print the top functions by tottime")
    args = ap.parse_args()
    pair = make_case()
    for _ in range(200):
        pair()
    best = float("inf")
    for _ in range(args.repeats):
        start = time.perf_counter()
        for _ in range(args.iters):
            pair()
        best = min(best, time.perf_counter() - start)
    pair_us = best / args.iters * 1e6
    n = min(args.iters, 5000)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        pair()
    prof.disable()
    stats = pstats.Stats(prof)
    own, fake, calls, _ = split(stats)
    stub_calls = sum(nc for func, (_, nc, _, _, _) in stats.stats.items() if is_stub(func))
    print(f"pair_us {pair_us:.2f}  symmoe_us {pair_us * own / (own + fake):.2f}  "
          f"(profiled: symmoe {own / n * 1e6:.2f} us, fakes {fake / n * 1e6:.2f} us per pair)  "
          f"calls_per_pair {calls / n:.0f} (into fakes/stubs {stub_calls / n:.0f})")
    if args.profile:
        stats.sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
