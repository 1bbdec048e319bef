// Planner pieces shared by all plans: expected load, overrides (the only env reads of the planner), printing.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <sstream>

#include "plan/model.hpp"
#include "symmoe/env.hpp"
#include "symmoe/plan.hpp"

namespace symmoe::plan {

double expected_tokens_per_expert(const MoeShape& shape, int tokens_per_rank) {
  return static_cast<double>(tokens_per_rank) * shape.num_ranks * shape.num_topk / shape.num_experts;
}

void detail::check_row_counts(const MoeShape& shape, const char* plan_name) {
  const int64_t R = shape.num_ranks, T = shape.num_max_tokens_per_rank, K = shape.num_topk;
  const int64_t El = shape.num_local_experts();
  const int64_t limit = std::numeric_limits<int32_t>::max();
  const int64_t expanded = R * T * std::min(K, El) + El * 128;
  const auto check = [&](const char* what, int64_t rows) {
    SYMMOE_CHECK(rows <= limit, "plan", plan_name, ": ", what, " rows ", rows, " exceed ", limit,
                 " (the kernels' 32-bit row indices) for ", shape.to_string(), "; lower T_max (tokens per rank)");
  };
  check("received (R * T_max)", R * T);
  check("expanded (R * T_max * min(K, E/R) + padding)", expanded);
  check("combine (T_max * K)", T * K);
}

PlanOverrides PlanOverrides::from_env() {
  PlanOverrides o;
  o.block_m = static_cast<int>(env::get_int("BLOCK_M", 0));
  o.num_stages = static_cast<int>(env::get_int("NUM_STAGES", 0));
  o.ep_sms = static_cast<int>(env::get_int("EP_SMS", 0));
  o.experts_per_wave = static_cast<int>(env::get_int("EXPERTS_PER_WAVE", 0));
  SYMMOE_CHECK(o.block_m >= 0 && o.num_stages >= 0 && o.ep_sms >= 0 && o.experts_per_wave >= 0, "plan",
               "SYMMOE_ overrides must be >= 0 (0 = not set), got ", o.to_string());
  return o;
}

std::string PlanOverrides::to_string() const {
  if (!any()) return "none";
  std::ostringstream os;
  if (block_m) os << "SYMMOE_BLOCK_M=" << block_m << " ";
  if (num_stages) os << "SYMMOE_NUM_STAGES=" << num_stages << " ";
  if (ep_sms) os << "SYMMOE_EP_SMS=" << ep_sms << " ";
  if (experts_per_wave) os << "SYMMOE_EXPERTS_PER_WAVE=" << experts_per_wave << " ";
  std::string s = os.str();
  s.pop_back();
  return s;
}

const char* gemm_epilogue_name(GemmEpilogue e) { return e == GemmEpilogue::kBf16 ? "bf16" : "swiglu_fp8"; }

int math_registers_estimate(int wg_tile_m, int wg_tile_n) {
  const int final_acc = wg_tile_m * wg_tile_n / hopper::kThreadsPerWarpgroup;
  const int partial_acc = final_acc < 64 ? final_acc : 64;
  return final_acc + partial_acc + 40;
}

std::string format_bytes(uint64_t num_bytes) {
  char buf[96];
  const double b = static_cast<double>(num_bytes);
  if (b >= 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof(buf), "%.2f GiB", b / (1024.0 * 1024 * 1024));
  else if (b >= 1024.0 * 1024)
    std::snprintf(buf, sizeof(buf), "%.2f MiB", b / (1024.0 * 1024));
  else if (b >= 1024.0)
    std::snprintf(buf, sizeof(buf), "%.2f KiB", b / 1024.0);
  else
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(num_bytes));
  return buf;
}

template <int kNumRegions>
std::string format_regions(const std::string& title, const layout::RegionList<kNumRegions>& regions) {
  std::ostringstream os;
  os << title << "\n";
  char line[200];
  std::snprintf(line, sizeof(line), "  %-20s %16s %16s %6s  %s\n", "region", "offset", "bytes", "align", "size");
  os << line;
  for (int i = 0; i < kNumRegions; ++i) {
    const layout::Region& r = regions[i];
    std::snprintf(line, sizeof(line), "  %-20s %16llu %16llu %6u  %s\n", r.name,
                  static_cast<unsigned long long>(r.offset), static_cast<unsigned long long>(r.num_bytes), r.alignment,
                  format_bytes(r.num_bytes).c_str());
    os << line;
  }
  std::snprintf(line, sizeof(line), "  %-20s %16s %16llu %6u  %s\n", "total", "",
                static_cast<unsigned long long>(regions.num_bytes()), layout::kBaseAlignment,
                format_bytes(regions.num_bytes()).c_str());
  os << line;
  return os.str();
}

template std::string format_regions(const std::string&, const layout::RegionList<layout::EpLayout::kNumRegions>&);
template std::string format_regions(const std::string&, const layout::RegionList<layout::MegaLayout::kNumRegions>&);

}  // namespace symmoe::plan
