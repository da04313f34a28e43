// nonzero, argwhere and masked_select against PyTorch's values: row-major order, bool and NaN,
// 0-dim and empty inputs, broadcasting, the gradient, errors.
#include "ember/autograd/engine.h"
#include "ember/core/ops/nonzero.h"
#include "test_util.h"

namespace ember::testing {
namespace {

TEST(Nonzero, CoordinatesInRowMajorOrder) {
  // torch.nonzero(torch.tensor([[0., 1., 0.], [2., 0., 3.]])) -> [[0, 1], [1, 0], [1, 2]]
  Tensor x = tensor({{0.0f, 1.0f, 0.0f}, {2.0f, 0.0f, 3.0f}});
  Tensor expected = tensor({{0, 1}, {1, 0}, {1, 2}});
  EXPECT_TRUE(nonzero(x).equal(expected));
  EXPECT_TRUE(x.argwhere().equal(expected));
  EXPECT_TRUE((x > 0).nonzero().equal(expected));                       // bool
  EXPECT_TRUE(nonzero(tensor({0.0, NAN, -0.0})).equal(tensor({{1}})));  // NaN is nonzero, -0.0 is not
  // 0-dim: one row of no coordinates, or none; empty: none, with x.dim() columns.
  EXPECT_EQ(nonzero(full({}, 5.0)).sizes(), (IntArrayRef{1, 0}));
  EXPECT_EQ(nonzero(full({}, 0.0)).sizes(), (IntArrayRef{0, 0}));
  EXPECT_EQ(nonzero(zeros({0, 3})).sizes(), (IntArrayRef{0, 2}));
  EXPECT_EQ(nonzero(tensor({3, 0, -2})).dtype(), kInt64);
  // A non-contiguous input counts in its logical order.
  EXPECT_TRUE(nonzero(x.t()).equal(tensor({{0, 1}, {1, 0}, {2, 1}})));
}

TEST(Nonzero, MaskedSelectBroadcastsAndIsDifferentiable) {
  Tensor x = tensor({{1.0, 2.0}, {3.0, 4.0}});
  EXPECT_CLOSE(masked_select(x, tensor({{true, false}, {false, true}})), tensor({1.0, 4.0}));
  EXPECT_CLOSE(x.masked_select(tensor({true, false})), tensor({1.0, 3.0}));  // mask broadcast
  // x broadcast against a larger mask: torch.masked_select(torch.tensor([1., 2.]), m) for
  // m = [[True, True], [False, True]] -> [1., 2., 2.]
  EXPECT_CLOSE(masked_select(tensor({1.0, 2.0}), tensor({{true, true}, {false, true}})),
               tensor({1.0, 2.0, 2.0}));
  EXPECT_EQ(masked_select(x, zeros({2, 2}, kBool)).sizes(), (IntArrayRef{0}));
  // The gradient lands where the mask selected, summed over broadcast copies.
  Tensor xr = tensor({1.0, 2.0}).requires_grad_();
  Tensor y = masked_select(xr, tensor({{true, true}, {false, true}}));
  EXPECT_CLOSE(autograd::grad({y}, {xr}, {tensor({1.0, 10.0, 100.0})})[0], tensor({1.0, 110.0}));
}

TEST(Nonzero, ErrorsNameTheOp) {
  Tensor x = ones({2, 3});
  EXPECT_EMBER_ERROR(masked_select(x, ones({2, 3})), "masked_select", "bool", "float32");
  EXPECT_EMBER_ERROR(masked_select(x, ones({4}, kBool)), "masked_select", "[2, 3]", "[4]");
  EXPECT_EMBER_ERROR(nonzero(Tensor()), "nonzero");
}

}  // namespace
}  // namespace ember::testing
