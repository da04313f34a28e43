#pragma once

// Files the data-format tests write for themselves, in a fresh temp folder per test.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ember/core/tensor.h"
#include "test_util.h"

namespace ember::testing {

using Bytes = std::vector<uint8_t>;

void write_bytes(const std::string& path, const Bytes& bytes);

// An IDX file: magic number 0x0000TTDD (TT = `type`, DD = sizes.size()), the sizes big-endian,
// then `data`.
Bytes idx_bytes(const std::vector<uint32_t>& sizes, const Bytes& data, uint8_t type = 0x08);

// n bytes 0, 1, 2, ... modulo 251 (a prime, so rows of 28 do not repeat).
Bytes pattern(size_t n, uint8_t start = 0);

// A uint8 tensor's values in C order.
Bytes bytes_of(const Tensor& t);

}  // namespace ember::testing
