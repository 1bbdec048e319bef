// main() of every tests/gpu binary: refuses to run (exit 2, clear message) where no Hopper GPU is visible,
// so a GPU suite can never "pass" by skipping everything.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char** argv) {
  int num_gpus = 0;
  if (cudaGetDeviceCount(&num_gpus) != cudaSuccess || num_gpus == 0) {
    std::fprintf(stderr, "%s: no GPU visible; tests/gpu binaries run on the device machine only\n", argv[0]);
    return 2;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  if (prop.major != 9) {
    std::fprintf(stderr, "%s: GPU 0 is sm_%d%d; symmoe kernels need Hopper (sm_90a)\n", argv[0], prop.major, prop.minor);
    return 2;
  }
  std::printf("[symmoe] %d x %s (%d SMs)\n", num_gpus, prop.name, prop.multiProcessorCount);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
