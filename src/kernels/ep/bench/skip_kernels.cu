// The phase-skipping EP kernels of `symmoe bench ep --skip` (kernels/ep/skip.hpp): every dispatch mask (the four
// dispatch bits) and every combine mask (the two combine bits), instantiated here and linked only into the CLI,
// so the library's kernels carry no benchmark switch. Not under the build's spill check (bench-only code).
#include <array>
#include <utility>

#include "ep/bench_access.hpp"
#include "kernels/ep/combine_kernel.cuh"
#include "kernels/ep/dispatch_kernel.cuh"
#include "symmoe/common.hpp"

namespace symmoe {
namespace {

constexpr int kNumDispatchMasks = 16;  // kDispatchSkipMask: bits 0..3
constexpr int kNumCombineMasks = 4;    // kCombineSkipMask: bits 4..5
static_assert(ep::kDispatchSkipMask == kNumDispatchMasks - 1 && ep::kCombineSkipMask == (kNumCombineMasks - 1) << 4,
              "skip.hpp's bits changed: update the instantiated masks");

// Launchers of masks 1 .. n (index mask - 1). Mask 0 is the library's kernel: not instantiated here (a second copy
// of it in this object would be a second registration of the same kernel).
template <size_t... kIdx>
constexpr std::array<ep::DispatchLaunchFn, sizeof...(kIdx)> dispatch_table(std::index_sequence<kIdx...>) {
  return {&ep::launch_dispatch_kernel<uint32_t(kIdx + 1)>...};
}
template <size_t... kIdx>
constexpr std::array<ep::CombineLaunchFn, sizeof...(kIdx)> combine_table(std::index_sequence<kIdx...>) {
  return {&ep::launch_combine_kernel<uint32_t((kIdx + 1) << 4)>...};
}

}  // namespace

void EpBenchAccess::set_skip_phases(EpBuffer& buffer, uint32_t bits) {
  SYMMOE_CHECK((bits & ~(ep::kDispatchSkipMask | ep::kCombineSkipMask)) == 0, "bench", "skip mask ", bits,
               " has bits outside ep::SkipPhase (", ep::kDispatchSkipMask | ep::kCombineSkipMask, ")");
  static constexpr auto kDispatch = dispatch_table(std::make_index_sequence<kNumDispatchMasks - 1>());
  static constexpr auto kCombine = combine_table(std::make_index_sequence<kNumCombineMasks - 1>());
  // Mask 0 of each: the library's own launchers (nullptr).
  const uint32_t d = bits & ep::kDispatchSkipMask, c = (bits & ep::kCombineSkipMask) >> 4;
  set_launchers(buffer, d ? kDispatch[d - 1] : nullptr, c ? kCombine[c - 1] : nullptr);
}

}  // namespace symmoe
