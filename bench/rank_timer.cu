// See rank_timer.hpp.
#include "rank_timer.hpp"

#include <vector>

#include "bench.hpp"
#include "symmoe/cuda_check.hpp"

namespace symmoe::bench {

double graph_time_all_ranks_us(Communicator& comm, const std::function<void()>& fn, int calls, int reps) {
  const auto& local = comm.local_ranks();
  std::vector<cudaGraphExec_t> execs(local.size());
  for (const auto& p : local) {
    SYMMOE_CUDA_CHECK(cudaSetDevice(p.device));
    SYMMOE_CUDA_CHECK(cudaStreamBeginCapture(comm.stream(p.rank), cudaStreamCaptureModeRelaxed));
  }
  for (int c = 0; c < calls; ++c) fn();
  for (size_t i = 0; i < local.size(); ++i) {
    cudaGraph_t graph;
    SYMMOE_CUDA_CHECK(cudaSetDevice(local[i].device));
    SYMMOE_CUDA_CHECK(cudaStreamEndCapture(comm.stream(local[i].rank), &graph));
    SYMMOE_CUDA_CHECK(cudaGraphInstantiate(&execs[i], graph, 0));
    SYMMOE_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  const int first = local[0].rank;
  SYMMOE_CUDA_CHECK(cudaSetDevice(local[0].device));
  const double us = median_time_us(comm.stream(first), [&] {
    for (size_t i = 0; i < local.size(); ++i) {
      SYMMOE_CUDA_CHECK(cudaSetDevice(local[i].device));
      SYMMOE_CUDA_CHECK(cudaGraphLaunch(execs[i], comm.stream(local[i].rank)));
    }
    SYMMOE_CUDA_CHECK(cudaSetDevice(local[0].device));
  }, 2, reps);
  comm.synchronize();
  for (auto e : execs) SYMMOE_CUDA_CHECK(cudaGraphExecDestroy(e));
  return us / calls;
}

}  // namespace symmoe::bench
