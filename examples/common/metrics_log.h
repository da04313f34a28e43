#pragma once

// Metrics as JSON lines, one object per record (an epoch's summary, a run's end), flushed as
// written so that a plot or a dashboard can follow a running job:
//   {"epoch": 3, "train_loss": 0.4123, "test_top1": 0.9134, "epoch_s": 6.1}
#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace ember::examples {

using MetricValue = std::variant<int64_t, double, std::string>;
using MetricRecord = std::vector<std::pair<std::string, MetricValue>>;

// One record as a JSON object on one line (strings escaped, non-finite numbers as null).
std::string to_json_line(const MetricRecord& record);

class MetricsLog {
 public:
  // An empty path writes nothing. `append` keeps the records already there (a resumed run).
  explicit MetricsLog(const std::string& path, bool append = false);
  void write(const MetricRecord& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace ember::examples
