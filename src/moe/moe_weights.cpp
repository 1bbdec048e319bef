// Host side of the MoE expert weights: the synthetic generator on the host (for the golden model of sampled
// tokens) and the per-rank device store (synthetic GPU fill, or upload of host weights through the L1 transform).
#include "symmoe/moe_weights.hpp"

#include <algorithm>
#include <atomic>
#include <thread>

#include "moe/synthetic_matrix.hpp"
#include "moe/weight_store_impl.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/weight_transform.hpp"

namespace symmoe {

namespace synthetic {
namespace {

Fp8BlockWeights host_matrix(int rows, int cols, uint64_t seed, int expert, Matrix m, int fan_in) {
  Fp8BlockWeights w = sized_matrix<Fp8BlockWeights>(rows, cols, size_t(rows) * cols);
  const uint64_t key = stream_key(seed, expert, m), scale_key = stream_key(seed, expert, m + 2);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) w.data[size_t(r) * cols + c] = weight_code(key, r, c);
  const float fis = fan_in_scale(fan_in);
  w.scales.resize(size_t(rows / 128) * (cols / 128));
  for (int rb = 0; rb < rows / 128; ++rb)
    for (int cb = 0; cb < cols / 128; ++cb)
      w.scales[size_t(rb) * (cols / 128) + cb] = block_scale(scale_key, rb, cb, fis);
  return w;
}

}  // namespace

ref::ExpertWeights host_expert(int hidden, int intermediate, int expert, uint64_t seed) {
  return host_expert_matrices<ref::ExpertWeights>(
      hidden, intermediate, "synthetic weights",
      [&](int rows, int cols, Matrix m, int fan_in) { return host_matrix(rows, cols, seed, expert, m, fan_in); });
}

ref::ExpertWeightMap host_experts(int hidden, int intermediate, const std::vector<ref::Routing>& routings,
                                  uint64_t seed, int num_threads) {
  std::vector<int> experts;
  for (const auto& r : routings)
    for (const int64_t e : r.topk_idx)
      if (e >= 0) experts.push_back(int(e));
  std::sort(experts.begin(), experts.end());
  experts.erase(std::unique(experts.begin(), experts.end()), experts.end());
  std::vector<ref::ExpertWeights> made(experts.size());
  if (num_threads <= 0) num_threads = std::max(1, int(std::thread::hardware_concurrency()));
  num_threads = std::min<int>(num_threads, std::max<size_t>(experts.size(), 1));
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < num_threads; ++t)
    pool.emplace_back([&] {
      for (size_t i = next++; i < experts.size(); i = next++)
        made[i] = host_expert(hidden, intermediate, experts[i], seed);
    });
  for (auto& t : pool) t.join();
  ref::ExpertWeightMap map;
  for (size_t i = 0; i < experts.size(); ++i) map[experts[i]] = std::move(made[i]);
  return map;
}

}  // namespace synthetic

MoeWeightStore::MoeWeightStore() : impl_(new Impl) {}
MoeWeightStore::MoeWeightStore(MoeWeightStore&&) noexcept = default;
MoeWeightStore& MoeWeightStore::operator=(MoeWeightStore&&) noexcept = default;
MoeWeightStore::~MoeWeightStore() = default;

MoeWeightStore MoeWeightStore::synthetic(const Communicator& comm, const MoeShape& shape, uint64_t seed) {
  MoeWeightStore store;
  store.impl_->allocate(comm, shape, gemm::WeightFormat::kFp8);
  const int El = shape.num_local_experts();
  const auto& local = comm.local_ranks();
  for (size_t i = 0; i < local.size(); ++i) {
    const layout::WeightStoreLayout l(shape, gemm::WeightFormat::kFp8, store.impl_->ranks[i].base());
    SYMMOE_CUDA_CHECK(cudaSetDevice(local[i].device));
    launch_synthetic_weights(shape, local[i].rank * El, El, seed, l.get_w1(), l.get_w1_scales(), l.get_w2(),
                             l.get_w2_scales(), comm.stream(local[i].rank));
  }
  for (size_t i = 0; i < local.size(); ++i) {
    SYMMOE_CUDA_CHECK(cudaSetDevice(local[i].device));
    SYMMOE_CUDA_CHECK(cudaStreamSynchronize(comm.stream(local[i].rank)));
  }
  return store;
}

MoeWeightStore MoeWeightStore::from_host(const Communicator& comm, const MoeShape& shape,
                                         const ref::ExpertWeightMap& weights) {
  MoeWeightStore store;
  store.impl_->allocate(comm, shape, gemm::WeightFormat::kFp8);
  const int El = shape.num_local_experts(), H = shape.hidden, I = shape.intermediate;
  const size_t w1_bytes = size_t(2) * I * H, w1_scales = size_t(I / 128) * (H / 128) * 2;
  const size_t w2_bytes = size_t(H) * I, w2_scales = size_t(H / 128) * (I / 128);
  std::vector<uint8_t> w1(El * w1_bytes), w2(El * w2_bytes), t1(El * w1_bytes);
  std::vector<float> s1(El * w1_scales), s2(El * w2_scales), ts1(El * w1_scales);
  const auto& local = comm.local_ranks();
  for (size_t i = 0; i < local.size(); ++i) {
    for (int le = 0; le < El; ++le) {
      const int e = local[i].rank * El + le;
      const auto it = weights.find(e);
      SYMMOE_CHECK(it != weights.end(), "moe", "from_host: no weights for expert ", e, " (rank ", local[i].rank, ")");
      const ref::ExpertWeights& w = it->second;
      SYMMOE_CHECK(w.w1.num_rows == 2 * I && w.w1.num_cols == H && w.w2.num_rows == H && w.w2.num_cols == I &&
                       w.w1.scales.size() == w1_scales && w.w2.scales.size() == w2_scales,
                   "moe", "from_host: expert ", e, " has W1 [", w.w1.num_rows, ", ", w.w1.num_cols, "] W2 [",
                   w.w2.num_rows, ", ", w.w2.num_cols, "], expected [2I, H] and [H, I] of ", shape.to_string());
      std::copy(w.w1.data.begin(), w.w1.data.end(), w1.begin() + le * w1_bytes);
      std::copy(w.w1.scales.begin(), w.w1.scales.end(), s1.begin() + le * w1_scales);
      std::copy(w.w2.data.begin(), w.w2.data.end(), w2.begin() + le * w2_bytes);
      std::copy(w.w2.scales.begin(), w.w2.scales.end(), s2.begin() + le * w2_scales);
    }
    gemm::transform_l1_weights(w1.data(), s1.data(), El, I, H, t1.data(), ts1.data());
    const layout::WeightStoreLayout l(shape, gemm::WeightFormat::kFp8, store.impl_->ranks[i].base());
    SYMMOE_CUDA_CHECK(cudaSetDevice(local[i].device));
    SYMMOE_CUDA_CHECK(cudaMemcpy(l.get_w1(), t1.data(), t1.size(), cudaMemcpyHostToDevice));
    SYMMOE_CUDA_CHECK(cudaMemcpy(l.get_w1_scales(), ts1.data(), ts1.size() * 4, cudaMemcpyHostToDevice));
    SYMMOE_CUDA_CHECK(cudaMemcpy(l.get_w2(), w2.data(), w2.size(), cudaMemcpyHostToDevice));
    SYMMOE_CUDA_CHECK(cudaMemcpy(l.get_w2_scales(), s2.data(), s2.size() * 4, cudaMemcpyHostToDevice));
  }
  return store;
}

gemm::WeightFormat MoeWeightStore::format() const { return impl_->format; }

std::vector<MoeRankWeights> MoeWeightStore::views() const {
  const bool fp4 = impl_->format == gemm::WeightFormat::kFp4;
  std::vector<MoeRankWeights> v;
  for (const auto& r : impl_->ranks) {
    const layout::WeightStoreLayout l(impl_->shape, impl_->format, r.base());
    MoeRankWeights w;
    w.w1 = l.get_w1(), w.w1_scales = l.get_w1_scales();
    w.w2 = l.get_w2(), w.w2_scales = l.get_w2_scales();
    w.format = impl_->format;
    if (fp4) w.w1_scale_codes = l.get_w1_codes(), w.w2_scale_codes = l.get_w2_codes();
    v.push_back(w);
  }
  return v;
}

size_t MoeWeightStore::expert_bytes(const MoeShape& s, gemm::WeightFormat format) {
  return ExpertArraySizes(s, format).total_bytes();
}

void check_rank_weights(const MoeRankWeights& w, int rank, const char* layer) {
  SYMMOE_CHECK(w.format == gemm::WeightFormat::kFp8 || w.format == gemm::WeightFormat::kFp4, layer, "rank ", rank,
               ": weights.format must be kFp8 or kFp4, got ", int(w.format));
  SYMMOE_CHECK(w.w1 && w.w1_scales && w.w2 && w.w2_scales, layer, "rank ", rank,
               ": a weight pointer is null (w1, w1_scales, w2, w2_scales are all required)");
  if (w.format == gemm::WeightFormat::kFp4)
    SYMMOE_CHECK(w.w1_scale_codes && w.w2_scale_codes, layer, "rank ", rank,
                 ": FP4 weights need w1_scale_codes and w2_scale_codes (got ", w.w1_scale_codes ? "" : "null ",
                 "w1_scale_codes, ", w.w2_scale_codes ? "" : "null ", "w2_scale_codes)");
  else
    SYMMOE_CHECK(!w.w1_scale_codes && !w.w2_scale_codes, layer, "rank ", rank,
                 ": w1_scale_codes / w2_scale_codes are set but weights.format is kFp8 (FP4 weights need kFp4)");
}

}  // namespace symmoe
