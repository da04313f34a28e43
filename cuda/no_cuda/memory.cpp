// The memory API of a build without CUDA: nothing is pinned or cached; stats throw.
#include "ember/core/allocation_context.h"
#include "ember/cuda/allocator_config.h"
#include "ember/cuda/caching_allocator.h"
#include "ember/cuda/host_allocator.h"
#include "ember/cuda/no_cuda/no_cuda.h"

namespace ember::cuda {

size_t memory_allocated(int) { detail::throw_no_cuda("memory_allocated"); }
size_t max_memory_allocated(int) { detail::throw_no_cuda("max_memory_allocated"); }
size_t memory_reserved(int) { detail::throw_no_cuda("memory_reserved"); }
size_t max_memory_reserved(int) { detail::throw_no_cuda("max_memory_reserved"); }
void reset_peak_memory_stats(int) { detail::throw_no_cuda("reset_peak_memory_stats"); }
void reset_accumulated_memory_stats(int) { detail::throw_no_cuda("reset_accumulated_memory_stats"); }
std::map<std::string, int64_t> memory_stats(int) { detail::throw_no_cuda("memory_stats"); }
std::string memory_summary(int, bool) { detail::throw_no_cuda("memory_summary"); }
void set_per_process_memory_fraction(double, int) {
  detail::throw_no_cuda("set_per_process_memory_fraction");
}
void empty_cache() {}
std::string memory_snapshot(int) { detail::throw_no_cuda("memory_snapshot"); }
// CPU kernels and modules name themselves too; there is nothing to snapshot.
void record_memory_history(bool enabled) { ember::detail::g_record_allocation_context.store(enabled); }
// Checked as a CUDA build checks them; there is no allocator to give them to.
void set_allocator_settings(const std::string& settings) {
  detail::parse_allocator_config(settings, "set_allocator_settings");
}

bool is_pinned(const void*) { return false; }
void host_empty_cache() {}

}  // namespace ember::cuda
