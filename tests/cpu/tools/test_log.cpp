// SYMMOE_LOG_LEVEL parsing (include/symmoe/log.hpp): names in any case and 0-3; anything else is an error naming
// the accepted values.
#include <gtest/gtest.h>

#include "symmoe/log.hpp"

using symmoe::log::Level;
using symmoe::log::parse_level;

TEST(LogLevel, NamesAndNumbers) {
  EXPECT_EQ(parse_level("ERROR"), Level::kError);
  EXPECT_EQ(parse_level("warn"), Level::kWarn);
  EXPECT_EQ(parse_level("Warning"), Level::kWarn);
  EXPECT_EQ(parse_level("INFO"), Level::kInfo);
  EXPECT_EQ(parse_level("debug"), Level::kDebug);
  EXPECT_EQ(parse_level("0"), Level::kError);
  EXPECT_EQ(parse_level("3"), Level::kDebug);
  EXPECT_STREQ(symmoe::log::level_name(Level::kInfo), "INFO");
}

TEST(LogLevel, RejectsUnknownValues) {
  for (const char* bad : {"", "4", "-1", "TRACE", "2x", "verbose"}) {
    try {
      parse_level(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const symmoe::Error& e) {
      EXPECT_NE(std::string(e.what()).find("SYMMOE_LOG_LEVEL must be ERROR, WARN, INFO, DEBUG or 0-3"),
                std::string::npos)
          << e.what();
    }
  }
}
