#include "data_files.h"

#include <cstdlib>
#include <fstream>

#include "ember/core/error.h"

namespace ember::testing {

void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  EMBER_CHECK(f.good(), "write_bytes: cannot write ", path);
}

Bytes idx_bytes(const std::vector<uint32_t>& sizes, const Bytes& data, uint8_t type) {
  Bytes out = {0, 0, type, static_cast<uint8_t>(sizes.size())};
  for (uint32_t s : sizes)
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(s >> shift));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Bytes pattern(size_t n, uint8_t start) {
  Bytes out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>((start + i) % 251);
  return out;
}

Bytes bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  const uint8_t* p = c.data_ptr<uint8_t>();
  return Bytes(p, p + c.numel());
}

}  // namespace ember::testing
