#include "moe/layer_check.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "symmoe/cuda_check.hpp"
#include "symmoe/formats.hpp"

namespace symmoe::moe {

namespace {
size_t y_values(const std::vector<MoeForwardArgs>& args, size_t i, int hidden) {
  return size_t(args[i].num_tokens) * size_t(hidden);
}
}  // namespace

std::vector<std::vector<uint16_t>> download_y(const Communicator& comm, const std::vector<const uint16_t*>& y,
                                              const std::vector<MoeForwardArgs>& args, int hidden) {
  SYMMOE_CHECK(y.size() == args.size(), "moe", "download_y: ", y.size(), " y pointers for ", args.size(), " ranks");
  std::vector<std::vector<uint16_t>> out;
  for (size_t i = 0; i < y.size(); ++i) {
    out.emplace_back(y_values(args, i, hidden));
    SYMMOE_CUDA_CHECK(cudaSetDevice(comm.local_ranks()[i].device));
    if (!out.back().empty())
      SYMMOE_CUDA_CHECK(cudaMemcpy(out.back().data(), y[i], out.back().size() * 2, cudaMemcpyDeviceToHost));
  }
  return out;
}

void poison_y(const Communicator& comm, const std::vector<const uint16_t*>& y, const std::vector<MoeForwardArgs>& args,
              int hidden) {
  SYMMOE_CHECK(y.size() == args.size(), "moe", "poison_y: ", y.size(), " y pointers for ", args.size(), " ranks");
  for (size_t i = 0; i < y.size(); ++i) {
    SYMMOE_CUDA_CHECK(cudaSetDevice(comm.local_ranks()[i].device));
    SYMMOE_CUDA_CHECK(cudaMemset(const_cast<uint16_t*>(y[i]), 0xFF, y_values(args, i, hidden) * 2));
    SYMMOE_CUDA_CHECK(cudaDeviceSynchronize());  // done before the next call on the rank's (non-blocking) stream
  }
}

BitwiseDiff compare_bitwise(const Communicator& comm, const std::vector<std::vector<uint16_t>>& want,
                            const std::vector<std::vector<uint16_t>>& got, int hidden) {
  SYMMOE_CHECK(want.size() == got.size(), "moe", "compare_bitwise: ", want.size(), " ranks vs ", got.size());
  BitwiseDiff d;
  for (size_t r = 0; r < want.size(); ++r) {
    SYMMOE_CHECK(want[r].size() == got[r].size(), "moe", "compare_bitwise: local rank ", r, " has ", want[r].size(),
                 " values vs ", got[r].size());
    d.num_values += want[r].size();
    size_t last_row = ~size_t(0);
    for (size_t i = 0; i < want[r].size(); ++i) {
      if (want[r][i] == got[r][i]) continue;
      if (d.num_different++ == 0) {
        d.rank = comm.local_ranks()[r].rank;
        d.token = i / size_t(hidden), d.col = i % size_t(hidden);
        d.want = want[r][i], d.got = got[r][i];
      }
      if (i / size_t(hidden) != last_row) last_row = i / size_t(hidden), ++d.num_rows_different;
      const bool same_sign = (want[r][i] ^ got[r][i]) < 0x8000;
      const int steps = same_sign ? std::abs(int(want[r][i] & 0x7FFF) - int(got[r][i] & 0x7FFF)) : 65535;
      d.max_ulps = std::max(d.max_ulps, steps);
    }
  }
  return d;
}

std::string BitwiseDiff::to_string(const std::string& want_name, const std::string& got_name) const {
  if (equal()) return "bitwise equal (" + std::to_string(num_values) + " values)";
  char buf[256];
  std::snprintf(buf, sizeof buf, "first difference: rank %d token %zu col %zu: %s 0x%04x (%g) %s 0x%04x (%g)", rank,
                token, col, want_name.c_str(), want, double(fmt::bf16_to_float(want)), got_name.c_str(), got,
                double(fmt::bf16_to_float(got)));
  return std::string(buf) + " (" + std::to_string(num_different) + " of " + std::to_string(num_values) +
         " values differ in " + std::to_string(num_rows_different) + " rows, at most " + std::to_string(max_ulps) +
         " bf16 steps)";
}

}  // namespace symmoe::moe
