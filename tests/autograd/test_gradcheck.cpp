// The gradcheck table's coverage, and that gradcheck itself catches a wrong formula. The
// table's cases run as tests named Gradcheck.<op> (tests/main.cpp).
#include <algorithm>

#include "test_util.h"

namespace ember::testing {

const std::vector<std::string>& ops_pending_backward() {
  static const std::vector<std::string> pending = {"prod",
                                                   "max",
                                                   "min",
                                                   "amax",
                                                   "amin",
                                                   "var",
                                                   "std",
                                                   "norm",
                                                   "logsumexp",
                                                   "conv1d",
                                                   "conv2d",
                                                   "conv_transpose2d",
                                                   "max_pool2d",
                                                   "max_pool2d_with_indices",
                                                   "avg_pool2d",
                                                   "adaptive_avg_pool2d",
                                                   "einsum",
                                                   "flip",
                                                   "roll",
                                                   "pad",
                                                   "repeat",
                                                   "tril",
                                                   "triu",
                                                   "index_select",
                                                   "gather",
                                                   "scatter",
                                                   "scatter_add",
                                                   "index_add",
                                                   "take_along_dim",
                                                   "sort",
                                                   "topk",
                                                   "cumsum"};
  return pending;
}

TEST(Gradcheck, EveryDifferentiableOpHasACase) {
  const auto& pending = ops_pending_backward();
  for (const OpSchema& op : registered_ops()) {
    if (!op.differentiable) continue;
    bool has_case = false;
    for (const GradcheckCase& c : gradcheck_table()) has_case = has_case || c.op == op.name;
    bool is_pending = std::find(pending.begin(), pending.end(), op.name) != pending.end();
    EXPECT_TRUE(has_case || is_pending)
        << "differentiable op '" << op.name << "' has no gradcheck case (tests/autograd/gradcheck_*.cpp)";
    EXPECT_FALSE(has_case && is_pending)
        << "'" << op.name << "' has a gradcheck case: remove it from ops_pending_backward";
  }
}

TEST(Gradcheck, CatchesAWrongFormula) {
  // x * x with a backward that forgets the factor 2: gradcheck must say so.
  auto wrong = [](const std::vector<Tensor>& x) {
    Tensor out = x[0].detach() * x[0].detach();
    record("square_wrong", {x[0]}, {out},
           [s = SavedTensor(x[0], false)](const GradContext& g) -> std::vector<Tensor> {
             return {g.grad() * g(s)};
           });
    return out;
  };
  Tensor x = tensor({1.5, -0.5}, kFloat64).requires_grad_();
  EXPECT_EMBER_ERROR(autograd::gradcheck(wrong, {x}), "gradcheck", "Jacobian mismatch", "input 0");
}

}  // namespace ember::testing
