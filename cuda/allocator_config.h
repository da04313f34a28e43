#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

// The CUDA caching allocator's settings (PyTorch's PYTORCH_CUDA_ALLOC_CONF), from the environment
// variable EMBER_CUDA_ALLOC_CONF when the allocator starts, or cuda::set_allocator_settings
// (cuda/caching_allocator.h). The form is
// PyTorch's, "key:value" pairs separated by commas:
//   max_split_size_mb:N            blocks of N MiB or more are never split, and a request below N
//                                  MiB never takes one (against fragmentation); N > 20
//   garbage_collection_threshold:T once reserved memory passes T (0 < T < 1) of the memory the
//                                  allocator may use (the GPU's, or set_per_process_memory_fraction's
//                                  share), a request that needs a new segment first gives the
//                                  least recently used cached segments back to CUDA
//   expandable_segments:False      accepted; True is refused (ember has no expandable segments)
//   backend:native                 accepted; cudaMallocAsync is refused
// No CUDA types here: a build without CUDA parses the same (and has no allocator to set).
namespace ember::cuda {

struct AllocatorConfig {
  size_t max_split_size = SIZE_MAX;         // bytes; SIZE_MAX: blocks of any size split
  double garbage_collection_threshold = 0;  // 0: off
};

namespace detail {
// `settings` in EMBER_CUDA_ALLOC_CONF's form; errors name `origin` (the variable or the call).
AllocatorConfig parse_allocator_config(std::string_view settings, const char* origin);
}  // namespace detail

}  // namespace ember::cuda
