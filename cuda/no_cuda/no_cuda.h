#pragma once

#include "ember/core/error.h"

namespace ember::cuda::detail {

[[noreturn]] inline void throw_no_cuda(const char* op) {
  throw Error(std::string(op) + ": ember was built without CUDA");
}

}  // namespace ember::cuda::detail
