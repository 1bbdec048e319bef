#include "result_line.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>

namespace symmoe::bench {

namespace {
// Non-finite numbers have no JSON form: null says "no value" to every strict parser.
nlohmann::json number(double value) { return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr); }
}  // namespace

JsonLine& JsonLine::set(const std::string& key, std::string encoded) {
  for (auto& [k, v] : fields_)
    if (k == key) {
      v = std::move(encoded);
      return *this;
    }
  fields_.emplace_back(key, std::move(encoded));
  return *this;
}

JsonLine& JsonLine::add(const std::string& key, const std::string& value) {
  // Invalid UTF-8 (e.g. a truncated argv) becomes U+FFFD instead of an exception.
  return set(key, nlohmann::json(value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

JsonLine& JsonLine::add(const std::string& key, double value) { return set(key, number(value).dump()); }

JsonLine& JsonLine::add(const std::string& key, bool value) { return set(key, value ? "true" : "false"); }

JsonLine& JsonLine::add_integer(const std::string& key, long long value) { return set(key, std::to_string(value)); }

JsonLine& JsonLine::add(const std::string& key, const std::optional<std::string>& value) {
  return value ? add(key, *value) : add_null(key);
}

JsonLine& JsonLine::add(const std::string& key, const std::vector<std::optional<double>>& values) {
  nlohmann::json array = nlohmann::json::array();
  for (const auto& v : values) array.push_back(v ? number(*v) : nlohmann::json(nullptr));
  return set(key, array.dump());
}

JsonLine& JsonLine::add_null(const std::string& key) { return set(key, "null"); }

std::string gpu_kind(const std::string& override_kind, const std::vector<std::string>& device_names) {
  if (!override_kind.empty()) return override_kind;
  std::vector<std::pair<std::string, int>> counts;  // name, devices; in order of first appearance
  for (const std::string& name : device_names) {
    std::string word;
    for (const char c : name) {
      if (std::isalnum(static_cast<unsigned char>(c)))
        word += char(std::tolower(static_cast<unsigned char>(c)));
      else if (!word.empty() && word.back() != '-')
        word += '-';
    }
    while (!word.empty() && word.back() == '-') word.pop_back();
    if (word.empty()) word = "unnamed";
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == word; });
    if (it == counts.end())
      counts.emplace_back(word, 1);
    else
      ++it->second;
  }
  std::string kind;
  for (const auto& [word, n] : counts)
    kind += (kind.empty() ? "" : "+") + word + (n > 1 ? "-x" + std::to_string(n) : "");
  return kind.empty() ? "unknown" : kind;
}

std::string JsonLine::str() const {
  std::string out = "{";
  for (size_t i = 0; i < fields_.size(); ++i) {
    out += i ? ", " : "";
    out += nlohmann::json(fields_[i].first).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    out += ": " + fields_[i].second;
  }
  return out + "}";
}

}  // namespace symmoe::bench
