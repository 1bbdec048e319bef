// EP dispatch/combine on the GPUs against the golden model (symmoe::ref), BITWISE: received rows and scales, every
// EpHandle field, expand segments, cached == fresh, combine results and combined_topk_weights; over uniform, Zipf,
// one-hot-expert and 30%-masked routings, alignment 1 and 128, BF16 and FP8 (fp32 and packed UE8M0 scales per 32
// and 128), with and without biases; backward duality (dispatch backward = combine, combine backward = cached
// dispatch) against the golden model and the written-out adjoint. Also: 100 repeated fresh dispatches identical, 10,000
// dispatch+combine calls and 1,000 CUDA-graph replays stable, device-detected bad expert ids / duplicates raise
// symmoe::Error naming the token. Ranks: one per GPU and 8 virtual ranks (in-process backend). Outputs and handles are
// poisoned before each compared call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/compare.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/ep.hpp"
#include "symmoe/formats.hpp"
#include "symmoe/reference/combine.hpp"
#include "symmoe/reference/dispatch.hpp"
#include "symmoe/reference/routing.hpp"
#include "gpu/device_array.hpp"

namespace symmoe {
namespace {

using test::num_gpus;

using test::DevMem;
using test::upload;

template <typename T>
std::vector<T> download(int device, const void* src, size_t count) {
  std::vector<T> out(count);
  SYMMOE_CUDA_CHECK(cudaSetDevice(device));
  if (count) SYMMOE_CUDA_CHECK(cudaMemcpy(out.data(), src, count * sizeof(T), cudaMemcpyDeviceToHost));
  return out;
}

void poison(int device, const void* p, size_t bytes) { test::poison(device, p, bytes, 0xAB); }

// Finite random bf16 values in [-2, 2).
std::vector<uint16_t> random_bf16(size_t n, std::mt19937_64& rng) {
  std::vector<uint16_t> v(n);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  for (auto& x : v) x = fmt::float_to_bf16(u(rng));
  return v;
}
std::vector<uint8_t> random_bytes(size_t n, std::mt19937_64& rng) {
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = uint8_t(rng());
  return v;
}

struct EpSetup {
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<EpBuffer> buffer;
  EpBufferConfig config;
  int R = 0;
  std::vector<int> devices;  // per local rank
};

EpSetup make_setup(int ranks, EpDtype dtype, EpScales scales, int hidden = 512, int experts = 32, int topk = 6,
                   int t_max = 96) {
  EpSetup s;
  s.comm = Communicator::in_process(ranks, 5000);
  s.R = s.comm->num_ranks();
  s.config.num_max_tokens_per_rank = t_max, s.config.hidden = hidden, s.config.num_topk = topk;
  s.config.num_experts = experts, s.config.dtype = dtype, s.config.scales = scales;
  s.buffer = std::make_unique<EpBuffer>(*s.comm, s.config);
  for (const auto& p : s.comm->local_ranks()) s.devices.push_back(p.device);
  return s;
}

struct Case {
  ref::RoutingKind kind = ref::RoutingKind::kUniform;
  double mask = 0;
  int alignment = 1;
  bool expand = false;
  bool zero_padding = true;
  bool biases = false;
  bool weights = true;
  bool reduce_local = false;
  uint64_t seed = 1;
};

std::string case_name(const Case& c) {
  return std::string(ref::routing_kind_name(c.kind)) + (c.mask > 0 ? "+mask" : "") +
         " align=" + std::to_string(c.alignment) + (c.expand ? " expand" : " non-expand") +
         (c.zero_padding ? "" : " nozero") + (c.biases ? " biases" : "") + (c.reduce_local ? " reduce_local" : "");
}

// Per-rank inputs (host) for the golden model and their device copies.
struct Inputs {
  std::vector<ref::DispatchInput> host;
  std::vector<DevMem> x, sf, idx, w;
  std::vector<EpDispatchArgs> args;
};

Inputs make_inputs(const EpSetup& s, const Case& c, uint64_t salt, const std::vector<ref::Routing>* routing = nullptr) {
  Inputs in;
  const auto& cfg = s.config;
  const int xb = s.buffer->x_row_bytes(), sb = s.buffer->scale_row_bytes();
  std::mt19937_64 rng(c.seed * 1000003 + salt);
  for (int r = 0; r < s.R; ++r) {
    ref::DispatchInput d;
    d.num_tokens = (r + int(c.seed)) % 3 == 0 ? cfg.num_max_tokens_per_rank : cfg.num_max_tokens_per_rank - 7 * r - 3;
    d.num_tokens = std::max(d.num_tokens, 1);
    ref::RoutingOptions ro;
    ro.kind = c.kind, ro.mask_prob = c.mask, ro.seed = c.seed, ro.hot_expert = int(c.seed % cfg.num_experts);
    ro.hot_fraction = 0.7;
    const ref::Routing rt =
        routing ? (*routing)[r] : ref::make_routing(d.num_tokens, cfg.num_experts, cfg.num_topk, ro, r);
    d.num_tokens = rt.num_tokens;
    d.topk_idx = rt.topk_idx, d.topk_weights = rt.topk_weights;
    if (c.mask > 0 && d.num_tokens > 2)  // an all-masked token, explicitly
      for (int k = 0; k < cfg.num_topk; ++k)
        d.topk_idx[size_t(1) * cfg.num_topk + k] = -1, d.topk_weights[cfg.num_topk + k] = 0;
    d.x_row_bytes = xb, d.sf_row_bytes = sb;
    if (cfg.dtype == EpDtype::kBf16) {
      const auto v = random_bf16(size_t(d.num_tokens) * cfg.hidden, rng);
      d.x.resize(v.size() * 2);
      std::memcpy(d.x.data(), v.data(), d.x.size());
    } else {
      d.x = random_bytes(size_t(d.num_tokens) * xb, rng);
    }
    // Payloads name their source: the first 4 bytes of a row are (rank, token).
    for (int t = 0; t < d.num_tokens; ++t) {
      const uint32_t tag = (uint32_t(r) << 16) | uint32_t(t);
      if (cfg.dtype != EpDtype::kBf16) std::memcpy(&d.x[size_t(t) * xb], &tag, 4);
    }
    d.x_sf = random_bytes(size_t(d.num_tokens) * sb, rng);
    in.host.push_back(std::move(d));
  }
  for (int i = 0; i < s.R; ++i) {
    const int dev = s.devices[i];
    in.x.push_back(upload(dev, in.host[i].x));
    in.sf.push_back(upload(dev, in.host[i].x_sf));
    in.idx.push_back(upload(dev, in.host[i].topk_idx));
    in.w.push_back(upload(dev, in.host[i].topk_weights));
    EpDispatchArgs a;
    a.num_tokens = in.host[i].num_tokens;
    a.x = in.x[i].ptr;
    a.x_scales = sb ? in.sf[i].ptr : nullptr;
    a.topk_idx = in.idx[i].as<int64_t>();
    a.topk_weights = in.w[i].as<float>();
    in.args.push_back(a);
  }
  return in;
}

ref::DispatchConfig ref_config(const EpSetup& s, const Case& c) {
  ref::DispatchConfig rc;
  rc.num_ranks = s.R, rc.num_experts = s.config.num_experts, rc.num_topk = s.config.num_topk;
  rc.num_max_tokens_per_rank = s.config.num_max_tokens_per_rank, rc.expert_alignment = c.alignment;
  rc.do_expand = c.expand, rc.zero_padding = c.zero_padding;
  return rc;
}

void poison_outputs(const EpSetup& s, const std::vector<EpDispatchResult>& res, std::vector<EpHandle>* handles) {
  const int K = s.config.num_topk, xb = s.buffer->x_row_bytes(), sb = s.buffer->scale_row_bytes();
  for (int i = 0; i < s.R; ++i) {
    const size_t rows = size_t(res[i].row_capacity);
    poison(s.devices[i], res[i].recv_x, rows * xb);
    poison(s.devices[i], res[i].recv_scales, rows * sb);
    poison(s.devices[i], res[i].recv_topk_idx, rows * K * 8);
    poison(s.devices[i], res[i].recv_topk_weights, rows * K * 4);
    if (!handles) continue;
    EpHandle& h = (*handles)[i];
    const int R = s.R, E = s.config.num_experts, El = E / R, T = s.config.num_max_tokens_per_rank;
    poison(h.device, h.num_tokens_per_rank, R * 4);
    poison(h.device, h.num_tokens_per_expert, E * 4);
    poison(h.device, h.dst_buffer_slot_idx, size_t(T) * K * 4);
    poison(h.device, h.topk_idx, size_t(T) * K * 8);
    poison(h.device, h.psum_num_recv_tokens_per_rank, R * 4);
    poison(h.device, h.num_unaligned_recv_tokens_per_expert, El * 4);
    poison(h.device, h.psum_num_recv_tokens_per_expert, El * 4);
    poison(h.device, h.num_recv_tokens_per_expert, El * 4);
    poison(h.device, h.recv_src_metadata, size_t(R) * T * (2 + K) * 4);
    poison(h.device, h.device_counts, 8);
  }
}

// Rows of an expand output that hold data (not padding), for comparisons that must ignore unspecified padding.
std::vector<char> valid_rows(const ref::EpHandle& h) {
  const int rows = h.do_expand ? h.num_expanded_tokens : h.num_recv_tokens;
  std::vector<char> valid(rows, 1);
  if (!h.do_expand) return valid;
  int start = 0;
  for (int e = 0; e < h.num_local_experts(); ++e) {
    for (int r = start + h.num_unaligned_recv_tokens_per_expert[e]; r < start + h.num_recv_tokens_per_expert_list[e];
         ++r)
      valid[r] = 0;
    start += h.num_recv_tokens_per_expert_list[e];
  }
  return valid;
}

// Compares one rank's dispatch outputs (and, if check_handle, its handle) with the golden model.
// `buffer`: the buffer that ran the dispatch when it is not s.buffer (row sizes).
void expect_dispatch_equal(const EpSetup& s, int i, const ref::DispatchOutput& want, const EpDispatchResult& got,
                           const EpHandle& h, bool check_handle, bool zero_padding, const std::string& what,
                           const EpBuffer* buffer = nullptr) {
  if (!buffer) buffer = s.buffer.get();
  const int dev = s.devices[i], K = s.config.num_topk, xb = buffer->x_row_bytes(), sb = buffer->scale_row_bytes();
  const ref::EpHandle& wh = want.handle;
  const std::string tag = what + " rank " + std::to_string(i);
  const int rows = wh.do_expand ? wh.num_expanded_tokens : wh.num_recv_tokens;
  ASSERT_LE(rows, got.row_capacity) << tag;
  auto rx = download<uint8_t>(dev, got.recv_x, size_t(rows) * xb);
  auto rs = download<uint8_t>(dev, got.recv_scales, size_t(rows) * sb);
  const auto valid = valid_rows(wh);
  if (wh.do_expand && !zero_padding) {  // padding rows unspecified: copy the expected bytes over them
    for (int r = 0; r < rows; ++r)
      if (!valid[r]) {
        std::memcpy(&rx[size_t(r) * xb], &want.recv_x[size_t(r) * xb], xb);
        if (sb) std::memcpy(&rs[size_t(r) * sb], &want.recv_sf[size_t(r) * sb], sb);
      }
  }
  EXPECT_TRUE(test::bitwise_equal(want.recv_x, rx, tag + " recv_x"));
  EXPECT_TRUE(test::bitwise_equal(want.recv_sf, rs, tag + " recv_scales"));
  const size_t idx_n = wh.do_expand ? size_t(rows) : size_t(rows) * K;
  EXPECT_TRUE(test::bitwise_equal(want.recv_topk_idx, download<int64_t>(dev, got.recv_topk_idx, idx_n),
                                  tag + " recv_topk_idx"));
  EXPECT_TRUE(test::bitwise_equal(want.recv_topk_weights, download<float>(dev, got.recv_topk_weights, idx_n),
                                  tag + " recv_topk_weights"));
  if (!check_handle) return;
  const int R = s.R, El = s.config.num_experts / R, T = wh.num_tokens;
  EXPECT_EQ(h.num_recv_tokens, wh.num_recv_tokens) << tag;
  EXPECT_EQ(h.num_expanded_tokens, wh.num_expanded_tokens) << tag;
  EXPECT_EQ(h.num_tokens, wh.num_tokens) << tag;
  EXPECT_EQ(h.do_expand, wh.do_expand) << tag;
  EXPECT_TRUE(
      test::bitwise_equal(wh.num_recv_tokens_per_expert_list, h.num_recv_tokens_per_expert_list, tag + " list"));
  const auto counts = download<int32_t>(dev, h.device_counts, 2);
  EXPECT_EQ(counts[0], wh.num_recv_tokens) << tag << " device num_recv_tokens";
  EXPECT_EQ(counts[1], wh.num_expanded_tokens) << tag << " device num_expanded_tokens";
  EXPECT_TRUE(test::bitwise_equal(wh.num_tokens_per_rank, download<int32_t>(dev, h.num_tokens_per_rank, R),
                                  tag + " num_tokens_per_rank"));
  EXPECT_TRUE(test::bitwise_equal(wh.num_tokens_per_expert,
                                  download<int32_t>(dev, h.num_tokens_per_expert, s.config.num_experts),
                                  tag + " num_tokens_per_expert"));
  EXPECT_TRUE(test::bitwise_equal(wh.dst_buffer_slot_idx, download<int32_t>(dev, h.dst_buffer_slot_idx, size_t(T) * K),
                                  tag + " dst_buffer_slot_idx"));
  EXPECT_TRUE(
      test::bitwise_equal(wh.topk_idx, download<int64_t>(dev, h.topk_idx, size_t(T) * K), tag + " topk_idx copy"));
  EXPECT_TRUE(test::bitwise_equal(wh.psum_num_recv_tokens_per_rank,
                                  download<int32_t>(dev, h.psum_num_recv_tokens_per_rank, R),
                                  tag + " psum_num_recv_tokens_per_rank"));
  EXPECT_TRUE(test::bitwise_equal(wh.num_unaligned_recv_tokens_per_expert,
                                  download<int32_t>(dev, h.num_unaligned_recv_tokens_per_expert, El),
                                  tag + " unaligned"));
  EXPECT_TRUE(test::bitwise_equal(wh.psum_num_recv_tokens_per_expert,
                                  download<int32_t>(dev, h.psum_num_recv_tokens_per_expert, El),
                                  tag + " psum_per_expert"));
  EXPECT_TRUE(test::bitwise_equal(wh.num_recv_tokens_per_expert_list,
                                  download<int32_t>(dev, h.num_recv_tokens_per_expert, El), tag + " aligned (device)"));
  EXPECT_TRUE(test::bitwise_equal(wh.recv_src_metadata,
                                  download<int32_t>(dev, h.recv_src_metadata, size_t(wh.num_recv_tokens) * (2 + K)),
                                  tag + " recv_src_metadata"));
}

std::vector<ref::EpHandle> ref_handles(const std::vector<ref::DispatchOutput>& outs) {
  std::vector<ref::EpHandle> h;
  for (const auto& o : outs) h.push_back(o.handle);
  return h;
}

// Fresh dispatch (compared), cached dispatch of new x (compared), combine (compared).
void run_case(EpSetup& s, const Case& c) {
  SCOPED_TRACE(case_name(c) + " ranks=" + std::to_string(s.R) + " dtype=" + ep_scales_name(s.config.scales));
  const int K = s.config.num_topk, H = s.config.hidden;
  Inputs in = make_inputs(s, c, 1);
  const auto want = ref::dispatch(ref_config(s, c), in.host);
  EpDispatchOptions opt;
  opt.expert_alignment = c.alignment, opt.expand = c.expand, opt.zero_padding = c.zero_padding;
  std::vector<EpHandle> handles(s.R);
  auto res = s.buffer->dispatch(in.args, opt, handles);  // first call; then poison and compare the second
  poison_outputs(s, res, &handles);
  res = s.buffer->dispatch(in.args, opt, handles);
  for (int i = 0; i < s.R; ++i) expect_dispatch_equal(s, i, want[i], res[i], handles[i], true, c.zero_padding, "fresh");

  // Cached dispatch with new payloads and weights (same routing).
  std::vector<ref::Routing> routing(s.R);
  for (int i = 0; i < s.R; ++i) {
    routing[i].num_tokens = in.host[i].num_tokens, routing[i].num_topk = K;
    routing[i].topk_idx = in.host[i].topk_idx, routing[i].topk_weights = in.host[i].topk_weights;
    for (auto& w : routing[i].topk_weights) w = w * 0.5f + 0.125f;
  }
  Inputs in2 = make_inputs(s, c, 2, &routing);
  const auto want2 = ref::dispatch_cached(ref_handles(want), in2.host, c.zero_padding);
  poison_outputs(s, res, nullptr);
  EpDispatchOptions copt = opt;
  copt.cached = true;
  auto res2 = s.buffer->dispatch(in2.args, copt, handles);
  for (int i = 0; i < s.R; ++i)
    expect_dispatch_equal(s, i, want2[i], res2[i], handles[i], false, c.zero_padding, "cached");

  // Combine: bf16 rows shaped like recv_x, optional weights and biases.
  std::mt19937_64 rng(c.seed * 77 + 5);
  std::vector<ref::CombineInput> cin(s.R);
  std::vector<DevMem> cx, cw, b0, b1;
  std::vector<EpCombineArgs> cargs(s.R);
  for (int i = 0; i < s.R; ++i) {
    const ref::EpHandle& wh = want[i].handle;
    const int rows = wh.do_expand ? wh.num_expanded_tokens : wh.num_recv_tokens;
    cin[i].x = random_bf16(size_t(rows) * H, rng);
    if (c.weights) {
      std::vector<float> w(size_t(rows) * (wh.do_expand ? 1 : K));
      for (auto& v : w) v = float(rng() % 1000) / 997.f;
      cin[i].topk_weights = w;
    }
    if (c.biases)
      cin[i].bias_0 = random_bf16(size_t(wh.num_tokens) * H, rng),
      cin[i].bias_1 = random_bf16(size_t(wh.num_tokens) * H, rng);
    const int dev = s.devices[i];
    cx.push_back(upload(dev, cin[i].x));
    cw.push_back(upload(dev, cin[i].topk_weights ? *cin[i].topk_weights : std::vector<float>{}));
    b0.push_back(upload(dev, cin[i].bias_0 ? *cin[i].bias_0 : std::vector<uint16_t>{}));
    b1.push_back(upload(dev, cin[i].bias_1 ? *cin[i].bias_1 : std::vector<uint16_t>{}));
    cargs[i].x = cx[i].as<uint16_t>();
    cargs[i].topk_weights = c.weights ? cw[i].as<float>() : nullptr;
    cargs[i].bias_0 = c.biases ? b0[i].as<uint16_t>() : nullptr;
    cargs[i].bias_1 = c.biases ? b1[i].as<uint16_t>() : nullptr;
  }
  ref::CombineOptions ro;
  ro.reduce_local_experts = c.reduce_local;
  const auto cwant = ref::combine(ref_handles(want), H, cin, ro);
  EpCombineOptions co;
  co.reduce_local_experts = c.reduce_local;
  auto cres = s.buffer->combine(cargs, co, handles);  // warm, poison, compare the second call
  for (int i = 0; i < s.R; ++i) {
    poison(s.devices[i], cres[i].combined_x, size_t(in.host[i].num_tokens) * H * 2);
    if (cres[i].combined_topk_weights)
      poison(s.devices[i], cres[i].combined_topk_weights, size_t(in.host[i].num_tokens) * K * 4);
  }
  cres = s.buffer->combine(cargs, co, handles);
  for (int i = 0; i < s.R; ++i) {
    const int T = in.host[i].num_tokens;
    const std::string tag = "combine rank " + std::to_string(i);
    EXPECT_TRUE(test::bitwise_equal(
        cwant[i].combined_x, download<uint16_t>(s.devices[i], cres[i].combined_x, size_t(T) * H), tag + " combined_x"));
    if (c.weights)
      EXPECT_TRUE(test::bitwise_equal(cwant[i].combined_topk_weights,
                                      download<float>(s.devices[i], cres[i].combined_topk_weights, size_t(T) * K),
                                      tag + " combined_topk_weights"));
  }
}

// Routing entry (token, lane) of `bad_rank` in `in` set to `value`: dispatch must raise an error naming the rank,
// token and lane, and containing `detail`; then good inputs must still match the golden model bitwise (the dispatch
// kernel reset the error key after reading it).
void expect_bad_routing_raises(EpSetup& s, const Case& c, const Inputs& in, int bad_rank, int token, int lane,
                               int64_t value, const std::string& detail) {
  SCOPED_TRACE("bad routing value " + std::to_string(value));
  std::vector<int64_t> idx = in.host[bad_rank].topk_idx;
  idx[size_t(token) * s.config.num_topk + lane] = value;
  SYMMOE_CUDA_CHECK(cudaSetDevice(s.devices[bad_rank]));
  SYMMOE_CUDA_CHECK(cudaMemcpy(in.idx[bad_rank].ptr, idx.data(), idx.size() * 8, cudaMemcpyHostToDevice));
  test::finish_legacy_stream();
  std::vector<EpHandle> handles(s.R);
  const std::string where =
      "rank " + std::to_string(bad_rank) + " token " + std::to_string(token) + " lane " + std::to_string(lane);
  try {
    s.buffer->dispatch(in.args, EpDispatchOptions{}, handles);
    ADD_FAILURE() << "bad expert id " << value << " at " << where << " was not reported";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(where), std::string::npos) << msg;
    EXPECT_NE(msg.find(detail), std::string::npos) << msg;
  }
  Inputs good = make_inputs(s, c, 3);
  const auto want = ref::dispatch(ref_config(s, c), good.host);
  auto res = s.buffer->dispatch(good.args, EpDispatchOptions{}, handles);
  for (int i = 0; i < s.R; ++i) expect_dispatch_equal(s, i, want[i], res[i], handles[i], true, true, "after error");
}

struct Param {
  int ranks;  // 0: one per GPU
  EpDtype dtype;
  EpScales scales;
};
std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return (info.param.ranks == 0 ? std::string("one_per_gpu") : "virtual" + std::to_string(info.param.ranks)) + "_" +
         ep_scales_name(info.param.scales);
}

class EpGolden : public ::testing::TestWithParam<Param> {};

TEST_P(EpGolden, MatchesGoldenModelBitwise) {
  const Param p = GetParam();
  EpSetup s = make_setup(p.ranks == 0 ? num_gpus() : p.ranks, p.dtype, p.scales);
  const ref::RoutingKind kinds[] = {ref::RoutingKind::kUniform, ref::RoutingKind::kZipf, ref::RoutingKind::kHotExpert};
  uint64_t seed = 11;
  for (const auto kind : kinds)
    for (double mask : {0.0, 0.3})
      for (int alignment : {1, 128})
        for (bool expand : {false, true}) {
          Case c;
          c.kind = kind, c.mask = mask, c.alignment = alignment, c.expand = expand, c.seed = seed++;
          c.biases = (seed % 2) == 0;
          c.zero_padding = !(expand && (seed % 3) == 0);
          c.reduce_local = expand && (seed % 4) == 1;
          c.weights = (seed % 5) != 0;
          run_case(s, c);
          if (HasFailure()) return;  // the first failing case is the informative one
        }
}

INSTANTIATE_TEST_SUITE_P(Ranks, EpGolden,
                         ::testing::Values(Param{0, EpDtype::kBf16, EpScales::kNone},
                                           Param{0, EpDtype::kFp8E4m3, EpScales::kFp32Per128},
                                           Param{0, EpDtype::kFp8E4m3, EpScales::kUe8m0Per128},
                                           Param{0, EpDtype::kFp8E4m3, EpScales::kUe8m0Per32},
                                           Param{8, EpDtype::kBf16, EpScales::kNone},
                                           Param{8, EpDtype::kFp8E4m3, EpScales::kFp32Per128},
                                           Param{8, EpDtype::kFp8E4m3, EpScales::kUe8m0Per32}),
                         param_name);

// Larger batches (~1000 tokens per rank: several tokens per warp, bases across many CTAs) and longer rows (hidden
// 4608: an FP8 row is two bulk-copy pieces, the second partial, plus a 144-byte scale piece): the same comparisons,
// and a bad id far into the batch is still found (the error key is reset in the kernel afterwards).
class EpLargeBatch : public ::testing::TestWithParam<int> {};

TEST_P(EpLargeBatch, MatchesGoldenModelAndFindsLateBadIds) {
  EpSetup s = make_setup(GetParam() == 0 ? num_gpus() : GetParam(), EpDtype::kFp8E4m3, EpScales::kFp32Per128, 4608, 32,
                         6, 1024);
  uint64_t seed = 70;
  for (const auto kind : {ref::RoutingKind::kUniform, ref::RoutingKind::kZipf, ref::RoutingKind::kHotExpert}) {
    Case c;
    c.kind = kind, c.mask = kind == ref::RoutingKind::kZipf ? 0.3 : 0.0, c.seed = seed++;
    c.expand = kind != ref::RoutingKind::kUniform, c.alignment = c.expand ? 128 : 1;
    c.biases = kind == ref::RoutingKind::kHotExpert;
    run_case(s, c);
    if (HasFailure()) return;
  }
  Case c;
  c.seed = 80;
  Inputs in = make_inputs(s, c, 1);
  const int bad_rank = s.R - 1, token = 700;
  ASSERT_GT(in.host[bad_rank].num_tokens, token);
  const int64_t value = s.config.num_experts;
  expect_bad_routing_raises(s, c, in, bad_rank, token, 4, value, "expert id " + std::to_string(value));
}

INSTANTIATE_TEST_SUITE_P(Ranks, EpLargeBatch, ::testing::Values(0, 8), [](const ::testing::TestParamInfo<int>& info) {
  return info.param == 0 ? std::string("one_per_gpu") : "virtual" + std::to_string(info.param);
});

// Fresh dispatch repeated 100 times: every output and handle field identical to the golden model each time
// (checked on the first, last and every 10th call; the others must equal the first).
TEST(EpRepeat, DeterministicOver100Calls) {
  EpSetup s = make_setup(num_gpus(), EpDtype::kFp8E4m3, EpScales::kFp32Per128);
  Case c;
  c.kind = ref::RoutingKind::kZipf, c.mask = 0.3, c.expand = true, c.alignment = 128, c.seed = 99;
  Inputs in = make_inputs(s, c, 1);
  const auto want = ref::dispatch(ref_config(s, c), in.host);
  EpDispatchOptions opt;
  opt.expert_alignment = c.alignment, opt.expand = true, opt.deterministic = true;
  std::vector<EpHandle> handles(s.R);
  for (int call = 0; call < 100; ++call) {
    auto res = s.buffer->dispatch(in.args, opt, handles);
    if (call % 10 == 9 || call == 0)
      for (int i = 0; i < s.R; ++i)
        expect_dispatch_equal(s, i, want[i], res[i], handles[i], true, true, "call " + std::to_string(call));
    if (HasFailure()) return;
    poison_outputs(s, res, &handles);
  }
}

// Round trip with identity experts: combine(recv_x of a bf16 dispatch) without host syncs, 10,000 times, then
// 1,000 replays of a captured CUDA graph of the same pair; results equal the golden model after both.
class EpStability : public ::testing::TestWithParam<int> {};

TEST_P(EpStability, TenThousandCallsAndGraphReplays) {
  EpSetup s = make_setup(GetParam() == 0 ? num_gpus() : GetParam(), EpDtype::kBf16, EpScales::kNone);
  Case c;
  c.kind = ref::RoutingKind::kHotExpert, c.mask = 0.3, c.expand = true, c.alignment = 128, c.seed = 7;
  Inputs in = make_inputs(s, c, 1);
  const auto want = ref::dispatch(ref_config(s, c), in.host);
  std::vector<ref::CombineInput> cin(s.R);
  for (int i = 0; i < s.R; ++i) {
    cin[i].x.resize(want[i].recv_x.size() / 2);
    std::memcpy(cin[i].x.data(), want[i].recv_x.data(), want[i].recv_x.size());
    cin[i].topk_weights = want[i].recv_topk_weights;
  }
  const auto cwant = ref::combine(ref_handles(want), s.config.hidden, cin);
  EpDispatchOptions opt;
  opt.expert_alignment = c.alignment, opt.expand = true;
  std::vector<EpHandle> handles(s.R);
  auto res = s.buffer->dispatch(in.args, opt, handles);  // fills handles and sizes outputs (host sync)
  std::vector<EpCombineArgs> cargs(s.R);
  for (int i = 0; i < s.R; ++i) {
    cargs[i].x = static_cast<const uint16_t*>(res[i].recv_x);
    cargs[i].topk_weights = res[i].recv_topk_weights;
  }
  opt.cpu_sync = false;
  EpCombineOptions co;
  co.cpu_sync = false;
  const auto check = [&](const std::string& what) {
    s.buffer->synchronize();
    auto cres = s.buffer->combine(cargs, EpCombineOptions{}, handles);  // one synced call to read results
    for (int i = 0; i < s.R; ++i) {
      const int T = in.host[i].num_tokens, K = s.config.num_topk;
      EXPECT_TRUE(test::bitwise_equal(cwant[i].combined_x,
                                      download<uint16_t>(s.devices[i], cres[i].combined_x, size_t(T) * s.config.hidden),
                                      what + " combined_x rank " + std::to_string(i)));
      EXPECT_TRUE(test::bitwise_equal(cwant[i].combined_topk_weights,
                                      download<float>(s.devices[i], cres[i].combined_topk_weights, size_t(T) * K),
                                      what + " combined_topk_weights rank " + std::to_string(i)));
    }
  };
  for (int call = 0; call < 10000; ++call) {
    s.buffer->dispatch(in.args, opt, handles);
    s.buffer->combine(cargs, co, handles);
    if (call % 2500 == 2499) check("call " + std::to_string(call));
    if (HasFailure()) return;
  }
  // Capture every rank's stream at once (the call launches all ranks), then replay.
  std::vector<cudaGraph_t> graphs(s.R);
  std::vector<cudaGraphExec_t> execs(s.R);
  for (int i = 0; i < s.R; ++i) {
    SYMMOE_CUDA_CHECK(cudaSetDevice(s.devices[i]));
    SYMMOE_CUDA_CHECK(cudaStreamBeginCapture(s.comm->stream(i), cudaStreamCaptureModeRelaxed));
  }
  s.buffer->dispatch(in.args, opt, handles);
  s.buffer->combine(cargs, co, handles);
  for (int i = 0; i < s.R; ++i) {
    SYMMOE_CUDA_CHECK(cudaSetDevice(s.devices[i]));
    SYMMOE_CUDA_CHECK(cudaStreamEndCapture(s.comm->stream(i), &graphs[i]));
    SYMMOE_CUDA_CHECK(cudaGraphInstantiate(&execs[i], graphs[i], 0));
  }
  for (int rep = 0; rep < 1000; ++rep)
    for (int i = 0; i < s.R; ++i) {
      SYMMOE_CUDA_CHECK(cudaSetDevice(s.devices[i]));
      SYMMOE_CUDA_CHECK(cudaGraphLaunch(execs[i], s.comm->stream(i)));
    }
  check("after 1000 graph replays");
  for (int i = 0; i < s.R; ++i) {
    SYMMOE_CUDA_CHECK(cudaGraphExecDestroy(execs[i]));
    SYMMOE_CUDA_CHECK(cudaGraphDestroy(graphs[i]));
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, EpStability, ::testing::Values(0, 8), [](const ::testing::TestParamInfo<int>& info) {
  return info.param == 0 ? std::string("one_per_gpu") : "virtual" + std::to_string(info.param);
});

// Backward duality (issue 4): dispatch's backward is combine with the forward handle (the gradients of the received
// rows summed back per token, those of recv_topk_weights returned as combined_topk_weights); combine's backward is
// a cached dispatch of the output gradient with that handle, here on a second, BF16 buffer while the forward
// dispatch is FP8 with packed UE8M0 scales per 32 channels. Each is compared bitwise with the golden model AND with
// the adjoint written out from the forward handle's recv_src_metadata: the rows a token was copied to are exactly
// the rows its gradient sums (ascending top-k lane, fp32, one bf16 rounding), and every copy of a token receives
// exactly its gradient row.
class EpBackward : public ::testing::TestWithParam<int> {};

TEST_P(EpBackward, DispatchAndCombineBackwardAreDual) {
  EpSetup s = make_setup(GetParam() == 0 ? num_gpus() : GetParam(), EpDtype::kFp8E4m3, EpScales::kUe8m0Per32);
  EpBufferConfig grad_config = s.config;
  grad_config.dtype = EpDtype::kBf16, grad_config.scales = EpScales::kNone;
  EpBuffer grad_buffer(*s.comm, grad_config);
  const int K = s.config.num_topk, H = s.config.hidden, T_max = s.config.num_max_tokens_per_rank;
  const int El = s.config.num_experts / s.R;
  for (const bool expand : {false, true}) {
    Case c;
    c.kind = ref::RoutingKind::kZipf, c.mask = 0.3, c.expand = expand, c.alignment = expand ? 128 : 1;
    c.seed = expand ? 41 : 40;
    SCOPED_TRACE(case_name(c) + " ranks=" + std::to_string(s.R));
    Inputs in = make_inputs(s, c, 1);
    const auto fwd = ref::dispatch(ref_config(s, c), in.host);
    EpDispatchOptions opt;
    opt.expand = expand, opt.expert_alignment = c.alignment;
    std::vector<EpHandle> handles(s.R);
    const auto res = s.buffer->dispatch(in.args, opt, handles);
    for (int i = 0; i < s.R; ++i) expect_dispatch_equal(s, i, fwd[i], res[i], handles[i], true, true, "forward");
    if (HasFailure()) return;

    // ---- dispatch backward = combine(gradient rows, handle) ----
    std::mt19937_64 rng(c.seed * 131 + 7);
    std::vector<ref::CombineInput> gin(s.R);
    std::vector<DevMem> gx, gw;
    std::vector<EpCombineArgs> gargs(s.R);
    for (int d = 0; d < s.R; ++d) {
      const ref::EpHandle& h = fwd[d].handle;
      const int rows = expand ? h.num_expanded_tokens : h.num_recv_tokens;
      gin[d].x = random_bf16(size_t(rows) * H, rng);
      std::vector<float> w(size_t(rows) * (expand ? 1 : K));
      for (auto& v : w) v = float(int(rng() % 2001) - 1000) / 512.f;
      gin[d].topk_weights = w;
      gx.push_back(upload(s.devices[d], gin[d].x));
      gw.push_back(upload(s.devices[d], w));
      gargs[d].x = gx[d].as<uint16_t>();
      gargs[d].topk_weights = gw[d].as<float>();
    }
    const auto want_grad = ref::combine(ref_handles(fwd), H, gin);
    // The adjoint of "copy token (s, t) to these rows": (lane, row of rank d) pairs per source token.
    struct Copy {
      int lane, d;
      int64_t row;
    };
    std::vector<std::vector<std::vector<Copy>>> copies(s.R);
    for (int r = 0; r < s.R; ++r) copies[r].resize(in.host[r].num_tokens);
    for (int d = 0; d < s.R; ++d) {
      const ref::EpHandle& h = fwd[d].handle;
      for (int i = 0; i < h.num_recv_tokens; ++i) {
        const int32_t* meta = &h.recv_src_metadata[size_t(i) * (2 + K)];
        const int src = meta[0] / T_max, t = meta[0] % T_max;
        if (!expand) copies[src][t].push_back({meta[1] - src * K, d, i});
        for (int k = 0; expand && k < K; ++k)
          if (meta[2 + k] >= 0) copies[src][t].push_back({k, d, meta[2 + k]});
      }
    }
    auto grad = s.buffer->combine(gargs, EpCombineOptions{}, handles);
    for (int r = 0; r < s.R; ++r) {
      const int T = in.host[r].num_tokens;
      const auto got_x = download<uint16_t>(s.devices[r], grad[r].combined_x, size_t(T) * H);
      const auto got_w = download<float>(s.devices[r], grad[r].combined_topk_weights, size_t(T) * K);
      const std::string tag = "dispatch backward rank " + std::to_string(r);
      EXPECT_TRUE(test::bitwise_equal(want_grad[r].combined_x, got_x, tag + " grad x (golden)"));
      EXPECT_TRUE(test::bitwise_equal(want_grad[r].combined_topk_weights, got_w, tag + " grad weights (golden)"));
      std::vector<uint16_t> adj_x(size_t(T) * H);
      std::vector<float> adj_w(size_t(T) * K, 0.f);
      for (int t = 0; t < T; ++t) {
        auto list = copies[r][t];
        std::sort(list.begin(), list.end(), [](const Copy& a, const Copy& b) { return a.lane < b.lane; });
        for (int j = 0; j < H; ++j) {
          float acc = 0.f;
          for (const Copy& cp : list) acc += fmt::bf16_to_float(gin[cp.d].x[size_t(cp.row) * H + j]);
          adj_x[size_t(t) * H + j] = fmt::float_to_bf16(acc);
        }
        for (int k = 0; k < K; ++k) {  // lane k's weight gradient comes from the rank that owns its expert
          const int64_t e = in.host[r].topk_idx[size_t(t) * K + k];
          for (const Copy& cp : list) {
            if (e < 0 || cp.d != int(e / El)) continue;
            if (expand && cp.lane == k) adj_w[size_t(t) * K + k] = (*gin[cp.d].topk_weights)[cp.row];
            if (!expand) adj_w[size_t(t) * K + k] = (*gin[cp.d].topk_weights)[size_t(cp.row) * K + k];
          }
        }
      }
      EXPECT_TRUE(test::bitwise_equal(adj_x, got_x, tag + " grad x (adjoint)"));
      EXPECT_TRUE(test::bitwise_equal(adj_w, got_w, tag + " grad weights (adjoint)"));
    }
    if (HasFailure()) return;

    // ---- combine backward = cached dispatch of the output gradient (BF16 buffer, the FP8 dispatch's handle) ----
    std::vector<ref::DispatchInput> gy(s.R);
    std::vector<DevMem> gy_dev;
    std::vector<EpDispatchArgs> yargs(s.R);
    for (int r = 0; r < s.R; ++r) {
      gy[r] = in.host[r];
      const auto v = random_bf16(size_t(in.host[r].num_tokens) * H, rng);
      gy[r].x.resize(v.size() * 2);
      std::memcpy(gy[r].x.data(), v.data(), gy[r].x.size());
      gy[r].x_row_bytes = H * 2, gy[r].sf_row_bytes = 0, gy[r].x_sf.clear();
      gy_dev.push_back(upload(s.devices[r], gy[r].x));
      yargs[r] = in.args[r];
      yargs[r].x = gy_dev[r].ptr, yargs[r].x_scales = nullptr;
    }
    const auto want_gy = ref::dispatch_cached(ref_handles(fwd), gy, true);
    EpDispatchOptions copt;
    copt.cached = true;
    const auto gres = grad_buffer.dispatch(yargs, copt, handles);
    for (int d = 0; d < s.R; ++d) {
      expect_dispatch_equal(s, d, want_gy[d], gres[d], handles[d], false, true, "combine backward (golden)",
                            &grad_buffer);
      const ref::EpHandle& h = fwd[d].handle;
      const int rows = expand ? h.num_expanded_tokens : h.num_recv_tokens;
      const auto got = download<uint8_t>(s.devices[d], gres[d].recv_x, size_t(rows) * H * 2);
      std::vector<uint8_t> adj = got;  // rows no token was copied to (expand padding) are not the adjoint's business
      for (int i = 0; i < h.num_recv_tokens; ++i) {
        const int32_t* meta = &h.recv_src_metadata[size_t(i) * (2 + K)];
        const uint8_t* g = &gy[meta[0] / T_max].x[size_t(meta[0] % T_max) * H * 2];
        if (!expand) std::memcpy(&adj[size_t(i) * H * 2], g, size_t(H) * 2);
        for (int k = 0; expand && k < K; ++k)
          if (meta[2 + k] >= 0) std::memcpy(&adj[size_t(meta[2 + k]) * H * 2], g, size_t(H) * 2);
      }
      EXPECT_TRUE(test::bitwise_equal(adj, got, "combine backward (adjoint) rank " + std::to_string(d) + " rows"));
    }
    if (HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, EpBackward, ::testing::Values(0, 8), [](const ::testing::TestParamInfo<int>& info) {
  return info.param == 0 ? std::string("one_per_gpu") : "virtual" + std::to_string(info.param);
});

// A call without an explicit stream is ordered after the work already queued on the device's legacy default stream
// (Communicator::call_stream): a payload rewritten there by a copy that waits behind a ~10 ms kernel is the payload
// dispatched. Before that rule, tests that poisoned or uploaded with cudaMemset / cudaMemcpy raced the rank streams
// (outputs left as poison, a poisoned handle read by a cached dispatch: illegal address), more often on one GPU.
__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

TEST(EpStreamOrder, CallsWithoutAStreamFollowTheLegacyStream) {
  EpSetup s = make_setup(8, EpDtype::kFp8E4m3, EpScales::kFp32Per128);
  Case c;
  c.kind = ref::RoutingKind::kZipf, c.mask = 0.3, c.seed = 31;
  Inputs in = make_inputs(s, c, 1), next = make_inputs(s, c, 2);  // same routing and counts, other payloads
  const auto want = ref::dispatch(ref_config(s, c), next.host);
  std::vector<EpHandle> handles(s.R);
  s.buffer->dispatch(in.args, EpDispatchOptions{}, handles);  // warm (host-synced)
  for (int i = 0; i < s.R; ++i) {
    int clock_khz = 0;
    SYMMOE_CUDA_CHECK(cudaSetDevice(s.devices[i]));
    SYMMOE_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, s.devices[i]));
    spin_kernel<<<1, 1, 0, cudaStreamLegacy>>>(10LL * clock_khz);
    SYMMOE_CUDA_CHECK_LAUNCH("spin_kernel");
    SYMMOE_CUDA_CHECK(
        cudaMemcpyAsync(in.x[i].ptr, next.x[i].ptr, next.x[i].bytes, cudaMemcpyDeviceToDevice, cudaStreamLegacy));
    SYMMOE_CUDA_CHECK(
        cudaMemcpyAsync(in.sf[i].ptr, next.sf[i].ptr, next.sf[i].bytes, cudaMemcpyDeviceToDevice, cudaStreamLegacy));
  }
  const auto res = s.buffer->dispatch(in.args, EpDispatchOptions{}, handles);
  for (int i = 0; i < s.R; ++i)
    expect_dispatch_equal(s, i, want[i], res[i], handles[i], true, false, "after legacy copy");
}

// Bad expert ids and duplicates are found on the device and raised on the host naming rank, token, lane, value;
// the other ranks do not hang, and the buffer keeps working afterwards.
TEST(EpInputErrors, OutOfRangeAndDuplicateRaise) {
  EpSetup s = make_setup(num_gpus(), EpDtype::kBf16, EpScales::kNone);
  Case c;
  c.seed = 3;
  const int K = s.config.num_topk, E = s.config.num_experts, bad_rank = s.R - 1, token = 5, lane = 2;
  for (const int64_t value : {int64_t(E) + 3, int64_t(-7)}) {
    Inputs in = make_inputs(s, c, 1);
    expect_bad_routing_raises(s, c, in, bad_rank, token, lane, value, "expert id " + std::to_string(value));
  }
  Inputs in = make_inputs(s, c, 1);
  const int64_t lane0 = in.host[bad_rank].topk_idx[size_t(token) * K];  // lane 2 repeats lane 0's expert
  expect_bad_routing_raises(s, c, in, bad_rank, token, lane, lane0,
                            "expert " + std::to_string(lane0) + " duplicates lane 0");
}

// DeepEP V2's bias order: the fp32 sum starts from the biases (bias_0 + bias_1), then adds the rows. With
// bias_1 = -bias_0 of magnitude 2^20 the bias sum is exactly 0, so the result must equal the combine without biases
// bitwise (adding the rows first and the biases last would round the partial sums to multiples of 2^-3). Also one
// random bias, against the golden model; non-expand and expand + reduce_local_experts; one rank per GPU.
TEST(EpCombineBiasOrder, BiasesStartTheSum) {
  EpSetup s = make_setup(num_gpus(), EpDtype::kBf16, EpScales::kNone);
  const int H = s.config.hidden;
  for (bool expand : {false, true}) {
    Case c;
    c.kind = ref::RoutingKind::kZipf, c.mask = 0.3, c.expand = expand, c.reduce_local = expand, c.seed = 29;
    SCOPED_TRACE(case_name(c));
    Inputs in = make_inputs(s, c, 1);
    const auto want = ref::dispatch(ref_config(s, c), in.host);
    EpDispatchOptions opt;
    opt.expand = expand;
    std::vector<EpHandle> handles(s.R);
    s.buffer->dispatch(in.args, opt, handles);
    std::mt19937_64 rng(41);
    std::vector<ref::CombineInput> cin(s.R);
    std::vector<DevMem> cx, big0, big1, small0;
    std::vector<std::vector<uint16_t>> big(s.R), small(s.R);
    for (int i = 0; i < s.R; ++i) {
      const ref::EpHandle& wh = want[i].handle;
      cin[i].x = random_bf16(size_t(wh.do_expand ? wh.num_expanded_tokens : wh.num_recv_tokens) * H, rng);
      const size_t n = size_t(wh.num_tokens) * H;
      big[i].resize(n);
      for (auto& b : big[i]) b = fmt::float_to_bf16(std::ldexp(float(128 + rng() % 128), 13));  // 2^20 .. 2^21
      small[i] = random_bf16(n, rng);
      std::vector<uint16_t> neg(n);
      for (size_t j = 0; j < n; ++j) neg[j] = uint16_t(big[i][j] ^ 0x8000u);
      const int dev = s.devices[i];
      cx.push_back(upload(dev, cin[i].x));
      big0.push_back(upload(dev, big[i]));
      big1.push_back(upload(dev, neg));
      small0.push_back(upload(dev, small[i]));
    }
    EpCombineOptions co;
    co.reduce_local_experts = expand;
    auto run = [&](int which) {  // 0: no bias, 1: (big, -big), 2: one random bias
      std::vector<EpCombineArgs> args(s.R);
      for (int i = 0; i < s.R; ++i) {
        args[i].x = cx[i].as<uint16_t>();
        args[i].bias_0 = which == 1 ? big0[i].as<uint16_t>() : which == 2 ? small0[i].as<uint16_t>() : nullptr;
        args[i].bias_1 = which == 1 ? big1[i].as<uint16_t>() : nullptr;
      }
      const auto res = s.buffer->combine(args, co, handles);
      std::vector<std::vector<uint16_t>> out(s.R);
      for (int i = 0; i < s.R; ++i)
        out[i] = download<uint16_t>(s.devices[i], res[i].combined_x, size_t(in.host[i].num_tokens) * H);
      return out;
    };
    const auto plain = run(0), cancelled = run(1), biased = run(2);
    ref::CombineOptions ro;
    ro.reduce_local_experts = expand;
    for (int i = 0; i < s.R; ++i) cin[i].bias_0 = small[i];
    const auto want_biased = ref::combine(ref_handles(want), H, cin, ro);
    for (int i = 0; i < s.R; ++i) {
      const std::string tag = "rank " + std::to_string(i);
      EXPECT_TRUE(test::bitwise_equal(plain[i], cancelled[i], tag + " bias (b, -b) vs no bias"));
      EXPECT_TRUE(test::bitwise_equal(want_biased[i].combined_x, biased[i], tag + " one bias vs golden"));
    }
  }
}

// Combine into caller-owned outputs (EpCombineArgs::combined_x_out / combined_topk_weights_out): equal to the
// golden model, and the EpBuffer's own output memory (a previous combine's result) is left untouched.
TEST(EpCombineOutputs, CallerOwnedOutputs) {
  EpSetup s = make_setup(num_gpus(), EpDtype::kBf16, EpScales::kNone);
  const int K = s.config.num_topk, H = s.config.hidden;
  Case c;
  c.kind = ref::RoutingKind::kUniform, c.mask = 0.3, c.seed = 37;
  Inputs in = make_inputs(s, c, 1);
  const auto want = ref::dispatch(ref_config(s, c), in.host);
  std::vector<EpHandle> handles(s.R);
  s.buffer->dispatch(in.args, EpDispatchOptions{}, handles);
  std::mt19937_64 rng(43);
  std::vector<ref::CombineInput> cin(s.R);
  std::vector<DevMem> cx, cw, out_x, out_w;
  std::vector<EpCombineArgs> args(s.R);
  for (int i = 0; i < s.R; ++i) {
    const int rows = want[i].handle.num_recv_tokens, T = in.host[i].num_tokens, dev = s.devices[i];
    cin[i].x = random_bf16(size_t(rows) * H, rng);
    std::vector<float> w(size_t(rows) * K);
    for (auto& v : w) v = float(rng() % 1000) / 991.f;
    cin[i].topk_weights = w;
    cx.push_back(upload(dev, cin[i].x));
    cw.push_back(upload(dev, w));
    out_x.emplace_back(dev, size_t(T) * H * 2);
    out_w.emplace_back(dev, size_t(T) * K * 4);
    poison(dev, out_x[i].ptr, size_t(T) * H * 2);
    poison(dev, out_w[i].ptr, size_t(T) * K * 4);
    args[i].x = cx[i].as<uint16_t>(), args[i].topk_weights = cw[i].as<float>();
  }
  const auto own = s.buffer->combine(args, EpCombineOptions{}, handles);  // into the buffer's memory
  std::vector<std::vector<uint16_t>> own_before(s.R);
  for (int i = 0; i < s.R; ++i)
    own_before[i] = download<uint16_t>(s.devices[i], own[i].combined_x, size_t(in.host[i].num_tokens) * H);
  for (int i = 0; i < s.R; ++i) {
    args[i].x = cx[i].as<uint16_t>();
    args[i].combined_x_out = out_x[i].as<uint16_t>(), args[i].combined_topk_weights_out = out_w[i].as<float>();
  }
  const auto res = s.buffer->combine(args, EpCombineOptions{}, handles);
  const auto cwant = ref::combine(ref_handles(want), H, cin);
  for (int i = 0; i < s.R; ++i) {
    const int T = in.host[i].num_tokens;
    const std::string tag = "rank " + std::to_string(i);
    EXPECT_EQ(res[i].combined_x, out_x[i].as<uint16_t>()) << tag;
    EXPECT_EQ(res[i].combined_topk_weights, out_w[i].as<float>()) << tag;
    EXPECT_TRUE(test::bitwise_equal(cwant[i].combined_x, download<uint16_t>(s.devices[i], out_x[i].ptr, size_t(T) * H),
                                    tag + " combined_x_out"));
    EXPECT_TRUE(test::bitwise_equal(cwant[i].combined_topk_weights,
                                    download<float>(s.devices[i], out_w[i].ptr, size_t(T) * K),
                                    tag + " combined_topk_weights_out"));
    EXPECT_TRUE(test::bitwise_equal(own_before[i], download<uint16_t>(s.devices[i], own[i].combined_x, size_t(T) * H),
                                    tag + " buffer-owned combined_x untouched"));
  }
}

// Dispatch into caller-owned outputs (EpDispatchArgs::*_out, row_capacity rows): the same bytes as the
// EpBuffer's own outputs, compared with the golden model; non-expand and expand, FP8 with scales; outputs with
// fewer rows than the capacity are refused before anything is launched.
TEST(EpDispatchOutputs, CallerOwnedOutputs) {
  EpSetup s = make_setup(num_gpus(), EpDtype::kFp8E4m3, EpScales::kFp32Per128);
  const int K = s.config.num_topk, xb = s.buffer->x_row_bytes(), sb = s.buffer->scale_row_bytes();
  for (bool expand : {false, true}) {
    Case c;
    c.kind = ref::RoutingKind::kZipf, c.mask = 0.3, c.expand = expand, c.alignment = expand ? 8 : 1, c.seed = 53;
    SCOPED_TRACE(case_name(c));
    Inputs in = make_inputs(s, c, 1);
    const auto want = ref::dispatch(ref_config(s, c), in.host);
    EpDispatchOptions opt;
    opt.expand = expand, opt.expert_alignment = c.alignment;
    const int cap = s.buffer->row_capacity(expand, c.alignment);
    std::vector<DevMem> ox, os, oi, ow;
    for (int i = 0; i < s.R; ++i) {
      const int dev = s.devices[i];
      ox.emplace_back(dev, size_t(cap) * xb), os.emplace_back(dev, size_t(cap) * sb);
      oi.emplace_back(dev, size_t(cap) * K * 8), ow.emplace_back(dev, size_t(cap) * K * 4);
      poison(dev, ox[i].ptr, size_t(cap) * xb), poison(dev, os[i].ptr, size_t(cap) * sb);
      poison(dev, oi[i].ptr, size_t(cap) * K * 8), poison(dev, ow[i].ptr, size_t(cap) * K * 4);
      EpDispatchArgs& a = in.args[i];
      a.recv_x_out = ox[i].ptr, a.recv_scales_out = os[i].ptr, a.out_rows = cap;
      a.recv_topk_idx_out = oi[i].as<int64_t>(), a.recv_topk_weights_out = ow[i].as<float>();
    }
    std::vector<EpHandle> handles(s.R);
    auto bad = in.args;
    bad[0].out_rows = cap - 1;
    EXPECT_THROW(s.buffer->dispatch(bad, opt, handles), Error);
    const auto res = s.buffer->dispatch(in.args, opt, handles);
    for (int i = 0; i < s.R; ++i) {
      EXPECT_EQ(res[i].recv_x, ox[i].ptr);
      EXPECT_EQ(res[i].recv_scales, os[i].ptr);
      EXPECT_EQ(res[i].recv_topk_idx, oi[i].as<int64_t>());
      EXPECT_EQ(res[i].recv_topk_weights, ow[i].as<float>());
      EXPECT_EQ(res[i].row_capacity, cap);
      expect_dispatch_equal(s, i, want[i], res[i], handles[i], true, true, "caller-owned outputs");
    }
  }
}

}  // namespace
}  // namespace symmoe
