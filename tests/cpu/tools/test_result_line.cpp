// The benchmark result writer (bench/result_line.hpp) writes strict JSON: non-finite numbers as null, control
// characters escaped, integers as integers, keys in order. Each line is parsed back with nlohmann-json's strict
// parser (which rejects NaN/Infinity literals and raw control characters).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "result_line.hpp"

using symmoe::bench::JsonLine;

namespace {
nlohmann::ordered_json parse(const JsonLine& line) {
  const std::string s = line.str();
  EXPECT_EQ(s.find('\n'), std::string::npos) << s;
  return nlohmann::ordered_json::parse(s);  // throws on anything that is not strict JSON
}
}  // namespace

TEST(ResultLine, NonFiniteNumbersAreNull) {
  JsonLine line;
  line.add("nan", std::nan("")).add("inf", std::numeric_limits<double>::infinity()).add("ninf", -INFINITY);
  line.add("finite", 1.5);
  const auto j = parse(line);
  EXPECT_TRUE(j["nan"].is_null());
  EXPECT_TRUE(j["inf"].is_null());
  EXPECT_TRUE(j["ninf"].is_null());
  EXPECT_EQ(j["finite"].get<double>(), 1.5);
}

TEST(ResultLine, StringsWithControlCharactersRoundTrip) {
  const std::string tricky = std::string("tab\there \"quoted\" back\\slash newline\n bell\a nul") + '\0' + "end";
  JsonLine line;
  line.add("command", tricky).add("key with \"quote\"\t", "v");
  const std::string s = line.str();
  for (const char c : s) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << "raw control character in " << s;
  const auto j = parse(line);
  EXPECT_EQ(j["command"].get<std::string>(), tricky);
  EXPECT_EQ(j["key with \"quote\"\t"].get<std::string>(), "v");
}

TEST(ResultLine, IntegersBoolsNullsArraysAndKeyOrder) {
  JsonLine line;
  line.add("ranks", 8).add("bytes", 1ll << 40).add("ok", true).add("precise", 1234567.25);
  line.add_null("missing").add("driver", std::optional<std::string>{}).add("cuda", std::optional<std::string>("13.0"));
  line.add("clocks", std::vector<std::optional<double>>{1980.0, std::nullopt, NAN});
  line.add("ranks", 4);  // a repeated key keeps its place and takes the new value
  const auto j = parse(line);
  EXPECT_TRUE(j["ranks"].is_number_integer());
  EXPECT_EQ(j["ranks"].get<int>(), 4);
  EXPECT_EQ(j["bytes"].get<long long>(), 1ll << 40);
  EXPECT_EQ(j["ok"].get<bool>(), true);
  EXPECT_EQ(j["precise"].get<double>(), 1234567.25);  // full precision (the old writer printed 1.23457e+06)
  EXPECT_TRUE(j["missing"].is_null());
  EXPECT_TRUE(j["driver"].is_null());
  EXPECT_EQ(j["cuda"].get<std::string>(), "13.0");
  ASSERT_EQ(j["clocks"].size(), 3u);
  EXPECT_EQ(j["clocks"][0].get<double>(), 1980.0);
  EXPECT_TRUE(j["clocks"][1].is_null());
  EXPECT_TRUE(j["clocks"][2].is_null());
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"ranks", "bytes", "ok", "precise", "missing", "driver", "cuda", "clocks"}));
}

TEST(ResultLine, InvalidUtf8IsReplacedNotThrown) {
  JsonLine line;
  line.add("command", std::string("symmoe bench \xff\xfe"));
  const auto j = parse(line);
  EXPECT_NE(j["command"].get<std::string>().find("symmoe bench"), std::string::npos);
}

// The "gpu" field: SYMMOE_GPU_KIND when set, else the GPUs' own names (cudaGetDeviceProperties), counted.
TEST(ResultLine, GpuKindFromTheGpusNamesUnlessOverridden) {
  using symmoe::bench::gpu_kind;
  EXPECT_EQ(gpu_kind("", {"NVIDIA H200"}), "nvidia-h200");
  EXPECT_EQ(gpu_kind("", {"NVIDIA H200", "NVIDIA H200"}), "nvidia-h200-x2");
  EXPECT_EQ(gpu_kind("", std::vector<std::string>(8, "NVIDIA H100 80GB HBM3")), "nvidia-h100-80gb-hbm3-x8");
  EXPECT_EQ(gpu_kind("", {"NVIDIA H100 PCIe", "NVIDIA H200", "NVIDIA H100 PCIe"}), "nvidia-h100-pcie-x2+nvidia-h200");
  EXPECT_EQ(gpu_kind("", {" (GPU) "}), "gpu");
  EXPECT_EQ(gpu_kind("", {"***"}), "unnamed");
  EXPECT_EQ(gpu_kind("", {}), "unknown");
  EXPECT_EQ(gpu_kind("nvidia-h200-x2", {"NVIDIA H100 PCIe"}), "nvidia-h200-x2");  // the variable overrides
}
