#pragma once

// What the trainer tests read back from a run: its metrics file and its checkpoints.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "ember/ember.h"

namespace ember::testing {

// Field `key` of every record of a metrics file (JSON lines written by examples/common), in order.
inline std::vector<double> metric(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::vector<double> out;
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find("\"" + key + "\": ");
    EXPECT_NE(at, std::string::npos) << key << " in " << line;
    if (at != std::string::npos) out.push_back(std::stod(line.substr(at + key.size() + 4)));
  }
  return out;
}

// The same dtype, shape and bytes.
inline bool bit_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || !a.sizes().equals(b.sizes())) return false;
  Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

}  // namespace ember::testing
