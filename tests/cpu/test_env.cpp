// Environment knobs (include/symmoe/env.hpp): strict integer reads naming the variable, one list of known knobs,
// misspelt SYMMOE_* names answered with the closest known one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "common/spelling.hpp"
#include "symmoe/common.hpp"
#include "symmoe/env.hpp"

namespace symmoe {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class EnvKnob : public ::testing::Test {
 protected:
  void TearDown() override { ::unsetenv("SYMMOE_EP_SMS"); }
};

TEST_F(EnvKnob, IntegerReadsAreWholeAndInRange) {
  ::unsetenv("SYMMOE_EP_SMS");
  EXPECT_EQ(env::get_int("EP_SMS", 7), 7);
  ::setenv("SYMMOE_EP_SMS", "", 1);
  EXPECT_EQ(env::get_int("EP_SMS", 7), 7);  // empty = unset
  ::setenv("SYMMOE_EP_SMS", "24", 1);
  EXPECT_EQ(env::get_int("EP_SMS", 0), 24);
  for (const char* bad : {"4294967320", "-1", "1025", "24x", "0x18", " 24", "abc", "99999999999999999999999"}) {
    ::setenv("SYMMOE_EP_SMS", bad, 1);
    const std::string e = error_of([] { env::get_int("EP_SMS", 0); });
    EXPECT_NE(e.find("SYMMOE_EP_SMS must be an integer in [0, 1024], got '" + std::string(bad) + "'"),
              std::string::npos)
        << bad << ": " << e;
  }
}

TEST_F(EnvKnob, EveryReadKnobIsListed) {
  // The knobs the library reads (grep env::get_ / env::raw over src/ and bench/) and the ones scripts read.
  for (const char* name : {"TIMEOUT_MS", "BLOCK_M", "NUM_STAGES", "EP_SMS", "EXPERTS_PER_WAVE", "TEST_SEED",
                           "UNIQUE_ID", "BOOTSTRAP_DIR", "GPU_KIND", "COMMIT", "LOG_LEVEL", "TESTS", "RUN_ARGS",
                           "CHECK_TIMEOUT", "PY_STEPS", "BUILD_TIMEOUT", "STEP_TIMEOUT", "DEADLINE"})
    EXPECT_NO_THROW(env::raw(name)) << name;
  EXPECT_NE(error_of([] { env::raw("NOT_A_KNOB"); }).find("SYMMOE_NOT_A_KNOB is read but not listed"),
            std::string::npos);
  EXPECT_NE(error_of([] { env::get_int("COMMIT", 0); }).find("not an integer knob"), std::string::npos);
  std::set<std::string> names;
  for (const env::Knob& k : env::known_knobs()) {
    EXPECT_TRUE(names.insert(k.name).second) << "listed twice: " << k.name;
    EXPECT_GT(std::string(k.meaning).size(), 10u) << k.name;
    if (k.is_integer) {
      EXPECT_LE(k.lo, k.hi) << k.name;
    }
  }
}

TEST_F(EnvKnob, NoBenchmarkSwitchIsAKnob) {  // the former EP phase-skip variable stays unknown
  EXPECT_NE(error_of([] { env::raw("EP_SKIP"); }).find("is read but not listed"), std::string::npos);
  EXPECT_EQ(env::unknown_name_warnings({"SYMMOE_EP_SKIP"}).size(), 1u);
}

TEST(EnvNames, MisspellingsWarnWithTheClosestKnownName) {
  const auto w = env::unknown_name_warnings(
      {"SYMMOE_BLOKC_M", "SYMMOE_BLOCK_M", "PATH", "SYMMOE_TIMEOUT", "SYMMOE_EPSMS", "SYMMOE_WHATEVER_ELSE_ENTIRELY"});
  ASSERT_EQ(w.size(), 4u);
  EXPECT_NE(w[0].find("unknown environment variable SYMMOE_BLOKC_M is ignored (did you mean SYMMOE_BLOCK_M?)"),
            std::string::npos)
      << w[0];
  EXPECT_NE(w[1].find("SYMMOE_TIMEOUT is ignored (did you mean SYMMOE_TIMEOUT_MS?)"), std::string::npos) << w[1];
  EXPECT_NE(w[2].find("SYMMOE_EPSMS is ignored (did you mean SYMMOE_EP_SMS?)"), std::string::npos) << w[2];
  EXPECT_NE(w[3].find("SYMMOE_WHATEVER_ELSE_ENTIRELY is ignored (symmoe info lists"), std::string::npos) << w[3];
  EXPECT_TRUE(env::unknown_name_warnings({"SYMMOE_COMMIT", "SYMMOE_GPU_KIND", "HOME"}).empty());
}

TEST(Spelling, ClosestWord) {
  const std::vector<std::string> flags = {"shape", "ranks", "tokens", "hot-fraction", "zipf-s"};
  EXPECT_EQ(detail::closest_word("tokens", flags), "tokens");
  EXPECT_EQ(detail::closest_word("tokns", flags), "tokens");
  EXPECT_EQ(detail::closest_word("rnaks", flags), "ranks");  // adjacent swap
  EXPECT_EQ(detail::closest_word("hot-frac", flags), "hot-fraction");
  EXPECT_EQ(detail::closest_word("x", flags), "");
  EXPECT_EQ(detail::closest_word("layer", flags), "");
}

}  // namespace
}  // namespace symmoe
