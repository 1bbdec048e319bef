#include "cli/command.hpp"

#include <cstdio>
#include <sstream>

#include "symmoe/common.hpp"

namespace symmoe::cli {

std::map<std::string, Command>& registry() {
  static std::map<std::string, Command> commands;
  return commands;
}

Args& Args::option(const std::string& name, const std::string& def, const std::string& help) {
  order_.push_back(name);
  specs_[name] = Spec{def, help, false};
  return *this;
}

Args& Args::flag(const std::string& name, const std::string& help) {
  order_.push_back(name);
  specs_[name] = Spec{"", help, true};
  return *this;
}

bool Args::parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      print_help();
      return false;
    }
    if (a == "--") {  // everything after -- is positional (e.g. `launch -n 2 -- symmoe run`)
      for (++i; i < argc; ++i) positional_.push_back(argv[i]);
      break;
    }
    if (a.rfind("--", 0) != 0) {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    const auto eq = name.find('=');
    if (eq != std::string::npos) value = name.substr(eq + 1), name = name.substr(0, eq);
    const auto it = specs_.find(name);
    SYMMOE_CHECK(it != specs_.end(), "cli", "symmoe ", command_, ": unknown flag --", name, " (see --help)");
    if (it->second.is_flag) {
      SYMMOE_CHECK(eq == std::string::npos, "cli", "flag --", name, " takes no value");
      values_[name] = "1";
    } else {
      if (eq == std::string::npos) {
        SYMMOE_CHECK(i + 1 < argc, "cli", "option --", name, " needs a value");
        value = argv[++i];
      }
      values_[name] = value;
    }
  }
  return true;
}

std::string Args::str(const std::string& name) const {
  const auto spec = specs_.find(name);
  SYMMOE_CHECK(spec != specs_.end(), "cli", "internal: option --", name, " was not declared");
  const auto it = values_.find(name);
  return it != values_.end() ? it->second : spec->second.def;
}

int Args::integer(const std::string& name) const {
  const auto s = str(name);
  try {
    size_t used = 0;
    const int v = std::stoi(s, &used);
    SYMMOE_CHECK(used == s.size(), "cli", "option --", name, " expects an integer, got '", s, "'");
    return v;
  } catch (const std::logic_error&) {
    SYMMOE_FAIL("cli", "option --", name, " expects an integer, got '", s, "'");
  }
}

double Args::real(const std::string& name) const {
  const auto s = str(name);
  try {
    return std::stod(s);
  } catch (const std::logic_error&) {
    SYMMOE_FAIL("cli", "option --", name, " expects a number, got '", s, "'");
  }
}

bool Args::has(const std::string& name) const { return values_.count(name) != 0; }

std::vector<std::string> Args::str_list(const std::string& name) const {
  std::vector<std::string> out;
  std::stringstream ss(str(name));
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<int> Args::int_list(const std::string& name) const {
  std::vector<int> out;
  for (const auto& item : str_list(name)) {
    try {
      out.push_back(std::stoi(item));
    } catch (const std::logic_error&) {
      SYMMOE_FAIL("cli", "option --", name, " expects a comma-separated list of integers, got '", item, "'");
    }
  }
  return out;
}

void Args::print_help() const {
  std::printf("usage: symmoe %s [options]\n\n%s\n\noptions:\n", command_.c_str(), summary_.c_str());
  for (const auto& name : order_) {
    const auto& s = specs_.at(name);
    std::string left = "  --" + name + (s.is_flag ? "" : " <v>");
    std::printf("%-26s %s%s\n", left.c_str(), s.help.c_str(),
                s.is_flag || s.def.empty() ? "" : (" [default: " + s.def + "]").c_str());
  }
}

}  // namespace symmoe::cli
