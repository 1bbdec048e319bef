// main() of every tests/gpu binary: refuses to run (exit 2, clear message) where no Hopper GPU is visible,
// so a GPU suite can never "pass" by skipping everything; prints the session seed (tests/gpu/device_array.hpp) at
// the start and, after every failed test, the command line that reruns it with the same random inputs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpu/device_array.hpp"

namespace {

class ReproduceOnFailure : public ::testing::EmptyTestEventListener {
 public:
  explicit ReproduceOnFailure(std::string binary) : binary_(std::move(binary)) {}
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (!info.result()->Failed()) return;
    std::printf("[symmoe] reproduce: SYMMOE_TEST_SEED=%llu %s --gtest_filter='%s.%s'\n",
                (unsigned long long)symmoe::test::session_seed(), binary_.c_str(), info.test_suite_name(), info.name());
    std::fflush(stdout);
  }

 private:
  std::string binary_;
};

}  // namespace

int main(int argc, char** argv) {
  int num_gpus = 0;
  if (cudaGetDeviceCount(&num_gpus) != cudaSuccess || num_gpus == 0) {
    std::fprintf(stderr, "%s: no GPU visible; tests/gpu binaries run on the device machine only\n", argv[0]);
    return 2;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  if (prop.major != 9) {
    std::fprintf(stderr, "%s: GPU 0 is sm_%d%d; symmoe kernels need Hopper (sm_90a)\n", argv[0], prop.major,
                 prop.minor);
    return 2;
  }
  std::printf("[symmoe] %d x %s (%d SMs)\n", num_gpus, prop.name, prop.multiProcessorCount);
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {  // what gtest left: our own options (device_array.hpp), nothing else
    const std::string a = argv[i];
    char* end = nullptr;
    const double v = a.rfind("--seconds=", 0) == 0 ? std::strtod(a.c_str() + 10, &end) : -1;
    if (end && *end == '\0' && end != a.c_str() + 10 && v >= 0 && v <= 86400) {
      symmoe::test::option_seconds() = v;
      continue;
    }
    std::fprintf(stderr, "%s: unknown argument '%s' (gtest flags, or --seconds=S with 0 <= S <= 86400)\n", argv[0],
                 argv[i]);
    return 2;
  }
  std::printf("[symmoe] SYMMOE_TEST_SEED=%llu\n", (unsigned long long)symmoe::test::session_seed());
  ::testing::UnitTest::GetInstance()->listeners().Append(new ReproduceOnFailure(argv[0]));
  return RUN_ALL_TESTS();
}
