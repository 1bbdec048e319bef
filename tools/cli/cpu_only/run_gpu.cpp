// CPU-only builds (no symmoe_cuda): the GPU path of `symmoe run` is not compiled in. visible_gpu_count() is 0 there
// (cli_common/gpu_probe.cpp), so `run` never calls this; it answers anyway in case a caller does.
#include "cli/run_gpu.hpp"
#include "symmoe/common.hpp"

namespace symmoe::cli {

int run_gpu_layer(const GpuRunOptions&) {
  SYMMOE_FAIL("cli",
              "symmoe was built without CUDA (CPU-only build): the GPU path of `run` is not available; "
              "use `symmoe run --cpu`");
}

}  // namespace symmoe::cli
