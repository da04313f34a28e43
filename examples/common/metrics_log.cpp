#include "ember/examples/common/metrics_log.h"

#include <cmath>
#include <cstdio>

#include <ember/core/error.h>
#include <ember/core/json_string.h>

namespace ember::examples {
namespace {

void append_value(std::string& out, const MetricValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) {
    out += std::to_string(*i);
  } else if (const auto* d = std::get_if<double>(&v)) {
    if (!std::isfinite(*d)) {
      out += "null";  // JSON has no inf or NaN
    } else {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.9g", *d);
      out += buf;
    }
  } else {
    append_json_string(out, std::get<std::string>(v));
  }
}

}  // namespace

std::string to_json_line(const MetricRecord& record) {
  std::string out = "{";
  for (size_t i = 0; i < record.size(); ++i) {
    if (i) out += ", ";
    append_json_string(out, record[i].first);
    out += ": ";
    append_value(out, record[i].second);
  }
  return out + "}";
}

MetricsLog::MetricsLog(const std::string& path, bool append) : path_(path) {
  if (path.empty()) return;
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  EMBER_CHECK(out_.good(), "MetricsLog: cannot open ", path, " for writing");
}

void MetricsLog::write(const MetricRecord& record) {
  if (path_.empty()) return;
  out_ << to_json_line(record) << '\n';
  out_.flush();
  EMBER_CHECK(out_.good(), "MetricsLog: writing ", path_, " failed");
}

}  // namespace ember::examples
