// What symmoe prints, and how much: one level for the whole library and CLI, read once from SYMMOE_LOG_LEVEL
// (like NCCL_DEBUG): ERROR, WARN (default), INFO, DEBUG, or the numbers 0-3; names in any case. Messages go to
// stderr as "symmoe <LEVEL> [<component>] <message>". A message above the level costs one integer compare: its
// arguments are not even formatted.
#pragma once

#include <string>

#include "symmoe/common.hpp"

namespace symmoe::log {

enum class Level : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// SYMMOE_LOG_LEVEL, parsed on the first call. Never throws: an unknown value is reported once (naming the accepted
// ones) and WARN is used.
Level threshold();
// "ERROR" | "WARN" | "INFO" | "DEBUG" (any case) or "0".."3"; throws symmoe::Error otherwise.
Level parse_level(const std::string& text);
const char* level_name(Level level);

inline bool enabled(Level level) { return static_cast<int>(level) <= static_cast<int>(threshold()); }
void write(Level level, const char* component, const std::string& message);

}  // namespace symmoe::log

// SYMMOE_LOG(kInfo, "ep", "dispatch plan: ", plan.to_string());
#define SYMMOE_LOG(level, component, ...)                                                                  \
  do {                                                                                                     \
    if (::symmoe::log::enabled(::symmoe::log::Level::level))                                               \
      ::symmoe::log::write(::symmoe::log::Level::level, component, ::symmoe::detail::concat(__VA_ARGS__)); \
  } while (0)
