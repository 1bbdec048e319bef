// CLI plumbing: subcommands register themselves (one file each under tools/cli/), and a tiny flag parser.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace symmoe::cli {

// Parsed "--name value" / "--flag" arguments of one subcommand. Every flag a command reads is declared with
// its help text first, so `--help` lists all of them and an unknown flag is an error.
class Args {
 public:
  Args(std::string command, std::string summary) : command_(std::move(command)), summary_(std::move(summary)) {}

  // Declare flags (before parse). `def` is the default shown in --help.
  Args& option(const std::string& name, const std::string& def, const std::string& help);
  Args& flag(const std::string& name, const std::string& help);

  // Returns false when --help was asked (help already printed). Throws symmoe::Error on unknown flags.
  bool parse(int argc, char** argv);

  std::string str(const std::string& name) const;
  int integer(const std::string& name) const;
  double real(const std::string& name) const;
  bool has(const std::string& name) const;               // a flag given, or an option given explicitly
  std::vector<int> int_list(const std::string& name) const;    // "1,8,32"
  std::vector<std::string> str_list(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  void print_help() const;

 private:
  struct Spec {
    std::string def, help;
    bool is_flag;
  };
  std::string command_, summary_;
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
