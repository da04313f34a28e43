#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

namespace ember {

// How autocast treats an op's floating inputs (the policy table of DESIGN.md).
enum class AutocastPolicy : int8_t {
  None,            // runs in the inputs' dtype (views, indexing, elementwise of one input)
  LowerPrecision,  // matmul, linear, conv, bmm, attention: cast to the autocast dtype
  Float32,         // softmax, norms, losses, exp/log, reductions: cast up to float32
  Promote,         // cat, stack, mixed binary ops: cast to the widest input dtype
};

// The declaration of one op: what the tests, autograd and autocast know about it.
struct OpSchema {
  std::string_view name;
  AutocastPolicy autocast;
  bool differentiable;
};

// All ops, in registration order. Each op family registers its table once at load time.
const std::vector<OpSchema>& registered_ops();
const OpSchema* find_op(std::string_view name);

struct OpRegistrar {
  OpRegistrar(std::initializer_list<OpSchema> ops);
};

}  // namespace ember
