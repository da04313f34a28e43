// profiler::Profile on the CPU: per-stub call counts, self times of nested kernel calls (exact
// identities: a parent's self time is its total less its children's), sorted and limited tables,
// and the error paths (one session at a time, hooks owned by someone else, results before stop).
#include <ember/core/profiler.h>
#include <ember/cuda/device.h>
#include <ember/nn/activation.h>
#include <ember/nn/container.h>
#include <ember/nn/linear.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#if __has_include(<nlohmann/json.hpp>)
#include <nlohmann/json.hpp>
#endif

#include "profiler_test_util.h"

namespace ember::testing {
namespace {

using profiler::FunctionEventAvg;
using profiler::KeyAverages;
using profiler::Profile;
using profiler::ProfilerActivity;

// Test stubs: "test_outer" calls "test_inner" twice, so the profile sees nested kernel calls.
using SpinFn = void (*)(double ms);
constinit DispatchStub<SpinFn> test_inner_stub("test_inner");
constinit DispatchStub<SpinFn> test_outer_stub("test_outer");
constinit DispatchStub<SpinFn> test_leaf_stub("test_leaf");
constinit DispatchStub<SpinFn> test_throw_stub("test_throw");

void spin(double ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(ms);
  while (std::chrono::steady_clock::now() < end) {
  }
}
void outer_kernel(double ms) {
  spin(ms);
  test_inner_stub(kCPU)(3 * ms);
  test_inner_stub(kCPU)(3 * ms);
}
void throw_kernel(double) { throw Error("test_throw: failed on purpose"); }

// A stub with tensor arguments among others, for recorded shapes.
using ShapedFn = void (*)(const Tensor& a, int64_t k, const Tensor& b);
constinit DispatchStub<ShapedFn> test_shaped_stub("test_shaped");
KernelRegistrar<ShapedFn> reg_shaped(test_shaped_stub, kCPU, [](const Tensor&, int64_t, const Tensor&) {});
KernelRegistrar<SpinFn> reg_inner(test_inner_stub, kCPU, &spin);
KernelRegistrar<SpinFn> reg_outer(test_outer_stub, kCPU, &outer_kernel);
KernelRegistrar<SpinFn> reg_leaf(test_leaf_stub, kCPU, &spin);
KernelRegistrar<SpinFn> reg_throw(test_throw_stub, kCPU, &throw_kernel);

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(Profiler, CountsEachStubsCalls) {
  Tensor x = arange(12, kFloat32).view({3, 4});
  softmax(x, 1);  // before the session: not counted
  Profile prof(kCpuOnly);
  EXPECT_TRUE(prof.running());
  EXPECT_FALSE(prof.profiles_device());
  for (int i = 0; i < 3; ++i) softmax(x, 1);
  cumsum(x, 0);
  cumsum(x, 1);
  prof.stop();
  softmax(x, 0);  // after: not counted
  KeyAverages avg = prof.key_averages();
  EXPECT_FALSE(avg.has_device_time());
  EXPECT_EQ(entry(avg, "softmax").count, 3);
  EXPECT_EQ(entry(avg, "cumsum").count, 2);
  EXPECT_EQ(avg.find("test_inner"), nullptr);
  for (const FunctionEventAvg& e : avg.events()) {
    EXPECT_GE(e.cpu_time_total, e.self_cpu_time_total) << e.key;
    EXPECT_NEAR(e.cpu_time_avg(), e.cpu_time_total / static_cast<double>(e.count), 1e-12) << e.key;
    EXPECT_EQ(e.device_time_total, 0.0) << e.key;
  }
}

TEST(Profiler, NestedCallsCountSelfTime) {
  Profile prof(kCpuOnly);
  test_outer_stub(kCPU)(1.0);
  test_outer_stub(kCPU)(1.0);
  prof.stop();
  KeyAverages avg = prof.key_averages();
  const FunctionEventAvg outer = entry(avg, "test_outer");
  const FunctionEventAvg inner = entry(avg, "test_inner");
  EXPECT_EQ(outer.count, 2);
  EXPECT_EQ(inner.count, 4);
  // Each inner call spins 3 ms, each outer 1 ms itself: lower bounds only (the machine may be slow).
  EXPECT_GE(inner.cpu_time_total, 12.0);
  EXPECT_GE(outer.self_cpu_time_total, 2.0);
  EXPECT_NEAR(inner.self_cpu_time_total, inner.cpu_time_total, 1e-9);  // a leaf
  EXPECT_NEAR(outer.self_cpu_time_total, outer.cpu_time_total - inner.cpu_time_total, 1e-9);
}

TEST(Profiler, TableIsSortedLimitedAndAligned) {
  Profile prof(kCpuOnly);
  test_outer_stub(kCPU)(1.0);
  test_outer_stub(kCPU)(1.0);
  for (int i = 0; i < 3; ++i) test_leaf_stub(kCPU)(0.0);
  prof.stop();
  KeyAverages avg = prof.key_averages();
  ASSERT_EQ(avg.size(), 3u);
  // First-call order: outer opens before its inner calls.
  EXPECT_EQ(avg[0].key, "test_outer");
  EXPECT_EQ(avg[1].key, "test_inner");
  EXPECT_EQ(avg[2].key, "test_leaf");

  // Layout: rule, header, rule, rows, rule, total.
  auto rows_of = [](const std::string& table) {
    std::vector<std::string> l = lines(table), names;
    for (size_t i = 3; i + 2 < l.size(); ++i) names.push_back(l[i].substr(0, l[i].find(' ')));
    return names;
  };
  EXPECT_EQ(rows_of(avg.table("count", -1)),
            (std::vector<std::string>{"test_inner", "test_leaf", "test_outer"}));
  EXPECT_EQ(rows_of(avg.table("cpu_time_total", 10)),
            (std::vector<std::string>{"test_outer", "test_inner", "test_leaf"}));
  EXPECT_EQ(rows_of(avg.table("self_cpu_time_total", 2)),
            (std::vector<std::string>{"test_inner", "test_outer"}));
  EXPECT_TRUE(rows_of(avg.table("count", 0)).empty());

  std::vector<std::string> l = lines(avg.table("count"));
  ASSERT_EQ(l.size(), 8u);
  EXPECT_NE(l[1].find("Self CPU %"), std::string::npos) << l[1];
  EXPECT_NE(l[1].find("# Calls"), std::string::npos) << l[1];
  EXPECT_EQ(l[1].find("device"), std::string::npos) << "a CPU session has no device columns: " << l[1];
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(l[i].size(), l[0].size()) << "line " << i << ": " << l[i];
  EXPECT_EQ(l[3].substr(l[3].size() - 1), "4");  // test_inner's calls, right-aligned
  EXPECT_EQ(l[7].rfind("Self CPU time total: ", 0), 0u) << l[7];
}

TEST(Profiler, AThrowingKernelIsStillCounted) {
  Profile prof(kCpuOnly);
  EXPECT_EMBER_ERROR(test_throw_stub(kCPU)(0.0), "test_throw", "on purpose");
  test_leaf_stub(kCPU)(0.0);
  prof.stop();
  KeyAverages avg = prof.key_averages();
  EXPECT_EQ(entry(avg, "test_throw").count, 1);
  EXPECT_EQ(entry(avg, "test_leaf").count, 1);
}

TEST(Profiler, SessionsRunOneAtATime) {
  {
    Profile prof(kCpuOnly);
    EXPECT_EMBER_ERROR(Profile second(kCpuOnly), "profiler::Profile", "already running");
    // The failed second session left the first one working.
    test_leaf_stub(kCPU)(0.0);
    EXPECT_EMBER_ERROR(prof.key_averages(), "profiler::Profile", "key_averages", "stopped session");
    prof.stop();
    EXPECT_EQ(entry(prof.key_averages(), "test_leaf").count, 1);
    EXPECT_EMBER_ERROR(prof.stop(), "profiler::Profile", "stop() called on a stopped session");
  }
  { Profile unstopped(kCpuOnly); }  // the destructor stops it, so a new session may start
  Profile next(kCpuOnly);
  next.stop();
  EXPECT_EQ(next.key_averages().size(), 0u);
  EXPECT_EQ(detail::g_kernel_range_hooks.load(), nullptr);
}

// A stopped session's results keep their range names while later sessions record their own (the
// names once lived in the session, which the next one cleared).
TEST(Profiler, ResultsOutliveTheNextSession) {
  Profile first(kCpuOnly);
  { profiler::RecordFunction range(std::string("first session's range")); }
  first.stop();
  for (int i = 0; i < 3; ++i) {
    Profile later(kCpuOnly);
    { profiler::RecordFunction range(std::string(64, static_cast<char>('a' + i))); }
    later.stop();
  }
  KeyAverages avg = first.key_averages();
  ASSERT_EQ(avg.size(), 1u);
  EXPECT_EQ(avg[0].key, "first session's range");
}

void other_push(const char*) {}
void other_pop() {}
constexpr detail::KernelRangeHooks kOtherHooks{&other_push, &other_pop};

TEST(Profiler, RefusesHooksSomeoneElseHolds) {
  detail::g_kernel_range_hooks.store(&kOtherHooks);
  EXPECT_EMBER_ERROR(Profile prof(kCpuOnly), "profiler::Profile", "kernel-range hooks are in use",
                     "emit_nvtx");
  EXPECT_EQ(detail::g_kernel_range_hooks.load(), &kOtherHooks);  // left as they were
  detail::g_kernel_range_hooks.store(nullptr);
}

TEST(Profiler, ErrorPaths) {
  Profile prof(kCpuOnly);
  prof.stop();
  EXPECT_EMBER_ERROR(prof.key_averages().table("cuda_time"), "KeyAverages::table",
                     "unknown sort_by \"cuda_time\"", "device_time_total");
  if (!cuda::is_available())
    EXPECT_EMBER_ERROR(Profile cuda_prof({ProfilerActivity::CUDA}), "profiler::Profile",
                       "CUDA activity needs");
}

// A record_function range is a row of its own and holds the kernels called inside it; the
// Chrome trace has one complete event per range, nested by time as they ran, and escapes names.
TEST(Profiler, RecordFunctionAndChromeTrace) {
  { profiler::RecordFunction outside("no session"); }  // nothing recorded, nothing broken
  const std::string step = "train \"step\" 1";
  Profile prof(kCpuOnly);
  {
    profiler::RecordFunction range(step);
    test_outer_stub(kCPU)(0.2);
    test_leaf_stub(kCPU)(0.1);
  }
  test_leaf_stub(kCPU)(0.1);
  EXPECT_THROW(prof.export_chrome_trace("unused.json"), Error);
  prof.stop();
  KeyAverages avg = prof.key_averages();
  EXPECT_EQ(avg.find("no session"), nullptr);
  const FunctionEventAvg& r = entry(avg, step);
  EXPECT_EQ(r.count, 1);
  // Its children: test_outer (with its two test_inner) and the first test_leaf.
  EXPECT_NEAR(
      r.self_cpu_time_total,
      r.cpu_time_total - entry(avg, "test_outer").cpu_time_total - entry(avg, "test_leaf").cpu_time_total / 2,
      0.1);

#if __has_include(<nlohmann/json.hpp>)
  TempDir dir;
  const std::string path = dir.path() + "/trace.json";
  prof.export_chrome_trace(path);
  std::ifstream in(path);
  nlohmann::json trace = nlohmann::json::parse(in);
  const auto& events = trace.at("traceEvents");
  ASSERT_EQ(events.size(), 6u);  // the range, outer, 2 inner, 2 leaf
  auto span = [&](const std::string& name, int which = 0) {
    for (const auto& e : events)
      if (e.at("name") == name && which-- == 0) {
        EXPECT_EQ(e.at("ph"), "X");
        return std::pair<double, double>(e.at("ts"), e.at("ts").get<double>() + e.at("dur").get<double>());
      }
    ADD_FAILURE() << "no event " << name;
    return std::pair<double, double>(0, 0);
  };
  auto inside = [](std::pair<double, double> in, std::pair<double, double> out) {
    return in.first >= out.first && in.second <= out.second + 1e-3;
  };
  EXPECT_TRUE(inside(span("test_outer"), span(step)));
  EXPECT_TRUE(inside(span("test_inner", 1), span("test_outer")));
  EXPECT_TRUE(inside(span("test_leaf", 0), span(step)));
  EXPECT_GE(span("test_leaf", 1).first, span(step).second);
#endif
}

// profile_memory: tensor memory allocated and freed inside a range is charged to it (self) and to
// the ranges around it (total), and each allocation and free is a "[memory]" event of the trace.
TEST(Profiler, ProfileMemoryChargesAllocationsToTheirInnermostRange) {
  profiler::ProfileOptions options;
  options.activities = kCpuOnly;
  options.profile_memory = true;
  Tensor kept;
  Profile prof(options);
  {
    profiler::RecordFunction outer("outer");
    Tensor scratch = empty({1000});  // 4000 bytes, freed before outer ends
    {
      profiler::RecordFunction inner("inner");
      kept = empty({250}, kFloat64);  // 2000 bytes, outlives the session
    }
  }
  Tensor after = empty({10});  // in no range of the user's
  prof.stop();
  KeyAverages avg = prof.key_averages();
  EXPECT_TRUE(avg.has_memory());
  // Allocations are charged to ember::empty, the op that made them; a free to the range open when
  // the tensor dies.
  const FunctionEventAvg &outer = entry(avg, "outer"), &inner = entry(avg, "inner");
  const FunctionEventAvg& make = entry(avg, "ember::empty");
  EXPECT_EQ(make.count, 3);
  EXPECT_EQ(make.self_cpu_memory_usage, 4000 + 2000 + 40);
  EXPECT_EQ(inner.self_cpu_memory_usage, 0);
  EXPECT_EQ(inner.cpu_memory_usage, 2000);
  EXPECT_EQ(outer.self_cpu_memory_usage, -4000);  // scratch freed as outer closes
  EXPECT_EQ(outer.cpu_memory_usage, 2000);        // +4000 + 2000 - 4000
  EXPECT_EQ(outer.device_memory_usage, 0);
  const std::string table = avg.table("self_cpu_memory_usage");
  EXPECT_NE(table.find("Self CPU Mem"), std::string::npos) << table;
  EXPECT_NE(table.find("5.90 Kb"), std::string::npos) << table;      // 6040 bytes
  EXPECT_EQ(lines(table)[3].rfind("ember::empty", 0), 0u) << table;  // sorted by self memory

#if __has_include(<nlohmann/json.hpp>)
  TempDir dir;
  prof.export_chrome_trace(dir.path() + "/trace.json");
  std::ifstream in(dir.path() + "/trace.json");
  nlohmann::json trace = nlohmann::json::parse(in);
  std::vector<int64_t> bytes;
  double inner_start = 0, inner_end = 0, kept_at = -1;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("name") == "inner") {
      inner_start = e.at("ts");
      inner_end = inner_start + e.at("dur").get<double>();
    }
    if (e.at("name") != "[memory]") continue;
    EXPECT_EQ(e.at("ph"), "i");
    EXPECT_EQ(e.at("args").at("Device Type"), 0);
    bytes.push_back(e.at("args").at("Bytes"));
    if (bytes.back() == 2000) kept_at = e.at("ts");
  }
  EXPECT_EQ(bytes, (std::vector<int64_t>{4000, 2000, -4000, 40}));
  EXPECT_TRUE(kept_at >= inner_start && kept_at <= inner_end);
#endif
  // Without the option, no memory is recorded.
  Profile plain(kCpuOnly);
  {
    profiler::RecordFunction r("r");
    Tensor t = empty({8});
  }
  plain.stop();
  EXPECT_FALSE(plain.key_averages().has_memory());
  EXPECT_EQ(entry(plain.key_averages(), "r").cpu_memory_usage, 0);
  EXPECT_EQ(plain.key_averages().table().find("CPU Mem"), std::string::npos);
}

// A module's call is a range "nn.Module: <name>", nested in its parent module's, holding its
// kernels: Sequential's self time is its total less its two children's.
TEST(Profiler, ModuleCallsAreRangesNestedAsTheModules) {
  nn::Sequential seq(nn::Linear(64, 64), nn::ReLU());
  Tensor x = randn({256, 64});
  seq(x);  // no session: nothing recorded
  Profile prof(kCpuOnly);
  seq(x);
  prof.stop();
  KeyAverages avg = prof.key_averages();
  const FunctionEventAvg& all = entry(avg, "nn.Module: Sequential");
  const FunctionEventAvg& linear = entry(avg, "nn.Module: Linear");
  const FunctionEventAvg& relu = entry(avg, "nn.Module: ReLU");
  EXPECT_EQ(all.count, 1);
  EXPECT_EQ(linear.count, 1);
  EXPECT_EQ(relu.count, 1);
  EXPECT_NEAR(all.self_cpu_time_total, all.cpu_time_total - linear.cpu_time_total - relu.cpu_time_total,
              1e-6);
  // The product is Linear's child, not Sequential's.
  EXPECT_LT(linear.self_cpu_time_total, linear.cpu_time_total);
}

TEST(Profiler, RecordShapesGroupsCallsByTheirTensorArguments) {
  Tensor a = zeros({2, 3}), b = zeros({4}, kBFloat16);
  {
    Profile plain(kCpuOnly);
    test_shaped_stub(kCPU)(a, 1, b);
    plain.stop();
    KeyAverages grouped = plain.key_averages(/*group_by_input_shape=*/true);
    ASSERT_EQ(grouped.size(), 1u);
    EXPECT_EQ(grouped[0].input_shapes, "");  // not recorded
  }
  Profile prof(profiler::ProfileOptions{kCpuOnly, /*record_shapes=*/true});
  test_shaped_stub(kCPU)(a, 1, b);
  test_shaped_stub(kCPU)(a, 2, b);
  test_shaped_stub(kCPU)(b, 1, Tensor());
  prof.stop();
  EXPECT_EQ(entry(prof.key_averages(), "test_shaped").count, 3);
  KeyAverages grouped = prof.key_averages(true);
  ASSERT_EQ(grouped.size(), 2u);
  EXPECT_EQ(grouped[0].input_shapes, "[2, 3] float32, [4] bfloat16");
  EXPECT_EQ(grouped[0].count, 2);
  EXPECT_EQ(grouped[1].input_shapes, "[4] bfloat16, []");
  EXPECT_EQ(grouped[1].count, 1);
  const std::string table = grouped.table("count");
  EXPECT_NE(table.find("Input Shapes"), std::string::npos) << table;
  EXPECT_NE(table.find("  [2, 3] float32, [4] bfloat16\n"), std::string::npos) << table;
  EXPECT_EQ(prof.key_averages().table().find("Input Shapes"), std::string::npos);
#if __has_include(<nlohmann/json.hpp>)
  TempDir dir;
  prof.export_chrome_trace(dir.path() + "/trace.json");
  std::ifstream in(dir.path() + "/trace.json");
  const auto events = nlohmann::json::parse(in).at("traceEvents");
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].at("args").at("input_shapes"), "[4] bfloat16, []");
#endif
}

// A scheduled profile records only its windows: step i calls test_leaf i + 1 times, so each
// window's count says which steps it holds. Warm-up steps are recorded and thrown away.
TEST(Profiler, ScheduleRecordsItsWindows) {
  auto run = [](const profiler::Schedule& schedule, int64_t steps) {
    std::vector<int64_t> windows;
    {
      Profile prof(
          schedule, [&](const Profile& p) { windows.push_back(entry(p.key_averages(), "test_leaf").count); },
          kCpuOnly);
      for (int64_t i = 0; i < steps; ++i) {
        for (int64_t k = 0; k <= i; ++k) test_leaf_stub(kCPU)(0.0);
        prof.step();
      }
      EXPECT_EQ(prof.step_num(), steps);
    }
    return windows;
  };
  // Cycles of 1 waiting, 1 warm-up and 2 active steps, twice: steps 2-3 and 6-7.
  EXPECT_EQ(run({.wait = 1, .warmup = 1, .active = 2, .repeat = 2}, 10),
            (std::vector<int64_t>{3 + 4, 7 + 8}));
  EXPECT_EQ(run({.active = 1, .repeat = 1, .skip_first = 2}, 5), (std::vector<int64_t>{3}));
  // repeat 0: windows until the profile ends; one still recording at the end is handed on too.
  EXPECT_EQ(run({.wait = 1, .active = 2}, 5), (std::vector<int64_t>{2 + 3, 5}));
  EXPECT_EMBER_ERROR(Profile({.active = 0}, nullptr, kCpuOnly), "profiler::Profile", "active > 0");
  Profile plain(kCpuOnly);
  EXPECT_EMBER_ERROR(plain.step(), "profiler::Profile", "scheduled");
}

}  // namespace
}  // namespace ember::testing
