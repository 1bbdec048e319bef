// GPU side of the formats: the device quantiser against the host quantiser, bitwise, on fresh random inputs; the
// device build of the formats.hpp casts against their host build and against Hopper's hardware cvt.
// Runs on the device machine only (gpu_test_main.cpp refuses to run without a Hopper GPU).
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/compare.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/formats.hpp"
#include "symmoe/quant.hpp"
#include "symmoe/quantize_gpu.hpp"
#include "gpu/device_array.hpp"

namespace fmt = symmoe::fmt;
using symmoe::test::bitwise_equal;
using symmoe::test::DeviceArray;

namespace {

using symmoe::test::fresh_seed;  // SYMMOE_TEST_SEED reproduces a run (gpu/device_array.hpp)

enum class Dist { kNormal, kSkewed, kOutliers, kSpecials };
const char* name(Dist d) {
  return d == Dist::kNormal ? "normal" : d == Dist::kSkewed ? "skewed" : d == Dist::kOutliers ? "outliers" : "specials";
}

std::vector<float> random_matrix(int rows, int cols, Dist dist, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> expo(-24.0f, 14.0f);
  std::vector<float> x(size_t(rows) * cols);
  for (auto& v : x) v = dist == Dist::kSkewed ? std::copysign(std::exp2(expo(rng)), normal(rng)) : normal(rng);
  if (dist == Dist::kOutliers || dist == Dist::kSpecials) {
    for (int i = 0; i < rows; ++i) x[rng() % x.size()] = (rng() & 1 ? 3e4f : -3e4f);
    for (int r = 0; r < rows; r += 3) std::fill_n(x.begin() + size_t(r) * cols + (rng() % (cols / 32)) * 32, 32, 0.0f);
  }
  if (dist == Dist::kSpecials) {
    const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, -0.0f, 1e-40f, 448.0f, 464.0f};
    for (int i = 0; i < rows; ++i) x[rng() % x.size()] = specials[rng() % 8];
  }
  return x;
}

// Runs the device quantiser on x (as fp32, or as bf16 when `as_bf16`) and compares with the host quantiser.
void check_against_host(int rows, int cols, int block, fmt::ScaleFormat format, Dist dist, bool as_bf16) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(std::string(as_bf16 ? "bf16 " : "fp32 ") + name(dist) + " " + std::to_string(rows) + "x" +
               std::to_string(cols) + " block " + std::to_string(block) + " " + fmt::to_string(format) + " seed " +
               std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::vector<float> x = random_matrix(rows, cols, dist, rng);
  std::vector<uint16_t> x_bf16(x.size());
  if (as_bf16) {
    for (size_t i = 0; i < x.size(); ++i) {
      x_bf16[i] = fmt::float_to_bf16(x[i]);
      x[i] = fmt::bf16_to_float(x_bf16[i]);  // the host reference sees exactly what the device reads
    }
  }
  const symmoe::Fp8Activations expected = symmoe::quantize_activations(x.data(), rows, cols, block, format);

  DeviceArray<uint8_t> out(size_t(rows) * cols);
  DeviceArray<float> scales(size_t(rows) * (cols / block));
  out.poison(0xA5);
  scales.poison(0xFF);  // NaN
  if (as_bf16) {
    DeviceArray<uint16_t> d_x(x.size());
    d_x.upload(x_bf16);
    symmoe::quantize_activations_gpu(reinterpret_cast<const __nv_bfloat16*>(d_x.ptr), rows, cols, block, format,
                                     out.ptr, scales.ptr, nullptr);
    SYMMOE_CUDA_CHECK(cudaDeviceSynchronize());
  } else {
    DeviceArray<float> d_x(x.size());
    d_x.upload(x);
    symmoe::quantize_activations_gpu(d_x.ptr, rows, cols, block, format, out.ptr, scales.ptr, nullptr);
    SYMMOE_CUDA_CHECK(cudaDeviceSynchronize());
  }
  EXPECT_TRUE(bitwise_equal(expected.data, out.download(), "e4m3 data"));
  const std::vector<float> got_scales = scales.download();
  std::vector<uint32_t> expected_bits(got_scales.size()), got_bits(got_scales.size());
  for (size_t i = 0; i < got_scales.size(); ++i) {
    expected_bits[i] = fmt::float_as_bits(expected.scales[i]);
    got_bits[i] = fmt::float_as_bits(got_scales[i]);
  }
  EXPECT_TRUE(bitwise_equal(expected_bits, got_bits, "scale bits"));
}

}  // namespace

TEST(GpuFormats, QuantizeActivationsMatchesHostBitwise) {
  struct Shape {
    int rows, cols;
  };
  // 96 and 160 channels leave a partial 128-chunk (block 32 only); 7168 is DeepSeek-V3's hidden size.
  const Shape shapes[] = {{1, 128}, {77, 7168}, {513, 256}, {300, 96}, {5, 160}};
  for (const Shape& s : shapes)
    for (int block : {128, 32}) {
      if (s.cols % block != 0) continue;
      for (fmt::ScaleFormat format : {fmt::ScaleFormat::kFp32, fmt::ScaleFormat::kUe8m0})
        for (Dist dist : {Dist::kNormal, Dist::kSkewed, Dist::kOutliers, Dist::kSpecials})
          for (bool as_bf16 : {false, true}) check_against_host(s.rows, s.cols, block, format, dist, as_bf16);
    }
}

TEST(GpuFormats, BadArgumentsRejectedBeforeAnythingIsWritten) {
  const int rows = 4, cols = 256;
  DeviceArray<float> x(size_t(rows) * cols);
  DeviceArray<uint8_t> out(size_t(rows) * cols);
  DeviceArray<float> scales(size_t(rows) * cols / 32);
  out.poison(0xA5);
  auto expect_error = [&](auto fn, const std::string& argument) {
    try {
      fn();
      ADD_FAILURE() << "no symmoe::Error for bad " << argument;
    } catch (const symmoe::Error& e) {
      EXPECT_NE(std::string(e.what()).find(argument), std::string::npos) << e.what();
    }
  };
  const auto f = fmt::ScaleFormat::kFp32;
  expect_error([&] { symmoe::quantize_activations_gpu(x.ptr, rows, cols, 64, f, out.ptr, scales.ptr, nullptr); },
               "block");
  expect_error([&] { symmoe::quantize_activations_gpu(x.ptr, rows, 96, 128, f, out.ptr, scales.ptr, nullptr); },
               "num_cols");
  expect_error([&] { symmoe::quantize_activations_gpu(x.ptr, -1, cols, 128, f, out.ptr, scales.ptr, nullptr); },
               "num_rows");
  expect_error([&] { symmoe::quantize_activations_gpu(x.ptr + 1, rows, 128, 128, f, out.ptr, scales.ptr, nullptr); },
               "x must");
  expect_error([&] { symmoe::quantize_activations_gpu(x.ptr, rows, 128, 128, f, out.ptr + 2, scales.ptr, nullptr); },
               "out must");
  expect_error([&] { symmoe::quantize_activations_gpu(x.ptr, rows, 128, 128, f, out.ptr, nullptr, nullptr); },
               "scales must");
  SYMMOE_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint8_t> after = out.download();
  EXPECT_TRUE(bitwise_equal(std::vector<uint8_t>(after.size(), 0xA5), after, "out after rejected calls"));
}

// ---- the casts themselves on the device ----
namespace {

// codes[i] = the four casts of the fp32 with bits i * stride (e4m3, e5m2, e2m1, bf16 high byte | low byte).
__global__ void device_casts_kernel(uint32_t stride, size_t n, uint8_t* e4m3, uint8_t* e5m2, uint8_t* e2m1,
                                    uint16_t* bf16) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float x = fmt::bits_as_float(uint32_t(i * stride));
    e4m3[i] = fmt::float_to_e4m3(x);
    e5m2[i] = fmt::float_to_e5m2(x);
    e2m1[i] = fmt::float_to_e2m1(x);
    bf16[i] = fmt::float_to_bf16(x);
  }
}

// Over all 2^32 fp32 bit patterns: formats.hpp vs the hardware cvt (cvt.rn.satfinite.{e4m3,e5m2}x2.f32 and
// cvt.rn.bf16.f32 through CUDA's device intrinsics). Non-NaN mismatches are counted; for NaN inputs the hardware
// codes are collected in a 256-bit set.
__global__ void hardware_cvt_kernel(unsigned long long* mismatches, uint32_t* nan_codes_e4m3,
                                    uint32_t* nan_codes_e5m2) {
  unsigned long long bad[3] = {0, 0, 0};
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < (1ull << 32);
       i += uint64_t(gridDim.x) * blockDim.x) {
    const float x = fmt::bits_as_float(uint32_t(i));
    const uint8_t hw4 = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    const uint8_t hw5 = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
    const uint16_t hwb = __nv_bfloat16_raw(__float2bfloat16_rn(x)).x;
    if (x != x) {
      atomicOr(&nan_codes_e4m3[hw4 / 32], 1u << (hw4 % 32));
      atomicOr(&nan_codes_e5m2[hw5 / 32], 1u << (hw5 % 32));
      continue;
    }
    bad[0] += hw4 != fmt::float_to_e4m3(x);
    bad[1] += hw5 != fmt::float_to_e5m2(x);
    bad[2] += hwb != fmt::float_to_bf16(x);
  }
  for (int k = 0; k < 3; ++k)
    if (bad[k]) atomicAdd(&mismatches[k], bad[k]);
}

}  // namespace

TEST(GpuFormats, DeviceCastsMatchHostCasts) {
  const uint32_t stride = 251;  // ~17M patterns spread over all exponents, signs and NaN payloads
  const size_t n = ((1ull << 32) + stride - 1) / stride;
  DeviceArray<uint8_t> e4m3(n), e5m2(n), e2m1(n);
  DeviceArray<uint16_t> bf16(n);
  e4m3.poison(0xA5), e5m2.poison(0xA5), e2m1.poison(0xA5), bf16.poison(0xA5);
  device_casts_kernel<<<1024, 256>>>(stride, n, e4m3.ptr, e5m2.ptr, e2m1.ptr, bf16.ptr);
  SYMMOE_CUDA_CHECK_LAUNCH("device_casts_kernel");
  SYMMOE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint8_t> h4(n), h5(n), h2(n);
  std::vector<uint16_t> hb(n);
  for (size_t i = 0; i < n; ++i) {
    const float x = fmt::bits_as_float(uint32_t(i * stride));
    h4[i] = fmt::float_to_e4m3(x), h5[i] = fmt::float_to_e5m2(x), h2[i] = fmt::float_to_e2m1(x);
    hb[i] = fmt::float_to_bf16(x);
  }
  EXPECT_TRUE(bitwise_equal(h4, e4m3.download(), "device float_to_e4m3"));
  EXPECT_TRUE(bitwise_equal(h5, e5m2.download(), "device float_to_e5m2"));
  EXPECT_TRUE(bitwise_equal(h2, e2m1.download(), "device float_to_e2m1"));
  EXPECT_TRUE(bitwise_equal(hb, bf16.download(), "device float_to_bf16"));
}

TEST(GpuFormats, CastsMatchHardwareCvtOnAllFloats) {
  DeviceArray<unsigned long long> mismatches(3);
  DeviceArray<uint32_t> nan4(8), nan5(8);
  mismatches.poison(0), nan4.poison(0), nan5.poison(0);
  hardware_cvt_kernel<<<4096, 256>>>(mismatches.ptr, nan4.ptr, nan5.ptr);
  SYMMOE_CUDA_CHECK_LAUNCH("hardware_cvt_kernel");
  SYMMOE_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<unsigned long long> bad = mismatches.download();
  EXPECT_EQ(bad[0], 0u) << "e4m3: formats.hpp differs from cvt.rn.satfinite on non-NaN inputs";
  EXPECT_EQ(bad[1], 0u) << "e5m2: formats.hpp differs from cvt.rn.satfinite on non-NaN inputs";
  EXPECT_EQ(bad[2], 0u) << "bf16: formats.hpp differs from cvt.rn.bf16.f32 on non-NaN inputs";
  // NaN: formats.hpp gives 0x7F (CUDA's host conversion); report what the hardware gives, and require a NaN code.
  const std::vector<uint32_t> n4 = nan4.download(), n5 = nan5.download();
  for (int code = 0; code < 256; ++code) {
    if (n4[code / 32] >> (code % 32) & 1) {
      std::printf("[symmoe] hardware e4m3 code for NaN input: 0x%02X\n", code);
      EXPECT_EQ(code & 0x7F, 0x7F) << "hardware e4m3 NaN code is not a NaN";
    }
    if (n5[code / 32] >> (code % 32) & 1) {
      std::printf("[symmoe] hardware e5m2 code for NaN input: 0x%02X\n", code);
      EXPECT_GT(code & 0x7F, 0x7C) << "hardware e5m2 NaN code is not a NaN";
    }
  }
}
