// See moe_inputs.hpp.
#include "cli_common/moe_inputs.hpp"

#include "cli_common/layer_inputs_layout.hpp"

#include "symmoe/cuda_check.hpp"
#include "symmoe/mega_moe.hpp"
#include "symmoe/moe_weights.hpp"

namespace symmoe::cli {

std::vector<MoeForwardArgs> stage_in_mega_workspace(const Communicator& comm, const MoeShape& shape,
                                                    const MegaMoe& layer, const std::vector<MoeForwardArgs>& args) {
  const auto& local = comm.local_ranks();
  SYMMOE_CHECK(args.size() == local.size(), "bench", "expected one MoeForwardArgs per local rank (", local.size(),
               "), got ", args.size());
  const size_t H = size_t(shape.hidden), K = size_t(shape.num_topk);
  std::vector<MoeForwardArgs> staged = args;
  for (size_t i = 0; i < args.size(); ++i) {
    const MoeForwardArgs& a = args[i];
    const MegaInputView in = layer.input(i);
    const size_t T = size_t(a.num_tokens);
    SYMMOE_CHECK(a.num_tokens >= 0 && a.num_tokens <= shape.num_max_tokens_per_rank, "bench", "rank ", local[i].rank,
                 ": num_tokens ", a.num_tokens, " outside [0, ", shape.num_max_tokens_per_rank, "]");
    SYMMOE_CUDA_CHECK(cudaSetDevice(local[i].device));
    if (T > 0) {
      SYMMOE_CUDA_CHECK(cudaMemcpy(in.x, a.x, T * H, cudaMemcpyDeviceToDevice));
      SYMMOE_CUDA_CHECK(cudaMemcpy2D(in.x_scales, size_t(in.x_scales_stride) * 4, a.x_scales, (H / 128) * 4,
                                     (H / 128) * 4, T, cudaMemcpyDeviceToDevice));
      SYMMOE_CUDA_CHECK(cudaMemcpy(in.topk_idx, a.topk_idx, T * K * 8, cudaMemcpyDeviceToDevice));
      SYMMOE_CUDA_CHECK(cudaMemcpy(in.topk_weights, a.topk_weights, T * K * 4, cudaMemcpyDeviceToDevice));
    }
    staged[i].x = in.x, staged[i].x_scales = in.x_scales;
    staged[i].topk_idx = in.topk_idx, staged[i].topk_weights = in.topk_weights;
  }
  return staged;
}

DeviceLayerInputs::DeviceLayerInputs(const Communicator& comm, const MoeShape& shape) : comm_(comm), shape_(shape) {
  const layout::LayerInputsLayout l(shape.num_max_tokens_per_rank, shape.hidden, shape.num_topk);
  for (const auto& p : comm.local_ranks()) blocks_.emplace_back(p.device, l.num_bytes());
}

std::vector<MoeForwardArgs> DeviceLayerInputs::upload(const std::vector<ref::MoeLayerInput>& host) {
  SYMMOE_CHECK(host.size() == blocks_.size(), "bench", "expected inputs for ", blocks_.size(), " local ranks, got ",
               host.size());
  args_.assign(host.size(), MoeForwardArgs{});
  for (size_t i = 0; i < host.size(); ++i) {
    const auto& h = host[i];
    SYMMOE_CHECK(h.x.num_rows <= shape_.num_max_tokens_per_rank && h.x.num_cols == shape_.hidden, "bench",
                 "rank input [", h.x.num_rows, ", ", h.x.num_cols, "] does not fit ", shape_.to_string());
    const layout::LayerInputsLayout l(shape_.num_max_tokens_per_rank, shape_.hidden, shape_.num_topk,
                                      blocks_[i].base());
    SYMMOE_CUDA_CHECK(cudaSetDevice(blocks_[i].device()));
    SYMMOE_CUDA_CHECK(cudaMemcpy(l.get_x(), h.x.data.data(), h.x.data.size(), cudaMemcpyHostToDevice));
    SYMMOE_CUDA_CHECK(cudaMemcpy(l.get_x_scales(), h.x.scales.data(), h.x.scales.size() * 4, cudaMemcpyHostToDevice));
    SYMMOE_CUDA_CHECK(
        cudaMemcpy(l.get_topk_idx(), h.routing.topk_idx.data(), h.routing.topk_idx.size() * 8, cudaMemcpyHostToDevice));
    SYMMOE_CUDA_CHECK(cudaMemcpy(l.get_topk_weights(), h.routing.topk_weights.data(), h.routing.topk_weights.size() * 4,
                                 cudaMemcpyHostToDevice));
    MoeForwardArgs& a = args_[i];
    a.num_tokens = h.x.num_rows;
    a.x = l.get_x(), a.x_scales = l.get_x_scales();
    a.topk_idx = l.get_topk_idx(), a.topk_weights = l.get_topk_weights();
    a.y = l.get_y();
  }
  return args_;
}

ref::MoeLayerInput fast_layer_input(const MoeShape& shape, int num_tokens, const ref::RoutingOptions& options,
                                    int rank) {
  ref::MoeLayerInput in;
  const int H = shape.hidden;
  in.x.num_rows = num_tokens, in.x.num_cols = H, in.x.block = 128;
  in.x.data.resize(size_t(num_tokens) * H);
  const uint64_t key = synthetic::stream_key(options.seed, rank, 100);
  for (int t = 0; t < num_tokens; ++t)
    for (int c = 0; c < H; ++c) in.x.data[size_t(t) * H + c] = synthetic::weight_code(key, t, c);
  in.x.scales.assign(size_t(num_tokens) * (H / 128), 2.f / 448.f);
  in.routing = ref::make_routing(num_tokens, shape.num_experts, shape.num_topk, options, rank);
  return in;
}

double RankTraffic::weight_bytes(const MoeShape& s, gemm::WeightFormat f) const {
  return double(experts_touched) * double(MoeWeightStore::expert_bytes(s, f));
}

double RankTraffic::hbm_bytes(const MoeShape& s, gemm::WeightFormat f) const {
  return weight_bytes(s, f) + double(recv_pairs) * (s.hidden + 4.0 * s.hidden / 128 + 2.0 * s.hidden);
}

double RankTraffic::nvl_bytes(const MoeShape& s) const {
  return double(remote_recv_tokens) * (s.hidden + 4.0 * s.hidden / 128 + 12.0 * s.num_topk) +
         double(remote_return_rows) * 2.0 * s.hidden;
}

RankTraffic rank_traffic(const MoeShape& shape, const std::vector<ref::Routing>& routings, int rank) {
  const int El = shape.num_local_experts(), K = shape.num_topk;
  RankTraffic t;
  std::vector<char> touched(El, 0);
  for (size_t src = 0; src < routings.size(); ++src) {
    const auto& r = routings[src];
    for (int tok = 0; tok < r.num_tokens; ++tok) {
      int here = 0;
      for (int k = 0; k < K; ++k) {
        const int64_t e = r.topk_idx[size_t(tok) * K + k];
        if (e < 0 || e / El != rank) continue;
        ++here;
        touched[e % El] = 1;
      }
      t.recv_pairs += here;
      if (int(src) != rank && here > 0) t.remote_recv_tokens += 1, t.remote_return_rows += here;
    }
  }
  for (char c : touched) t.experts_touched += c;
  return t;
}

}  // namespace symmoe::cli
