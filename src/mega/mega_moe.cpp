// MegaMoe host side: plans, workspace, TMA descriptors, input copy-in and the launch (include/symmoe/mega_moe.hpp).
#include "symmoe/mega_moe.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include "common/nvtx.hpp"
#include "gemm/tensor_map.hpp"
#include "kernels/common/input_error.hpp"
#include "kernels/comm/sym_buffer.cuh"
#include "kernels/mega/launch.hpp"
#include "mega/test_access.hpp"
#include "runtime/device_block.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/log.hpp"

namespace symmoe {

struct MegaMoe::Impl {
  struct Rank {
    RankPlacement placement;
    MoeRankWeights weights;
    plan::MegaPlan plan;                       // for T_max tokens per rank: sizes the workspace, printed
    std::map<int, plan::MegaPlan> call_plans;  // per call's num_tokens (plan_mega_moe(shape, sms, T)), host only
    layout::MegaLayout ws;
    // Per BLOCK_M candidate (A box rows); FP8 weights use maps[c].gemm only.
    mega::kernel::MegaRankMaps maps[layout::kMegaNumBlockMCandidates];
    runtime::DeviceBlock trace_block, own_y_block, recv_counts_block;  // own the three arrays below
    unsigned long long* trace = nullptr;                               // [num_sms][kTraceWordsPerCta] while tracing
    uint16_t* own_y = nullptr;                                         // [T_max, H] when the caller passes no y
    int32_t* recv_counts = nullptr;                                    // [El] (options.count_received)
    kernel::InputError* input_error = nullptr;  // host-mapped: the kernel's record of bad routing
    bool weights_bound = false;                 // bind_weights() ran (forward() requires it)
  };
  // Rank i of this process (Communicator::local_ranks() order), checked.
  Rank& at(size_t i) {
    SYMMOE_CHECK(i < ranks.size(), "mega", "local index ", i, " >= ", ranks.size(), " local ranks");
    return ranks[i];
  }
  // Words of a rank's trace buffer ([num_sms][kTraceWordsPerCta]).
  static size_t trace_words(const Rank& r) { return size_t(r.plan.num_sms) * mega::kTraceWordsPerCta; }

  Communicator* comm = nullptr;
  plan::PlanOverrides overrides;  // read once (SYMMOE_* knobs), applied to every call's plan
  SymmetricBuffer buffer;
  std::vector<Rank> ranks;
  // forward(): checks, then per local rank the copy-in and `launch(global rank, plan, params, maps, stream)`.
  // MegaMoe::forward launches every rank; MegaTestAccess leaves one out (a template: no test switch in forward()).
  template <typename Launch>
  static std::vector<const uint16_t*> forward(MegaMoe& self, const std::vector<MoeForwardArgs>& args, Launch&& launch);

  ~Impl() {
    for (auto& r : ranks)
      if (r.input_error) cudaFreeHost(r.input_error);
  }
};

namespace {

plan::GemmWeights plan_weights(gemm::WeightFormat f) {
  return f == gemm::WeightFormat::kFp4 ? plan::GemmWeights::kFp4 : plan::GemmWeights::kFp8;
}

mega::kernel::MegaRankMaps make_maps(const layout::MegaLayout& ws, const MoeRankWeights& w, int block_m) {
  const layout::MegaDims& d = ws.dims();
  const uint64_t P = ws.num_pool_rows(), H = d.hidden, I = d.intermediate, El = d.num_local_experts();
  const uint32_t sfa_box = uint32_t(block_m + plan::kGemmSfaBoxPad);
  using gemm::make_tensor_map_2d;
  mega::kernel::MegaRankMaps maps{};
  mega::kernel::MegaTensorMaps& m = maps.gemm;
  m.l1_a = make_tensor_map_2d(ws.get_l1_pool_x(0), CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, H, P, H, 128, block_m, true,
                              "mega l1 pool x");
  m.l1_sfa = make_tensor_map_2d(ws.get_l1_pool_scale(0, 0), CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, P, H / 128, P * 4,
                                sfa_box, 1, false, "mega l1 pool scales");
  if (w.format != gemm::WeightFormat::kFp4)
    m.l1_b = make_tensor_map_2d(w.w1, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, H, El * 2 * I, H, 128, 256, true, "mega w1");
  m.l2_a = make_tensor_map_2d(ws.get_l2_pool_x(0), CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, I, P, I, 128, block_m, true,
                              "mega l2 pool x");
  m.l2_sfa = make_tensor_map_2d(ws.get_l2_pool_scale(0, 0), CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, P, I / 128, P * 4,
                                sfa_box, 1, false, "mega l2 pool scales");
  if (w.format == gemm::WeightFormat::kFp4) {
    // Row pairs in boxes of one K block x 256 rows (gemm::make_fp4_weight_map); the codes' boxes are the tile's 256
    // words of one K block (as the FP4 grouped GEMM's, grouped_gemm.cpp).
    m.l1_b = gemm::make_fp4_weight_map(w.w1, H, El * 2 * I, 256, "mega w1 (fp4)");
    m.l2_b = gemm::make_fp4_weight_map(w.w2, I, El * H, 256, "mega w2 (fp4)");
    maps.l1_codes = make_tensor_map_2d(w.w1_scale_codes, CU_TENSOR_MAP_DATA_TYPE_UINT32, 4, 2 * I, El * (H / 128),
                                       2 * I * 4, 256, 1, false, "mega w1 scale codes");
    maps.l2_codes = make_tensor_map_2d(w.w2_scale_codes, CU_TENSOR_MAP_DATA_TYPE_UINT32, 4, H, El * (I / 128), H * 4,
                                       256, 1, false, "mega w2 scale codes");
  } else {
    m.l2_b = make_tensor_map_2d(w.w2, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, I, El * H, I, 128, 256, true, "mega w2");
  }
  return maps;
}

}  // namespace

MegaMoe::MegaMoe(Communicator& comm, const MoeShape& shape, const MegaMoeOptions& options)
    : impl_(new Impl), shape_(shape), options_(options) {
  shape.validate();
  SYMMOE_CHECK(shape.num_ranks == comm.num_ranks(), "mega", "shape has ", shape.num_ranks, " ranks, the communicator ",
               comm.num_ranks());
  SYMMOE_CHECK(options.num_sms >= 0, "mega", "num_sms must be >= 0, got ", options.num_sms);
  const auto& local = comm.local_ranks();
  Impl& im = *impl_;
  im.comm = &comm;
  im.overrides = plan::PlanOverrides::from_env();
  std::vector<plan::MegaPlan> plans;
  for (const auto& p : local) {
    const int sms = options.num_sms ? std::min(options.num_sms, p.num_sms) : p.num_sms;
    plans.push_back(plan::plan_mega_moe(shape, sms, im.overrides));
    SYMMOE_LOG(kInfo, "mega", "rank ", p.rank, " (device ", p.device, "): ", plans.back().to_string());
  }
  im.buffer = comm.alloc_symmetric(plans[0].workspace_bytes);  // zero-filled: every counter starts at 0
  for (size_t i = 0; i < local.size(); ++i) {
    Impl::Rank r;
    r.placement = local[i];
    r.plan = plans[i];
    r.ws = layout::MegaLayout(r.plan.dims(), im.buffer.ptr(local[i].rank));
    r.own_y_block.allocate(r.placement.device, size_t(shape.num_max_tokens_per_rank) * shape.hidden * 2);
    r.own_y = r.own_y_block.at<uint16_t>(0);
    if (options.count_received) {
      r.recv_counts_block.allocate(r.placement.device, size_t(shape.num_local_experts()) * 4);
      r.recv_counts = r.recv_counts_block.at<int32_t>(0);
    }
    SYMMOE_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&r.input_error), sizeof(kernel::InputError),
                                    cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(r.input_error, 0, sizeof(kernel::InputError));
    im.ranks.push_back(std::move(r));
  }
}

MegaMoe::MegaMoe(Communicator& comm, const MoeShape& shape, const std::vector<MoeRankWeights>& weights,
                 const MegaMoeOptions& options)
    : MegaMoe(comm, shape, options) {
  bind_weights(weights);
}

void MegaMoe::bind_weights(const std::vector<MoeRankWeights>& weights) {
  Impl& im = *impl_;
  SYMMOE_CHECK(weights.size() == im.ranks.size(), "mega", "expected one MoeRankWeights per local rank (",
               im.ranks.size(), "), got ", weights.size());
  for (size_t i = 0; i < weights.size(); ++i) check_rank_weights(weights[i], im.ranks[i].placement.rank, "mega");
  // Every check before any rank changes (a throw leaves the old binding intact); the plans of the new format too.
  std::vector<plan::MegaPlan> plans;
  for (size_t i = 0; i < weights.size(); ++i) {
    const Impl::Rank& r = im.ranks[i];
    const plan::GemmWeights format = plan_weights(weights[i].format);
    plans.push_back(format == r.plan.weights ? r.plan
                                             : plan::plan_mega_moe(shape_, r.plan.num_sms, im.overrides, format));
    SYMMOE_CHECK(plans.back().workspace_bytes == r.plan.workspace_bytes, "mega", "rank ", r.placement.rank, ": the ",
                 plan::gemm_weights_name(format), " plan's workspace (", plans.back().workspace_bytes,
                 " B) differs from the layer's (", r.plan.workspace_bytes, " B)");
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    Impl::Rank& r = im.ranks[i];
    if (plans[i].weights != r.plan.weights) {
      r.plan = plans[i];
      r.call_plans.clear();  // planned per call for the old format
      SYMMOE_LOG(kInfo, "mega", "rank ", r.placement.rank, " (", plan::gemm_weights_name(r.plan.weights),
                 " weights): ", r.plan.to_string());
    }
    r.weights = weights[i];
    for (int c = 0; c < layout::kMegaNumBlockMCandidates; ++c)  // host only: no device work, no synchronisation
      r.maps[c] = make_maps(r.ws, r.weights, layout::kMegaBlockMCandidates[c]);
    r.weights_bound = true;
  }
}

MegaMoe::~MegaMoe() = default;

void MegaMoe::set_trace(bool on) {
  for (auto& r : impl_->ranks) {
    SYMMOE_CUDA_CHECK(cudaSetDevice(r.placement.device));
    if (on && !r.trace) {
      r.trace_block.allocate(r.placement.device, Impl::trace_words(r) * 8);
      r.trace = r.trace_block.at<unsigned long long>(0);
    }
    if (!on && r.trace) {
      r.trace_block.release();
      r.trace = nullptr;
    }
  }
}

std::vector<unsigned long long> MegaMoe::trace(size_t i) const {
  const Impl::Rank& r = impl_->at(i);
  SYMMOE_CHECK(r.trace != nullptr, "mega", "trace(): tracing is off (set_trace(true) before forward)");
  std::vector<unsigned long long> host(Impl::trace_words(r));
  SYMMOE_CUDA_CHECK(cudaSetDevice(r.placement.device));
  SYMMOE_CUDA_CHECK(cudaMemcpy(host.data(), r.trace, host.size() * 8, cudaMemcpyDeviceToHost));
  return host;
}

const plan::MegaPlan& MegaMoe::plan_for_tokens(size_t i, int num_tokens) {
  Impl::Rank& r = impl_->at(i);
  auto it = r.call_plans.find(num_tokens);
  if (it == r.call_plans.end())
    it = r.call_plans
             .emplace(num_tokens,
                      plan::plan_mega_moe(shape_, r.plan.num_sms, num_tokens, impl_->overrides, r.plan.weights))
             .first;
  return it->second;
}

const plan::MegaPlan& MegaMoe::plan(size_t i) const { return impl_->at(i).plan; }

MegaInputView MegaMoe::input(size_t i) const {
  const layout::MegaLayout& ws = impl_->at(i).ws;
  MegaInputView v;
  v.x = ws.get_x(0), v.x_scales = ws.get_x_scales(0), v.x_scales_stride = int(ws.x_scales_stride() / 4);
  v.topk_idx = ws.get_topk_idx(0), v.topk_weights = ws.get_topk_weights(0);
  return v;
}

const int32_t* MegaMoe::received_counts(size_t i) const { return impl_->at(i).recv_counts; }

void MegaMoe::synchronize() {
  impl_->comm->synchronize();  // CUDA errors and peer timeouts first
  for (const auto& r : impl_->ranks) raise_input_error(r.input_error, r.placement.rank, shape_.num_experts, "mega");
}

template <typename Launch>
std::vector<const uint16_t*> MegaMoe::Impl::forward(MegaMoe& self, const std::vector<MoeForwardArgs>& args,
                                                    Launch&& launch) {
  SYMMOE_NVTX_RANGE("moe.fused.forward");
  Impl& im = *self.impl_;
  const MoeShape& shape = self.shape_;
  SYMMOE_CHECK(args.size() == im.ranks.size(), "mega", "expected one MoeForwardArgs per local rank (", im.ranks.size(),
               "), got ", args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    check_forward_args(shape, im.ranks[i].placement.rank, args[i]);
    SYMMOE_CHECK(im.ranks[i].weights_bound, "mega", "rank ", im.ranks[i].placement.rank,
                 ": no weights bound (construct with weights or call bind_weights first)");
  }
  const int H = shape.hidden, K = shape.num_topk;
  std::vector<const uint16_t*> ys(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    SYMMOE_NVTX_RANGE("moe.fused.copy_in_and_launch");
    Impl::Rank& r = im.ranks[i];
    const MoeForwardArgs& a = args[i];
    const cudaStream_t stream = im.comm->call_stream(r.placement.rank, a.stream);
    const MegaInputView in = self.input(i);
    const size_t T = size_t(a.num_tokens);
    SYMMOE_CUDA_CHECK(cudaSetDevice(r.placement.device));
    // Copy-in (skipped for inputs the caller wrote in place).
    if (T > 0) {
      if (a.x != in.x) SYMMOE_CUDA_CHECK(cudaMemcpyAsync(in.x, a.x, T * H, cudaMemcpyDeviceToDevice, stream));
      if (a.x_scales != in.x_scales)
        SYMMOE_CUDA_CHECK(cudaMemcpy2DAsync(in.x_scales, size_t(in.x_scales_stride) * 4, a.x_scales,
                                            size_t(H / 128) * 4, size_t(H / 128) * 4, T, cudaMemcpyDeviceToDevice,
                                            stream));
      if (a.topk_idx != in.topk_idx)
        SYMMOE_CUDA_CHECK(cudaMemcpyAsync(in.topk_idx, a.topk_idx, T * K * 8, cudaMemcpyDeviceToDevice, stream));
      if (a.topk_weights != in.topk_weights)
        SYMMOE_CUDA_CHECK(
            cudaMemcpyAsync(in.topk_weights, a.topk_weights, T * K * 4, cudaMemcpyDeviceToDevice, stream));
    }
    const plan::MegaPlan& call_plan = self.plan_for_tokens(i, a.num_tokens);
    mega::kernel::MegaParams p;
    p.ws = r.ws;
    p.sym = comm::make_sym_buffer(im.buffer, r.placement.rank);
    p.ctx = im.comm->wait_context(r.placement.rank);
    p.num_tokens = a.num_tokens;
    p.wave_l1_tiles = call_plan.wave_l1_tiles;
    p.w1_scales = r.weights.w1_scales, p.w2_scales = r.weights.w2_scales;
    p.clamp = self.options_.clamp;
    p.y = a.y ? a.y : r.own_y;
    p.recv_counts = r.recv_counts;
    p.input_error = r.input_error;
    p.trace = r.trace;
    if (r.trace) SYMMOE_CUDA_CHECK(cudaMemsetAsync(r.trace, 0, Impl::trace_words(r) * 8, stream));
    p.l1 = mega::kernel::make_phase_params(p, false);
    p.l2 = mega::kernel::make_phase_params(p, true);
    ys[i] = p.y;
    // The maps of the plan's BLOCK_M.
    const int* const candidates_end = layout::kMegaBlockMCandidates + layout::kMegaNumBlockMCandidates;
    const int candidate = int(std::find(layout::kMegaBlockMCandidates, candidates_end, call_plan.block_m) -
                              layout::kMegaBlockMCandidates);
    SYMMOE_CHECK(candidate < layout::kMegaNumBlockMCandidates, "mega", "BLOCK_M ", call_plan.block_m,
                 " is no fused-kernel candidate");
    launch(r.placement.rank, call_plan, p, r.maps[candidate], stream);
  }
  return ys;
}

namespace {
void launch_rank(int, const plan::MegaPlan& plan, const mega::kernel::MegaParams& p,
                 const mega::kernel::MegaRankMaps& maps, cudaStream_t stream) {
  mega::kernel::launch_mega_moe(plan, p, maps, plan.num_sms, stream);
}
}  // namespace

std::vector<const uint16_t*> MegaMoe::forward(const std::vector<MoeForwardArgs>& args) {
  return Impl::forward(*this, args, [](const auto&... launch_args) { launch_rank(launch_args...); });
}

std::vector<const uint16_t*> MegaTestAccess::forward_without_launching(MegaMoe& layer,
                                                                       const std::vector<MoeForwardArgs>& args,
                                                                       int rank) {
  return MegaMoe::Impl::forward(layer, args, [rank](int r, const auto&... launch_args) {
    if (r != rank) launch_rank(r, launch_args...);
  });
}

}  // namespace symmoe
