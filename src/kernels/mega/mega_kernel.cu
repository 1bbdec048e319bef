// Compiled fused MoE kernels with FP8 weights on the tokens-on-M core (the one-batch core at BLOCK_M 64, split N, and
// 128: plan::kMegaKernels entries 2 and 3), each timed and traced; and launch_mega_moe, which picks among all entries
// (the others: mega_kernel_fp4.cu, mega_kernel_swap_ab.cu, mega_kernel_swap_ab_fp4.cu).
#include <array>
#include <utility>

#include "kernels/mega/launch.cuh"

namespace symmoe::mega::kernel {

static_assert(plan::kNumMegaKernels == 7 && plan::kMegaKernels[2].block_m == 64 &&
                  plan::kMegaKernels[3].block_m == 128 && plan::kMegaKernels[3].weights == plan::GemmWeights::kFp8,
              "plan::kMegaKernels changed: update the explicit instantiations of mega_kernel*.cu");
template void launch_mega_entry<2>(const plan::MegaPlan&, const MegaParams&, const MegaRankMaps&, int, cudaStream_t);
template void launch_mega_entry<3>(const plan::MegaPlan&, const MegaParams&, const MegaRankMaps&, int, cudaStream_t);

namespace {
using LaunchEntry = void (*)(const plan::MegaPlan&, const MegaParams&, const MegaRankMaps&, int, cudaStream_t);
template <int... kIndex>
constexpr auto launch_table(std::integer_sequence<int, kIndex...>) {
  return std::array<LaunchEntry, sizeof...(kIndex)>{&launch_mega_entry<kIndex>...};
}
}  // namespace

void launch_mega_moe(const plan::MegaPlan& plan, const MegaParams& params, const MegaRankMaps& maps, int num_ctas,
                     cudaStream_t stream) {
  SYMMOE_CHECK(num_ctas >= 1, "mega", "num_ctas must be >= 1, got ", num_ctas);
  const int index = plan::mega_kernel_index(plan.block_m, plan.weights);
  SYMMOE_CHECK(index >= 0, "mega", "no compiled fused kernel with BLOCK_M ", plan.block_m, " and ",
               plan::gemm_weights_name(plan.weights), " weights");
  static constexpr auto kTable = launch_table(std::make_integer_sequence<int, plan::kNumMegaKernels>{});
  kTable[index](plan, params, maps, num_ctas, stream);
}

}  // namespace symmoe::mega::kernel
