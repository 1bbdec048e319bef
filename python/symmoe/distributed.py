"""Communicator from Python: one rank per process through the caller's torch.distributed group (torchrun), or
in-process virtual ranks. The C++ runtime is the one `symmoe launch` uses (src/runtime): the group only carries
the NCCL unique id; the runtime then bootstraps its own NCCL communicator and exchanges the CUDA IPC handles of
every symmetric buffer through it.
"""
import socket
import sys

from . import _C


class Communicator:
    """Wraps symmoe._C.Communicator. Build with from_group(group) (torchrun) or in_process(num_ranks)."""

    def __init__(self, native):
        self.native = native

    @classmethod
    def from_group(cls, group=None, timeout_ms=-1):
        """Collective over `group` (default: the world group). Each process drives the GPU that is current for
        torch (torch.cuda.current_device(), set it from LOCAL_RANK first). Rank 0 of the group makes the NCCL
        unique id; all_gather_object shares it together with (host, device), so two processes on one GPU fail
        here with a clear error instead of hanging in NCCL."""
        import torch
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("symmoe.Communicator.from_group: torch.distributed is not initialised "
                               "(call torch.distributed.init_process_group first, e.g. under torchrun)")
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        device = torch.cuda.current_device()
        mine = {"rank": rank, "host": socket.gethostname(), "device": device,
                "unique_id": _C.nccl_unique_id_hex() if rank == 0 else None}
        gathered = [None] * world
        dist.all_gather_object(gathered, mine, group=group)
        seen = {}
        for g in gathered:
            key = (g["host"], g["device"])
            if key in seen:
                raise RuntimeError(f"symmoe: group ranks {seen[key]} and {g['rank']} both use GPU {g['device']} on "
                                   f"{g['host']}; call torch.cuda.set_device(LOCAL_RANK) before building a buffer")
            seen[key] = g["rank"]
        unique_id = next(g["unique_id"] for g in gathered if g["rank"] == 0)
        return cls(_C.Communicator.multi_process(rank, world, device, unique_id, timeout_ms))

    @classmethod
    def for_group(cls, group=None, timeout_ms=-1):
        """What a buffer built from `group` uses: from_group when a group is given or torch.distributed is
        initialised, else one in-process rank (single-GPU scripts without torchrun)."""
        dist = sys.modules.get("torch.distributed")
        dist_ready = dist is not None and dist.is_available() and dist.is_initialized()
        if group is not None or dist_ready:
            return cls.from_group(group, timeout_ms)
        return cls.in_process(1, timeout_ms)

    @classmethod
    def in_process(cls, num_ranks=1, timeout_ms=-1):
        """num_ranks virtual ranks over the visible GPUs of this process (round-robin)."""
        return cls(_C.Communicator.in_process(num_ranks, timeout_ms))

    @property
    def num_ranks(self):
        return self.native.num_ranks

    @property
    def backend(self):
        return self.native.backend

    @property
    def local_ranks(self):
        """[{rank, device, num_sms}] of the ranks this process drives."""
        return self.native.local_ranks

    def stream(self, rank):
        return self.native.stream(rank)

    def host_barrier(self):
        self.native.host_barrier()

    def synchronize(self):
        self.native.synchronize()

    def __repr__(self):
        ranks = [r["rank"] for r in self.local_ranks]
        return f"<symmoe.Communicator {self.backend} ranks={self.num_ranks} local={ranks}>"
