// multinomial on the GPU: frequencies from the weights, zero weights never drawn, distinct indices
// without replacement, and bad weights refused.
#include "cuda_test_util.h"

namespace ember::testing {
namespace {

class MultinomialCuda : public CudaTest {};

TEST_F(MultinomialCuda, DrawsFromTheWeightsOnTheDevice) {
  manual_seed(6);
  const Tensor w = tensor({{1.0f, 0.0f, 3.0f, 6.0f}, {0.0f, 2.0f, 2.0f, 0.0f}}).cuda();
  Tensor draws = multinomial(w, 20000, true);
  ASSERT_TRUE(draws.is_cuda());
  EXPECT_TRUE(draws.sizes().equals({2, 20000}));
  Tensor row0 = draws.select(0, 0).cpu(), row1 = draws.select(0, 1).cpu();
  EXPECT_EQ((row0 == 1).sum().item<int64_t>(), 0);
  EXPECT_EQ(((row1 == 0).logical_or(row1 == 3)).sum().item<int64_t>(), 0);
  // Category 3 has weight 6 of 10: 12000 expected, sd about 69.
  EXPECT_NEAR(static_cast<double>((row0 == 3).sum().item<int64_t>()), 12000, 400);
  Tensor perm = multinomial(rand({16, 50}).cuda() + 0.1, 50);
  EXPECT_TRUE(std::get<0>(sort(perm, 1)).cpu().equal(arange(50, kInt64).expand({16, 50})));
  EXPECT_EMBER_ERROR(multinomial(tensor({1.0f, -1.0f}).cuda(), 1),
                     "multinomial: probability tensor contains");
}

}  // namespace
}  // namespace ember::testing
