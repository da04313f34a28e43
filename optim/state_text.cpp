#include "ember/optim/state_text.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "ember/core/error.h"

namespace ember::optim::detail {

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::string format_numbers(const std::vector<double>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += format_number(v[i]);
  }
  return out;
}

double parse_number(const std::string& who, const std::string& key, const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  EMBER_CHECK(!text.empty() && end == text.c_str() + text.size(), who, ": ", key, " is \"", text,
              "\", not a number");
  return v;
}

std::vector<double> parse_numbers(const std::string& who, const std::string& key, const std::string& text) {
  std::vector<double> out;
  for (const std::string& part : split(text, ',')) out.push_back(parse_number(who, key, part));
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);) out.push_back(item);
  if (s.back() == sep) out.push_back("");  // getline drops a trailing empty field
  return out;
}

const std::string& metadata_at(const std::map<std::string, std::string>& metadata, const std::string& who,
                               const std::string& key) {
  auto it = metadata.find(key);
  EMBER_CHECK(it != metadata.end(), who, ": the state dict has no ", key);
  return it->second;
}

}  // namespace ember::optim::detail
