// EpBuffer: owns the symmetric EP buffer, per-rank workspaces and outputs; checks arguments, fills kernel
// parameters, launches dispatch/combine on every local rank, and (cpu_sync) reads counts and errors back.
#include <algorithm>
#include <cstring>

#include "common/nvtx.hpp"
#include "kernels/comm/sym_buffer.cuh"
#include "kernels/common/input_error.hpp"
#include "kernels/ep/params.hpp"
#include "runtime/device_block.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/ep.hpp"
#include "layout/ep_handle.hpp"
#include "layout/ep_scratch.hpp"
#include "symmoe/log.hpp"
#include "symmoe/plan.hpp"

namespace symmoe {
namespace {

using runtime::DeviceBlock;

// The kernels' view of a handle's device arrays (dispatch fills them, combine reads them).
ep::HandleArrays handle_arrays(const EpHandle& h) {
  return {h.num_tokens_per_rank,
          h.num_tokens_per_expert,
          h.dst_buffer_slot_idx,
          h.topk_idx,
          h.psum_num_recv_tokens_per_rank,
          h.num_unaligned_recv_tokens_per_expert,
          h.psum_num_recv_tokens_per_expert,
          h.num_recv_tokens_per_expert,
          h.recv_src_metadata,
          h.device_counts};
}

layout::EpDims make_dims(const EpBufferConfig& c, int num_ranks) {
  layout::EpDims d;
  d.num_ranks = num_ranks, d.num_experts = c.num_experts, d.num_topk = c.num_topk, d.hidden = c.hidden;
  d.num_max_tokens_per_rank = c.num_max_tokens_per_rank;
  d.dtype = c.dtype == EpDtype::kBf16 ? layout::TokenDtype::kBf16 : layout::TokenDtype::kFp8E4m3;
  d.scale_row_bytes = ep_scale_row_bytes(c.scales, c.hidden);
  return d;
}

}  // namespace

struct EpHandle::Storage {
  DeviceBlock block;
};

EpHandle::EpHandle() = default;
EpHandle::~EpHandle() = default;
EpHandle::EpHandle(EpHandle&&) noexcept = default;
EpHandle& EpHandle::operator=(EpHandle&&) noexcept = default;

struct EpBuffer::Impl {
  struct RankState {
    RankPlacement placement;
    int plan_dispatch_sms = 1, plan_combine_sms = 1;
    DeviceBlock workspace;  // warp counts + error key
    int32_t* warp_counts = nullptr;
    unsigned long long* error_key = nullptr;
    ep::InputError* error_host = nullptr;  // host-mapped
    ep::InputError* error_dev = nullptr;
    DeviceBlock outputs;  // recv_x, recv_sf (expand only), recv_topk_idx, recv_topk_weights for `row_capacity` rows
    int row_capacity = 0;
    bool has_expand_rows = false;
    uint8_t *recv_x = nullptr, *recv_sf = nullptr;
    int64_t* recv_topk_idx = nullptr;
    float* recv_topk_weights = nullptr;
    DeviceBlock combined;  // combined_x [T_max, H] bf16, combined_topk_weights [T_max, K]
    uint16_t* combined_x = nullptr;
    float* combined_topk_weights = nullptr;
  };

  Communicator* comm = nullptr;
  layout::EpDims dims;
  SymmetricBuffer buffer;
  std::vector<RankState> ranks;  // local ranks, Communicator::local_ranks() order
  ~Impl() {
    for (auto& r : ranks)
      if (r.error_host) cudaFreeHost(r.error_host);
  }

  // What every EP kernel of `rank` reaches the symmetric buffer through (dispatch and combine alike).
  template <typename Params>
  void fill_buffer_view(Params& p, int rank) {
    p.sym = comm::make_sym_buffer(buffer, rank);
    p.layout = layout::EpLayout(dims, buffer.ptr(rank));
    p.sync = p.layout.get_sync_area();
    p.wait = comm->wait_context(rank);
  }

  // cpu_sync: blocks until each local rank's stream of this call (the caller's, else the rank's own) is done.
  template <typename CallArgs>
  void synchronize_call_streams(const std::vector<CallArgs>& args) {
    for (size_t i = 0; i < ranks.size(); ++i) {
      SYMMOE_CUDA_CHECK(cudaSetDevice(ranks[i].placement.device));
      SYMMOE_CUDA_CHECK(cudaStreamSynchronize(args[i].stream ? args[i].stream : comm->stream(ranks[i].placement.rank)));
    }
  }
};

EpBuffer::EpBuffer(Communicator& comm, const EpBufferConfig& config) : impl_(new Impl), config_(config) {
  const int R = comm.num_ranks();
  config.validate(R);
  impl_->comm = &comm;
  impl_->dims = make_dims(config, R);
  const layout::EpLayout sizing(impl_->dims);
  impl_->buffer = comm.alloc_symmetric(sizing.num_bytes());
  MoeShape shape;
  shape.hidden = config.hidden, shape.intermediate = config.hidden, shape.num_experts = config.num_experts;
  shape.num_topk = config.num_topk, shape.num_ranks = R, shape.num_max_tokens_per_rank = config.num_max_tokens_per_rank;
  const plan::PlanOverrides overrides = plan::PlanOverrides::from_env();  // read once (SYMMOE_EP_SMS)
  for (const RankPlacement& p : comm.local_ranks()) {
    Impl::RankState st;
    st.placement = p;
    SYMMOE_CUDA_CHECK(cudaSetDevice(p.device));
    int max_smem = 0;
    SYMMOE_CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, p.device));
    SYMMOE_CHECK(ep::dispatch_smem_bytes(impl_->dims) <= size_t(max_smem), "ep", "dispatch needs ",
                 ep::dispatch_smem_bytes(impl_->dims), " B of shared memory (", R, " ranks, ", config.num_experts,
                 " experts), the device has ", max_smem);
    const plan::EpPlan plan = plan::plan_ep(shape, impl_->dims.dtype, p.num_sms, overrides);
    st.plan_dispatch_sms = plan.dispatch_sms, st.plan_combine_sms = plan.combine_sms;
    SYMMOE_LOG(kInfo, "ep", "rank ", p.rank, " (device ", p.device, ", ", p.num_sms, " SMs): symmetric buffer ",
               plan::format_bytes(sizing.num_bytes()), "; ", plan.to_string());
    st.workspace.allocate(p.device, layout::EpWorkspaceLayout(impl_->dims, p.num_sms).num_bytes());
    const layout::EpWorkspaceLayout workspace(impl_->dims, p.num_sms, st.workspace.base());
    st.warp_counts = workspace.get_warp_counts();
    st.error_key = workspace.get_error_key();
    // "No error" (all ones); each dispatch kernel resets it after reading it (no memset node per call).
    SYMMOE_CUDA_CHECK(cudaMemset(st.error_key, 0xff, 8));
    SYMMOE_CUDA_CHECK(
        cudaHostAlloc(&st.error_host, sizeof(ep::InputError), cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(st.error_host, 0, sizeof(ep::InputError));
    SYMMOE_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&st.error_dev), st.error_host, 0));
    st.combined.allocate(p.device, layout::EpCombinedLayout(impl_->dims).num_bytes());
    const layout::EpCombinedLayout combined(impl_->dims, st.combined.base());
    st.combined_x = combined.get_combined_x();
    st.combined_topk_weights = combined.get_combined_topk_weights();
    impl_->ranks.push_back(std::move(st));
  }
}

EpBuffer::~EpBuffer() = default;

int EpBuffer::scale_row_bytes() const { return ep_scale_row_bytes(config_.scales, config_.hidden); }
int EpBuffer::x_row_bytes() const { return config_.hidden * (config_.dtype == EpDtype::kBf16 ? 2 : 1); }

int EpBuffer::row_capacity(bool expand, int expert_alignment) const {
  const layout::EpDims& d = impl_->dims;
  const int El = d.num_experts / d.num_ranks;
  return expand ? d.num_ranks * d.num_max_tokens_per_rank * std::min(d.num_topk, El) + El * (expert_alignment - 1)
                : d.num_ranks * d.num_max_tokens_per_rank;
}

int EpBuffer::num_ctas(int rank, int requested_sms) const {
  for (const auto& r : impl_->ranks)
    if (r.placement.rank == rank) {
      const int want = requested_sms > 0 ? requested_sms : r.plan_dispatch_sms;
      return std::clamp(want, 1, r.placement.num_sms);
    }
  SYMMOE_FAIL("ep", "rank ", rank, " is not driven by this process");
}

std::vector<EpDispatchResult> EpBuffer::dispatch(const std::vector<EpDispatchArgs>& args,
                                                 const EpDispatchOptions& options, std::vector<EpHandle>& handles) {
  SYMMOE_NVTX_RANGE(options.cached ? "ep.dispatch (cached)" : "ep.dispatch");
  Impl& im = *impl_;
  const int R = im.dims.num_ranks, K = im.dims.num_topk, E = im.dims.num_experts, El = E / R;
  const int T_max = im.dims.num_max_tokens_per_rank;
  SYMMOE_CHECK(args.size() == im.ranks.size() && handles.size() == im.ranks.size(), "ep", "dispatch: expected ",
               im.ranks.size(), " args and handles (one per local rank), got ", args.size(), " and ", handles.size());
  // ---- checks (before anything is launched) ----
  for (size_t i = 0; i < im.ranks.size(); ++i) {
    SYMMOE_NVTX_RANGE("ep.dispatch.check_args");
    const int rank = im.ranks[i].placement.rank;
    check_dispatch_args(config_, R, rank, args[i], options);
    if (options.cached) {
      const EpHandle& h = handles[i];
      SYMMOE_CHECK(h.rank == rank && h.storage_ != nullptr, "ep", "cached dispatch rank ", rank,
                   ": the handle was not filled by a dispatch of this rank");
      SYMMOE_CHECK(h.num_tokens == args[i].num_tokens, "ep", "cached dispatch rank ", rank, ": num_tokens ",
                   args[i].num_tokens, " differs from the handle's ", h.num_tokens);
      // A handle of another buffer of the same shape is fine (e.g. combine's backward: a BF16 cached dispatch with
      // the handle of an FP8 forward dispatch); only the routing shape must match.
      SYMMOE_CHECK(h.num_ranks == R && h.num_experts == E && h.num_topk == K && h.num_max_tokens_per_rank == T_max,
                   "ep", "cached dispatch rank ", rank, ": the handle was made for another shape (R ", h.num_ranks,
                   ", E ", h.num_experts, ", K ", h.num_topk, ", T_max ", h.num_max_tokens_per_rank,
                   "), this buffer has R ", R, ", E ", E, ", K ", K, ", T_max ", T_max);
    }
  }
  const bool expand = options.cached ? handles[0].do_expand : options.expand;
  const int alignment = options.cached ? handles[0].expert_alignment : options.expert_alignment;
  const int capacity = row_capacity(expand, alignment);
  const int xb = x_row_bytes(), sb = scale_row_bytes();
  for (size_t i = 0; i < im.ranks.size(); ++i) {
    const EpDispatchArgs& a = args[i];
    const bool any_out = a.recv_x_out || a.recv_scales_out || a.recv_topk_idx_out || a.recv_topk_weights_out;
    SYMMOE_CHECK(!any_out || a.out_rows >= capacity, "ep", "dispatch rank ", im.ranks[i].placement.rank,
                 ": the caller's outputs have ", a.out_rows, " rows, fewer than the row capacity ", capacity,
                 (expand ? " (expand)" : " (non-expand)"));
  }

  // Allocations first, for every rank, THEN the launches: cudaFree synchronises its device, and in-process ranks
  // share devices, so freeing between two ranks' launches would wait for a kernel that waits for a rank not yet
  // launched (a deadlock until the barrier timeout).
  for (size_t i = 0; i < im.ranks.size(); ++i) {
    Impl::RankState& st = im.ranks[i];
    const int rank = st.placement.rank;
    SYMMOE_CUDA_CHECK(cudaSetDevice(st.placement.device));
    // Outputs (worst case rows; grows on the first call that needs more).
    // Non-expand x and scale rows live in the symmetric buffer (senders push into them); only expand allocates
    // its own rows.
    if (st.row_capacity < capacity || (expand && !st.has_expand_rows)) {
      st.outputs.allocate(st.placement.device, layout::EpOutputsLayout(im.dims, capacity, expand).num_bytes());
      const layout::EpOutputsLayout outputs(im.dims, capacity, expand, st.outputs.base());
      st.recv_x = outputs.get_recv_x();
      st.recv_sf = sb ? outputs.get_recv_scales() : nullptr;
      st.recv_topk_idx = outputs.get_recv_topk_idx();
      st.recv_topk_weights = outputs.get_recv_topk_weights();
      st.row_capacity = capacity;
      st.has_expand_rows = expand;
    }
    EpHandle& h = handles[i];
    if (!options.cached) {
      if (!h.storage_ || h.device != st.placement.device || h.num_ranks != R || h.num_experts != E || h.num_topk != K ||
          h.num_max_tokens_per_rank != T_max) {
        h.storage_ = std::make_unique<EpHandle::Storage>();
        h.storage_->block.allocate(st.placement.device, layout::EpHandleLayout(im.dims).num_bytes());
        const layout::EpHandleLayout lay(im.dims, h.storage_->block.base());
        h.num_tokens_per_rank = lay.get_num_tokens_per_rank();
        h.num_tokens_per_expert = lay.get_num_tokens_per_expert();
        h.dst_buffer_slot_idx = lay.get_dst_buffer_slot_idx();
        h.topk_idx = lay.get_topk_idx();
        h.psum_num_recv_tokens_per_rank = lay.get_psum_num_recv_tokens_per_rank();
        h.num_unaligned_recv_tokens_per_expert = lay.get_num_unaligned_recv_tokens_per_expert();
        h.psum_num_recv_tokens_per_expert = lay.get_psum_num_recv_tokens_per_expert();
        h.num_recv_tokens_per_expert = lay.get_num_recv_tokens_per_expert();
        h.recv_src_metadata = lay.get_recv_src_metadata();
        h.device_counts = lay.get_device_counts();
      }
      h.rank = rank, h.num_ranks = R, h.do_expand = expand, h.num_experts = E, h.num_topk = K;
      h.expert_alignment = alignment, h.num_max_tokens_per_rank = T_max, h.num_tokens = args[i].num_tokens;
      h.num_recv_tokens = h.num_expanded_tokens = -1;
      h.num_recv_tokens_per_expert_list.clear();
      h.device = st.placement.device;
    }
  }

  std::vector<EpDispatchResult> results(im.ranks.size());
  for (size_t i = 0; i < im.ranks.size(); ++i) {
    SYMMOE_NVTX_RANGE("ep.dispatch.launch");
    Impl::RankState& st = im.ranks[i];
    const int rank = st.placement.rank;
    EpHandle& h = handles[i];
    SYMMOE_CUDA_CHECK(cudaSetDevice(st.placement.device));
    ep::DispatchParams p{};
    im.fill_buffer_view(p, rank);
    p.rank = rank, p.num_tokens = args[i].num_tokens, p.x_row_bytes = xb, p.sf_row_bytes = sb;
    p.x = static_cast<const uint8_t*>(args[i].x);
    p.x_sf = static_cast<const uint8_t*>(args[i].x_scales);
    p.topk_idx = args[i].topk_idx;
    p.topk_weights = args[i].topk_weights;
    p.cached = options.cached, p.expand = expand, p.zero_padding = options.zero_padding;
    p.expert_alignment = alignment;
    p.handle = handle_arrays(h);
    const layout::EpLayout& lay = p.layout;
    const EpDispatchArgs& a = args[i];
    // Expand x and scale rows are written by the copy epilogue, so they can go to the caller's memory directly;
    // non-expand rows land in the symmetric buffer (copied out below).
    p.recv_x = expand && a.recv_x_out ? static_cast<uint8_t*>(a.recv_x_out) : st.recv_x;
    p.recv_sf = expand && a.recv_scales_out ? static_cast<uint8_t*>(a.recv_scales_out) : st.recv_sf;
    p.recv_topk_idx = a.recv_topk_idx_out ? a.recv_topk_idx_out : st.recv_topk_idx;
    p.recv_topk_weights = a.recv_topk_weights_out ? a.recv_topk_weights_out : st.recv_topk_weights;
    p.warp_counts = st.warp_counts;
    p.error_key = st.error_key;
    p.error = st.error_dev;
    const cudaStream_t stream = im.comm->call_stream(rank, args[i].stream);
    ep::launch_dispatch(p, num_ctas(rank, options.num_sms), stream);

    EpDispatchResult& r = results[i];
    r.recv_x = expand ? static_cast<void*>(p.recv_x) : lay.get_recv_x_row(0);
    r.recv_scales = !sb ? nullptr : expand ? static_cast<void*>(p.recv_sf) : lay.get_recv_scales_row(0);
    if (!expand && a.recv_x_out) {
      SYMMOE_CUDA_CHECK(
          cudaMemcpyAsync(a.recv_x_out, r.recv_x, size_t(capacity) * xb, cudaMemcpyDeviceToDevice, stream));
      r.recv_x = a.recv_x_out;
    }
    if (!expand && sb && a.recv_scales_out) {
      SYMMOE_CUDA_CHECK(
          cudaMemcpyAsync(a.recv_scales_out, r.recv_scales, size_t(capacity) * sb, cudaMemcpyDeviceToDevice, stream));
      r.recv_scales = a.recv_scales_out;
    }
    r.recv_topk_idx = p.recv_topk_idx;
    r.recv_topk_weights = p.recv_topk_weights, r.row_capacity = capacity;
  }
  if (!options.cpu_sync) return results;
  SYMMOE_NVTX_RANGE("ep.dispatch.cpu_sync");
  im.synchronize_call_streams(args);
  synchronize();
  for (size_t i = 0; i < im.ranks.size(); ++i) {
    EpHandle& h = handles[i];
    SYMMOE_CUDA_CHECK(cudaSetDevice(h.device));
    int32_t counts[2];
    SYMMOE_CUDA_CHECK(cudaMemcpy(counts, h.device_counts, sizeof counts, cudaMemcpyDeviceToHost));
    h.num_recv_tokens = counts[0], h.num_expanded_tokens = counts[1];
    h.num_recv_tokens_per_expert_list.resize(El);
    SYMMOE_CUDA_CHECK(cudaMemcpy(h.num_recv_tokens_per_expert_list.data(), h.num_recv_tokens_per_expert, El * 4,
                                 cudaMemcpyDeviceToHost));
    results[i].num_rows = h.do_expand ? h.num_expanded_tokens : h.num_recv_tokens;
  }
  return results;
}

std::vector<EpCombineResult> EpBuffer::combine(const std::vector<EpCombineArgs>& args, const EpCombineOptions& options,
                                               const std::vector<EpHandle>& handles) {
  SYMMOE_NVTX_RANGE("ep.combine");
  Impl& im = *impl_;
  SYMMOE_CHECK(args.size() == im.ranks.size() && handles.size() == im.ranks.size(), "ep", "combine: expected ",
               im.ranks.size(), " args and handles (one per local rank), got ", args.size(), " and ", handles.size());
  for (size_t i = 0; i < im.ranks.size(); ++i)
    check_combine_args(config_, im.ranks[i].placement.rank, handles[i], args[i], options);
  const bool with_weights = args[0].topk_weights != nullptr;
  for (size_t i = 0; i < args.size(); ++i)
    SYMMOE_CHECK((args[i].topk_weights != nullptr) == with_weights, "ep",
                 "combine: topk_weights must be given on every rank or on none (rank ", im.ranks[i].placement.rank,
                 " differs from rank ", im.ranks[0].placement.rank, ")");
  std::vector<EpCombineResult> results(im.ranks.size());
  for (size_t i = 0; i < im.ranks.size(); ++i) {
    Impl::RankState& st = im.ranks[i];
    const int rank = st.placement.rank;
    const EpHandle& h = handles[i];
    SYMMOE_NVTX_RANGE("ep.combine.launch");
    SYMMOE_CUDA_CHECK(cudaSetDevice(st.placement.device));
    ep::CombineParams p{};
    im.fill_buffer_view(p, rank);
    p.rank = rank, p.num_tokens = h.num_tokens;
    p.expand = h.do_expand, p.reduce_local_experts = options.reduce_local_experts;
    p.x = args[i].x, p.topk_weights = args[i].topk_weights, p.bias_0 = args[i].bias_0, p.bias_1 = args[i].bias_1;
    p.handle = handle_arrays(h);
    p.combined_x = args[i].combined_x_out ? args[i].combined_x_out : st.combined_x;
    p.combined_topk_weights = !with_weights                       ? nullptr
                              : args[i].combined_topk_weights_out ? args[i].combined_topk_weights_out
                                                                  : st.combined_topk_weights;
    const int requested = options.num_sms > 0 ? options.num_sms : st.plan_combine_sms;
    const cudaStream_t stream = im.comm->call_stream(rank, args[i].stream);
    ep::launch_combine(p, std::clamp(requested, 1, st.placement.num_sms), stream);
    results[i].combined_x = p.combined_x;
    results[i].combined_topk_weights = p.combined_topk_weights;
  }
  if (options.cpu_sync) {
    SYMMOE_NVTX_RANGE("ep.combine.cpu_sync");
    im.synchronize_call_streams(args);
    synchronize();
  }
  return results;
}

void EpBuffer::synchronize() {
  Impl& im = *impl_;
  im.comm->synchronize();  // CUDA errors and peer timeouts first
  for (auto& st : im.ranks) raise_input_error(st.error_host, st.placement.rank, config_.num_experts, "ep");
}

}  // namespace symmoe
