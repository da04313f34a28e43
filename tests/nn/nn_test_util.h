#pragma once

// Helpers the nn tests share. Reference numbers come from PyTorch with the same deterministic
// tensors: wave(shape, a, b) is, in Python,
//   torch.sin(torch.arange(n, dtype=torch.float64) * a + b).reshape(shape)

#include <functional>
#include <string>
#include <vector>

#include "test_util.h"

namespace ember::testing {

inline Tensor wave(IntArrayRef shape, double a = 0.37, double b = 0.1) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return (arange(n, kFloat64) * a + b).sin().reshape(shape);
}

inline Tensor f64(const NestedList& values) { return tensor(values, kFloat64); }

// Writes `value` into a parameter or buffer (as torch.no_grad(): p.copy_(value)).
inline void assign(const Tensor& p, const Tensor& value) {
  NoGradGuard no_grad;
  p.copy_(value);
}

// Sets m's parameters from wave(), as the PyTorch side of the reference numbers does, in float64
// and eval mode:
//   for i, (name, p) in enumerate(m.named_parameters()):
//     p.copy_(wave(list(p.shape), 0.3 + 0.1 * i, 0.2 * i) * 0.5)
inline void fill_with_waves(nn::Module& m) {
  m.to(kFloat64);
  int i = 0;
  for (const auto& [name, p] : m.named_parameters()) {
    assign(p, wave(p.sizes(), 0.3 + 0.1 * i, 0.2 * i) * 0.5);
    ++i;
  }
  m.eval();
}

// The parameters' names, in order.
inline std::vector<std::string> keys_of(const OrderedDict<Tensor>& d) { return d.keys(); }

// gradcheck of fn(x) with respect to x and every parameter of `m` (all float64).
inline void gradcheck_module(nn::Module& m, const std::function<Tensor(const Tensor&)>& fn, const Tensor& x) {
  std::vector<Tensor> inputs{x.detach().clone().requires_grad_()};
  for (const Tensor& p : m.parameters()) inputs.push_back(p);
  EXPECT_TRUE(autograd::gradcheck([&](const std::vector<Tensor>& in) { return fn(in[0]); }, inputs));
}

}  // namespace ember::testing
