#pragma once

// A kernel-level profiler in the spirit of torch.profiler: while a Profile session runs, every
// kernel call through a DispatchStub is timed under its stub's name ("linear", "softmax_backward",
// ...), on the host (wall clock around the call) and, with the CUDA activity, on the device (a
// pair of CUDA events on the current stream, resolved after one synchronize at stop()).
//
//   profiler::Profile prof;
//   train_step();
//   prof.stop();
//   std::cerr << prof.key_averages().table("device_time_total", 20);
//
// Times are self times: a kernel that calls another stub's kernel is charged only for the part
// that is not its child's, so the self columns add up to the profiled time once.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ember::detail {
struct KernelRangeHooks;
}

namespace ember::profiler {

// torch.profiler.ProfilerActivity.
enum class ProfilerActivity { CPU, CUDA };

// One stub's statistics over a session (torch.autograd.profiler_util.FunctionEventAvg); in ms.
struct FunctionEventAvg {
  std::string key;           // the stub's name
  std::string input_shapes;  // grouped by input shape: the calls' tensor arguments, else empty
  int64_t count = 0;
  double cpu_time_total = 0, self_cpu_time_total = 0;
  double device_time_total = 0, self_device_time_total = 0;
  // With profile_memory: bytes of tensor memory allocated less freed inside the calls (self: not
  // in a range nested in them), on the CPU and on the device.
  int64_t cpu_memory_usage = 0, self_cpu_memory_usage = 0;
  int64_t device_memory_usage = 0, self_device_memory_usage = 0;

  double cpu_time_avg() const { return count ? cpu_time_total / static_cast<double>(count) : 0; }
  double device_time_avg() const { return count ? device_time_total / static_cast<double>(count) : 0; }
};

// What key_averages() returns: one entry per stub name, in order of first call.
class KeyAverages {
 public:
  KeyAverages(std::vector<FunctionEventAvg> events, bool has_device_time, bool has_memory = false)
      : events_(std::move(events)), has_device_time_(has_device_time), has_memory_(has_memory) {}

  const std::vector<FunctionEventAvg>& events() const { return events_; }
  size_t size() const { return events_.size(); }
  const FunctionEventAvg& operator[](size_t i) const { return events_[i]; }
  // The entry named `key`, or null.
  const FunctionEventAvg* find(const std::string& key) const;
  bool has_device_time() const { return has_device_time_; }
  bool has_memory() const { return has_memory_; }

  // An aligned table sorted by a column (descending): "device_time_total", "self_device_time_total",
  // "cpu_time_total", "self_cpu_time_total" or "count" (PyTorch's "cuda_time_total" and
  // "self_cuda_time_total" are accepted); row_limit < 0 prints every row. Percentages are of the
  // summed self times, given in the last lines. A session that profiled memory adds the memory
  // columns, and sorts by "cpu_memory_usage", "self_cpu_memory_usage", "device_memory_usage" and
  // "self_device_memory_usage" ("cuda_" for "device_" too).
  std::string table(const std::string& sort_by = "device_time_total", int row_limit = 20) const;

 private:
  std::vector<FunctionEventAvg> events_;
  bool has_device_time_;
  bool has_memory_;
};

// Which steps a scheduled profile records (torch.profiler.schedule): after `skip_first` steps,
// cycles of `wait` steps not recorded, `warmup` steps recorded and thrown away (first-step
// effects), then `active` steps recorded and handed to on_trace_ready; `repeat` cycles, 0 for as
// many as the profile lives.
struct Schedule {
  int64_t wait = 0, warmup = 0, active = 1, repeat = 0, skip_first = 0;
};

// What a session records beyond kernel times (torch.profiler.profile's arguments).
struct ProfileOptions {
  // Without them: CPU, and CUDA when a device timer is registered (ember built with CUDA) and a
  // GPU is present.
  std::optional<std::vector<ProfilerActivity>> activities;
  // Each kernel call's tensor arguments, sizes and dtype ("[4096, 768] bf16, [768] f32"), for
  // key_averages(true) and the trace; costs a string per call.
  bool record_shapes = false;
  // Each allocation and free of tensor memory, charged to the range open on its thread (a kernel,
  // a module's forward, a record_function), in key_averages' memory columns and as "[memory]"
  // events of the trace (torch.profiler.profile(profile_memory=True)).
  bool profile_memory = false;
};

// A profiling session, running from construction to stop() (or destruction). One at a time, and not
// together with cuda::nvtx::EmitNvtx (both use the kernel-range hooks). Without `activities`, CUDA
// is profiled when a device timer is registered (ember built with CUDA) and a GPU is present.
class Profile {
 public:
  Profile();
  explicit Profile(const std::vector<ProfilerActivity>& activities);
  explicit Profile(const ProfileOptions& options);
  // A scheduled session for a training loop (torch.profiler.profile(schedule=..., on_trace_ready=...)):
  // call step() after each training step; at the end of each active window, on_trace_ready gets
  // this Profile, whose key_averages() and export_chrome_trace() then give that window's results.
  // stop() hands on a window still recording.
  Profile(const Schedule& schedule, std::function<void(const Profile&)> on_trace_ready,
          const std::vector<ProfilerActivity>& activities);
  Profile(const Schedule& schedule, std::function<void(const Profile&)> on_trace_ready);
  Profile(const Schedule& schedule, std::function<void(const Profile&)> on_trace_ready,
          const ProfileOptions& options);
  ~Profile();
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  // Ends the session: removes the hooks and waits once for the recorded device work.
  void stop();
  // A scheduled session's step boundary (torch.profiler.profile.step).
  void step();
  int64_t step_num() const { return step_num_; }
  bool running() const { return running_; }
  bool profiles_device() const { return device_; }
  // The results: after stop(), or of the last active window of a scheduled session. Grouped by
  // input shape (a session with record_shapes), calls of one stub with different tensor
  // arguments are rows of their own.
  KeyAverages key_averages(bool group_by_input_shape = false) const;
  // Writes the session's ranges as a Chrome trace (the JSON Trace Event Format, which Perfetto and
  // chrome://tracing open): one complete event per kernel call and record_function range, on its
  // thread's track, nested as they ran, device times in each event's args. After stop().
  void export_chrome_trace(const std::string& path) const;

 private:
  struct Window;  // a finished window's ranges and device times
  enum class Action { None, Warmup, Record, RecordAndSave };
  Action action(int64_t step) const;
  void start(const ProfileOptions& options);
  void begin_window();
  void end_window(bool keep);

  bool running_ = false;
  bool device_ = false;
  bool memory_ = false;
  const ember::detail::KernelRangeHooks* hooks_ = nullptr;  // the ones this session installed
  bool recording_ = false;
  std::optional<Schedule> schedule_;
  std::function<void(const Profile&)> on_trace_ready_;
  int64_t step_num_ = 0;
  std::shared_ptr<const Window> result_;
};

// A named range of user code in the running session (torch.profiler.record_function): from
// construction to destruction, with the kernels called meanwhile nested inside it, in the table
// as its own row and in the trace. Does nothing when no session runs.
//
//   { profiler::RecordFunction range("forward"); loss = model(x); }
class RecordFunction {
 public:
  explicit RecordFunction(const std::string& name);
  ~RecordFunction();
  RecordFunction(const RecordFunction&) = delete;
  RecordFunction& operator=(const RecordFunction&) = delete;
};

namespace detail {
// The device timing a backend provides (cuda/ registers one at load time; none without CUDA).
// Calls come from one thread at a time (the profiler serializes them).
struct DeviceTimer {
  bool (*available)();
  // Records a start event on the current stream of the current device; returns the range's slot.
  int64_t (*start)();
  void (*end)(int64_t slot);
  // Waits once for the recorded work; returns each slot's elapsed ms, by slot, and frees the slots.
  std::vector<double> (*collect)();
};
void set_device_timer(const DeviceTimer* timer);
const DeviceTimer* device_timer();
}  // namespace detail

}  // namespace ember::profiler
