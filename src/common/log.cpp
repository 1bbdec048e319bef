#include "symmoe/log.hpp"

#include <cctype>
#include <cstdio>

#include "symmoe/env.hpp"

namespace symmoe::log {

Level parse_level(const std::string& text) {
  std::string upper;
  for (const char c : text) upper += char(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "ERROR" || upper == "0") return Level::kError;
  if (upper == "WARN" || upper == "WARNING" || upper == "1") return Level::kWarn;
  if (upper == "INFO" || upper == "2") return Level::kInfo;
  if (upper == "DEBUG" || upper == "3") return Level::kDebug;
  SYMMOE_FAIL("env", "SYMMOE_LOG_LEVEL must be ERROR, WARN, INFO, DEBUG or 0-3, got '", text, "'");
}

const char* level_name(Level level) {
  switch (level) {
    case Level::kError:
      return "ERROR";
    case Level::kWarn:
      return "WARN";
    case Level::kInfo:
      return "INFO";
    case Level::kDebug:
      return "DEBUG";
  }
  return "?";
}

namespace {
// Logging never throws (it runs in destructors and error paths): an unknown value is reported once and WARN used.
Level read_threshold() noexcept {
  try {
    return parse_level(env::get_string("LOG_LEVEL", "WARN"));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "symmoe WARN [env] %s; using WARN\n", e.what());
    return Level::kWarn;
  }
}
}  // namespace

Level threshold() {
  static const Level level = read_threshold();
  return level;
}

void write(Level level, const char* component, const std::string& message) {
  // One fprintf per message, so lines from several threads (virtual ranks) do not interleave mid-line.
  std::fprintf(stderr, "symmoe %s [%s] %s\n", level_name(level), component, message.c_str());
}

}  // namespace symmoe::log
