// Host-side argument checks of EP dispatch/combine (no GPU): every bad argument raises symmoe::Error naming the
// field, the rank and expected vs got, before anything is launched.
#include <gtest/gtest.h>

#include <string>

#include "symmoe/ep.hpp"
#include "common/compare.hpp"

namespace symmoe {
namespace {

EpBufferConfig v3_config() {
  EpBufferConfig c;
  c.num_max_tokens_per_rank = 128, c.hidden = 7168, c.num_topk = 8, c.num_experts = 256;
  c.dtype = EpDtype::kFp8E4m3, c.scales = EpScales::kFp32Per128;
  return c;
}

// Fake, suitably aligned device addresses: the checks never dereference them.
const void* fake(uintptr_t addr) { return reinterpret_cast<const void*>(addr); }

EpDispatchArgs good_args(int num_tokens) {
  EpDispatchArgs a;
  a.num_tokens = num_tokens;
  a.x = fake(0x10000);
  a.x_scales = fake(0x20000);
  a.topk_idx = static_cast<const int64_t*>(fake(0x30000));
  a.topk_weights = static_cast<const float*>(fake(0x40000));
  return a;
}

using test::error_of;

TEST(EpHostChecks, ScaleRowBytes) {
  EXPECT_EQ(ep_scale_row_bytes(EpScales::kNone, 7168), 0);
  EXPECT_EQ(ep_scale_row_bytes(EpScales::kFp32Per128, 7168), 224);
  EXPECT_EQ(ep_scale_row_bytes(EpScales::kUe8m0Per32, 7168), 224);
  EXPECT_EQ(ep_scale_row_bytes(EpScales::kUe8m0Per128, 7168), 56);
  EXPECT_EQ(ep_scale_row_bytes(EpScales::kUe8m0Per128, 128), 4);  // one byte padded to a whole int32
  EXPECT_NE(error_of([] { ep_scale_row_bytes(EpScales::kFp32Per128, 100); }).find("multiple of 128"),
            std::string::npos);
}

TEST(EpHostChecks, ConfigValidation) {
  EXPECT_EQ(error_of([] { v3_config().validate(8); }), "");
  EpBufferConfig c = v3_config();
  EXPECT_NE(error_of([&] { c.validate(3); }).find("multiple of num_ranks (3)"), std::string::npos);
  c.hidden = 7000;
  EXPECT_NE(error_of([&] { c.validate(8); }).find("hidden"), std::string::npos);
  c = v3_config();
  c.num_topk = 33;
  EXPECT_NE(error_of([&] { c.validate(8); }).find("num_topk"), std::string::npos);
  c = v3_config();
  c.scales = EpScales::kNone;
  EXPECT_NE(error_of([&] { c.validate(8); }).find("needs scales"), std::string::npos);
  c = v3_config();
  c.dtype = EpDtype::kBf16;
  EXPECT_NE(error_of([&] { c.validate(8); }).find("needs scales none"), std::string::npos);
}

TEST(EpHostChecks, DispatchArguments) {
  const EpBufferConfig c = v3_config();
  EpDispatchOptions o;
  EXPECT_EQ(error_of([&] { check_dispatch_args(c, 8, 3, good_args(128), o); }), "");
  std::string msg = error_of([&] { check_dispatch_args(c, 8, 3, good_args(129), o); });
  EXPECT_NE(msg.find("rank 3: num_tokens 129 outside [0, num_max_tokens_per_rank = 128]"), std::string::npos) << msg;
  EpDispatchArgs a = good_args(4);
  a.x = fake(0x10008);
  EXPECT_NE(error_of([&] { check_dispatch_args(c, 8, 1, a, o); }).find("16-byte aligned"), std::string::npos);
  a = good_args(4);
  a.x_scales = nullptr;
  EXPECT_NE(error_of([&] { check_dispatch_args(c, 8, 1, a, o); }).find("x_scales"), std::string::npos);
  a = good_args(4);
  a.topk_idx = nullptr;
  EXPECT_NE(error_of([&] { check_dispatch_args(c, 8, 1, a, o); }).find("topk_idx"), std::string::npos);
  a = good_args(4);
  a.topk_weights = nullptr;
  EXPECT_NE(error_of([&] { check_dispatch_args(c, 8, 1, a, o); }).find("topk_weights"), std::string::npos);
  o.expert_alignment = 0;
  EXPECT_NE(error_of([&] { check_dispatch_args(c, 8, 1, good_args(4), o); }).find("expert_alignment"),
            std::string::npos);
  o = EpDispatchOptions{};
  EXPECT_EQ(error_of([&] { check_dispatch_args(c, 8, 1, good_args(0), o); }), "");  // no tokens: no pointers needed
  EXPECT_NE(error_of([&] { check_dispatch_args(c, 7, 1, good_args(4), o); }).find("num_ranks (7)"), std::string::npos);
  EpBufferConfig bf16 = c;
  bf16.dtype = EpDtype::kBf16, bf16.scales = EpScales::kNone;
  EXPECT_NE(error_of([&] { check_dispatch_args(bf16, 8, 0, good_args(4), o); }).find("x_scales given"),
            std::string::npos);
}

TEST(EpHostChecks, CombineArguments) {
  const EpBufferConfig c = v3_config();
  EpHandle empty;
  EpCombineArgs a;
  a.x = static_cast<const uint16_t*>(fake(0x10000));
  EXPECT_NE(error_of([&] { check_combine_args(c, 0, empty, a, EpCombineOptions{}); }).find("empty"), std::string::npos);
}

// Caller-owned outputs: rows must be given and addresses aligned (checked before the row capacity, which needs the
// buffer: EpBuffer::dispatch refuses out_rows below it).
TEST(EpHostChecks, CallerOwnedOutputs) {
  const EpBufferConfig c = v3_config();
  const EpDispatchOptions o;
  EpDispatchArgs a = good_args(4);
  a.recv_x_out = const_cast<void*>(fake(0x50000));
  EXPECT_NE(error_of([&] { check_dispatch_args(c, 8, 1, a, o); }).find("out_rows"), std::string::npos);
  a.out_rows = 1024;
  EXPECT_EQ(error_of([&] { check_dispatch_args(c, 8, 1, a, o); }), "");
  a.recv_x_out = const_cast<void*>(fake(0x50008));
  EXPECT_NE(error_of([&] { check_dispatch_args(c, 8, 1, a, o); }).find("recv_x_out must be 16-byte aligned"),
            std::string::npos);
  a = good_args(0);  // a rank without tokens still receives rows: its outputs are checked too
  a.recv_topk_idx_out = static_cast<int64_t*>(const_cast<void*>(fake(0x60004))), a.out_rows = 8;
  EXPECT_NE(error_of([&] { check_dispatch_args(c, 8, 1, a, o); }).find("recv_topk_idx_out"), std::string::npos);
  EpCombineArgs ca;
  ca.x = static_cast<const uint16_t*>(fake(0x10000));
  ca.combined_x_out = static_cast<uint16_t*>(const_cast<void*>(fake(0x70002)));
  EpHandle h;  // host fields as a dispatch of rank 0 leaves them (device arrays: fake addresses)
  h.rank = 0, h.num_topk = c.num_topk, h.num_experts = c.num_experts;
  h.num_max_tokens_per_rank = c.num_max_tokens_per_rank;
  h.dst_buffer_slot_idx = static_cast<int32_t*>(const_cast<void*>(fake(0x80000)));
  EXPECT_NE(error_of([&] { check_combine_args(c, 0, h, ca, EpCombineOptions{}); }).find("combined_x_out"),
            std::string::npos);
  ca.combined_x_out = static_cast<uint16_t*>(const_cast<void*>(fake(0x70000)));
  EXPECT_EQ(error_of([&] { check_combine_args(c, 0, h, ca, EpCombineOptions{}); }), "");
  h.dst_buffer_slot_idx = nullptr;  // EpHandle owns nothing here: nothing to free
}

}  // namespace
}  // namespace symmoe
