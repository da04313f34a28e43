#include "ember/cuda/allocator_config.h"

#include <cctype>
#include <charconv>
#include <string>

#include "ember/core/error.h"

namespace ember::cuda::detail {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
// A block below a large segment's 20 MiB is split anyway; PyTorch's lower bound too.
constexpr size_t kMinMaxSplitMiB = 20;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

AllocatorConfig parse_allocator_config(std::string_view settings, const char* origin) {
  AllocatorConfig c;
  while (!trim(settings).empty()) {
    size_t comma = settings.find(',');
    std::string_view item = trim(settings.substr(0, comma));
    settings = comma == std::string_view::npos ? std::string_view() : settings.substr(comma + 1);
    if (item.empty()) continue;
    size_t colon = item.find(':');
    EMBER_CHECK(colon != std::string_view::npos, origin, ": \"", item, "\" is not key:value");
    const std::string_view key = trim(item.substr(0, colon)), value = trim(item.substr(colon + 1));
    if (key == "max_split_size_mb") {
      size_t mib = 0;
      auto [end, err] = std::from_chars(value.data(), value.data() + value.size(), mib);
      EMBER_CHECK(err == std::errc() && end == value.data() + value.size(), origin, ": max_split_size_mb \"",
                  value, "\" is not a whole number of MiB");
      EMBER_CHECK(mib > kMinMaxSplitMiB, origin, ": max_split_size_mb ", mib,
                  " is too small, it must be above ", kMinMaxSplitMiB);
      c.max_split_size = mib > SIZE_MAX / kMiB ? SIZE_MAX : mib * kMiB;
    } else if (key == "garbage_collection_threshold") {
      double t = 0;
      auto [end, err] = std::from_chars(value.data(), value.data() + value.size(), t);
      EMBER_CHECK(err == std::errc() && end == value.data() + value.size() && t > 0 && t < 1, origin,
                  ": garbage_collection_threshold \"", value, "\" must be a number between 0 and 1");
      c.garbage_collection_threshold = t;
    } else if (key == "expandable_segments") {
      EMBER_CHECK(value == "False" || value == "false", origin, ": expandable_segments:", value,
                  " is not supported by ember's allocator (False is accepted)");
    } else if (key == "backend") {
      EMBER_CHECK(value == "native", origin, ": backend:", value,
                  " is not supported by ember (its allocator is the native one)");
    } else {
      EMBER_CHECK(
          false, origin, ": unknown setting \"", key,
          "\" (ember knows max_split_size_mb, garbage_collection_threshold, expandable_segments, backend)");
    }
  }
  return c;
}

}  // namespace ember::cuda::detail
