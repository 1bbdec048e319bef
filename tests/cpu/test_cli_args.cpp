// The CLI's one flag parser (src/cli_common/command.hpp): unknown flags, stray words, malformed and out-of-range values
// are errors that name the word, the expected values and the valid flags.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_common/command.hpp"
#include "symmoe/common.hpp"

namespace symmoe {
namespace {

cli::Args make_args() {
  cli::Args a("run", "test command");
  a.option("tokens", "16", "tokens")
      .int_range(1, 1 << 20)
      .option("hot-fraction", "0.5", "fraction")
      .real_range(0, 1)
      .option("sms", "8,16", "SM list")
      .list_range(1, 132)
      .option("layer", "fused", "layer")
      .choices({"fused", "composed"})
      .option("out", "results", "directory")
      .flag("cpu", "CPU path");
  return a;
}

// Parses `words` (argv[0] = "run") and returns the error message, "" when parsing succeeded.
std::string parse_error(cli::Args& a, std::vector<std::string> words) {
  std::vector<char*> argv;
  static char cmd[] = "run";
  argv.push_back(cmd);
  for (auto& w : words) argv.push_back(w.data());
  try {
    a.parse(int(argv.size()), argv.data());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_refused(std::vector<std::string> words, const std::string& needle) {
  cli::Args a = make_args();
  const std::string e = parse_error(a, words);
  EXPECT_NE(e.find(needle), std::string::npos) << "message: '" << e << "', expected to contain '" << needle << "'";
}

TEST(CliArgs, AcceptsDeclaredFlagsAndValues) {
  cli::Args a = make_args();
  ASSERT_EQ(parse_error(a, {"--cpu", "--tokens", "2", "--hot-fraction=1", "--sms", "8,132", "--layer", "composed"}),
            "");
  EXPECT_TRUE(a.has("cpu"));
  EXPECT_EQ(a.integer("tokens"), 2);
  EXPECT_EQ(a.real("hot-fraction"), 1.0);
  EXPECT_EQ(a.int_list("sms"), (std::vector<int>{8, 132}));
  EXPECT_EQ(a.str("layer"), "composed");
  EXPECT_EQ(a.str("out"), "results");  // default
  EXPECT_FALSE(a.has("out"));
}

TEST(CliArgs, RefusesUnknownFlagsAndStrayWords) {
  expect_refused({"--cpu", "-tokens", "2"},
                 "symmoe run: unknown flag '-tokens' (did you mean --tokens?); valid flags: "
                 "--tokens, --hot-fraction, --sms, --layer, --out, --cpu");
  expect_refused({"--tokns", "2"}, "unknown flag '--tokns' (did you mean --tokens?)");
  expect_refused({"-x"}, "unknown flag '-x'; valid flags:");
  expect_refused({"foo"}, "unexpected argument 'foo'; valid flags:");
  expect_refused({"--"}, "unknown flag '--'");
  expect_refused({"--cpu=1"}, "flag --cpu takes no value");
  expect_refused({"--tokens", "2", "--tokens", "3"}, "--tokens given twice");
  expect_refused({"--tokens"}, "--tokens needs a value (an integer in [1, 1048576])");
  expect_refused({"--tokens", "--cpu"}, "--tokens needs a value (an integer in [1, 1048576]), got the flag '--cpu'");
}

TEST(CliArgs, RefusesValuesOutsideTheirRange) {
  expect_refused({"--tokens", "0"}, "symmoe run: --tokens expects an integer in [1, 1048576], got '0'");
  expect_refused({"--tokens", "2147483647"}, "got '2147483647'");
  expect_refused({"--tokens", "4294967312"}, "got '4294967312'");  // 2^32 + 16 must not wrap to 16
  expect_refused({"--tokens", "16x"}, "got '16x'");
  expect_refused({"--tokens", " 16"}, "got ' 16'");
  expect_refused({"--tokens", "1.5"}, "got '1.5'");
  expect_refused({"--hot-fraction", "2"}, "--hot-fraction expects a finite number in [0, 1], got '2'");
  expect_refused({"--hot-fraction", "-0.1"}, "got '-0.1'");
  expect_refused({"--hot-fraction", "nan"}, "got 'nan'");
  expect_refused({"--hot-fraction", "inf"}, "got 'inf'");
  expect_refused({"--hot-fraction", "0.5.1"}, "got '0.5.1'");
  expect_refused({"--sms", "8,1000"}, "--sms expects a comma-separated list of integers, each in [1, 132], got '1000'");
  expect_refused({"--sms", "8,,16"}, "got '' in '8,,16'");
  expect_refused({"--sms", ""}, "got an empty list");
  expect_refused({"--layer", "fast"}, "--layer expects one of fused, composed, got 'fast'");
}

TEST(CliArgs, PositionalsOnlyWhereDeclared) {
  cli::Args a("launch", "test");
  a.option("n", "", "processes").int_range(1, 72).positionals("-- command args...");
  ASSERT_EQ(parse_error(a, {"--n", "2", "--", "symmoe", "run", "--cpu"}), "");
  EXPECT_EQ(a.positional(), (std::vector<std::string>{"symmoe", "run", "--cpu"}));
  cli::Args b("launch", "test");
  b.option("n", "", "processes").int_range(1, 72).positionals("-- command args...");
  EXPECT_NE(parse_error(b, {"--n", "2", "-v", "--", "x"}).find("unknown flag '-v'"), std::string::npos);
}

TEST(CliArgs, DefaultsAndUndeclaredNamesAreChecked) {
  cli::Args a("run", "test");
  a.option("reps", "0", "repetitions").int_range(1, 100);  // a bad default is caught when read
  ASSERT_EQ(parse_error(a, {}), "");
  EXPECT_THROW(a.integer("reps"), Error);
  EXPECT_THROW(a.has("repz"), Error);  // a typo in a command's own code
  EXPECT_THROW(a.str("repz"), Error);
}

}  // namespace
}  // namespace symmoe
