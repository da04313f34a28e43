#pragma once

// One more step under the profiler, for the step benchmarks' --profile: its tables (by kernel and
// op, then by input shapes) go to stderr, sorted by self device time (self host time on the CPU);
// with a trace path (--trace) the step is also written there as a Chrome trace.
#include <cstdio>
#include <functional>
#include <string>

#include <ember/core/profiler.h>
#include <ember/cuda/device.h>

namespace ember::bench {

inline void profile_step(const Device& device, const std::string& name, const std::function<void()>& step,
                         const std::string& trace_path = "") {
  profiler::ProfileOptions options;
  options.record_shapes = true;
  profiler::Profile prof(options);
  step();
  if (device.is_cuda()) cuda::synchronize();
  prof.stop();
  if (!trace_path.empty()) prof.export_chrome_trace(trace_path);
  // By self time: the kernels first (an op's or a module's device time is its kernels', counted
  // again in its total).
  const char* sort_by = prof.profiles_device() ? "self_device_time_total" : "self_cpu_time_total";
  std::fprintf(stderr, "== %s: one step, kernels and ops by %s\n%s\n", name.c_str(), sort_by,
               prof.key_averages().table(sort_by, 25).c_str());
  std::fprintf(stderr, "== %s: by input shapes\n%s\n", name.c_str(),
               prof.key_averages(/*group_by_input_shape=*/true).table(sort_by, 40).c_str());
}

}  // namespace ember::bench
