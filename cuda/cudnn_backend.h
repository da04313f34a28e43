#pragma once

// cuDNN's backend (graph) API, the one cuDNN 9's newest engines are reached through: an owned
// descriptor with checked attribute setters, and the way from a finalized operation graph to a
// plan that ran (heuristic engine lists, PyTorch's numerical-note filter, plan finalization,
// measurement with cudnn.benchmark, execution with a workspace from the caching allocator).
#include <cstdint>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "ember/core/device.h"
#include "ember/cuda/cudnn_handle.h"

namespace ember::cuda::cudnn_backend {

// One backend descriptor, destroyed with its owner. Creation, set() and finalize() throw on any
// status but success, naming the caller's file and line; try_finalize() returns the status, for
// the steps where cuDNN declining is an expected answer.
class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type,
                      std::source_location where = std::source_location::current());
  ~Descriptor();
  Descriptor(Descriptor&& other) noexcept;
  Descriptor& operator=(Descriptor&& other) noexcept;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }

  // `count` elements of `type` (CUDNN_TYPE_INT64: int64_t, CUDNN_TYPE_BACKEND_DESCRIPTOR:
  // cudnnBackendDescriptor_t, CUDNN_TYPE_BOOLEAN: bool, ...).
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
           const void* elements, std::source_location where = std::source_location::current());
  void set(cudnnBackendAttributeName_t name, const Descriptor& d,
           std::source_location where = std::source_location::current());
  void finalize(std::source_location where = std::source_location::current());
  cudnnStatus_t try_finalize();

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// "<what>: <status> (<cuDNN's last error message>)", for a step that cuDNN declined.
std::string describe_failure(const char* what, cudnnStatus_t status);

// An engine configuration that passed the filter, with its engine's global index.
struct Candidate {
  Descriptor config;
  int64_t engine;
};

// The engine configurations for a finalized operation graph: heuristic mode A's list, then the
// fallback list. Filtered as PyTorch filters them: never an engine that converts its inputs to a
// narrower type, tensor-core engines only when `tensor_cores` (for float32 they compute in TF32),
// and with `deterministic` none that cuDNN notes as nondeterministic. `found` gets the number
// before filtering.
std::vector<Candidate> engine_configs(const Descriptor& graph, bool tensor_cores, bool deterministic,
                                      int64_t& found);

// A finalized execution plan, which needs `workspace` bytes.
struct Plan {
  Descriptor config, plan;
  int64_t engine, workspace;
};

// Device pointers by tensor unique id for one execution.
struct VariantPack {
  std::vector<int64_t> uids;
  std::vector<void*> pointers;
};

// The plan to keep: the first candidate that finalizes, whose workspace the caching allocator can
// give and that runs on `data`; with `benchmark`, the fastest of the first kBenchmarkCandidates
// that run on `timing_data` (timed on the current stream), then run on `data`. The kept plan has
// run once on `data`; nullopt when none runs.
inline constexpr int kBenchmarkCandidates = 8;
std::optional<Plan> choose_and_run(cudnnHandle_t handle, std::vector<Candidate>& candidates,
                                   const VariantPack& data, const VariantPack& timing_data, Device device,
                                   bool benchmark);

// Runs a plan with a workspace from the caching allocator: false when the workspace cannot be had
// or cuDNN does not run it (the CUDA error state cleared).
bool run(cudnnHandle_t handle, const Plan& plan, const VariantPack& data, Device device);

}  // namespace ember::cuda::cudnn_backend
