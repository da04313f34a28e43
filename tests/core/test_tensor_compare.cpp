// torch.equal / isclose / allclose / isnan / isinf / isfinite, IntArrayRef's ==, and
// load_state_dict(load(path)): what PyTorch users write first.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ember/ember.h"
#include "test_util.h"

namespace ember::testing {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

TEST(TensorCompare, Equal) {
  Tensor a = tensor({1.0, 2.0, 3.0});
  EXPECT_TRUE(equal(a, a.clone()));
  EXPECT_TRUE(a.equal(tensor({1, 2, 3}, kInt64)));  // after type promotion
  EXPECT_FALSE(a.equal(tensor({1.0, 2.0, 4.0})));
  EXPECT_FALSE(a.equal(a.view({1, 3})));  // sizes differ
  EXPECT_FALSE(tensor({std::nan("")}).equal(tensor({std::nan("")})));
  EXPECT_TRUE(zeros({0, 3}).equal(zeros({0, 3})));
  EXPECT_EMBER_ERROR(equal(a, Tensor()), "equal: expected two defined tensors");
}

TEST(TensorCompare, IsCloseAndAllClose) {
  Tensor a = tensor({1.0, 1e10, kInf, -kInf, std::nan(""), 0.0});
  Tensor b = tensor({1.0 + 1e-6, 1.000001e10, kInf, kInf, std::nan(""), 1e-9});  // float32
  EXPECT_CLOSE(isclose(a, b), tensor({1, 1, 1, 0, 0, 1}, kBool));
  EXPECT_CLOSE(isclose(a, b, 1e-5, 1e-8, /*equal_nan=*/true), tensor({1, 1, 1, 0, 1, 1}, kBool));
  EXPECT_CLOSE(a.isclose(b, 0, 0), tensor({0, 0, 1, 0, 0, 0}, kBool));
  EXPECT_FALSE(allclose(a, b));
  EXPECT_TRUE(allclose(tensor({1.0, 2.0}), tensor({1.0 + 1e-7, 2.0})));
  EXPECT_TRUE(tensor({1.0, 2.0}).allclose(tensor({1.1, 2.0}), 0.1));
  // Broadcasting, and integers without wrap-around.
  EXPECT_CLOSE(isclose(tensor({{1.0}, {2.0}}), tensor({1.0, 2.0})), tensor({{1, 0}, {0, 1}}, kBool));
  Tensor big = tensor(std::vector<int64_t>{std::numeric_limits<int64_t>::max()}, kInt64),
         small = tensor(std::vector<int64_t>{std::numeric_limits<int64_t>::min()}, kInt64);
  EXPECT_FALSE(allclose(big, small));
  EXPECT_TRUE(allclose(full({1}, 5, kInt64), full({1}, 5, kInt32)));
  EXPECT_EMBER_ERROR(isclose(a, b, -1), "isclose: rtol and atol must be non-negative");
  EXPECT_EMBER_ERROR(isclose(tensor({1}, kBool), tensor({1}, kBool)),
                     "isclose: not defined for bool tensors");
}

// isnan / isinf / isfinite: NaN, both infinities, finite values (the largest too) in every float
// dtype; integers and bools hold neither NaN nor inf.
TEST(TensorCompare, IsNanIsInfIsFinite) {
  const double big = std::numeric_limits<double>::max();
  for (ScalarType dt : {kFloat64, kFloat32, kBFloat16, kFloat16}) {
    SCOPED_TRACE(std::string(to_string(dt)));
    Tensor x = tensor({std::nan(""), kInf, -kInf, 0.0, -2.5, dt == kFloat64 ? big : 1.0}, kFloat64).to(dt);
    EXPECT_CLOSE(x.isnan(), tensor({1, 0, 0, 0, 0, 0}, kBool));
    EXPECT_CLOSE(isinf(x), tensor({0, 1, 1, 0, 0, 0}, kBool));
    EXPECT_CLOSE(x.isfinite(), tensor({0, 0, 0, 1, 1, 1}, kBool));
  }
  for (ScalarType dt : {kInt64, kInt32, kUInt8, kBool}) {
    Tensor x = tensor({0, 1, 1}, dt);
    EXPECT_CLOSE(isnan(x), zeros({3}, kBool));
    EXPECT_CLOSE(x.isinf(), zeros({3}, kBool));
    EXPECT_CLOSE(isfinite(x), ones({3}, kBool));
  }
  EXPECT_EMBER_ERROR(isnan(Tensor()), "isnan: expected a defined tensor");
}

TEST(TensorCompare, SizesCompareWithEquals) {
  Tensor a = zeros({2, 3}), b = ones({2, 3}), c = zeros({3, 2});
  EXPECT_TRUE(a.sizes() == b.sizes());
  EXPECT_FALSE(a.sizes() == c.sizes());
  EXPECT_TRUE(a.sizes() != c.sizes());
  EXPECT_TRUE(a.sizes() == IntArrayRef({2, 3}));
}

TEST(TensorCompare, LoadStateDictTakesWhatLoadReturns) {
  manual_seed(1);
  nn::Linear saved(3, 2), restored(3, 2);
  TempDir dir;
  save(saved->state_dict(), dir.file("linear.safetensors"));
  restored->load_state_dict(load(dir.file("linear.safetensors")));
  EXPECT_TRUE(restored->weight.equal(saved->weight));
  EXPECT_TRUE(restored->bias.equal(saved->bias));
}

}  // namespace
}  // namespace ember::testing
