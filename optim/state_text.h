#pragma once

// Numbers in a StateDict's metadata: "%.17g" text, which round-trips a double exactly. Shared by
// the optimizers and the LR schedulers.

#include <map>
#include <string>
#include <vector>

namespace ember::optim::detail {

std::string format_number(double v);
// "a,b,c"; empty for an empty list.
std::string format_numbers(const std::vector<double>& v);
// Throws ember::Error "<who>: <key> is "<text>", not a number" unless `text` is one number.
double parse_number(const std::string& who, const std::string& key, const std::string& text);
std::vector<double> parse_numbers(const std::string& who, const std::string& key, const std::string& text);
std::vector<std::string> split(const std::string& s, char sep);
// The value of `key`; throws "<who>: the state dict has no <key>" when absent.
const std::string& metadata_at(const std::map<std::string, std::string>& metadata, const std::string& who,
                               const std::string& key);

}  // namespace ember::optim::detail
