#include <cmath>

#include "test_util.h"

namespace ember::testing {

// Reference values: math constants and closed forms (Phi(1) = 0.8413447460685429 from the
// standard normal table; softplus(0) = ln 2; tanh-GELU(1) = 0.5 * (1 + tanh(sqrt(2/pi) * 1.044715))).
TEST(Elementwise, ValuesMatchClosedForms) {
  Tensor one = tensor({1.0}, kFloat64);
  EXPECT_NEAR(exp(one).item<double>(), M_E, 1e-15);
  EXPECT_NEAR(gelu(one).item<double>(), 0.8413447460685429, 1e-15);
  EXPECT_NEAR(gelu(one, "tanh").item<double>(), 0.5 * (1 + std::tanh(std::sqrt(2 / M_PI) * 1.044715)), 1e-15);
  EXPECT_NEAR(softplus(tensor({0.0}, kFloat64)).item<double>(), M_LN2, 1e-15);
  EXPECT_NEAR(softplus(tensor({30.0}, kFloat64)).item<double>(), 30.0, 0);  // linear above threshold
  EXPECT_NEAR(silu(one).item<double>(), 1 / (1 + std::exp(-1.0)), 1e-15);
  EXPECT_NEAR(sigmoid(tensor({-800.0}, kFloat64)).item<double>(), 0, 0);  // no NaN for large |x|
  EXPECT_CLOSE(leaky_relu(tensor({-2.f, 3.f}), 0.1), tensor({-0.2f, 3.f}));
  EXPECT_CLOSE(clamp(tensor({-2, 0, 5}), 0, 3), tensor({0, 0, 3}));
  EXPECT_CLOSE(clamp(tensor({-2.f, 5.f}), std::nullopt, 1.5), tensor({-2.f, 1.5f}));
  EXPECT_CLOSE(clamp(tensor({-2.f, 5.f}), 2, 1), tensor({1.f, 1.f}));  // min > max: all max
  EXPECT_CLOSE(sign(tensor({-3, 0, 2})), tensor({-1, 0, 1}));
  EXPECT_CLOSE(abs(tensor({-3, 4}, kInt32)), tensor({3, 4}, kInt32));
  EXPECT_CLOSE(pow(tensor({2, 3}), 3), tensor({8, 27}));
  EXPECT_CLOSE(pow(2, tensor({0.5f})), tensor({static_cast<float>(std::sqrt(2.0))}));
  EXPECT_CLOSE(rsqrt(tensor({4.f})), tensor({0.5f}));
}

TEST(Elementwise, GeluBackwardMatchesPyTorch) {
  // torch.ops.aten.gelu_backward(g, x[, approximate='tanh']) in float64 with
  // x = [-3, -0.5, 0, 0.7, 2.5], g = [1, 2, -1, 0.5, 3].
  Tensor x = tensor({-3.0, -0.5, 0.0, 0.7, 2.5}, kFloat64), g = tensor({1.0, 2.0, -1.0, 0.5, 3.0}, kFloat64);
  EXPECT_CLOSE(gelu_backward(g, x), tensor({-0.01194564720418392, 0.26500975068767424, -0.5,
                                            0.48830705056682994, 3.1128332577244353},
                                           kFloat64));
  EXPECT_CLOSE(gelu_backward(g, x, "tanh"), tensor({-0.011584166630969648, 0.2652601929307153, -0.5,
                                                    0.488178609328052, 3.1138547286379983},
                                                   kFloat64));
  // It is gelu's backward: the same as autograd through gelu.
  Tensor xr = x.detach().requires_grad_();
  EXPECT_CLOSE(autograd::grad({gelu(xr)}, {xr}, {g})[0], gelu_backward(g, x));
}

TEST(Elementwise, ThresholdBackwardMatchesPyTorch) {
  // torch.ops.aten.threshold_backward(g, x, 0.5): 0 where x <= 0.5 (the threshold itself too), g
  // elsewhere, and where x is NaN.
  Tensor x = tensor({-1.0f, 0.5f, 0.75f, NAN, 2.0f}), g = tensor({1.0f, 2.0f, -3.0f, 4.0f, 5.0f});
  EXPECT_CLOSE(threshold_backward(g, x, 0.5), tensor({0.0f, 0.0f, -3.0f, 4.0f, 5.0f}));
  // relu's backward is it, with its output and threshold 0, in bf16 too.
  for (ScalarType dt : {kFloat32, kBFloat16}) {
    Tensor xr = tensor({-1.0f, 0.0f, 0.5f, 3.0f}).to(dt).requires_grad_();
    Tensor gy = tensor({1.0f, 2.0f, 3.0f, 4.0f}).to(dt);
    Tensor gx = autograd::grad({relu(xr)}, {xr}, {gy})[0];
    EXPECT_EQ(gx.dtype(), dt);
    EXPECT_CLOSE(gx, threshold_backward(gy, relu(xr.detach()), 0));
    EXPECT_CLOSE(gx.to(kFloat32), tensor({0.0f, 0.0f, 3.0f, 4.0f}));
  }
  EXPECT_EMBER_ERROR(threshold_backward(ones({2}, kInt64), ones({2}, kInt64), 0), "threshold_backward",
                     "int64");
}

TEST(Elementwise, RoundingMatchesPyTorch) {
  // torch.round takes halves to even; floor, ceil and trunc as C's. NaN and inf pass, -0.0 stays.
  Tensor x = tensor({-2.5, -1.5, -0.7, -0.5, 0.5, 1.5, 2.5, 2.7, INFINITY, NAN});
  EXPECT_CLOSE(round(x), tensor({-2.0, -2.0, -1.0, -0.0, 0.0, 2.0, 2.0, 3.0, INFINITY, NAN}));
  EXPECT_CLOSE(floor(x), tensor({-3.0, -2.0, -1.0, -1.0, 0.0, 1.0, 2.0, 2.0, INFINITY, NAN}));
  EXPECT_CLOSE(ceil(x), tensor({-2.0, -1.0, -0.0, -0.0, 1.0, 2.0, 3.0, 3.0, INFINITY, NAN}));
  EXPECT_CLOSE(x.trunc(), tensor({-2.0, -1.0, -0.0, -0.0, 0.0, 1.0, 2.0, 2.0, INFINITY, NAN}));
  EXPECT_TRUE(std::signbit(round(tensor({-0.5}))[0].item<double>()));
  // Integers are whole already: the same values, in their dtype.
  Tensor i = tensor({-3, 0, 7});
  for (const Tensor& r : {i.floor(), i.ceil(), i.round(), i.trunc()}) {
    EXPECT_EQ(r.dtype(), kInt64);
    EXPECT_TRUE(r.equal(i));
  }
  // In bf16 the input's value (rounded to bf16) is rounded.
  EXPECT_CLOSE(tensor({2.5f, 3.5f}).to(kBFloat16).round().to(kFloat32), tensor({2.0f, 4.0f}));
  // The gradient is zero, as PyTorch's.
  Tensor xr = tensor({0.3, 1.7}).requires_grad_();
  EXPECT_TRUE(
      autograd::grad({round(xr) + floor(xr) + ceil(xr) + trunc(xr)}, {xr}, {ones({2}, kFloat64)})[0].equal(
          zeros({2}, kFloat64)));
}

TEST(Elementwise, NaNPropagates) {
  Tensor n = tensor({NAN, 1.0});
  EXPECT_TRUE(std::isnan(maximum(n, tensor({0.0, 0.0}))[0].item<double>()));
  EXPECT_TRUE(std::isnan(minimum(tensor({0.0, 0.0}), n)[0].item<double>()));
  EXPECT_TRUE(std::isnan(relu(n)[0].item<double>()));
  EXPECT_TRUE(std::isnan(clamp(n, 0, 1)[0].item<double>()));
  EXPECT_FALSE((n == n)[0].item<bool>());
}

TEST(Elementwise, BroadcastingAndScalars) {
  Tensor a = arange(3).view({3, 1}).to(kFloat32);
  Tensor b = arange(4).to(kFloat32);
  Tensor c = a * 10 + b;
  EXPECT_EQ(c.sizes().vec(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(c[2][3].item<float>(), 23.0f);
  EXPECT_CLOSE(10 - b, tensor({10.f, 9.f, 8.f, 7.f}));
  EXPECT_CLOSE(1 / tensor({2.f, 4.f}), tensor({0.5f, 0.25f}));
  EXPECT_CLOSE(add(tensor({1, 2}), tensor({10, 20}), 3), tensor({31, 62}));
  EXPECT_CLOSE(sub(tensor({1.f}), tensor({1.f}), 0.5), tensor({0.5f}));
  EXPECT_EQ((tensor({250}, kUInt8) + 10)[0].item<int64_t>(), 4);  // wraps like uint8
  EXPECT_CLOSE(where(tensor({true, false}), tensor({1, 2}), tensor({10.5, 20.5})), tensor({1.0f, 20.5f}));
  EXPECT_CLOSE(where(tensor({true, false}), tensor({1.f, 2.f}), 0.0), tensor({1.f, 0.f}));
  EXPECT_CLOSE(masked_fill(zeros({2, 2}), tensor({true, false}), 5), tensor({{5.f, 0.f}, {5.f, 0.f}}));
  EXPECT_CLOSE(logical_xor(tensor({1, 0, 2}), tensor({1, 1, 0})), tensor({false, true, true}));
  EXPECT_CLOSE(!tensor({true, false}), tensor({false, true}));
  EXPECT_CLOSE(tensor({1.5f, 2.f}) > 1.75, tensor({false, true}));
}

TEST(Elementwise, LowPrecisionRoundsOnce) {
  // bf16(1) + bf16(2^-8): computed in float then rounded once: ties to even gives 1.
  Tensor x = tensor({1.0}).to(kBFloat16) + tensor({0x1p-8}).to(kBFloat16);
  EXPECT_EQ(x.dtype(), kBFloat16);
  EXPECT_EQ(x.item<double>(), 1.0);
  Tensor h = exp(tensor({1.0}).to(kFloat16));
  EXPECT_EQ(h.item<double>(), static_cast<double>(static_cast<float>(Half(static_cast<float>(M_E)))));
}

TEST(Elementwise, InPlaceOpsWriteThroughViewsAndBumpTheVersion) {
  Tensor x = zeros({2, 3});
  Tensor row = x[1];
  uint32_t v = x._version();
  row.add_(tensor({1.f, 2.f, 3.f}));
  row *= 2;
  x.t().sub_(1);
  EXPECT_CLOSE(x, tensor({{-1.f, -1.f, -1.f}, {1.f, 3.f, 5.f}}));
  EXPECT_GT(x._version(), v);
  Tensor y = tensor({-1.f, 4.f});
  y.relu_().sqrt_();
  EXPECT_CLOSE(y, tensor({0.f, 2.f}));
  Tensor i = tensor({1, 2});
  i += 3;
  EXPECT_CLOSE(i, tensor({4, 5}));
  Tensor h = ones({2}, kFloat16);
  h.mul_(tensor({2.0, 3.0}, kFloat64));  // float64 operand cast into float16
  EXPECT_CLOSE(h, tensor({2.0, 3.0}).to(kFloat16));
  Tensor m = zeros({2, 2});
  m.masked_fill_(tensor({{true, false}, {false, true}}), 1);
  EXPECT_CLOSE(m, eye(2));
  Tensor c = tensor({-5.f, 5.f});
  c.clamp_(-1, 1);
  EXPECT_CLOSE(c, tensor({-1.f, 1.f}));
}

TEST(Elementwise, ErrorsNameTheOpShapesAndDtypes) {
  EXPECT_EMBER_ERROR(zeros({2, 3}) + zeros({4}), "add", "[2, 3]", "[4]", "cannot be broadcast");
  EXPECT_EMBER_ERROR(zeros({2}).add_(zeros({2, 2})), "add_", "output with shape [2]", "[2, 2]");
  EXPECT_EMBER_ERROR(zeros({2}, kInt64).add_(zeros({2})), "add_", "float32", "int64");
  EXPECT_EMBER_ERROR(zeros({2}, kInt64).exp_(), "exp_", "float32", "int64");
  EXPECT_EMBER_ERROR(zeros({2}, kInt64).div_(2), "div_", "float32", "int64");
  EXPECT_EMBER_ERROR(add(ones({2}, kInt64), ones({2}, kInt64), 0.5), "add", "alpha");
  EXPECT_EMBER_ERROR(ones({2}, kBool) - ones({2}, kBool), "sub", "bool");
  EXPECT_EMBER_ERROR(-ones({2}, kBool), "neg", "bool");
  EXPECT_EMBER_ERROR(pow(ones({2}, kInt64), -1), "pow", "negative");
  EXPECT_EMBER_ERROR(where(ones({2}), ones({2}), ones({2})), "where", "bool");
  EXPECT_EMBER_ERROR(masked_fill(ones({2}), ones({2}), 1), "masked_fill", "bool");
  EXPECT_EMBER_ERROR(ones({2}).masked_fill_(ones({2, 2}, kBool), 1), "masked_fill_", "[2, 2]");
  EXPECT_EMBER_ERROR(clamp(ones({2}), std::nullopt, std::nullopt), "clamp", "min", "max");
  EXPECT_EMBER_ERROR(gelu(ones({2}), "fast"), "gelu", "approximate", "fast");
  EXPECT_EMBER_ERROR(gelu_backward(ones({2}), ones({2}), "fast"), "gelu_backward", "approximate", "fast");
  EXPECT_EMBER_ERROR(gelu_backward(ones({2}, kInt64), ones({2}, kInt64)), "gelu_backward", "int64");
  EXPECT_EMBER_ERROR(gelu_backward(ones({2}), ones({3})), "gelu_backward", "[2]", "[3]");
  EXPECT_EMBER_ERROR(ones({3}).expand({2, 3}).add_(1), "add_", "memory location");
  EXPECT_EMBER_ERROR(ones({3}).expand({2, 3}).fill_(1), "fill_", "memory location");
}

}  // namespace ember::testing
