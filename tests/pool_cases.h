#pragma once

// The pooling calls that the channels-last tests run on the CPU and the GPU, each on an NHWC
// input against the same call on its NCHW copy.
#include <cmath>
#include <functional>
#include <initializer_list>

#include "ember/autograd/engine.h"
#include "ember/core/ops/pooling.h"
#include "test_util.h"

namespace ember::testing {

using Pool = std::function<Tensor(const Tensor&)>;

// A max pool's values and its indices are separate cases; max pools are exact, with integer
// dtypes too.
struct PoolCase {
  const char* name;
  Pool fn;
  bool max;  // integer dtypes too
};

inline const PoolCase kPoolCases[] = {
    {"max_pool2d_with_indices values",
     [](const Tensor& x) {
       return std::get<0>(max_pool2d_with_indices(x, {3, 2}, {2, 1}, {1, 1}, {1, 2}, true));
     },
     true},
    {"max_pool2d_with_indices indices",
     [](const Tensor& x) {
       return std::get<1>(max_pool2d_with_indices(x, {3, 2}, {2, 1}, {1, 1}, {1, 2}, true));
     },
     true},
    {"max_pool2d 2", [](const Tensor& x) { return max_pool2d(x, 2); }, true},
    {"max_pool2d 3, 2, 1, dilation 2", [](const Tensor& x) { return max_pool2d(x, 3, 2, 1, 2); }, true},
    {"avg_pool2d ceil_mode, no pad count",
     [](const Tensor& x) { return avg_pool2d(x, 3, 2, 1, true, false); }, false},
    {"avg_pool2d pad count",
     [](const Tensor& x) {
       return avg_pool2d(x, {2, 3}, {1, 2}, {1, 1});
     },
     false},
    {"avg_pool2d divisor 3", [](const Tensor& x) { return avg_pool2d(x, 2, 2, 0, false, true, 3); }, false},
    {"adaptive_avg_pool2d 4x3",
     [](const Tensor& x) {
       return adaptive_avg_pool2d(x, {4, 3});
     },
     false},
    {"adaptive_avg_pool2d global", [](const Tensor& x) { return adaptive_avg_pool2d(x, 1); }, false},
    {"adaptive_avg_pool2d 10x9",
     [](const Tensor& x) {
       return adaptive_avg_pool2d(x, {10, 9});
     },
     false},
};

// f(c, x) for each case and input: random values of each shape in the floating dtypes, with two
// NaNs for a max pool, and in int32 and uint8 for a max pool.
template <class F>
void for_each_pool_input(std::initializer_list<DimVector> shapes, F&& f) {
  for (const DimVector& shape : shapes)
    for (const PoolCase& c : kPoolCases) {
      std::vector<ScalarType> dtypes = {kFloat32, kFloat64, kFloat16, kBFloat16};
      if (c.max) dtypes.push_back(kInt32), dtypes.push_back(kUInt8);
      for (ScalarType dt : dtypes) {
        SCOPED_TRACE(::testing::Message() << c.name << " " << IntArrayRef(shape) << " " << dt);
        Tensor x = is_floating_point(dt) ? random_tensor(shape, dt) : randint(0, 100, shape).to(dt);
        if (c.max && is_floating_point(dt)) x.view({-1}).narrow(0, 11, 2).fill_(std::nan(""));
        f(c, x);
      }
    }
}

// Max pools whose windows overlap, as max pooling's backward kernel sees them, on inputs with
// ties (a few levels, half clipped to 0, as after a ReLU): the first maximum in window order wins.
inline const std::pair<const char*, Pool> kOverlappingMaxPools[] = {
    {"3, 2, 1 (ResNet's)", [](const Tensor& x) { return max_pool2d(x, 3, 2, 1); }},
    {"2, 1", [](const Tensor& x) { return max_pool2d(x, 2, 1); }},
    {"dilated ceil_mode",
     [](const Tensor& x) {
       return max_pool2d(x, {2, 3}, {2, 1}, {1, 0}, 2, true);
     }},
};

inline Tensor tied_input(IntArrayRef shape, ScalarType dt) { return relu(randint(-3, 4, shape)).to(dt); }

// fn's gradient at x for gy: from max pooling's backward kernel (first order), and from the
// scatter_add formula that create_graph records.
inline std::pair<Tensor, Tensor> max_pool_grads_both_ways(const Pool& fn, const Tensor& x, const Tensor& gy) {
  Tensor a = x.detach().requires_grad_(), b = x.detach().requires_grad_();
  Tensor kernel = autograd::grad({fn(a)}, {a}, {gy})[0];
  Tensor formula = autograd::grad({fn(b)}, {b}, {gy.detach().requires_grad_()}, true)[0];
  return {kernel, formula.detach()};
}

}  // namespace ember::testing
