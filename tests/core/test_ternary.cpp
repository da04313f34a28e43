// addcmul, addcdiv and lerp (core/ops/ternary.h): PyTorch's values, broadcasting, the in-place
// forms and their errors. Gradients: the gradcheck table; CUDA: the op table.
#include "test_util.h"

namespace ember::testing {
namespace {

TEST(Ternary, AddcmulAndAddcdivGivePyTorchsValues) {
  const Tensor input = tensor({1.0f, 2.0f}), t1 = tensor({3.0f, 4.0f}), t2 = tensor({2.0f, 8.0f});
  EXPECT_CLOSE(addcmul(input, t1, t2, 2), tensor({13.0f, 66.0f}), Tolerance{0, 0});
  EXPECT_CLOSE(addcdiv(input, t1, t2, 2), tensor({4.0f, 3.0f}), Tolerance{0, 0});
  EXPECT_CLOSE(input.addcmul(t1, t2), tensor({7.0f, 34.0f}), Tolerance{0, 0});  // value 1
  // Broadcast over all three: [2, 1] x [3] x [1, 1] -> [2, 3].
  Tensor out = addcmul(tensor({1.0, 2.0}).view({2, 1}), tensor({1.0, 2.0, 3.0}), full({1, 1}, 10.0), 0.5);
  EXPECT_CLOSE(out, tensor({6.0, 11.0, 16.0, 7.0, 12.0, 17.0}).view({2, 3}), Tolerance{0, 0});
  // Integer tensors multiply in their dtype; dividing two of them is refused, as PyTorch.
  EXPECT_EQ(addcmul(tensor({1LL}), tensor({2LL}), tensor({3LL})).dtype(), kInt64);
  EXPECT_EMBER_ERROR(addcdiv(tensor({1LL}), tensor({2LL}), tensor({3LL})), "addcdiv: integer division");
  EXPECT_EMBER_ERROR(addcmul(tensor({1LL}), tensor({2LL}), tensor({3LL}), 0.5),
                     "addcmul: for integral input");
  EXPECT_EMBER_ERROR(addcmul(zeros({2}), zeros({3}), zeros({2})), "addcmul");
  EXPECT_EMBER_ERROR(addcmul(Tensor(), zeros({2}), zeros({2})), "addcmul: an operand is undefined");
}

// bf16 operands compute in float32 and round once: the float32 result rounded.
TEST(Ternary, ReducedPrecisionRoundsOnce) {
  manual_seed(2);
  const Tensor a = randn({64}).to(kBFloat16), b = randn({64}).to(kBFloat16), c = randn({64}).to(kBFloat16);
  auto f32 = [](const Tensor& t) { return t.to(kFloat32); };
  EXPECT_CLOSE(addcmul(a, b, c, 0.3), addcmul(f32(a), f32(b), f32(c), 0.3).to(kBFloat16), Tolerance{0, 0});
  EXPECT_CLOSE(lerp(a, b, c), lerp(f32(a), f32(b), f32(c)).to(kBFloat16), Tolerance{0, 0});
  EXPECT_EQ(addcdiv(a, b, c).dtype(), kBFloat16);
}

TEST(Ternary, LerpGivesEndExactlyAtWeightOne) {
  EXPECT_CLOSE(lerp(tensor({0.0f, 10.0f}), tensor({10.0f, 20.0f}), 0.3), tensor({3.0f, 13.0f}),
               Tolerance{1e-6, 1e-6});
  manual_seed(1);
  const Tensor start = randn({1000}), end = randn({1000}) * 1e4;
  EXPECT_CLOSE(lerp(start, end, 1.0), end, Tolerance{0, 0});
  EXPECT_CLOSE(lerp(start, end, 0.0), start, Tolerance{0, 0});
  // A tensor weight chooses the form per element: the same values as the scalar weight.
  const Tensor w = tensor({-0.5f, 0.25f, 0.75f, 1.0f, 1.5f});
  const Tensor s = randn({5}), e = randn({5});
  Tensor got = lerp(s, e, w);
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_EQ(got[i].item<float>(), lerp(s[i], e[i], w[i].item<double>()).item<float>()) << i;
  EXPECT_CLOSE(s.lerp(e, w), got, Tolerance{0, 0});
  EXPECT_EMBER_ERROR(lerp(zeros({2}), zeros({2}, kFloat64), 0.5), "lerp: expected start and end of one");
  EXPECT_EMBER_ERROR(lerp(zeros({2}), zeros({2}), zeros({2}, kFloat64)), "lerp: expected a weight of dtype");
  EXPECT_EMBER_ERROR(lerp(zeros({2}, kInt64), zeros({2}, kInt64), 0.5), "lerp");
}

TEST(Ternary, InPlaceFormsWriteIntoTheirTensor) {
  Tensor x = tensor({1.0f, 2.0f});
  const Tensor& r = x.addcmul_(tensor({3.0f, 4.0f}), tensor({2.0f, 8.0f}), 2);
  EXPECT_EQ(&r, &x);
  EXPECT_CLOSE(x, tensor({13.0f, 66.0f}), Tolerance{0, 0});
  x.addcdiv_(tensor({2.0f, 4.0f}), tensor({2.0f, 2.0f}), -1);
  EXPECT_CLOSE(x, tensor({12.0f, 64.0f}), Tolerance{0, 0});
  x.lerp_(tensor({0.0f, 0.0f}), 0.25);
  EXPECT_CLOSE(x, tensor({9.0f, 48.0f}), Tolerance{0, 0});
  x.lerp_(tensor({1.0f, 1.0f}), full({2}, 1.0f));
  EXPECT_CLOSE(x, tensor({1.0f, 1.0f}), Tolerance{0, 0});
  // A broadcast result larger than the tensor written to is refused, and nothing is written.
  EXPECT_EMBER_ERROR(x.addcmul_(ones({3, 2}), ones({2})), "addcmul_: the result's shape [3, 2]");
  EXPECT_CLOSE(x, tensor({1.0f, 1.0f}), Tolerance{0, 0});
  // An EMA update under no_grad, as training code writes it.
  Tensor ema = zeros({3}), p = ones({3}).requires_grad_();
  {
    NoGradGuard no_grad;
    ema.lerp_(p, 0.1);
  }
  EXPECT_CLOSE(ema, full({3}, 0.1f), Tolerance{1e-7, 0});
}

}  // namespace
}  // namespace ember::testing
