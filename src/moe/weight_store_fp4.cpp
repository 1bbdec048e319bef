// FP4 expert weights on the GPUs: the synthetic FP4 generator on the host, the host checks of FP4 experts and the
// store's FP4 fill (transform_l{1,2}_weights_fp4 per expert on every host core, then one upload per chunk of
// experts). Layouts in include/symmoe/weight_store.hpp.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "moe/synthetic_matrix.hpp"
#include "moe/weight_store_impl.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/fp4_fold.hpp"
#include "symmoe/moe_weights.hpp"
#include "symmoe/weight_transform_fp4.hpp"

namespace symmoe {

namespace synthetic {
namespace {

Fp4Weights host_matrix_fp4(int rows, int cols, uint64_t seed, int expert, Matrix m, int fan_in) {
  Fp4Weights w = sized_matrix<Fp4Weights>(rows, cols, size_t(rows) * cols / 2);
  const uint64_t key = stream_key(seed, expert, m + 4), code_key = stream_key(seed, expert, m + 6);
  const int row_bytes = cols / 2;
  for (int r = 0; r < rows; ++r)
    for (int b = 0; b < row_bytes; b += 8) {
      const uint64_t word = mix64(key ^ ((uint64_t(uint32_t(r)) << 32) | uint32_t(b / 8)));
      for (int i = 0; i < 8 && b + i < row_bytes; ++i) w.data[size_t(r) * row_bytes + b + i] = uint8_t(word >> (8 * i));
    }
  const int base = fp4_base_code(fan_in), blocks = cols / 32;
  w.scales_ue8m0.resize(size_t(rows) * blocks);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < blocks; ++j)
      w.scales_ue8m0[size_t(r) * blocks + j] = uint8_t(base + int(3.f * unit(code_key, r, j)) - 1);
  return w;
}

}  // namespace

int fp4_base_code(int fan_in) { return 127 + int(std::lround(std::log2(1.0 / std::sqrt(8.5625 * double(fan_in))))); }

ref::ExpertWeightsFp4 host_expert_fp4(int hidden, int intermediate, int expert, uint64_t seed) {
  return host_expert_matrices<ref::ExpertWeightsFp4>(
      hidden, intermediate, "synthetic FP4 weights",
      [&](int rows, int cols, Matrix m, int fan_in) { return host_matrix_fp4(rows, cols, seed, expert, m, fan_in); });
}

}  // namespace synthetic

namespace {

void check_matrix_fp4(const Fp4Weights& w, int rows, int cols, int expert, const char* name) {
  SYMMOE_CHECK(w.num_rows == rows && w.num_cols == cols, "moe", "FP4 weights: expert ", expert, " ", name, " is [",
               w.num_rows, ", ", w.num_cols, "], expected [", rows, ", ", cols, "]");
  SYMMOE_CHECK(w.data.size() == size_t(rows) * cols / 2, "moe", "FP4 weights: expert ", expert, " ", name,
               ".data holds ", w.data.size(), " bytes, expected ", size_t(rows) * cols / 2, " (two E2M1 per byte)");
  SYMMOE_CHECK(w.scales_ue8m0.size() == size_t(rows) * (cols / 32), "moe", "FP4 weights: expert ", expert, " ", name,
               ".scales_ue8m0 holds ", w.scales_ue8m0.size(), " codes, expected ", size_t(rows) * (cols / 32),
               " (one per row per 32 columns)");
  fp4_fold_bases(w.scales_ue8m0.data(), rows, cols, "FP4 weights: expert " + std::to_string(expert) + " " + name,
                 nullptr);
}

// The packed int32 scales [rows, cols / 128] of a code array [rows, cols / 32] (byte for byte, fp4_fold.hpp).
std::vector<uint32_t> packed_codes(const std::vector<uint8_t>& codes) {
  std::vector<uint32_t> s(codes.size() / 4);
  std::memcpy(s.data(), codes.data(), s.size() * 4);
  return s;
}

// Host staging of a chunk of local experts in the device layout (weight_store.hpp, FP4).
struct Fp4Chunk {
  std::vector<uint8_t> w1, w2;
  std::vector<uint32_t> c1, c2;
  std::vector<float> b1, b2;
  explicit Fp4Chunk(const ExpertArraySizes& z, size_t n)
      : w1(n * z.w1_bytes),
        w2(n * z.w2_bytes),
        c1(n * z.w1_codes),
        c2(n * z.w2_codes),
        b1(n * z.w1_scales),
        b2(n * z.w2_scales) {}
  // Transforms expert w into slot j.
  void put(size_t j, const ref::ExpertWeightsFp4& w, const ExpertArraySizes& z, int H, int I) {
    const std::vector<uint32_t> s1 = packed_codes(w.w1.scales_ue8m0), s2 = packed_codes(w.w2.scales_ue8m0);
    gemm::transform_l1_weights_fp4(w.w1.data.data(), s1.data(), 1, I, H, w1.data() + j * z.w1_bytes,
                                   c1.data() + j * z.w1_codes, b1.data() + j * z.w1_scales);
    gemm::transform_l2_weights_fp4(w.w2.data.data(), s2.data(), 1, H, I, w2.data() + j * z.w2_bytes,
                                   c2.data() + j * z.w2_codes, b2.data() + j * z.w2_scales);
  }
};

template <typename T>
void copy_up(void* dst, const std::vector<T>& src, size_t count) {
  SYMMOE_CUDA_CHECK(cudaMemcpy(dst, src.data(), count * sizeof(T), cudaMemcpyHostToDevice));
}

// Runs f(i) for i in [0, n) on every host core; rethrows the first exception after all threads joined.
void parallel_for(size_t n, const std::function<void(size_t)>& f) {
  const size_t threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), std::max<size_t>(n, 1));
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) {
        try {
          f(i);
        } catch (...) {
          const std::lock_guard<std::mutex> lock(error_mutex);
          if (!error) error = std::current_exception();
          next = n;  // the other threads stop after their current item
        }
      }
    });
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

// Global expert e's host weights: a reference into the caller's map or `scratch`, filled.
using ExpertSource = std::function<const ref::ExpertWeightsFp4&(int expert, ref::ExpertWeightsFp4& scratch)>;

// Fills every local rank's allocation (layout::WeightStoreLayout, FP4) from `source`, in chunks of experts.
void fill_fp4(const std::vector<runtime::DeviceBlock>& blocks, const Communicator& comm, const MoeShape& shape,
              const ExpertSource& source) {
  const ExpertArraySizes z(shape, gemm::WeightFormat::kFp4);
  const int El = shape.num_local_experts(), H = shape.hidden, I = shape.intermediate;
  const size_t chunk = std::min<size_t>(El, 2 * std::max(1u, std::thread::hardware_concurrency()));
  Fp4Chunk host(z, chunk);
  const auto& local = comm.local_ranks();
  for (size_t i = 0; i < local.size(); ++i)
    for (int e0 = 0; e0 < El; e0 += int(chunk)) {
      const size_t n = std::min<size_t>(chunk, size_t(El - e0));
      parallel_for(n, [&](size_t j) {
        ref::ExpertWeightsFp4 scratch;
        host.put(j, source(local[i].rank * El + e0 + int(j), scratch), z, H, I);
      });
      const layout::WeightStoreLayout l(shape, gemm::WeightFormat::kFp4, blocks[i].base());
      SYMMOE_CUDA_CHECK(cudaSetDevice(local[i].device));
      copy_up(l.get_w1() + e0 * z.w1_bytes, host.w1, n * z.w1_bytes);
      copy_up(l.get_w1_codes() + e0 * z.w1_codes, host.c1, n * z.w1_codes);
      copy_up(l.get_w1_scales() + e0 * z.w1_scales, host.b1, n * z.w1_scales);
      copy_up(l.get_w2() + e0 * z.w2_bytes, host.w2, n * z.w2_bytes);
      copy_up(l.get_w2_codes() + e0 * z.w2_codes, host.c2, n * z.w2_codes);
      copy_up(l.get_w2_scales() + e0 * z.w2_scales, host.b2, n * z.w2_scales);
    }
  // A pageable cudaMemcpy may return before its DMA lands; the layers read the weights on non-blocking streams.
  for (const RankPlacement& p : local) {
    SYMMOE_CUDA_CHECK(cudaSetDevice(p.device));
    SYMMOE_CUDA_CHECK(cudaDeviceSynchronize());
  }
}

}  // namespace

void check_expert_fp4(const MoeShape& shape, int expert, const ref::ExpertWeightsFp4& w) {
  const int H = shape.hidden, I = shape.intermediate;
  check_matrix_fp4(w.w1, 2 * I, H, expert, "w1");
  check_matrix_fp4(w.w2, H, I, expert, "w2");
}

MoeWeightStore MoeWeightStore::from_host_fp4(const Communicator& comm, const MoeShape& shape,
                                             const ref::ExpertWeightMapFp4& weights) {
  shape.validate();
  const int El = shape.num_local_experts();
  for (const RankPlacement& p : comm.local_ranks())  // every check before anything is allocated
    for (int e = p.rank * El; e < (p.rank + 1) * El; ++e) {
      const auto it = weights.find(e);
      SYMMOE_CHECK(it != weights.end(), "moe", "from_host_fp4: no weights for expert ", e, " (rank ", p.rank, ")");
      check_expert_fp4(shape, e, it->second);
    }
  MoeWeightStore store;
  store.impl_->allocate(comm, shape, gemm::WeightFormat::kFp4);
  fill_fp4(store.impl_->ranks, comm, shape,
           [&](int e, ref::ExpertWeightsFp4&) -> const ref::ExpertWeightsFp4& { return weights.at(e); });
  return store;
}

MoeWeightStore MoeWeightStore::synthetic_fp4(const Communicator& comm, const MoeShape& shape, uint64_t seed) {
  MoeWeightStore store;
  store.impl_->allocate(comm, shape, gemm::WeightFormat::kFp4);
  fill_fp4(store.impl_->ranks, comm, shape, [&](int e, ref::ExpertWeightsFp4& scratch) -> const ref::ExpertWeightsFp4& {
    scratch = synthetic::host_expert_fp4(shape.hidden, shape.intermediate, e, seed);
    return scratch;
  });
  return store;
}

}  // namespace symmoe
