// Gradcheck cases for the reductions (sum and mean are in gradcheck_core.cpp).
//
// Cases with [low, high) = [0, 0) get exact zeros as inputs and add fixed values inside fn:
// zeros and ties are then exact, and still moved by gradcheck's perturbations. Central
// differences see half the step at a two-way tie, which is what the even split gives.
#include <tuple>

#include "test_util.h"

namespace ember::testing {
namespace {

// x plus fixed values of x's shape.
Tensor shifted(const Tensor& x, const std::vector<double>& values) {
  return x + tensor(values, x.options()).view(x.sizes());
}

auto values_of(std::tuple<Tensor, Tensor> r) { return std::get<0>(r); }

const GradcheckRegistrar registrar({
    {"prod", [](const auto& x) { return x[0].prod(1); }, {{3, 4}}, 0.5, 1.5, true},
    {"prod", [](const auto& x) { return x[0].prod() + x[0].prod(0, true); }, {{2, 3}}, -2, 2, true},
    // Rows with no, one, two and three zeros.
    {"prod",
     [](const auto& x) {
       return shifted(x[0], {1.5, -0.5, 2, 1.25, 0, 1.5, -2, 0.5, 0, 2, 0, 1.5, 0, 0, 0, 3}).prod(1);
     },
     {{4, 4}},
     0,
     0,
     true},
    {"prod",
     [](const auto& x) {
       return shifted(x[0], {1.5, 0, -2, 0.5, 3, 1.25}).prod();
     },
     {{2, 3}},
     0,
     0,
     true},
    {"max", [](const auto& x) { return x[0].max(); }, {{3, 4}}},
    {"max", [](const auto& x) { return values_of(x[0].max(1)); }, {{3, 4}}, -2, 2, true},
    {"max", [](const auto& x) { return values_of(x[0].max(0, true)); }, {{3, 2, 2}}},
    // A two-way tie: each gets half.
    {"max",
     [](const auto& x) {
       return shifted(x[0], {1, 3, -2, 3, 0.5, 2}).max();
     },
     {{2, 3}},
     0,
     0},
    {"min", [](const auto& x) { return x[0].min(); }, {{3, 4}}},
    {"min", [](const auto& x) { return values_of(x[0].min(-1, true)); }, {{2, 3, 4}}, -2, 2, true},
    {"amax",
     [](const auto& x) {
       return x[0].amax({0, 2}, true);
     },
     {{2, 3, 4}},
     -2,
     2,
     true},
    {"amax", [](const auto& x) { return x[0].amax(); }, {{3, 4}}},
    {"amax",
     [](const auto& x) {
       return shifted(x[0], {1, 4, 4, 2, 0, 2}).amax({1});
     },
     {{2, 3}},
     0,
     0},
    {"amin", [](const auto& x) { return x[0].amin({1}); }, {{3, 4}}},
    {"amin",
     [](const auto& x) {
       return shifted(x[0], {1, -1, -1, 2, 0, 0}).amin({0, 1});
     },
     {{3, 2}},
     0,
     0},
    {"var", [](const auto& x) { return x[0].var(); }, {{3, 4}}, -2, 2, true},
    {"var", [](const auto& x) { return x[0].var({1}, 0, true); }, {{3, 4}}, -2, 2, true},
    {"var",
     [](const auto& x) {
       return x[0].var({0, 2}, 2);
     },
     {{3, 2, 4}}},
    {"std", [](const auto& x) { return x[0].std(); }, {{3, 4}}, -2, 2, true},
    {"std", [](const auto& x) { return x[0].std({0}, 0, true); }, {{3, 4}}, -2, 2, true},
    {"norm", [](const auto& x) { return x[0].norm(); }, {{3, 4}}, -2, 2, true},
    {"norm", [](const auto& x) { return x[0].norm(2, {1}, true); }, {{3, 4}}, -2, 2, true},
    {"norm", [](const auto& x) { return x[0].norm(1, {0}); }, {{3, 4}}},
    {"norm", [](const auto& x) { return x[0].norm(INFINITY, {1}) + x[0].norm(-INFINITY); }, {{3, 4}}},
    {"norm",
     [](const auto& x) {
       return x[0].norm(3, {0, 2});
     },
     {{2, 3, 2}},
     -2,
     2,
     true},
    {"norm", [](const auto& x) { return x[0].norm(1.5) + x[0].norm(0.5, {1}); }, {{3, 4}}, -2, 2, true},
    {"norm", [](const auto& x) { return x[0].norm(-1, {1}) + x[0].norm(0); }, {{3, 4}}, 0.5, 2},
    // The zero vector: its 2-norm's gradient is 0 (so are the central differences).
    {"norm", [](const auto& x) { return x[0].norm(); }, {{4}}, 0, 0},
    {"logsumexp", [](const auto& x) { return x[0].logsumexp({1}); }, {{3, 4}}, -2, 2, true},
    {"logsumexp",
     [](const auto& x) {
       return x[0].logsumexp({0, 2}, true);
     },
     {{2, 3, 2}},
     -2,
     2,
     true},
    {"logsumexp", [](const auto& x) { return x[0].logsumexp({}); }, {{3, 4}}, -2, 2, true},
});

}  // namespace
}  // namespace ember::testing
