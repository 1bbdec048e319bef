// launch_barrier: a kernel of whole-rank barriers (grid sync + cross-rank + grid sync). Used by tests (stress,
// planted stalls, CUDA-graph replay), by `symmoe bench p2p` for barrier latency, and as a device-side barrier.
#include "kernels/comm/barrier.cuh"
#include "runtime/backend.hpp"
#include "symmoe/cuda_check.hpp"

namespace symmoe {

namespace {

__global__ void __launch_bounds__(32)
    rank_barrier_kernel(comm::SymBuffer sym, layout::SyncArea area, layout::WaitContext ctx, int iterations) {
  for (int i = 0; i < iterations; ++i)
    if (!comm::rank_barrier(sym, area, ctx)) return;  // timed out: the record is written, exit cleanly
}

}  // namespace

void launch_barrier(const Communicator& comm, int rank, int num_ctas, int iterations) {
  const auto& p = comm.placement(rank);
  if (num_ctas == 0) num_ctas = p.num_sms;
  SYMMOE_CHECK(num_ctas >= 1 && num_ctas <= p.num_sms, "runtime", "launch_barrier: rank ", rank, " may use 1..",
               p.num_sms, " CTAs (its SM share), got ", num_ctas);
  SYMMOE_CHECK(iterations >= 0, "runtime", "launch_barrier: iterations must be >= 0, got ", iterations);
  runtime_detail::DeviceGuard guard(p.device);
  rank_barrier_kernel<<<num_ctas, 32, 0, comm.stream(rank)>>>(
      comm::make_sym_buffer(comm.sync_buffer(), rank), comm.sync_area(rank), comm.wait_context(rank), iterations);
  SYMMOE_CUDA_CHECK_LAUNCH("rank_barrier_kernel");
}

}  // namespace symmoe
