// symmoe: expert-parallel MoE on Hopper. The one header a user includes (`#include <symmoe/symmoe.hpp>`, CMake
// `find_package(symmoe)` then `symmoe::core` or `symmoe::cuda`).
//
// Always (symmoe::core, plain C++): version (version.hpp), errors (common.hpp), SYMMOE_* knobs (env.hpp), logging
// (log.hpp), numeric formats and block quantisation, model shapes, the planner and buffer layouts, the golden model
// (reference/).
// With CUDA (symmoe::cuda, SYMMOE_WITH_CUDA == 1): the multi-rank runtime, EP dispatch/combine, the grouped FP8
// GEMM, expert weights on the GPU, the composed and the fused MoE layers.
#pragma once

#include "symmoe/version.hpp"

#include "symmoe/common.hpp"
#include "symmoe/env.hpp"
#include "symmoe/formats.hpp"
#include "symmoe/layout/common.hpp"
#include "symmoe/layout/ep.hpp"
#include "symmoe/layout/mega.hpp"
#include "symmoe/layout/sync.hpp"
#include "symmoe/log.hpp"
#include "symmoe/plan.hpp"
#include "symmoe/quant.hpp"
#include "symmoe/reference/combine.hpp"
#include "symmoe/reference/dispatch.hpp"
#include "symmoe/reference/gemm.hpp"
#include "symmoe/reference/mlp.hpp"
#include "symmoe/reference/routing.hpp"
#include "symmoe/shape.hpp"
#include "symmoe/swiglu.hpp"

#if SYMMOE_WITH_CUDA
#include "symmoe/cuda_check.hpp"
#include "symmoe/ep.hpp"
#include "symmoe/gemm.hpp"
#include "symmoe/mega_moe.hpp"
#include "symmoe/moe.hpp"
#include "symmoe/moe_args.hpp"
#include "symmoe/moe_weights.hpp"
#include "symmoe/quantize_gpu.hpp"
#include "symmoe/runtime.hpp"
#include "symmoe/weight_store.hpp"
#include "symmoe/weight_transform.hpp"
#endif
