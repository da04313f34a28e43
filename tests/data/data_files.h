#pragma once

// Files the data-format tests write for themselves, in a fresh temp folder per test.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ember/core/tensor.h"

namespace ember::testing {

using Bytes = std::vector<uint8_t>;

// A fresh folder under the system's temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // path/name, creating the folders on the way.
  std::string file(const std::string& name) const;

 private:
  std::string path_;
};

void write_bytes(const std::string& path, const Bytes& bytes);

// An IDX file: magic number 0x0000TTDD (TT = `type`, DD = sizes.size()), the sizes big-endian,
// then `data`.
Bytes idx_bytes(const std::vector<uint32_t>& sizes, const Bytes& data, uint8_t type = 0x08);

// n bytes 0, 1, 2, ... modulo 251 (a prime, so rows of 28 do not repeat).
Bytes pattern(size_t n, uint8_t start = 0);

// A uint8 tensor's values in C order.
Bytes bytes_of(const Tensor& t);

}  // namespace ember::testing
