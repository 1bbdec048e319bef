"""Fakes for the CPU tests of symmoe.ep: FakeCuda, a DLPack producer claiming to be a CUDA tensor at a fake
address (never dereferenced); FakeNative and FakeEpBuffer, stand-ins for symmoe._C.EpHandle and EpBuffer."""
from symmoe import _C
from symmoe.dlpack import KDL_CUDA


class FakeCuda:
    """A DLPack producer claiming to be a CUDA tensor (C-contiguous) at a fake, 256-byte aligned address."""
    _next = 0x7F0000000000

    def __init__(self, shape, dtype, device=0):
        self.shape, self.dtype, self.device = tuple(shape), dtype, device
        FakeCuda._next += 1 << 20
        self.ptr = FakeCuda._next

    def __dlpack__(self, stream=None, **kwargs):
        assert stream != 0, "DLPack forbids stream 0"
        return _C.dlpack_make_capsule(self.ptr, list(self.shape), self.dtype, KDL_CUDA, self.device)

    def __dlpack_device__(self):
        return (KDL_CUDA, self.device)


FIELDS = ("num_tokens_per_rank", "num_tokens_per_expert", "dst_buffer_slot_idx", "topk_idx",
          "psum_num_recv_tokens_per_rank", "num_unaligned_recv_tokens_per_expert", "psum_num_recv_tokens_per_expert",
          "num_recv_tokens_per_expert", "recv_src_metadata", "device_counts")


class FakeNative:
    """symmoe._C.EpHandle stand-in: device metadata at fake addresses, host fields as a dispatch leaves them."""

    def __init__(self):
        self.rank, self.num_ranks, self.do_expand, self.num_experts, self.num_topk = -1, 0, False, 0, 0
        self.expert_alignment, self.num_max_tokens_per_rank, self.num_tokens, self.device = 1, 0, 0, 0
        self.num_recv_tokens = self.num_expanded_tokens = -1
        self.num_recv_tokens_per_expert_list, self.num_local_experts = [], 0
        self.ptrs = {name: 0x10000000 * (i + 1) for i, name in enumerate(FIELDS)}


class FakeEpBuffer:
    """symmoe._C.EpBuffer stand-in for ranks R, experts E, top-k K: records calls, fills a fresh handle as
    EpBuffer::dispatch does, returns fixed output addresses and the given row counts (recv / expanded with CPU
    sync, -1 without) and row capacity."""

    def __init__(self, R, E, K, T_max, recv, expanded, capacity):
        self.R, self.E, self.K, self.T_max = R, E, K, T_max
        self.recv, self.expanded, self.capacity, self.calls = recv, expanded, capacity, []
        self.out_addresses, self.fail = (), None  # the last dispatch's caller-owned outputs; an error to raise

    def row_capacity(self, expand, alignment):
        return self.capacity

    def dispatch_one(self, num_tokens, x, sf, idx, w, stream, native, expand, alignment, zero_padding, cached,
                     num_sms, cpu_sync, *out_addresses):
        self.calls.append(("dispatch", num_tokens, x, sf, idx, w, stream, native, expand, alignment, zero_padding,
                           cached, num_sms, cpu_sync))
        self.out_addresses = out_addresses
        if self.fail:
            raise RuntimeError(self.fail)
        if not cached:
            native.rank, native.num_ranks, native.do_expand, native.num_experts = 0, self.R, expand, self.E
            native.num_topk, native.expert_alignment, native.num_max_tokens_per_rank = self.K, alignment, self.T_max
            native.num_tokens, native.num_local_experts = num_tokens, self.E // self.R
            native.num_recv_tokens = self.recv if cpu_sync else -1
            native.num_expanded_tokens = self.expanded if cpu_sync else -1
            native.num_recv_tokens_per_expert_list = [5] * (self.E // self.R) if cpu_sync else []
        rows = (self.expanded if expand else self.recv) if cpu_sync else -1
        return 0x1000, (0x2000 if sf else 0), 0x3000, 0x4000, rows, self.capacity

    def combine_one(self, *args):
        self.calls.append(("combine",) + args)
        return 0x5000, (0x6000 if args[1] else 0)
