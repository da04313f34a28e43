#pragma once

// What the profiler tests share: a CPU-only session's activities, and a row of key_averages by name.
#include <ember/core/profiler.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace ember::testing {

inline const std::vector<profiler::ProfilerActivity> kCpuOnly{profiler::ProfilerActivity::CPU};

// The row named `key`; an error listing every row when there is none.
inline const profiler::FunctionEventAvg& entry(const profiler::KeyAverages& avg, const std::string& key) {
  const profiler::FunctionEventAvg* e = avg.find(key);
  if (!e) throw Error("no row " + key + " in\n" + avg.table("count", -1));
  return *e;
}

}  // namespace ember::testing
