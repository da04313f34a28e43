#pragma once

// batch_norm_relu's backward without a residual recomputes the ReLU's mask from x; with a zero
// residual it takes the mask from the saved output (threshold_backward). The CPU and the GPU
// tests run both ways on inputs whose outputs sit at and near zero and require the same
// gradients: bit for bit on the GPU; on the CPU within the dtype's default tolerance, as Eigen
// may add a masked copy in another order than a mapped input (a wrong mask is off by O(1)).
#include <vector>

#include "ember/autograd/engine.h"
#include "ember/core/ops/normalization.h"
#include "test_util.h"

namespace ember::testing {

// Gradients of x, weight and bias, one way.
inline std::vector<Tensor> batch_norm_relu_grads(ScalarType dt, Device d, bool training, bool channels_last,
                                                 bool zero_residual) {
  manual_seed(11);
  // Channel 0: +-v pairs and zeros, a mean of exactly 0 on the CPU, so weight 1 and bias 0 put
  // outputs at exactly 0. Channels 1 and 2: weights so small that positive outputs round to zero
  // in float16 (channel 1) and in bfloat16 (channel 2). The rest: ordinary values.
  Tensor v = randn({4, 6, 2, 5});
  Tensor x = cat({v, -v, zeros({4, 6, 1, 5})}, 2);
  Tensor w = tensor({1.0f, 1e-9f, 1e-41f, 0.5f, 2.0f, 1.0f}),
         b = tensor({0.0f, 0.0f, 0.0f, 0.1f, -0.3f, 0.0f});
  Tensor gy = randn(x.sizes());
  x = x.to(d, dt), gy = gy.to(d, dt), w = w.to(d), b = b.to(d);
  if (channels_last)
    x = x.contiguous(MemoryFormat::ChannelsLast), gy = gy.contiguous(MemoryFormat::ChannelsLast);
  for (Tensor* t : {&x, &w, &b}) t->requires_grad_();
  Tensor rm = zeros({6}, TensorOptions().device(d)), rv = ones({6}, TensorOptions().device(d));
  Tensor y = batch_norm_relu(x, rm, rv, w, b, training, 0.1, 1e-5, zero_residual ? zeros_like(x) : Tensor());
  return autograd::grad({y}, {x, w, b}, {gy});
}

inline void expect_recomputed_relu_mask_is_the_saved_one(Device d) {
  for (ScalarType dt : {kFloat32, kFloat64, kFloat16, kBFloat16})
    for (bool training : {true, false})
      for (bool cl : {false, true}) {
        SCOPED_TRACE(::testing::Message() << dt << " training " << training << " channels-last " << cl);
        std::vector<Tensor> recomputed = batch_norm_relu_grads(dt, d, training, cl, false);
        std::vector<Tensor> saved = batch_norm_relu_grads(dt, d, training, cl, true);
        for (size_t i = 0; i < saved.size(); ++i)
          EXPECT_TRUE(d.is_cuda() ? recomputed[i].equal(saved[i]) : assert_close(recomputed[i], saved[i]))
              << "gradient " << i;
      }
}

}  // namespace ember::testing
