// symmoe common vocabulary: the host/device qualifier, the library's exception type and the check macros.
//
// Contract: every failure the library reports is a symmoe::Error carrying the component ("ep", "plan", ...),
// the call site (file:line) and a message that names the argument, the rank where relevant, and expected vs got.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#if defined(__CUDACC__)
#define SYMMOE_HD __host__ __device__ __forceinline__
#define SYMMOE_DEVICE __device__ __forceinline__
#else
#define SYMMOE_HD inline
#define SYMMOE_DEVICE inline
#endif

namespace symmoe {

class Error : public std::runtime_error {
 public:
  Error(std::string component, std::string site, const std::string& message)
      : std::runtime_error("symmoe[" + component + "] " + message + " (at " + site + ")"),
        component_(std::move(component)),
        site_(std::move(site)) {}
  const std::string& component() const { return component_; }
  const std::string& site() const { return site_; }

 private:
  std::string component_;
  std::string site_;
};

namespace detail {
inline std::string site(const char* file, int line) {
  std::string f(file);
  const auto slash = f.find_last_of('/');
  return (slash == std::string::npos ? f : f.substr(slash + 1)) + ":" + std::to_string(line);
}
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace symmoe

// SYMMOE_CHECK(cond, "component", message pieces...): throws symmoe::Error when cond is false.
#define SYMMOE_CHECK(cond, component, ...)                                         \
  do {                                                                             \
    if (!(cond))                                                                   \
      throw ::symmoe::Error(component, ::symmoe::detail::site(__FILE__, __LINE__), \
                            ::symmoe::detail::concat(__VA_ARGS__));                \
  } while (0)

#define SYMMOE_FAIL(component, ...) \
  throw ::symmoe::Error(component, ::symmoe::detail::site(__FILE__, __LINE__), ::symmoe::detail::concat(__VA_ARGS__))

// Plain integer helpers shared by host, device and golden model.
namespace symmoe {
template <typename T>
SYMMOE_HD constexpr T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}
template <typename T>
SYMMOE_HD constexpr T align_up(T a, T b) {
  return ceil_div(a, b) * b;
}
}  // namespace symmoe
