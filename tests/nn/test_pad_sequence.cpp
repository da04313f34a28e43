// nn::utils::rnn::pad_sequence against values by hand, its gradient, and its errors.
#include "test_util.h"

namespace ember::testing {
namespace {

using nn::utils::rnn::pad_sequence;

TEST(PadSequence, PadsAndStacks) {
  std::vector<Tensor> seqs = {tensor({1.0f, 2.0f, 3.0f}), tensor({4.0f}), tensor({5.0f, 6.0f})};
  EXPECT_CLOSE(pad_sequence(seqs, /*batch_first=*/true),
               tensor({{1.0f, 2.0f, 3.0f}, {4.0f, 0.0f, 0.0f}, {5.0f, 6.0f, 0.0f}}));
  // Time first by default, as PyTorch: [L, B].
  EXPECT_CLOSE(pad_sequence(seqs, false, -1),
               tensor({{1.0f, 4.0f, 5.0f}, {2.0f, -1.0f, 6.0f}, {3.0f, -1.0f, -1.0f}}));
  EXPECT_CLOSE(pad_sequence(seqs, true, 9, "left"),
               tensor({{1.0f, 2.0f, 3.0f}, {9.0f, 9.0f, 4.0f}, {9.0f, 5.0f, 6.0f}}));
  // Trailing dims are kept: [L_i, 2] -> [B, L, 2].
  Tensor out = pad_sequence({ones({2, 2}), ones({1, 2})}, true);
  EXPECT_EQ(out.sizes().vec(), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_CLOSE(out[1], tensor({{1.0f, 1.0f}, {0.0f, 0.0f}}));
}

TEST(PadSequence, Gradient) {
  Tensor a = random_tensor({3, 2}, kFloat64).requires_grad_(),
         b = random_tensor({1, 2}, kFloat64).requires_grad_();
  EXPECT_TRUE(autograd::gradcheck(
      [](const std::vector<Tensor>& in) { return pad_sequence(in, true, 0.5, "left"); }, {a, b}));
}

TEST(PadSequence, Errors) {
  EXPECT_EMBER_ERROR(pad_sequence({}), "pad_sequence: got no sequences");
  EXPECT_EMBER_ERROR(pad_sequence({ones({2}), ones({})}),
                     "pad_sequence: sequence 1 must have at least one dim");
  EXPECT_EMBER_ERROR(pad_sequence({ones({2, 3}), ones({2, 4})}), "pad_sequence: sequence 1 is", "[2, 4]",
                     "same trailing dims");
  EXPECT_EMBER_ERROR(pad_sequence({ones({2}), ones({2}, kFloat64)}), "pad_sequence: sequence 1 is float64");
  EXPECT_EMBER_ERROR(pad_sequence({ones({2})}, false, 0, "middle"), "pad_sequence: padding_side");
}

}  // namespace
}  // namespace ember::testing
