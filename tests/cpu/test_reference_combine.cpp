// Golden combine: combine(dispatch(x)) with simple per-rank / per-expert "experts" equals the analytic sum (payload
// values encode (rank, token, column), so a wrong row shows as a wrong value at a named token), the ascending-lane
// fp32 order on random values, combined_topk_weights, biases (DeepEP's order: they start the sum),
// reduce_local_experts, and bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>

#include "reference/random.hpp"
#include "symmoe/reference/combine.hpp"
#include "test_reference_util.hpp"

namespace symmoe::ref {
namespace {

using testing::config_of;
using testing::handles_of;
using testing::make_inputs;
using testing::payload_value;
using testing::routing_sweep;

constexpr int kHidden = 8;

float bf16_at(const std::vector<uint8_t>& bytes, size_t i) {
  uint16_t b;
  std::memcpy(&b, &bytes[i * 2], 2);
  return fmt::bf16_to_float(b);
}

// Small exact multipliers: the "expert" of a row multiplies it, so the sum tells which rows were added.
float rank_factor(int d) { return float(d + 1); }
float expert_factor(int64_t global_expert) { return float(1 + global_expert % 4); }
float bias_value(int which, int s, int t, int c) {
  return which == 0 ? float((s + t + c) % 3) - 1.f : 0.5f * float((t * c) % 5);
}

// What lane k of source s's token t adds at column col: its returned row, found through the destination's
// recv_src_metadata col 0 (not through the slots); none for a masked lane or, without expand, a lane that is not
// its destination's master lane.
std::optional<float> returned_value(const testing::RoutingCase& c, const std::vector<DispatchInput>& inputs,
                                    const std::vector<DispatchOutput>& out, const std::vector<CombineInput>& cin, int s,
                                    int t, int k, int col) {
  const int K = c.num_topk, El = c.num_experts / c.num_ranks, T_max = c.num_max_tokens;
  const int64_t* topk = &inputs[s].topk_idx[size_t(t) * K];
  if (topk[k] < 0) return std::nullopt;
  const int d = int(topk[k] / El);
  bool master = true;
  for (int j = k + 1; j < K; ++j) master &= !(topk[j] >= 0 && topk[j] / El == d);
  if (!c.do_expand && !master) return std::nullopt;
  const auto& h = out[d].handle;
  int i = 0;
  while (h.recv_src_metadata[size_t(i) * (2 + K)] != s * T_max + t) ++i;
  const int row = c.do_expand ? h.recv_src_metadata[size_t(i) * (2 + K) + 2 + k] : i;
  return fmt::bf16_to_float(cin[d].x[size_t(row) * kHidden + col]);
}

TEST(ReferenceCombine, AnalyticSumOverRoutingSweep) {
  int num_all_masked_checked = 0;
  for (const auto& c : routing_sweep()) {
    for (int variant = 0; variant < (c.do_expand ? 2 : 1); ++variant) {
      const bool reduce_local = variant == 1;
      SCOPED_TRACE(c.name() + (reduce_local ? " reduce_local_experts" : ""));
      const int R = c.num_ranks, K = c.num_topk, El = c.num_experts / R;
      const auto inputs = make_inputs(c, kHidden);
      const auto out = dispatch(config_of(c), inputs);
      const bool with_bias0 = c.options.seed % 3 != 0, with_bias1 = c.options.seed % 3 == 2;
      std::vector<CombineInput> cin(R);
      for (int d = 0; d < R; ++d) {
        const auto& o = out[d];
        const size_t rows = o.recv_x.size() / (2 * kHidden);
        for (size_t r = 0; r < rows; ++r) {
          // Expand padding rows hold NaN: combine must never read them.
          const bool padding = c.do_expand && o.recv_topk_idx[r] < 0;
          const float f = c.do_expand ? (padding ? 0.f : expert_factor(o.recv_topk_idx[r] + d * El)) : rank_factor(d);
          for (int col = 0; col < kHidden; ++col)
            cin[d].x.push_back(padding ? uint16_t(0x7FC0)
                                       : fmt::float_to_bf16(f * bf16_at(o.recv_x, r * kHidden + col)));
        }
        cin[d].topk_weights = o.recv_topk_weights;
        if (with_bias0) cin[d].bias_0.emplace();
        if (with_bias1) cin[d].bias_1.emplace();
        for (int t = 0; t < inputs[d].num_tokens; ++t)
          for (int col = 0; col < kHidden; ++col) {
            if (with_bias0) cin[d].bias_0->push_back(fmt::float_to_bf16(bias_value(0, d, t, col)));
            if (with_bias1) cin[d].bias_1->push_back(fmt::float_to_bf16(bias_value(1, d, t, col)));
          }
      }
      CombineOptions options;
      options.reduce_local_experts = reduce_local;
      const auto res = combine(handles_of(out), kHidden, cin, options);
      ASSERT_EQ(int(res.size()), R);
      for (int s = 0; s < R; ++s) {
        ASSERT_EQ(res[s].combined_x.size(), size_t(inputs[s].num_tokens) * kHidden);
        for (int t = 0; t < inputs[s].num_tokens; ++t) {
          const int64_t* topk = &inputs[s].topk_idx[size_t(t) * K];
          bool any = false;
          for (int k = 0; k < K; ++k) any |= topk[k] >= 0;
          num_all_masked_checked += !any;
          for (int col = 0; col < kHidden; ++col) {
            const float p = payload_value(s, t, col);
            float sum = 0.f;  // every term and partial sum is a small exact integer (or bf16-rounded partial)
            if (!c.do_expand) {
              for (int d = 0; d < R; ++d) {
                bool on_d = false;
                for (int k = 0; k < K; ++k) on_d |= topk[k] >= 0 && topk[k] / El == d;
                if (on_d) sum += rank_factor(d) * p;
              }
            } else if (!reduce_local) {
              for (int k = 0; k < K; ++k)
                if (topk[k] >= 0) sum += expert_factor(topk[k]) * p;
            } else {
              for (int d = 0; d < R; ++d) {
                float partial = 0.f;
                for (int k = 0; k < K; ++k)
                  if (topk[k] >= 0 && topk[k] / El == d) partial += expert_factor(topk[k]) * p;
                sum += fmt::bf16_to_float(fmt::float_to_bf16(partial));
              }
            }
            if (with_bias0) sum += bias_value(0, s, t, col);
            if (with_bias1) sum += bias_value(1, s, t, col);
            const uint16_t want = fmt::float_to_bf16(sum);
            const uint16_t got = res[s].combined_x[size_t(t) * kHidden + col];
            ASSERT_EQ(got, want) << "rank " << s << " token " << t << " col " << col << ": expected "
                                 << fmt::bf16_to_float(want) << " got " << fmt::bf16_to_float(got)
                                 << (any ? "" : " (all lanes masked)");
          }
          for (int k = 0; k < K; ++k) {
            const float want = topk[k] >= 0 ? inputs[s].topk_weights[size_t(t) * K + k] : 0.f;
            ASSERT_EQ(res[s].combined_topk_weights[size_t(t) * K + k], want)
                << "rank " << s << " token " << t << " lane " << k << " combined_topk_weights";
          }
        }
      }
    }
  }
  EXPECT_GT(num_all_masked_checked, 10);
}

// Random (non-integer) expert outputs: the fp32 accumulation order is ascending lane, one bf16 rounding. The
// expected value is computed by finding each lane's row through recv_src_metadata col 0 (not through the slots).
TEST(ReferenceCombine, AscendingLaneOrderOnRandomValues) {
  std::mt19937_64 rng(77);
  for (const auto& c : routing_sweep()) {
    if (c.options.seed % 4 != 0) continue;  // a quarter of the sweep is plenty here
    SCOPED_TRACE(c.name());
    const int R = c.num_ranks, K = c.num_topk;
    const auto inputs = make_inputs(c, kHidden);
    const auto out = dispatch(config_of(c), inputs);
    std::vector<CombineInput> cin(R);
    for (int d = 0; d < R; ++d)
      for (size_t i = 0; i < out[d].recv_x.size() / 2; ++i)
        cin[d].x.push_back(fmt::float_to_bf16(float(rnd::standard_normal(rng) * std::exp2(int(rng() % 12) - 6))));
    const auto res = combine(handles_of(out), kHidden, cin);
    for (int s = 0; s < R; ++s)
      for (int t = 0; t < inputs[s].num_tokens; ++t) {
        for (int col = 0; col < kHidden; ++col) {
          float acc = 0.f;
          for (int k = 0; k < K; ++k) {
            if (const auto v = returned_value(c, inputs, out, cin, s, t, k, col)) acc += *v;
          }
          ASSERT_EQ(res[s].combined_x[size_t(t) * kHidden + col], fmt::float_to_bf16(acc))
              << "rank " << s << " token " << t << " col " << col;
        }
      }
  }
}

// DeepEP V2's bias order (its reference combine: ordered_accumulate(y, bias_0.float() + bias_1.float())): the fp32
// sum starts from bias_0 + bias_1 and then adds the rows in ascending lane order, one bf16 rounding. One random
// bias of mixed magnitudes; two biases b and -b of magnitude 2^20, so the order shows: adding the rows first and
// the biases last rounds the partial sums to multiples of 2^-3 (those elements are counted).
TEST(ReferenceCombine, BiasesStartTheSumInDeepEpOrder) {
  std::mt19937_64 rng(91);
  auto random_bf16 = [&] {
    return fmt::float_to_bf16(float(rnd::standard_normal(rng) * std::exp2(int(rng() % 16) - 8)));
  };
  int num_checked = 0, num_order_visible = 0;
  for (const auto& c : routing_sweep()) {
    if (c.options.seed % 3 != 1) continue;
    for (int num_bias = 1; num_bias <= 2; ++num_bias) {
      SCOPED_TRACE(c.name() + " biases " + std::to_string(num_bias));
      const int R = c.num_ranks, K = c.num_topk;
      const auto inputs = make_inputs(c, kHidden);
      const auto out = dispatch(config_of(c), inputs);
      std::vector<CombineInput> cin(R);
      for (int d = 0; d < R; ++d) {
        for (size_t i = 0; i < out[d].recv_x.size() / 2; ++i) cin[d].x.push_back(random_bf16());
        cin[d].bias_0.emplace();
        if (num_bias == 2) cin[d].bias_1.emplace();
        for (int i = 0; i < inputs[d].num_tokens * kHidden; ++i) {
          if (num_bias == 1) {
            cin[d].bias_0->push_back(random_bf16());
            continue;
          }
          const uint16_t big = fmt::float_to_bf16(std::ldexp(float(128 + rng() % 128), 13));  // 2^20 .. 2^21
          cin[d].bias_0->push_back(big);
          cin[d].bias_1->push_back(uint16_t(big ^ 0x8000u));
        }
      }
      const auto res = combine(handles_of(out), kHidden, cin);
      for (int s = 0; s < R; ++s)
        for (int t = 0; t < inputs[s].num_tokens; ++t) {
          for (int col = 0; col < kHidden; ++col) {
            const size_t bi = size_t(t) * kHidden + col;
            const float b0 = fmt::bf16_to_float((*cin[s].bias_0)[bi]);
            const float b1 = num_bias == 2 ? fmt::bf16_to_float((*cin[s].bias_1)[bi]) : 0.f;
            float acc = b0 + b1, bias_last = 0.f;
            for (int k = 0; k < K; ++k) {
              if (const auto v = returned_value(c, inputs, out, cin, s, t, k, col)) acc += *v, bias_last += *v;
            }
            ASSERT_EQ(res[s].combined_x[bi], fmt::float_to_bf16(acc))
                << "rank " << s << " token " << t << " col " << col;
            ++num_checked;
            bias_last += b0;
            bias_last += b1;
            num_order_visible += fmt::float_to_bf16(acc) != fmt::float_to_bf16(bias_last);
          }
        }
    }
  }
  EXPECT_GT(num_checked, 1000);
  EXPECT_GT(num_order_visible, 0) << "the random values never distinguish bias-first from bias-last";
}

TEST(ReferenceCombine, BadArgumentsRaiseNamedErrors) {
  testing::RoutingCase c{2, 4, 2, 3, 1, {}, false, true};
  const auto inputs = make_inputs(c, kHidden);
  const auto out = dispatch(config_of(c), inputs);
  std::vector<CombineInput> cin(2);
  for (int d = 0; d < 2; ++d) cin[d].x.assign(size_t(out[d].handle.num_recv_tokens) * kHidden, 0);
  EXPECT_NO_THROW(combine(handles_of(out), kHidden, cin));
  auto bad = cin;
  bad[1].x.push_back(0);
  EXPECT_THROW(combine(handles_of(out), kHidden, bad), Error);
  bad = cin;
  bad[0].bias_0 = std::vector<uint16_t>(5, 0);
  try {
    combine(handles_of(out), kHidden, bad);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 bias"), std::string::npos) << e.what();
  }
  CombineOptions reduce;
  reduce.reduce_local_experts = true;
  EXPECT_THROW(combine(handles_of(out), kHidden, cin, reduce), Error);  // needs expand
  bad = cin;
  bad[0].topk_weights = std::vector<float>(size_t(out[0].handle.num_recv_tokens) * 2, 1.f);  // on one rank only
  EXPECT_THROW(combine(handles_of(out), kHidden, bad), Error);
}

}  // namespace
}  // namespace symmoe::ref
