// See timing.hpp.
#include "cli_common/timing.hpp"

#include <algorithm>
#include <vector>

#include "symmoe/cuda_check.hpp"

namespace symmoe::cli {

double median_time_us(cudaStream_t stream, const std::function<void()>& fn, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<cudaEvent_t> events(2 * reps);
  for (auto& e : events) SYMMOE_CUDA_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < reps; ++i) {
    SYMMOE_CUDA_CHECK(cudaEventRecord(events[2 * i], stream));
    fn();
    SYMMOE_CUDA_CHECK(cudaEventRecord(events[2 * i + 1], stream));
  }
  SYMMOE_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i) SYMMOE_CUDA_CHECK(cudaEventElapsedTime(&ms[i], events[2 * i], events[2 * i + 1]));
  for (auto& e : events) SYMMOE_CUDA_CHECK(cudaEventDestroy(e));
  std::nth_element(ms.begin(), ms.begin() + reps / 2, ms.end());
  return ms[reps / 2] * 1000.0;
}

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
  const double us = median_time_us(
      comm.stream(first),
      [&] {
        for (size_t i = 0; i < local.size(); ++i) {
          SYMMOE_CUDA_CHECK(cudaSetDevice(local[i].device));
          SYMMOE_CUDA_CHECK(cudaGraphLaunch(execs[i], comm.stream(local[i].rank)));
        }
        SYMMOE_CUDA_CHECK(cudaSetDevice(local[0].device));
      },
      2, reps);
  comm.synchronize();
  for (auto e : execs) SYMMOE_CUDA_CHECK(cudaGraphExecDestroy(e));
  return us / calls;
}

}  // namespace symmoe::cli
