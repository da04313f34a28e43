// Gradcheck cases for the nn ops: softmax, normalization, losses, dropout, embedding, attention.
// Integer inputs (targets, indices) and masks are fixed literals built inside each case.
#include "test_util.h"

namespace ember::testing {
namespace {

const GradcheckRegistrar registrar({
    {"softmax", [](const auto& x) { return softmax(x[0], 1); }, {{3, 4}}, -2, 2, true},
    {"softmax", [](const auto& x) { return softmax(x[0], 0) * x[0]; }, {{2, 3, 2}}, -2, 2, true},
    {"softmax", [](const auto& x) { return softmax(x[0].sum(), 0); }, {{2}}},
    {"log_softmax", [](const auto& x) { return log_softmax(x[0], 1); }, {{3, 4}}, -2, 2, true},
    {"log_softmax",
     [](const auto& x) { return log_softmax(x[0], -1) * x[0]; },
     {{2, 2, 3}},
     -2,
     2,
     true},
});

}  // namespace
}  // namespace ember::testing
