// The profiler's device timing on CUDA: a pair of timing events per kernel call, recorded on the
// current stream, taken from a per-device pool that later sessions reuse (events are never
// destroyed: the pool lives as long as the process, and the CUDA runtime may be gone at exit).
#include <vector>

#include "ember/core/profiler.h"
#include "ember/cuda/check.h"
#include "ember/cuda/device.h"
#include "ember/cuda/stream.h"

namespace ember::cuda {
namespace {

struct EventPair {
  cudaEvent_t start = nullptr, end = nullptr;
};

struct Slot {
  int device;
  size_t pair;
  bool ended;
};

// Serialized by the profiler's lock.
struct EventPool {
  std::vector<std::vector<EventPair>> pairs;  // by device
  std::vector<size_t> used;                   // by device: pairs handed out this session
  std::vector<Slot> slots;
};
EventPool g_pool;

bool available() { return is_available(); }

int64_t start() {
  int device = current_device();
  if (g_pool.pairs.size() <= static_cast<size_t>(device)) {
    g_pool.pairs.resize(static_cast<size_t>(device) + 1);
    g_pool.used.resize(static_cast<size_t>(device) + 1, 0);
  }
  std::vector<EventPair>& pairs = g_pool.pairs[static_cast<size_t>(device)];
  size_t& used = g_pool.used[static_cast<size_t>(device)];
  if (used == pairs.size()) {
    EventPair p;
    EMBER_CUDA_CHECK(cudaEventCreate(&p.start));
    EMBER_CUDA_CHECK(cudaEventCreate(&p.end));
    pairs.push_back(p);
  }
  EMBER_CUDA_CHECK(cudaEventRecord(pairs[used].start, current_stream(device)));
  g_pool.slots.push_back({device, used++, false});
  return static_cast<int64_t>(g_pool.slots.size()) - 1;
}

// Runs in the kernel's range destructor, so it reports failure by leaving the slot unended.
void end(int64_t slot) {
  Slot& s = g_pool.slots[static_cast<size_t>(slot)];
  cudaError_t err =
      cudaEventRecord(g_pool.pairs[static_cast<size_t>(s.device)][s.pair].end, current_stream(s.device));
  if (err == cudaSuccess)
    s.ended = true;
  else
    cudaGetLastError();
}

std::vector<double> collect() {
  std::vector<Slot> slots;
  slots.swap(g_pool.slots);
  for (size_t d = 0; d < g_pool.used.size(); ++d) {
    if (g_pool.used[d] == 0) continue;
    DeviceGuard guard(static_cast<int>(d));
    EMBER_CUDA_CHECK(cudaDeviceSynchronize());
    g_pool.used[d] = 0;
  }
  std::vector<double> ms(slots.size(), 0.0);
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!slots[i].ended) continue;
    const EventPair& p = g_pool.pairs[static_cast<size_t>(slots[i].device)][slots[i].pair];
    float elapsed = 0;
    EMBER_CUDA_CHECK(cudaEventElapsedTime(&elapsed, p.start, p.end));
    ms[i] = elapsed;
  }
  return ms;
}

constexpr profiler::detail::DeviceTimer kCudaTimer{&available, &start, &end, &collect};

struct Registrar {
  Registrar() { profiler::detail::set_device_timer(&kCudaTimer); }
} g_registrar;

}  // namespace
}  // namespace ember::cuda
