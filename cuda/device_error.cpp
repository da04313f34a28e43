#include "ember/cuda/device_error.h"

#include <cuda_runtime.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "ember/core/error.h"
#include "ember/cuda/check.h"

namespace ember::cuda {

namespace {

std::mutex ops_mutex;
std::vector<const char*> op_names;  // by id
std::atomic<DeviceIndexError*> record{nullptr};

}  // namespace

DeviceIndexError* device_index_error() {
  if (DeviceIndexError* r = record.load(std::memory_order_acquire)) return r;
  static std::once_flag once;
  std::call_once(once, [] {
    void* host = nullptr;
    // Portable: every device writes the same record; mapped: kernels reach it through the bus.
    EMBER_CUDA_CHECK(
        cudaHostAlloc(&host, sizeof(DeviceIndexError), cudaHostAllocMapped | cudaHostAllocPortable));
    *static_cast<DeviceIndexError*>(host) = {};
    void* dev = nullptr;
    EMBER_CUDA_CHECK(cudaHostGetDevicePointer(&dev, host, 0));
    EMBER_CHECK(dev == host, "device_index_error: mapped host memory needs unified addressing");
    record.store(static_cast<DeviceIndexError*>(host), std::memory_order_release);
  });
  return record.load(std::memory_order_acquire);
}

int32_t device_error_op(const char* op) {
  std::lock_guard<std::mutex> lock(ops_mutex);
  for (size_t i = 0; i < op_names.size(); ++i)
    if (op_names[i] == op || std::string(op_names[i]) == op) return static_cast<int32_t>(i);
  op_names.push_back(op);
  return static_cast<int32_t>(op_names.size() - 1);
}

void raise_device_errors() {
  DeviceIndexError* r = record.load(std::memory_order_acquire);
  if (!r || reinterpret_cast<volatile int32_t*>(&r->flag)[0] == 0) return;
  const DeviceIndexError e = *r;
  r->flag = 0;
  const char* op;
  {
    std::lock_guard<std::mutex> lock(ops_mutex);
    op = e.op >= 0 && static_cast<size_t>(e.op) < op_names.size() ? op_names[e.op] : "an indexing op";
  }
  const char* when = " (found by a CUDA kernel, raised at the first synchronization after it)";
  switch (e.kind) {
    case DeviceIndexError::EmbeddingRow:
      throw Error(ember::detail::str_cat(op, ": index ", e.index, " is out of range for a weight with ",
                                         e.size, " rows (num_embeddings)", when));
    case DeviceIndexError::ClassTarget:
      throw Error(ember::detail::str_cat(op, ": target ", e.index, " is out of bounds for ", e.size,
                                         " classes", when));
    default:
      throw Error(ember::detail::str_cat(op, ": index ", e.index, " is out of bounds for dimension ", e.dim,
                                         " with size ", e.size, when));
  }
}

}  // namespace ember::cuda
