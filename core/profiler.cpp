#include "ember/core/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "ember/core/atomic_file.h"
#include "ember/core/dispatch.h"
#include "ember/core/error.h"
#include "ember/core/json_string.h"
#include "ember/core/storage.h"

namespace ember::profiler {
namespace {

using Clock = std::chrono::steady_clock;

// What opened a range; the trace's category.
enum class Kind : int8_t { Kernel, Op, User };

// One kernel call, op (frontend or backward node) or record_function range. Ranges are appended
// at push, so a nested call finds its parent by index.
struct Range {
  const char* name;
  int64_t parent;
  int64_t slot;  // the device timer's, or -1
  int64_t thread;
  Kind kind = Kind::Kernel;
  bool closed = false;
  std::string shapes;   // the kernel's tensor arguments, when the session records shapes
  double start_ms = 0;  // host, from the session's start (set when the range closes)
  double host_ms = 0, child_host_ms = 0;
  int64_t cpu_bytes = 0, device_bytes = 0;  // allocated less freed while it was the innermost range
};

// One allocation (bytes > 0) or free of tensor memory, for the trace.
struct MemoryEvent {
  double ms;  // from the session's start
  const void* ptr;
  int64_t bytes;
  Device device;
  int64_t thread;
};

// The running session's ranges, shared by every thread that calls kernels meanwhile.
struct Session {
  std::mutex mu;
  bool active = false;
  bool device = false;
  uint64_t generation = 0;  // a range opened in an earlier session is ignored when it closes
  Clock::time_point start;
  std::vector<Range> ranges;
  std::vector<MemoryEvent> memory;
  std::deque<std::string> names;  // record_function's, which Range::name points into
  // Ops' names, "ember::softmax" and "autograd::softmax_backward": kept for the program's life,
  // so a range points into them without a copy per call.
  std::set<std::string, std::less<>> op_names[2];
  std::unordered_map<std::thread::id, int64_t> threads;  // numbered in order of first range

  // This thread's number, made on first use (under mu).
  int64_t thread_number() {
    return threads.try_emplace(std::this_thread::get_id(), static_cast<int64_t>(threads.size()))
        .first->second;
  }
};
Session g_session;

struct Open {
  uint64_t generation;
  int64_t index;  // -1: opened while no session was active
  Clock::time_point start;
};
thread_local std::vector<Open> t_open;

std::atomic<const detail::DeviceTimer*> g_timer{nullptr};

// The name an op's range shows (under the session's lock).
const char* op_name(ember::detail::OpRangeKind kind, const char* op) {
  auto& names = g_session.op_names[static_cast<int>(kind)];
  auto it = names.find(std::string_view(op));
  if (it == names.end()) it = names.emplace_hint(it, ember::detail::op_range_name(kind, op));
  return it->c_str();
}

// A User range's name is copied into the session (a record_function's), an Op's looked up in
// op_names, a Kernel's is a stub's, which lives as long as the program.
void push_range(const char* name, Kind kind, const std::string* shapes = nullptr,
                ember::detail::OpRangeKind op = ember::detail::OpRangeKind::Frontend) {
  Open open{0, -1, {}};
  {
    std::lock_guard lock(g_session.mu);
    if (g_session.active) {
      int64_t parent = -1;
      if (!t_open.empty() && t_open.back().generation == g_session.generation) parent = t_open.back().index;
      // Only kernels are timed on the device; a range's device time is its kernels'.
      int64_t slot = g_session.device && kind == Kind::Kernel ? g_timer.load()->start() : -1;
      if (kind == Kind::User) name = g_session.names.emplace_back(name).c_str();
      if (kind == Kind::Op) name = op_name(op, name);
      Range r{name, parent, slot, g_session.thread_number()};
      r.kind = kind;
      if (shapes) r.shapes = *shapes;
      g_session.ranges.push_back(std::move(r));
      open = {g_session.generation, static_cast<int64_t>(g_session.ranges.size()) - 1, {}};
    }
  }
  // Host time starts after the profiler's own work.
  open.start = Clock::now();
  t_open.push_back(open);
}

void pop() {
  Clock::time_point end = Clock::now();
  if (t_open.empty()) return;
  Open open = t_open.back();
  t_open.pop_back();
  std::lock_guard lock(g_session.mu);
  if (open.index < 0 || !g_session.active || open.generation != g_session.generation) return;
  Range& r = g_session.ranges[static_cast<size_t>(open.index)];
  if (r.slot >= 0) g_timer.load()->end(r.slot);
  r.closed = true;
  // Start and duration from the same two clock readings, so nested ranges nest in the trace.
  r.start_ms = std::chrono::duration<double, std::milli>(open.start - g_session.start).count();
  r.host_ms = std::chrono::duration<double, std::milli>(end - open.start).count();
  if (r.parent >= 0) g_session.ranges[static_cast<size_t>(r.parent)].child_host_ms += r.host_ms;
}

// The memory hook (profile_memory): charges the bytes to this thread's innermost open range.
void on_memory(const void* ptr, int64_t bytes, Device device) {
  const Clock::time_point now = Clock::now();
  std::lock_guard lock(g_session.mu);
  if (!g_session.active) return;
  if (!t_open.empty() && t_open.back().generation == g_session.generation && t_open.back().index >= 0) {
    Range& r = g_session.ranges[static_cast<size_t>(t_open.back().index)];
    (device.is_cpu() ? r.cpu_bytes : r.device_bytes) += bytes;
  }
  g_session.memory.push_back({std::chrono::duration<double, std::milli>(now - g_session.start).count(), ptr,
                              bytes, device, g_session.thread_number()});
}

void push(const char* name) { push_range(name, Kind::Kernel); }
void push_with_shapes(const char* name, const std::string& shapes) {
  push_range(name, Kind::Kernel, &shapes);
}

// A module's forward range is kept as a record_function range is (its name copied, a row of its own).
void push_copied(const char* name) { push_range(name, Kind::User); }

void push_op(ember::detail::OpRangeKind kind, const char* name, const std::string* shapes) {
  push_range(name, Kind::Op, shapes, kind);
}

constexpr ember::detail::KernelRangeHooks kProfilerHooks{&push, &pop, nullptr, &push_copied, &push_op};
constexpr ember::detail::KernelRangeHooks kProfilerShapeHooks{&push, &pop, &push_with_shapes, &push_copied,
                                                              &push_op};

bool wants_device(const std::vector<ProfilerActivity>& activities) {
  return std::find(activities.begin(), activities.end(), ProfilerActivity::CUDA) != activities.end();
}

std::vector<ProfilerActivity> default_activities() {
  const detail::DeviceTimer* timer = g_timer.load();
  if (timer && timer->available()) return {ProfilerActivity::CPU, ProfilerActivity::CUDA};
  return {ProfilerActivity::CPU};
}

// Per-name totals in order of first call; self times subtract the ranges nested directly inside.
// A kernel's device time is its span on the stream; an op's, module's or user range's is the sum
// of the kernels inside it, with no self device time (as PyTorch's CPU ops' CUDA totals).
std::vector<FunctionEventAvg> aggregate(const std::vector<Range>& ranges,
                                        const std::vector<double>& device_ms, bool group_by_input_shape) {
  // Totals with the nested ranges': a range comes after its parent, so walking back finishes each
  // range before adding it to its parent.
  std::vector<double> child_device(ranges.size(), 0), device(ranges.size(), 0);
  std::vector<int64_t> cpu_bytes(ranges.size()), device_bytes(ranges.size());
  for (size_t i = ranges.size(); i-- > 0;) {
    const Range& r = ranges[i];
    const bool timed = r.slot >= 0 && static_cast<size_t>(r.slot) < device_ms.size();
    if (r.closed) device[i] = timed ? device_ms[static_cast<size_t>(r.slot)] : child_device[i];
    cpu_bytes[i] += r.cpu_bytes;
    device_bytes[i] += r.device_bytes;
    if (r.parent < 0) continue;
    const auto p = static_cast<size_t>(r.parent);
    child_device[p] += device[i];
    cpu_bytes[p] += cpu_bytes[i];
    device_bytes[p] += device_bytes[i];
  }
  std::vector<FunctionEventAvg> out;
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const Range& r = ranges[i];
    if (!r.closed) continue;  // still running on another thread at stop()
    std::string shapes = group_by_input_shape ? r.shapes : std::string();
    auto [it, inserted] = index.try_emplace({r.name, shapes}, out.size());
    if (inserted) out.push_back({r.name, shapes});
    FunctionEventAvg& e = out[it->second];
    e.count += 1;
    e.cpu_time_total += r.host_ms;
    e.self_cpu_time_total += std::max(0.0, r.host_ms - r.child_host_ms);
    e.device_time_total += device[i];
    e.self_device_time_total += r.slot >= 0 ? std::max(0.0, device[i] - child_device[i]) : 0.0;
    e.cpu_memory_usage += cpu_bytes[i];
    e.self_cpu_memory_usage += r.cpu_bytes;
    e.device_memory_usage += device_bytes[i];
    e.self_device_memory_usage += r.device_bytes;
  }
  return out;
}

// The name (and the input shapes, when last) left-aligned, numbers right.
std::string format_row(const std::vector<std::string>& cells, const std::vector<size_t>& widths,
                       bool text_last) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    std::string pad(widths[i] > cells[i].size() ? widths[i] - cells[i].size() : 0, ' ');
    if (i == 0)
      line += cells[i] + pad;
    else if (text_last && i + 1 == cells.size())
      line += "  " + cells[i];
    else
      line += "  " + pad + cells[i];
  }
  return line + "\n";
}

std::string fixed(double v, const char* suffix = "") {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f%s", v, suffix);
  return buf;
}

double percent(double part, double total) { return total > 0 ? 100.0 * part / total : 0.0; }

// Bytes as PyTorch's tables print them: "12 b", "3.91 Kb", "-1.50 Mb", "2.00 Gb".
std::string memory_string(int64_t bytes) {
  const double b = static_cast<double>(bytes), a = std::abs(b);
  char buf[64];
  if (a >= 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.2f Gb", b / (1024.0 * 1024 * 1024));
  else if (a >= 1024.0 * 1024)
    std::snprintf(buf, sizeof buf, "%.2f Mb", b / (1024.0 * 1024));
  else if (a >= 1024.0)
    std::snprintf(buf, sizeof buf, "%.2f Kb", b / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%lld b", static_cast<long long>(bytes));
  return buf;
}

// The Trace Event Format's complete events ("ph": "X", microseconds), one per closed range on
// its thread's track, nested by time as they ran; a range's device time is in its args.
std::string chrome_trace(const std::vector<Range>& ranges, const std::vector<double>& device_ms,
                         const std::vector<MemoryEvent>& memory) {
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  bool first = true;
  char buf[160];
  for (const Range& r : ranges) {
    if (!r.closed) continue;
    std::snprintf(buf, sizeof buf, "\"ph\": \"X\", \"pid\": 0, \"tid\": %lld, \"ts\": %.3f, \"dur\": %.3f",
                  static_cast<long long>(r.thread), r.start_ms * 1e3, r.host_ms * 1e3);
    out += first ? "\n" : ",\n";
    out += "{\"name\": ";
    append_json_string(out, r.name);
    static constexpr const char* kCategory[] = {"kernel", "cpu_op", "user_annotation"};
    out += std::string(", \"cat\": \"") + kCategory[static_cast<int>(r.kind)] + "\", " + buf;
    std::string args;
    if (r.slot >= 0 && static_cast<size_t>(r.slot) < device_ms.size()) {
      std::snprintf(buf, sizeof buf, "\"device_ms\": %.6f", device_ms[static_cast<size_t>(r.slot)]);
      args = buf;
    }
    if (!r.shapes.empty()) {
      args += args.empty() ? "\"input_shapes\": " : ", \"input_shapes\": ";
      append_json_string(args, r.shapes);
    }
    if (!args.empty()) out += ", \"args\": {" + args + "}";
    out += "}";
    first = false;
  }
  // Instant events, as PyTorch writes them for profile_memory.
  for (const MemoryEvent& m : memory) {
    char event[320];
    std::snprintf(
        event, sizeof event,
        "{\"name\": \"[memory]\", \"cat\": \"cpu_instant_event\", \"ph\": \"i\", \"s\": \"t\", "
        "\"pid\": 0, \"tid\": %lld, \"ts\": %.3f, \"args\": {\"Device Type\": %d, \"Device Id\": %d, "
        "\"Addr\": %llu, \"Bytes\": %lld}}",
        static_cast<long long>(m.thread), m.ms * 1e3, m.device.is_cpu() ? 0 : 1,
        static_cast<int>(m.device.index), static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(m.ptr)),
        static_cast<long long>(m.bytes));
    out += first ? "\n" : ",\n";
    out += event;
    first = false;
  }
  return out + "\n]}\n";
}

// Installs the profiler's kernel-range hooks for a new session; returns whether it times the
// device.
bool install_hooks(const std::vector<ProfilerActivity>& activities,
                   const ember::detail::KernelRangeHooks* hooks) {
  bool device = wants_device(activities);
  const detail::DeviceTimer* timer = g_timer.load();
  EMBER_CHECK(!device || timer, "profiler::Profile: the CUDA activity needs ember built with CUDA");
  EMBER_CHECK(!device || timer->available(), "profiler::Profile: the CUDA activity needs a CUDA device");
  const ember::detail::KernelRangeHooks* expected = nullptr;
  if (!ember::detail::g_kernel_range_hooks.compare_exchange_strong(expected, hooks,
                                                                   std::memory_order_acq_rel)) {
    EMBER_CHECK(expected != &kProfilerHooks && expected != &kProfilerShapeHooks,
                "profiler::Profile: a profiling session is already running (one at a time)");
    throw Error(
        "profiler::Profile: the kernel-range hooks are in use (cuda::nvtx::EmitNvtx is on?); "
        "profiling and emit_nvtx cannot run together");
  }
  return device;
}

}  // namespace

namespace detail {
void set_device_timer(const DeviceTimer* timer) { g_timer.store(timer); }
const DeviceTimer* device_timer() { return g_timer.load(); }
}  // namespace detail

const FunctionEventAvg* KeyAverages::find(const std::string& key) const {
  for (const FunctionEventAvg& e : events_)
    if (e.key == key) return &e;
  return nullptr;
}

std::string KeyAverages::table(const std::string& sort_by, int row_limit) const {
  static const std::map<std::string, std::function<double(const FunctionEventAvg&)>> kSortKeys{
      {"device_time_total", [](const FunctionEventAvg& e) { return e.device_time_total; }},
      {"cuda_time_total", [](const FunctionEventAvg& e) { return e.device_time_total; }},
      {"self_device_time_total", [](const FunctionEventAvg& e) { return e.self_device_time_total; }},
      {"self_cuda_time_total", [](const FunctionEventAvg& e) { return e.self_device_time_total; }},
      {"cpu_time_total", [](const FunctionEventAvg& e) { return e.cpu_time_total; }},
      {"self_cpu_time_total", [](const FunctionEventAvg& e) { return e.self_cpu_time_total; }},
      {"count", [](const FunctionEventAvg& e) { return static_cast<double>(e.count); }},
      {"cpu_memory_usage", [](const FunctionEventAvg& e) { return static_cast<double>(e.cpu_memory_usage); }},
      {"self_cpu_memory_usage",
       [](const FunctionEventAvg& e) { return static_cast<double>(e.self_cpu_memory_usage); }},
      {"device_memory_usage",
       [](const FunctionEventAvg& e) { return static_cast<double>(e.device_memory_usage); }},
      {"cuda_memory_usage",
       [](const FunctionEventAvg& e) { return static_cast<double>(e.device_memory_usage); }},
      {"self_device_memory_usage",
       [](const FunctionEventAvg& e) { return static_cast<double>(e.self_device_memory_usage); }},
      {"self_cuda_memory_usage",
       [](const FunctionEventAvg& e) { return static_cast<double>(e.self_device_memory_usage); }},
  };
  auto key = kSortKeys.find(sort_by);
  if (key == kSortKeys.end()) {
    std::string valid;
    for (const auto& [name, fn] : kSortKeys) valid += (valid.empty() ? "" : ", ") + name;
    throw Error("KeyAverages::table: unknown sort_by \"" + sort_by + "\" (one of " + valid + ")");
  }
  std::vector<FunctionEventAvg> rows = events_;
  // Descending; ties by name so that the order does not depend on timing noise.
  std::stable_sort(rows.begin(), rows.end(), [&](const FunctionEventAvg& a, const FunctionEventAvg& b) {
    double ka = key->second(a), kb = key->second(b);
    return ka != kb ? ka > kb : a.key < b.key;
  });
  if (row_limit >= 0 && rows.size() > static_cast<size_t>(row_limit))
    rows.resize(static_cast<size_t>(row_limit));

  double self_cpu = 0, self_device = 0;
  for (const FunctionEventAvg& e : events_) {
    self_cpu += e.self_cpu_time_total;
    self_device += e.self_device_time_total;
  }
  std::vector<std::string> header{"Name", "Self CPU %", "Self CPU ms", "CPU total ms", "CPU avg ms"};
  if (has_device_time_)
    for (const char* h : {"Self device %", "Self device ms", "Device total ms", "Device avg ms"})
      header.push_back(h);
  if (has_memory_) {
    header.push_back("CPU Mem");
    header.push_back("Self CPU Mem");
    if (has_device_time_) {
      header.push_back("Device Mem");
      header.push_back("Self Device Mem");
    }
  }
  header.push_back("# Calls");
  const bool shapes = std::any_of(rows.begin(), rows.end(),
                                  [](const FunctionEventAvg& e) { return !e.input_shapes.empty(); });
  if (shapes) header.push_back("Input Shapes");
  std::vector<std::vector<std::string>> cells;
  for (const FunctionEventAvg& e : rows) {
    std::vector<std::string> row{e.key, fixed(percent(e.self_cpu_time_total, self_cpu), "%"),
                                 fixed(e.self_cpu_time_total), fixed(e.cpu_time_total),
                                 fixed(e.cpu_time_avg())};
    if (has_device_time_) {
      for (const std::string& s :
           {fixed(percent(e.self_device_time_total, self_device), "%"), fixed(e.self_device_time_total),
            fixed(e.device_time_total), fixed(e.device_time_avg())})
        row.push_back(s);
    }
    if (has_memory_) {
      row.push_back(memory_string(e.cpu_memory_usage));
      row.push_back(memory_string(e.self_cpu_memory_usage));
      if (has_device_time_) {
        row.push_back(memory_string(e.device_memory_usage));
        row.push_back(memory_string(e.self_device_memory_usage));
      }
    }
    row.push_back(std::to_string(e.count));
    if (shapes) row.push_back(e.input_shapes);
    cells.push_back(std::move(row));
  }
  std::vector<size_t> widths;
  for (const std::string& h : header) widths.push_back(h.size());
  for (const auto& row : cells)
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  size_t total_width = 0;
  for (size_t w : widths) total_width += w + 2;
  std::string rule(total_width - 2, '-');
  rule += "\n";

  std::string out = rule + format_row(header, widths, shapes) + rule;
  for (const auto& row : cells) out += format_row(row, widths, shapes);
  out += rule;
  out += "Self CPU time total: " + fixed(self_cpu, " ms") + "\n";
  if (has_device_time_) out += "Self device time total: " + fixed(self_device, " ms") + "\n";
  return out;
}

struct Profile::Window {
  std::vector<Range> ranges;
  std::vector<double> device_ms;
  std::vector<MemoryEvent> memory;
  std::deque<std::string> names;  // what the user ranges' names point into (moving keeps them in place)
};

Profile::Profile() : Profile(ProfileOptions{}) {}

Profile::Profile(const std::vector<ProfilerActivity>& activities) : Profile(ProfileOptions{activities}) {}

Profile::Profile(const ProfileOptions& options) {
  start(options);
  begin_window();
}

Profile::Profile(const Schedule& schedule, std::function<void(const Profile&)> on_trace_ready,
                 const ProfileOptions& options)
    : schedule_(schedule), on_trace_ready_(std::move(on_trace_ready)) {
  EMBER_CHECK(schedule.wait >= 0 && schedule.warmup >= 0 && schedule.active > 0 && schedule.repeat >= 0 &&
                  schedule.skip_first >= 0,
              "profiler::Profile: a schedule needs active > 0 and no negative counts, got wait ",
              schedule.wait, ", warmup ", schedule.warmup, ", active ", schedule.active, ", repeat ",
              schedule.repeat, ", skip_first ", schedule.skip_first);
  start(options);
  if (action(0) != Action::None) begin_window();
}

Profile::Profile(const Schedule& schedule, std::function<void(const Profile&)> on_trace_ready,
                 const std::vector<ProfilerActivity>& activities)
    : Profile(schedule, std::move(on_trace_ready), ProfileOptions{activities}) {}

Profile::Profile(const Schedule& schedule, std::function<void(const Profile&)> on_trace_ready)
    : Profile(schedule, std::move(on_trace_ready), ProfileOptions{}) {}

void Profile::start(const ProfileOptions& options) {
  const ember::detail::KernelRangeHooks* hooks =
      options.record_shapes ? &kProfilerShapeHooks : &kProfilerHooks;
  device_ = install_hooks(options.activities.value_or(default_activities()), hooks);
  hooks_ = hooks;
  running_ = true;
  memory_ = options.profile_memory;
  if (memory_) ember::detail::g_memory_hook.store(&on_memory, std::memory_order_release);
}

Profile::~Profile() {
  if (!running_) return;
  try {
    stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "profiler::Profile: stop() failed in the destructor: %s\n", e.what());
  }
}

Profile::Action Profile::action(int64_t step) const {
  const Schedule& s = *schedule_;
  if (step < s.skip_first) return Action::None;
  const int64_t cycle = s.wait + s.warmup + s.active, k = step - s.skip_first;
  if (s.repeat > 0 && k / cycle >= s.repeat) return Action::None;
  const int64_t at = k % cycle;
  if (at < s.wait) return Action::None;
  if (at < s.wait + s.warmup) return Action::Warmup;
  return at < cycle - 1 ? Action::Record : Action::RecordAndSave;
}

void Profile::begin_window() {
  std::lock_guard lock(g_session.mu);
  g_session.ranges.clear();
  g_session.memory.clear();
  g_session.threads.clear();
  g_session.start = Clock::now();
  g_session.device = device_;
  g_session.generation += 1;
  g_session.active = true;
  recording_ = true;
}

void Profile::end_window(bool keep) {
  std::vector<Range> ranges;
  std::vector<MemoryEvent> memory;
  std::deque<std::string> names;
  {
    std::lock_guard lock(g_session.mu);
    g_session.active = false;
    ranges.swap(g_session.ranges);
    memory.swap(g_session.memory);
    names.swap(g_session.names);
  }
  recording_ = false;
  std::vector<double> device_ms;
  if (device_) device_ms = g_timer.load()->collect();  // also frees the window's event slots
  if (!keep) return;
  result_ = std::make_shared<const Window>(
      Window{std::move(ranges), std::move(device_ms), std::move(memory), std::move(names)});
  if (on_trace_ready_) on_trace_ready_(*this);
}

void Profile::step() {
  EMBER_CHECK(running_ && schedule_, "profiler::Profile: step() needs a running scheduled session");
  const Action was = action(step_num_), now = action(++step_num_);
  if (was == Action::RecordAndSave) {
    end_window(true);
  } else if (was == Action::Warmup && now != Action::Warmup) {
    end_window(false);  // the warm-up's ranges are thrown away
  } else if (was != Action::None && now == Action::None) {
    end_window(false);
  }
  if (now != Action::None && !recording_) begin_window();
}

void Profile::stop() {
  EMBER_CHECK(running_, "profiler::Profile: stop() called on a stopped session");
  running_ = false;
  const ember::detail::KernelRangeHooks* ours = hooks_;
  ember::detail::g_kernel_range_hooks.compare_exchange_strong(ours, nullptr, std::memory_order_acq_rel);
  if (memory_) ember::detail::g_memory_hook.store(nullptr, std::memory_order_release);
  if (recording_) end_window(!schedule_ || action(step_num_) != Action::Warmup);
}

KeyAverages Profile::key_averages(bool group_by_input_shape) const {
  EMBER_CHECK(result_, "profiler::Profile: key_averages() needs a stopped session (call stop())");
  return KeyAverages(aggregate(result_->ranges, result_->device_ms, group_by_input_shape), device_, memory_);
}

void Profile::export_chrome_trace(const std::string& path) const {
  EMBER_CHECK(result_, "profiler::Profile: export_chrome_trace() needs a stopped session (call stop())");
  write_file_atomically(path, chrome_trace(result_->ranges, result_->device_ms, result_->memory),
                        "export_chrome_trace");
}

RecordFunction::RecordFunction(const std::string& name) { push_range(name.c_str(), Kind::User); }
RecordFunction::~RecordFunction() { pop(); }

}  // namespace ember::profiler
