#pragma once

// One more step under the profiler, for the step benchmarks' --profile: its tables (by kernel,
// then by kernel and input shapes) go to stderr, sorted by device time (host time on the CPU).
#include <cstdio>
#include <functional>
#include <string>

#include <ember/core/profiler.h>
#include <ember/cuda/device.h>

namespace ember::bench {

inline void profile_step(const Device& device, const std::string& name, const std::function<void()>& step) {
  profiler::ProfileOptions options;
  options.record_shapes = true;
  profiler::Profile prof(options);
  step();
  if (device.is_cuda()) cuda::synchronize();
  prof.stop();
  const char* sort_by = prof.profiles_device() ? "device_time_total" : "self_cpu_time_total";
  std::fprintf(stderr, "== %s: one step, kernels by %s\n%s\n", name.c_str(), sort_by,
               prof.key_averages().table(sort_by, 25).c_str());
  std::fprintf(stderr, "== %s: by input shapes\n%s\n", name.c_str(),
               prof.key_averages(/*group_by_input_shape=*/true).table(sort_by, 40).c_str());
}

}  // namespace ember::bench
