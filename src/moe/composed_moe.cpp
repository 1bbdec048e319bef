// ComposedMoe: EP dispatch (expand) -> glue -> grouped GEMM L1 (SwiGLU + FP8) -> grouped GEMM L2 -> EP combine,
// every stage enqueued per local rank on the rank's stream with no host synchronisation (include/symmoe/moe.hpp).
#include "symmoe/moe.hpp"

#include <algorithm>

#include "common/nvtx.hpp"
#include "moe/composed_moe_layout.hpp"
#include "moe/expand_glue.hpp"
#include "runtime/device_block.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/ep.hpp"
#include "symmoe/gemm.hpp"

namespace symmoe {

void check_options(const ComposedMoeOptions& o) {
  SYMMOE_CHECK(o.expert_alignment >= 1 && o.expert_alignment <= 1024, "moe",
               "expert_alignment must be in [1, 1024], got ", o.expert_alignment);
  SYMMOE_CHECK(o.ep_sms >= 0 && o.gemm_sms >= 0, "moe", "ep_sms and gemm_sms must be >= 0, got ", o.ep_sms, " and ",
               o.gemm_sms);
}

struct ComposedMoe::Impl {
  struct Rank {
    RankPlacement placement;
    MoeRankWeights weights;
    runtime::DeviceBlock block;         // one allocation: layout::ComposedStageLayout
    int32_t* segment_starts = nullptr;  // [El + 1]
    float* sfa = nullptr;               // [H/128, stride]
    uint8_t* l1_out = nullptr;          // e4m3 [capacity, I]
    float* l1_scales = nullptr;         // [I/128, stride]
    uint16_t* l2_out = nullptr;         // bf16 [capacity, H]
    EpDispatchResult dispatched;        // EP's expand outputs (pointers fixed after the warm-up dispatch)
  };
  Communicator* comm = nullptr;
  std::unique_ptr<EpBuffer> ep;
  std::vector<EpHandle> handles;
  std::vector<Rank> ranks;
  int capacity = 0, sfa_stride = 0;

  cudaStream_t stream(size_t i, const MoeForwardArgs& a) const {
    return a.stream ? a.stream : comm->stream(ranks[i].placement.rank);
  }
};

ComposedMoe::ComposedMoe(Communicator& comm, const MoeShape& shape, const std::vector<MoeRankWeights>& weights,
                         const ComposedMoeOptions& options)
    : impl_(new Impl), shape_(shape), options_(options) {
  shape.validate();
  check_options(options);
  SYMMOE_CHECK(shape.num_ranks == comm.num_ranks(), "moe", "shape has ", shape.num_ranks, " ranks, the communicator ",
               comm.num_ranks());
  const auto& local = comm.local_ranks();
  SYMMOE_CHECK(weights.size() == local.size(), "moe", "expected one MoeRankWeights per local rank (", local.size(),
               "), got ", weights.size());
  for (size_t i = 0; i < weights.size(); ++i) check_rank_weights(weights[i], local[i].rank, "moe");
  Impl& im = *impl_;
  im.comm = &comm;
  EpBufferConfig cfg;
  cfg.num_max_tokens_per_rank = shape.num_max_tokens_per_rank, cfg.hidden = shape.hidden;
  cfg.num_topk = shape.num_topk, cfg.num_experts = shape.num_experts;
  cfg.dtype = EpDtype::kFp8E4m3, cfg.scales = EpScales::kFp32Per128;
  im.ep = std::make_unique<EpBuffer>(comm, cfg);
  im.handles.resize(local.size());

  // The expand layout's rows: the worst case, from the shape and the alignment (EpBuffer::row_capacity).
  im.capacity = im.ep->row_capacity(/*expand=*/true, options.expert_alignment);
  im.sfa_stride = gemm::sfa_stride_for(im.capacity);

  // Warm-up dispatch of one all-masked token per rank (collective, host-synced). It sizes nothing; it makes EpBuffer
  // allocate its expand outputs and the handles, so forward() never allocates (cudaMalloc/cudaFree would break graph
  // capture and synchronise devices). One masked token rather than none: the path the EP tests exercise.
  // NOTES: EpBuffer allocates on its first dispatch only; an EpBuffer call that allocates outputs and handles up
  // front would make this dispatch unnecessary.
  const int K = shape.num_topk, H = shape.hidden;
  const uint64_t warm_bytes = layout::ComposedWarmupLayout(H, K).num_bytes();
  std::vector<runtime::DeviceBlock> warm(local.size());
  std::vector<EpDispatchArgs> warm_args(local.size());
  for (size_t i = 0; i < local.size(); ++i) {
    warm[i].allocate(local[i].device, warm_bytes);
    const layout::ComposedWarmupLayout l(H, K, warm[i].base());
    SYMMOE_CUDA_CHECK(cudaMemset(warm[i].base(), 0, warm_bytes));
    SYMMOE_CUDA_CHECK(cudaMemset(l.get_topk_idx(), 0xFF, size_t(K) * 8));  // int64 -1: every lane masked
    warm_args[i].num_tokens = 1;
    warm_args[i].x = l.get_x(), warm_args[i].x_scales = l.get_x_scales();
    warm_args[i].topk_idx = l.get_topk_idx(), warm_args[i].topk_weights = l.get_topk_weights();
  }
  EpDispatchOptions dopt;
  dopt.expand = true, dopt.expert_alignment = options.expert_alignment, dopt.zero_padding = false;
  dopt.num_sms = options.ep_sms;
  const auto res = im.ep->dispatch(warm_args, dopt, im.handles);  // cpu_sync: returns after the GPUs finished
  warm.clear();

  const int El = shape.num_local_experts(), I = shape.intermediate;
  for (size_t i = 0; i < local.size(); ++i) {
    Impl::Rank r;
    r.placement = local[i];
    r.weights = weights[i];
    r.dispatched = res[i];
    SYMMOE_CHECK(res[i].row_capacity == im.capacity, "moe", "rank ", local[i].rank, " expand capacity ",
                 res[i].row_capacity, " differs from the planned ", im.capacity);
    r.block.allocate(r.placement.device, layout::ComposedStageLayout(El, H, I, im.capacity, im.sfa_stride).num_bytes());
    const layout::ComposedStageLayout l(El, H, I, im.capacity, im.sfa_stride, r.block.base());
    r.segment_starts = l.get_segment_starts();
    r.sfa = l.get_sfa();
    r.l1_out = l.get_l1_out();
    r.l1_scales = l.get_l1_scales();
    r.l2_out = l.get_l2_out();
    im.ranks.push_back(std::move(r));
  }
}

ComposedMoe::~ComposedMoe() = default;

int ComposedMoe::row_capacity() const { return impl_->capacity; }

void ComposedMoe::synchronize() { impl_->ep->synchronize(); }

void ComposedMoe::stage_dispatch(const std::vector<MoeForwardArgs>& args) {
  SYMMOE_NVTX_RANGE("moe.composed.dispatch");
  Impl& im = *impl_;
  SYMMOE_CHECK(args.size() == im.ranks.size(), "moe", "expected one MoeForwardArgs per local rank (", im.ranks.size(),
               "), got ", args.size());
  for (size_t i = 0; i < args.size(); ++i) check_forward_args(shape_, im.ranks[i].placement.rank, args[i]);
  std::vector<EpDispatchArgs> dargs(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    dargs[i].num_tokens = args[i].num_tokens, dargs[i].x = args[i].x, dargs[i].x_scales = args[i].x_scales;
    dargs[i].topk_idx = args[i].topk_idx, dargs[i].topk_weights = args[i].topk_weights;
    // The first stage orders the call after legacy-stream work (Communicator::call_stream); later stages follow it
    // on the same stream.
    dargs[i].stream = im.comm->call_stream(im.ranks[i].placement.rank, args[i].stream);
  }
  EpDispatchOptions dopt;
  dopt.expand = true, dopt.expert_alignment = options_.expert_alignment, dopt.zero_padding = false;
  dopt.num_sms = options_.ep_sms, dopt.cpu_sync = false;
  const auto res = im.ep->dispatch(dargs, dopt, im.handles);
  for (size_t i = 0; i < res.size(); ++i)
    SYMMOE_CHECK(res[i].recv_x == im.ranks[i].dispatched.recv_x && res[i].row_capacity == im.capacity, "moe", "rank ",
                 im.ranks[i].placement.rank, ": EP moved its expand outputs after the warm-up dispatch");
}

namespace {

gemm::LaunchOptions gemm_launch_options(const MoeShape& s, const ComposedMoeOptions& o, int num_tokens) {
  gemm::LaunchOptions l;
  l.num_sms = o.gemm_sms;
  // Rows an expert of this rank expects if every rank sends like this one (the planner's tile-size hint).
  const long long pairs = (long long)num_tokens * s.num_topk * s.num_ranks;
  l.expected_rows_per_expert = int(std::max<long long>(1, pairs / s.num_experts));
  return l;
}

}  // namespace

void ComposedMoe::stage_experts_l1(const std::vector<MoeForwardArgs>& args) {
  SYMMOE_NVTX_RANGE("moe.composed.experts_l1");
  Impl& im = *impl_;
  const int El = shape_.num_local_experts(), H = shape_.hidden, I = shape_.intermediate;
  for (size_t i = 0; i < im.ranks.size(); ++i) {
    Impl::Rank& r = im.ranks[i];
    const EpHandle& h = im.handles[i];
    const cudaStream_t stream = im.stream(i, args[i]);
    SYMMOE_CUDA_CHECK(cudaSetDevice(r.placement.device));
    moe::ExpandGlueParams g;
    g.num_local_experts = El, g.num_k_blocks = H / 128;
    g.psum_per_expert = h.psum_num_recv_tokens_per_expert,
    g.unaligned_per_expert = h.num_unaligned_recv_tokens_per_expert;
    g.device_counts = h.device_counts;
    g.recv_scales = static_cast<const float*>(r.dispatched.recv_scales);
    g.segment_starts = r.segment_starts, g.sfa = r.sfa, g.sfa_stride = im.sfa_stride;
    moe::launch_expand_glue(g, im.capacity, stream);

    gemm::GroupedGemmInput in;
    in.layout = gemm::GroupLayout::kContiguous;
    in.num_experts = El, in.n = 2 * I, in.k = H, in.num_rows = im.capacity;
    in.segment_starts = r.segment_starts, in.num_valid_rows = h.num_unaligned_recv_tokens_per_expert;
    in.a = static_cast<const uint8_t*>(r.dispatched.recv_x), in.sfa = r.sfa, in.sfa_stride = im.sfa_stride;
    in.weights = r.weights.format;
    in.b = r.weights.w1, in.sfb = r.weights.w1_scales, in.b_scale_codes = r.weights.w1_scale_codes;
    gemm::SwigluFp8Output out;
    out.out = r.l1_out, out.out_scales = r.l1_scales, out.out_scale_stride = im.sfa_stride;
    out.row_weights = r.dispatched.recv_topk_weights, out.clamp = options_.clamp;
    gemm::grouped_gemm_swiglu_fp8(in, out, stream, gemm_launch_options(shape_, options_, args[i].num_tokens));
  }
}

void ComposedMoe::stage_experts_l2(const std::vector<MoeForwardArgs>& args) {
  SYMMOE_NVTX_RANGE("moe.composed.experts_l2");
  Impl& im = *impl_;
  const int El = shape_.num_local_experts(), H = shape_.hidden, I = shape_.intermediate;
  for (size_t i = 0; i < im.ranks.size(); ++i) {
    Impl::Rank& r = im.ranks[i];
    const EpHandle& h = im.handles[i];
    SYMMOE_CUDA_CHECK(cudaSetDevice(r.placement.device));
    gemm::GroupedGemmInput in;
    in.layout = gemm::GroupLayout::kContiguous;
    in.num_experts = El, in.n = H, in.k = I, in.num_rows = im.capacity;
    in.segment_starts = r.segment_starts, in.num_valid_rows = h.num_unaligned_recv_tokens_per_expert;
    in.a = r.l1_out, in.sfa = r.l1_scales, in.sfa_stride = im.sfa_stride;
    in.weights = r.weights.format;
    in.b = r.weights.w2, in.sfb = r.weights.w2_scales, in.b_scale_codes = r.weights.w2_scale_codes;
    gemm::grouped_gemm_bf16(in, r.l2_out, im.stream(i, args[i]),
                            gemm_launch_options(shape_, options_, args[i].num_tokens));
  }
}

std::vector<const uint16_t*> ComposedMoe::stage_combine(const std::vector<MoeForwardArgs>& args) {
  SYMMOE_NVTX_RANGE("moe.composed.combine");
  Impl& im = *impl_;
  std::vector<EpCombineArgs> cargs(im.ranks.size());
  for (size_t i = 0; i < im.ranks.size(); ++i) {
    cargs[i].x = im.ranks[i].l2_out;
    cargs[i].stream = im.stream(i, args[i]);
  }
  EpCombineOptions copt;
  copt.reduce_local_experts = false;  // the layer's sum rounds each lane's row to bf16 (docs/design.md §2.3)
  copt.num_sms = options_.ep_sms, copt.cpu_sync = false;
  const auto res = im.ep->combine(cargs, copt, im.handles);
  std::vector<const uint16_t*> y(im.ranks.size());
  for (size_t i = 0; i < im.ranks.size(); ++i) {
    y[i] = res[i].combined_x;
    if (args[i].y && args[i].num_tokens > 0) {
      SYMMOE_CUDA_CHECK(cudaSetDevice(im.ranks[i].placement.device));
      SYMMOE_CUDA_CHECK(cudaMemcpyAsync(args[i].y, res[i].combined_x, size_t(args[i].num_tokens) * shape_.hidden * 2,
                                        cudaMemcpyDeviceToDevice, cargs[i].stream));
      y[i] = args[i].y;
    }
  }
  return y;
}

std::vector<const uint16_t*> ComposedMoe::forward(const std::vector<MoeForwardArgs>& args) {
  SYMMOE_NVTX_RANGE("moe.composed.forward");
  stage_dispatch(args);  // checks every rank's arguments before anything is launched
  stage_experts_l1(args);
  stage_experts_l2(args);
  return stage_combine(args);
}

}  // namespace symmoe
