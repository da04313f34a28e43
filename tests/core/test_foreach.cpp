// _foreach_copy_ on the CPU: values (dtype conversion included), versions, and every error. The
// op table (op_table_foreach.cpp) covers layouts and dtypes against the float64 run.
#include "ember/core/ops/foreach.h"
#include "test_util.h"

namespace ember::testing {
namespace {

TEST(ForeachCopy, CopiesEachPairAndConverts) {
  // As torch._foreach_copy_([zeros(2, 3), zeros(4)], [arange(6.0, dtype=float64).view(2, 3),
  // arange(4, dtype=int32)]): [[0, 1, 2], [3, 4, 5]] and [0, 1, 2, 3], both float32.
  std::vector<Tensor> self = {zeros({2, 3}), zeros({4})};
  std::vector<Tensor> src = {arange(6, TensorOptions(kFloat64)).view({2, 3}),
                             arange(4, TensorOptions(kInt32))};
  const uint32_t v0 = self[0]._version(), v1 = self[1]._version();
  _foreach_copy_(self, src);
  EXPECT_CLOSE(self[0], from_blob(std::vector<float>{0, 1, 2, 3, 4, 5}.data(), {2, 3}, kFloat32).clone(),
               Tolerance{0, 0});
  EXPECT_CLOSE(self[1], from_blob(std::vector<float>{0, 1, 2, 3}.data(), {4}, kFloat32).clone(),
               Tolerance{0, 0});
  EXPECT_GT(self[0]._version(), v0);  // the kernel's pair
  EXPECT_GT(self[1]._version(), v1);  // copied by copy_
}

TEST(ForeachCopy, ViewsOfOneBuffer) {
  // DDP's use: the pieces of a flat buffer, written from separate tensors and read back.
  Tensor flat = zeros({7});
  std::vector<Tensor> views = {flat.narrow(0, 0, 6).view({2, 3}), flat.narrow(0, 6, 1)};
  std::vector<Tensor> grads = {full({2, 3}, 2.0), full({1}, -1.0)};
  _foreach_copy_(views, grads);
  EXPECT_CLOSE(flat, from_blob(std::vector<float>{2, 2, 2, 2, 2, 2, -1}.data(), {7}, kFloat32).clone(),
               Tolerance{0, 0});
  flat.mul_(3);
  _foreach_copy_(grads, views);
  EXPECT_CLOSE(grads[0], full({2, 3}, 6.0), Tolerance{0, 0});
  EXPECT_CLOSE(grads[1], full({1}, -3.0), Tolerance{0, 0});
}

TEST(ForeachCopy, Errors) {
  const char* op = "_foreach_copy_";
  Tensor a = zeros({2, 3}), b = ones({2, 3});
  EXPECT_EMBER_ERROR(_foreach_copy_({}, {}), op, "Tensor list must have at least one tensor");
  EXPECT_EMBER_ERROR(_foreach_copy_({a}, {b, b}), op, "same number of tensors, got 1 and 2");
  EXPECT_EMBER_ERROR(_foreach_copy_({a, a}, {b, ones({3})}), op, "self[1] has shape [2, 3]",
                     "src[1] has shape [3]");
  EXPECT_EMBER_ERROR(_foreach_copy_({a, Tensor()}, {b, b}), op, "self[1] is undefined");
  EXPECT_EMBER_ERROR(_foreach_copy_({a}, {Tensor()}), op, "src[0] is undefined");
  EXPECT_EMBER_ERROR(_foreach_copy_({zeros({3}).expand({2, 3})}, {b}), op, "single memory location",
                     "shape [2, 3], strides [0, 1]");
  Tensor leaf = zeros({2, 3}).requires_grad_();
  EXPECT_EMBER_ERROR(_foreach_copy_({a, leaf}, {b, b}), op, "a leaf tensor that requires grad");
  EXPECT_EMBER_ERROR(_foreach_copy_({a}, {leaf}), op, "tensors that require grad");
  // Every pair is checked before any is written.
  EXPECT_CLOSE(a, zeros({2, 3}), Tolerance{0, 0});
  {
    NoGradGuard no_grad;  // as a leaf's .grad or an optimizer's update does
    _foreach_copy_({leaf}, {b});
  }
  EXPECT_CLOSE(leaf.detach(), b, Tolerance{0, 0});
}

}  // namespace
}  // namespace ember::testing
