// The gradcheck table's coverage, and that gradcheck itself catches a wrong formula. The
// table's cases run as tests named Gradcheck.<op> (tests/main.cpp).
#include "test_util.h"

namespace ember::testing {

TEST(Gradcheck, EveryDifferentiableOpHasACase) {
  for (const OpSchema& op : registered_ops()) {
    if (!op.differentiable) continue;
    bool has_case = false;
    for (const GradcheckCase& c : gradcheck_table()) has_case = has_case || c.op == op.name;
    EXPECT_TRUE(has_case) << "differentiable op '" << op.name
                          << "' has no gradcheck case (tests/autograd/gradcheck_*.cpp)";
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
