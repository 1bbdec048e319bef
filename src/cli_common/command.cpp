#include "cli_common/command.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "common/spelling.hpp"
#include "symmoe/common.hpp"

namespace symmoe::cli {
namespace {

// Whole-string integer parse: no surrounding spaces or trailing characters, no overflow of long long.
bool parse_integer(const std::string& s, long long& out) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  errno = 0;
  char* end = nullptr;
  out = std::strtoll(s.c_str(), &end, 10);
  return errno == 0 && end == s.c_str() + s.size();
}

// Whole-string finite number parse ("nan", "inf" and "1.5x" are not numbers here).
bool parse_real(const std::string& s, double& out) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  errno = 0;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return errno == 0 && end == s.c_str() + s.size() && std::isfinite(out);
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

}  // namespace

std::map<std::string, Command>& registry() {
  static std::map<std::string, Command> commands;
  return commands;
}

Args& Args::option(const std::string& name, const std::string& def, const std::string& help) {
  order_.push_back(name);
  Spec spec;
  spec.def = def, spec.help = help;
  specs_[name] = spec;
  return *this;
}

Args& Args::flag(const std::string& name, const std::string& help) {
  order_.push_back(name);
  Spec spec;
  spec.help = help, spec.is_flag = true;
  specs_[name] = spec;
  return *this;
}

Args::Spec& Args::last_option(const char* what) {
  SYMMOE_CHECK(!order_.empty() && !specs_.at(order_.back()).is_flag, "cli", "internal: ", what,
               "() must follow an option() declaration");
  return specs_.at(order_.back());
}

Args& Args::int_range(long long lo, long long hi) {
  Spec& s = last_option("int_range");
  s.kind = Kind::kInt, s.int_lo = lo, s.int_hi = hi;
  return *this;
}

Args& Args::real_range(double lo, double hi) {
  Spec& s = last_option("real_range");
  s.kind = Kind::kReal, s.real_lo = lo, s.real_hi = hi;
  return *this;
}

Args& Args::list_range(long long lo, long long hi) {
  Spec& s = last_option("list_range");
  s.kind = Kind::kIntList, s.int_lo = lo, s.int_hi = hi;
  return *this;
}

Args& Args::choices(const std::vector<std::string>& allowed) {
  Spec& s = last_option("choices");
  s.kind = Kind::kChoice, s.allowed = allowed;
  return *this;
}

Args& Args::positionals(const std::string& what) {
  positional_what_ = what;
  return *this;
}

const Args::Spec& Args::spec(const std::string& name) const {
  const auto it = specs_.find(name);
  SYMMOE_CHECK(it != specs_.end(), "cli", "internal: option --", name, " was not declared");
  return it->second;
}

std::string Args::accepts(const Spec& s) const {
  switch (s.kind) {
    case Kind::kInt:
      return detail::concat("an integer in [", s.int_lo, ", ", s.int_hi, "]");
    case Kind::kReal:
      return detail::concat("a finite number in [", s.real_lo, ", ", s.real_hi, "]");
    case Kind::kIntList:
      return detail::concat("a comma-separated list of integers, each in [", s.int_lo, ", ", s.int_hi, "]");
    case Kind::kChoice: {
      std::string out = "one of ";
      for (size_t i = 0; i < s.allowed.size(); ++i) out += (i ? ", " : "") + s.allowed[i];
      return out;
    }
    case Kind::kText:
      break;
  }
  return "text";
}

void Args::check_value(const std::string& name, const std::string& value) const {
  const Spec& s = spec(name);
  const auto bad = [&](const std::string& got) {
    SYMMOE_FAIL("cli", "symmoe ", command_, ": --", name, " expects ", accepts(s), ", got ", got);
  };
  switch (s.kind) {
    case Kind::kInt: {
      long long v = 0;
      if (!parse_integer(value, v) || v < s.int_lo || v > s.int_hi) bad("'" + value + "'");
      return;
    }
    case Kind::kReal: {
      double v = 0;
      if (!parse_real(value, v) || v < s.real_lo || v > s.real_hi) bad("'" + value + "'");
      return;
    }
    case Kind::kIntList: {
      const auto items = split_commas(value);
      if (items.empty()) bad("an empty list");
      for (const auto& item : items) {
        long long v = 0;
        if (!parse_integer(item, v) || v < s.int_lo || v > s.int_hi) bad("'" + item + "' in '" + value + "'");
      }
      return;
    }
    case Kind::kChoice:
      for (const auto& a : s.allowed)
        if (a == value) return;
      bad("'" + value + "'");
      return;
    case Kind::kText:
      return;
  }
}

std::string Args::valid_flags() const {
  std::string out;
  for (const auto& name : order_) out += (out.empty() ? "--" : ", --") + name;
  return out.empty() ? "none" : out;
}

void Args::fail_unknown(const std::string& word) const {
  std::string bare = word;
  while (!bare.empty() && bare[0] == '-') bare.erase(0, 1);
  bare = bare.substr(0, bare.find('='));
  const std::string hint = detail::closest_word(bare, order_);
  const bool looks_like_flag = !word.empty() && word[0] == '-';
  SYMMOE_FAIL("cli", "symmoe ", command_, ": ", looks_like_flag ? "unknown flag '" : "unexpected argument '", word, "'",
              hint.empty() ? "" : " (did you mean --" + hint + "?)", "; valid flags: ", valid_flags(), " (symmoe ",
              command_, " --help)");
}

bool Args::parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      print_help();
      return false;
    }
    if (a == "--" && !positional_what_.empty()) {  // everything after -- is positional (`launch -n 2 -- symmoe run`)
      for (++i; i < argc; ++i) positional_.push_back(argv[i]);
      break;
    }
    if (a.rfind("--", 0) != 0 || a == "--") {
      if (positional_what_.empty() || (a.size() > 1 && a[0] == '-')) fail_unknown(a);
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    const auto eq = name.find('=');
    if (eq != std::string::npos) value = name.substr(eq + 1), name = name.substr(0, eq);
    const auto it = specs_.find(name);
    if (it == specs_.end()) fail_unknown(a);
    SYMMOE_CHECK(!values_.count(name), "cli", "symmoe ", command_, ": --", name, " given twice");
    if (it->second.is_flag) {
      SYMMOE_CHECK(eq == std::string::npos, "cli", "symmoe ", command_, ": flag --", name, " takes no value, got '", a,
                   "'");
      values_[name] = "1";
      continue;
    }
    if (eq == std::string::npos) {
      SYMMOE_CHECK(i + 1 < argc, "cli", "symmoe ", command_, ": --", name, " needs a value (", accepts(it->second),
                   ")");
      value = argv[++i];
      SYMMOE_CHECK(value.rfind("--", 0) != 0, "cli", "symmoe ", command_, ": --", name, " needs a value (",
                   accepts(it->second), "), got the flag '", value, "'");
    }
    check_value(name, value);
    values_[name] = value;
  }
  return true;
}

std::string Args::str(const std::string& name) const {
  const Spec& s = spec(name);
  const auto it = values_.find(name);
  return it != values_.end() ? it->second : s.def;
}

int Args::integer(const std::string& name) const {
  const std::string v = str(name);
  const Spec& s = spec(name);
  long long x = 0;
  if (s.kind == Kind::kInt) {
    check_value(name, v);
    parse_integer(v, x);
    SYMMOE_CHECK(x >= std::numeric_limits<int>::min() && x <= std::numeric_limits<int>::max(), "cli", "internal: --",
                 name, " range exceeds int");
    return int(x);
  }
  SYMMOE_CHECK(parse_integer(v, x) && x >= std::numeric_limits<int>::min() && x <= std::numeric_limits<int>::max(),
               "cli", "symmoe ", command_, ": --", name, " expects an integer in [", std::numeric_limits<int>::min(),
               ", ", std::numeric_limits<int>::max(), "], got '", v, "'");
  return int(x);
}

double Args::real(const std::string& name) const {
  const std::string v = str(name);
  const Spec& s = spec(name);
  if (s.kind == Kind::kReal) check_value(name, v);
  double x = 0;
  SYMMOE_CHECK(parse_real(v, x), "cli", "symmoe ", command_, ": --", name, " expects a finite number, got '", v, "'");
  return x;
}

bool Args::has(const std::string& name) const {
  spec(name);  // a typo in the command's own code is an internal error, not a silent "not given"
  return values_.count(name) != 0;
}

std::vector<std::string> Args::str_list(const std::string& name) const {
  std::vector<std::string> out;
  for (auto& item : split_commas(str(name)))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<int> Args::int_list(const std::string& name) const {
  const std::string v = str(name);
  const Spec& s = spec(name);
  if (s.kind == Kind::kIntList) check_value(name, v);
  std::vector<int> out;
  for (const auto& item : split_commas(v)) {
    long long x = 0;
    SYMMOE_CHECK(parse_integer(item, x) && x >= std::numeric_limits<int>::min() && x <= std::numeric_limits<int>::max(),
                 "cli", "symmoe ", command_, ": --", name, " expects a comma-separated list of integers, got '", item,
                 "' in '", v, "'");
    out.push_back(int(x));
  }
  return out;
}

void Args::print_help() const {
  std::printf("usage: symmoe %s [options]%s\n\n%s\n\noptions:\n", command_.c_str(),
              positional_what_.empty() ? "" : (" " + positional_what_).c_str(), summary_.c_str());
  for (const auto& name : order_) {
    const auto& s = specs_.at(name);
    std::string left = "  --" + name + (s.is_flag ? "" : " <v>");
    std::string right = s.help;
    if (s.kind != Kind::kText) right += " (" + accepts(s) + ")";
    if (!s.is_flag && !s.def.empty()) right += " [default: " + s.def + "]";
    std::printf("%-26s %s\n", left.c_str(), right.c_str());
  }
}

}  // namespace symmoe::cli
