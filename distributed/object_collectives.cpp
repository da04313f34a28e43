#include "ember/distributed/object_collectives.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "ember/core/factories.h"

namespace ember::distributed {
namespace {

// Where a group's collectives take their tensors: the current GPU for NCCL, else the CPU.
Device device_of(const GroupPtr& group) {
  return get_backend(group) == "nccl" ? Device(kCUDA) : Device(kCPU);
}

// The strings' bytes one after another, each padded to `width` (0: no padding), on `device`.
Tensor pack(const std::vector<std::string>& strings, int64_t width, Device device) {
  int64_t total = 0;
  for (const std::string& s : strings) total += width ? width : static_cast<int64_t>(s.size());
  Tensor bytes = zeros({std::max<int64_t>(total, 1)}, kUInt8);  // no empty collective
  auto* p = bytes.data_ptr<uint8_t>();
  for (const std::string& s : strings) {
    std::memcpy(p, s.data(), s.size());
    p += width ? width : static_cast<int64_t>(s.size());
  }
  return bytes.to(device);
}

// The strings of `sizes` from packed bytes, each `width` apart (0: one after another).
std::vector<std::string> unpack(const Tensor& bytes, const std::vector<int64_t>& sizes, int64_t width) {
  const Tensor host = bytes.cpu();
  const auto* p = reinterpret_cast<const char*>(host.data_ptr<uint8_t>());
  std::vector<std::string> out;
  for (int64_t n : sizes) {
    out.emplace_back(p, static_cast<size_t>(n));
    p += width ? width : n;
  }
  return out;
}

std::vector<int64_t> values_of(const Tensor& t) {
  const Tensor host = t.cpu();
  return {host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel()};
}

}  // namespace

void all_gather_object(std::vector<std::string>& object_list, const std::string& obj, const GroupPtr& group) {
  const int n = get_world_size(group);
  const Device device = device_of(group);
  Tensor sizes = empty({n}, TensorOptions(kInt64).device(device));
  all_gather_into_tensor(sizes, full({1}, static_cast<int64_t>(obj.size()), kInt64).to(device), group);
  const std::vector<int64_t> size_list = values_of(sizes);
  const int64_t width = std::max<int64_t>(*std::max_element(size_list.begin(), size_list.end()), 1);
  Tensor bytes = empty({n * width}, TensorOptions(kUInt8).device(device));
  all_gather_into_tensor(bytes, pack({obj}, width, device), group);
  object_list = unpack(bytes, size_list, width);
}

void broadcast_object_list(std::vector<std::string>& object_list, int src, const GroupPtr& group) {
  const bool root = get_rank() == src;
  const Device device = device_of(group);
  Tensor count = full({1}, root ? static_cast<int64_t>(object_list.size()) : 0, kInt64).to(device);
  broadcast(count, src, group);
  const int64_t n = values_of(count)[0];
  if (n == 0) {
    object_list.clear();
    return;
  }
  Tensor sizes = empty({n}, kInt64);
  if (root)
    for (int64_t i = 0; i < n; ++i)
      sizes.data_ptr<int64_t>()[i] = static_cast<int64_t>(object_list[i].size());
  sizes = sizes.to(device);
  broadcast(sizes, src, group);
  const std::vector<int64_t> size_list = values_of(sizes);
  Tensor bytes =
      root ? pack(object_list, 0, device)
           : empty({std::max<int64_t>(std::accumulate(size_list.begin(), size_list.end(), int64_t{0}), 1)},
                   TensorOptions(kUInt8).device(device));
  broadcast(bytes, src, group);
  if (!root) object_list = unpack(bytes, size_list, 0);
}

}  // namespace ember::distributed
