// CLI plumbing: subcommands register themselves (one file each under tools/cli/), and the one flag parser they all
// use. The parser is strict: an unknown flag, a stray word, a malformed or out-of-range value is an error that names
// the word, says what was expected and lists the valid flags (symmoe.cpp turns it into exit status 1).
#pragma once

#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace symmoe::cli {

// Parsed "--name value" / "--name=value" / "--flag" arguments of one subcommand. Every flag a command reads is
// declared first, with its help text and the values it accepts, so `--help` lists all of them and parse() refuses
// anything else.
class Args {
 public:
  Args(std::string command, std::string summary) : command_(std::move(command)), summary_(std::move(summary)) {}

  // Declare flags (before parse). `def` is the default shown in --help.
  Args& option(const std::string& name, const std::string& def, const std::string& help);
  Args& flag(const std::string& name, const std::string& help);
  // What the option declared last accepts (checked for given values by parse() and for every value by the getters):
  Args& int_range(long long lo, long long hi);             // an integer in [lo, hi]
  Args& real_range(double lo, double hi);                  // a finite number in [lo, hi]
  Args& list_range(long long lo, long long hi);            // a comma-separated list of integers, each in [lo, hi]
  Args& choices(const std::vector<std::string>& allowed);  // one of these words
  // Words that are not flags (e.g. the command of `launch`); without this a stray word is an error.
  Args& positionals(const std::string& what);

  // Returns false when --help was asked (help already printed). Throws symmoe::Error on bad arguments.
  bool parse(int argc, char** argv);

  std::string str(const std::string& name) const;
  int integer(const std::string& name) const;
  double real(const std::string& name) const;
  bool has(const std::string& name) const;                   // a flag given, or an option given explicitly
  std::vector<int> int_list(const std::string& name) const;  // "1,8,32"
  std::vector<std::string> str_list(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  void print_help() const;

 private:
  enum class Kind { kText, kInt, kReal, kIntList, kChoice };
  struct Spec {
    std::string def, help;
    bool is_flag = false;
    Kind kind = Kind::kText;
    long long int_lo = std::numeric_limits<int>::min(), int_hi = std::numeric_limits<int>::max();
    double real_lo = -std::numeric_limits<double>::max(), real_hi = std::numeric_limits<double>::max();
    std::vector<std::string> allowed;
  };
  Spec& last_option(const char* what);
  const Spec& spec(const std::string& name) const;
  void check_value(const std::string& name, const std::string& value) const;  // throws naming the flag
  std::string accepts(const Spec& s) const;                                   // "an integer in [1, 72]", ...
  std::string valid_flags() const;                                            // "--shape, --ranks, ..."
  [[noreturn]] void fail_unknown(const std::string& word) const;

  std::string command_, summary_, positional_what_;
  std::vector<std::string> order_;
  std::map<std::string, Spec> specs_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

struct Command {
  std::string name;
  std::string summary;
  std::function<int(int argc, char** argv)> run;  // argv[0] is the subcommand name
};

std::map<std::string, Command>& registry();

struct Registrar {
  Registrar(const std::string& name, const std::string& summary, std::function<int(int, char**)> fn) {
    registry()[name] = Command{name, summary, std::move(fn)};
  }
};

}  // namespace symmoe::cli

#define SYMMOE_CLI_COMMAND(ident, name, summary, fn) \
  static ::symmoe::cli::Registrar symmoe_cli_registrar_##ident(name, summary, fn)
