// EMBER_CUDA_ALLOC_CONF's form (cuda/allocator_config.h), parsed the same with or without CUDA;
// what each setting does to the allocator is tested on the GPU (tests/cuda/test_allocator.cpp).
#include <ember/cuda/allocator_config.h>
#include <ember/cuda/caching_allocator.h>
#include <ember/cuda/device.h>

#include "test_util.h"

namespace ember::testing {
namespace {

using cuda::detail::parse_allocator_config;

TEST(AllocatorConfig, ParsesPyTorchsForm) {
  cuda::AllocatorConfig d = parse_allocator_config("", "X");
  EXPECT_EQ(d.max_split_size, SIZE_MAX);
  EXPECT_EQ(d.garbage_collection_threshold, 0);
  cuda::AllocatorConfig c = parse_allocator_config(
      " max_split_size_mb:128, garbage_collection_threshold: 0.6,expandable_segments:False,backend:native,",
      "X");
  EXPECT_EQ(c.max_split_size, size_t{128} << 20);
  EXPECT_DOUBLE_EQ(c.garbage_collection_threshold, 0.6);
}

TEST(AllocatorConfig, ErrorsNameTheVariableAndTheSetting) {
  const char* v = "EMBER_CUDA_ALLOC_CONF";
  EXPECT_EMBER_ERROR(parse_allocator_config("max_split_size_mb", v),
                     "EMBER_CUDA_ALLOC_CONF: \"max_split_size_mb\"", "not key:value");
  EXPECT_EMBER_ERROR(parse_allocator_config("max_split_size_mb:20", v), "max_split_size_mb 20 is too small",
                     "above 20");
  EXPECT_EMBER_ERROR(parse_allocator_config("max_split_size_mb:1.5", v), "\"1.5\" is not a whole number");
  EXPECT_EMBER_ERROR(parse_allocator_config("garbage_collection_threshold:1", v),
                     "garbage_collection_threshold", "between 0 and 1");
  EXPECT_EMBER_ERROR(parse_allocator_config("garbage_collection_threshold:x", v), "\"x\"");
  EXPECT_EMBER_ERROR(parse_allocator_config("expandable_segments:True", v), "expandable_segments:True",
                     "not supported");
  EXPECT_EMBER_ERROR(parse_allocator_config("backend:cudaMallocAsync", v), "backend:cudaMallocAsync");
  EXPECT_EMBER_ERROR(parse_allocator_config("roundup_power2_divisions:4", v),
                     "unknown setting \"roundup_power2_divisions\"", "max_split_size_mb");
}

TEST(AllocatorConfig, SetAllocatorSettingsChecksWithoutAGpu) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is present (the CUDA suite sets them)";
  EXPECT_EMBER_ERROR(cuda::set_allocator_settings("max_split_size_mb:2"), "set_allocator_settings",
                     "too small");
  cuda::set_allocator_settings("max_split_size_mb:64");  // nothing to set, nothing broken
}

}  // namespace
}  // namespace ember::testing
