// One benchmark result as one line of strict JSON (docs/design.md §10.3): keys in the order they were added (a
// key added twice keeps its first place and its last value), integers as integers, non-finite numbers as null,
// strings escaped by nlohmann-json (quotes, backslashes and control characters). Plain C++: no CUDA.
#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace symmoe::bench {

class JsonLine {
 public:
  JsonLine& add(const std::string& key, const std::string& value);
  JsonLine& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  JsonLine& add(const std::string& key, double value);  // NaN and +-Inf are written as null
  JsonLine& add(const std::string& key, bool value);
  template <typename T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) JsonLine& add(const std::string& key, T value) {
    return add_integer(key, static_cast<long long>(value));
  }
  JsonLine& add(const std::string& key, const std::optional<std::string>& value);           // nullopt -> null
  JsonLine& add(const std::string& key, const std::vector<std::optional<double>>& values);  // nullopt -> null
  JsonLine& add_null(const std::string& key);

  std::string str() const;  // one line, no trailing newline

 private:
  JsonLine& add_integer(const std::string& key, long long value);
  JsonLine& set(const std::string& key, std::string encoded);
  std::vector<std::pair<std::string, std::string>> fields_;  // key, value already encoded as JSON
};

// The "gpu" field of a result line and its file name: `override_kind` (SYMMOE_GPU_KIND, e.g. "nvidia-h200-x2") when
// not empty, else made of the visible GPUs' own names (cudaGetDeviceProperties), lower case with '-' for blanks and
// "-x<count>" for more than one of a name: "NVIDIA H200" twice -> "nvidia-h200-x2"; different GPUs joined with '+'
// in device order of first appearance; "unknown" without a GPU.
std::string gpu_kind(const std::string& override_kind, const std::vector<std::string>& device_names);

}  // namespace symmoe::bench
