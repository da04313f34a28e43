#include "ember/cuda/cudnn_backend.h"

#include <algorithm>
#include <utility>

#include "ember/core/factories.h"
#include "ember/cuda/event.h"

namespace ember::cuda::cudnn_backend {

namespace {

[[noreturn]] void throw_at(cudnnStatus_t status, const std::string& what, const std::source_location& where) {
  detail::throw_cudnn_error(status, what.c_str(), where.file_name(), static_cast<int>(where.line()));
}

}  // namespace

Descriptor::Descriptor(cudnnBackendDescriptorType_t type, std::source_location where) {
  const cudnnStatus_t st = cudnnBackendCreateDescriptor(type, &d_);
  if (st != CUDNN_STATUS_SUCCESS)
    throw_at(st, ember::detail::str_cat("cudnnBackendCreateDescriptor(type ", static_cast<int>(type), ")"),
             where);
}

Descriptor::~Descriptor() {
  if (d_) cudnnBackendDestroyDescriptor(d_);
}

Descriptor::Descriptor(Descriptor&& other) noexcept : d_(std::exchange(other.d_, nullptr)) {}

Descriptor& Descriptor::operator=(Descriptor&& other) noexcept {
  std::swap(d_, other.d_);
  return *this;
}

void Descriptor::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                     const void* elements, std::source_location where) {
  const cudnnStatus_t st = cudnnBackendSetAttribute(d_, name, type, count, elements);
  if (st != CUDNN_STATUS_SUCCESS)
    throw_at(st,
             ember::detail::str_cat("cudnnBackendSetAttribute(attribute ", static_cast<int>(name), ", type ",
                                    static_cast<int>(type), ", count ", count, ")"),
             where);
}

void Descriptor::set(cudnnBackendAttributeName_t name, const Descriptor& d, std::source_location where) {
  cudnnBackendDescriptor_t raw = d.get();
  set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw, where);
}

void Descriptor::finalize(std::source_location where) {
  const cudnnStatus_t st = cudnnBackendFinalize(d_);
  if (st != CUDNN_STATUS_SUCCESS) throw_at(st, "cudnnBackendFinalize", where);
}

cudnnStatus_t Descriptor::try_finalize() { return cudnnBackendFinalize(d_); }

std::string describe_failure(const char* what, cudnnStatus_t status) {
  char why[512] = {};
  cudnnGetLastErrorString(why, sizeof why);
  return ember::detail::str_cat(what, ": ", cudnnGetErrorString(status), why[0] ? " (" : "", why,
                                why[0] ? ")" : "");
}

namespace {

// Whether the filter lets the configuration's engine run; its global index into `engine`.
bool allowed(const Descriptor& config, bool tensor_cores, bool deterministic, int64_t& engine) {
  Descriptor e(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw = e.get();
  int64_t n = 0;
  if (cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                               &n, &raw) != CUDNN_STATUS_SUCCESS)
    return false;
  engine = -1;
  cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &engine);
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  n = 0;
  if (cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) != CUDNN_STATUS_SUCCESS)
    return false;
  for (int64_t i = 0; i < n; ++i) {
    if (notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) return false;
    if (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE && !tensor_cores) return false;
    if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC && deterministic) return false;
  }
  return true;
}

// One heuristic mode's list; empty when cuDNN has none for the graph.
std::vector<Descriptor> heuristic_list(const Descriptor& graph, cudnnBackendHeurMode_t mode) {
  Descriptor heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (heur.try_finalize() != CUDNN_STATUS_SUCCESS) return {};
  int64_t n = 0;
  if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                               &n, nullptr) != CUDNN_STATUS_SUCCESS ||
      n <= 0)
    return {};
  // cuDNN fills in configuration descriptors created beforehand.
  std::vector<Descriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < n; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(configs.back().get());
  }
  int64_t got = 0;
  if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n,
                               &got, raw.data()) != CUDNN_STATUS_SUCCESS)
    return {};
  configs.erase(configs.begin() + std::clamp<int64_t>(got, 0, n), configs.end());
  return configs;
}

// The finalized plan of a candidate (which it then owns); nullopt when cuDNN declines it.
std::optional<Plan> make_plan(cudnnHandle_t handle, Candidate& c) {
  Descriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, c.config);
  if (plan.try_finalize() != CUDNN_STATUS_SUCCESS) return std::nullopt;
  int64_t workspace = 0, n = 0;
  if (cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                               &workspace) != CUDNN_STATUS_SUCCESS ||
      workspace < 0)
    return std::nullopt;
  return Plan{std::move(c.config), std::move(plan), c.engine, workspace};
}

// A workspace of `bytes` from the caching allocator into `ws`; false when it cannot be had.
bool allocate_workspace(int64_t bytes, Device device, Tensor& ws) {
  if (bytes == 0) return true;
  try {
    ws = empty({bytes}, TensorOptions(kUInt8).device(device));
    return true;
  } catch (const Error&) {
    return false;  // out of memory: a plan needing less may still run
  }
}

cudnnStatus_t execute(cudnnHandle_t handle, const Plan& plan, const VariantPack& data, void* workspace) {
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  const auto n = static_cast<int64_t>(data.uids.size());
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, data.uids.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, data.pointers.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack.finalize();
  const cudnnStatus_t st = cudnnBackendExecute(handle, plan.plan.get(), pack.get());
  if (st != CUDNN_STATUS_SUCCESS) cudaGetLastError();  // nothing left behind to fail the next call
  return st;
}

// Milliseconds per run of the plan on `data` (a warm-up run, then kRuns timed on the current
// stream); nullopt when it does not run.
std::optional<float> time_plan(cudnnHandle_t handle, const Plan& plan, const VariantPack& data,
                               Device device) {
  constexpr int kRuns = 2;
  Tensor ws;
  if (!allocate_workspace(plan.workspace, device, ws)) return std::nullopt;
  void* wsp = plan.workspace > 0 ? ws.data_ptr() : nullptr;
  if (execute(handle, plan, data, wsp) != CUDNN_STATUS_SUCCESS) return std::nullopt;
  Event start(true), end(true);
  start.record();
  for (int i = 0; i < kRuns; ++i)
    if (execute(handle, plan, data, wsp) != CUDNN_STATUS_SUCCESS) return std::nullopt;
  end.record();
  return start.elapsed_time(end) / kRuns;
}

}  // namespace

std::vector<Candidate> engine_configs(const Descriptor& graph, bool tensor_cores, bool deterministic,
                                      int64_t& found) {
  std::vector<Candidate> out;
  found = 0;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    std::vector<Descriptor> configs = heuristic_list(graph, mode);
    found += static_cast<int64_t>(configs.size());
    for (Descriptor& config : configs) {
      int64_t engine = -1;
      if (allowed(config, tensor_cores, deterministic, engine)) out.push_back({std::move(config), engine});
    }
  }
  return out;
}

bool run(cudnnHandle_t handle, const Plan& plan, const VariantPack& data, Device device) {
  Tensor ws;
  if (!allocate_workspace(plan.workspace, device, ws)) return false;
  return execute(handle, plan, data, plan.workspace > 0 ? ws.data_ptr() : nullptr) == CUDNN_STATUS_SUCCESS;
}

std::optional<Plan> choose_and_run(cudnnHandle_t handle, std::vector<Candidate>& candidates,
                                   const VariantPack& data, const VariantPack& timing_data, Device device,
                                   bool benchmark) {
  size_t next = 0;
  std::vector<std::pair<float, Plan>> timed;  // fastest first once sorted
  if (benchmark) {
    for (; next < candidates.size() && timed.size() < kBenchmarkCandidates; ++next)
      if (std::optional<Plan> p = make_plan(handle, candidates[next]))
        if (std::optional<float> ms = time_plan(handle, *p, timing_data, device))
          timed.emplace_back(*ms, std::move(*p));
    std::stable_sort(timed.begin(), timed.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  for (auto& [ms, p] : timed)
    if (run(handle, p, data, device)) return std::move(p);
  for (; next < candidates.size(); ++next)
    if (std::optional<Plan> p = make_plan(handle, candidates[next]))
      if (run(handle, *p, data, device)) return p;
  return std::nullopt;
}

}  // namespace ember::cuda::cudnn_backend
