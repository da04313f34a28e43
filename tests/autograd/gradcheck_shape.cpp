// Gradcheck cases for the shape, indexing, sorting and scan ops. Index tensors are fixed literals,
// in range; scatter's cases have no repeated index (which write wins would be ambiguous).
#include "test_util.h"

namespace ember::testing {
namespace {

using Inputs = std::vector<Tensor>;

// Index literals on the device of `like`: the CUDA suite runs these cases on the GPU too.
Tensor idx(const NestedList& values, const Tensor& like) {
  return tensor(values, TensorOptions(kInt64).device(like.device()));
}

const GradcheckRegistrar registrar({
    {"flip",
     [](const Inputs& x) {
       return x[0].flip({0, 2});
     },
     {{2, 3, 2}},
     -2,
     2,
     true},
    {"flip", [](const Inputs& x) { return x[0].flip({-1}) * x[0]; }, {{3, 4}}, -2, 2, true},
    {"roll",
     [](const Inputs& x) {
       return roll(x[0], {1, -2}, {0, 1});
     },
     {{3, 4}},
     -2,
     2,
     true},
    {"roll", [](const Inputs& x) { return roll(x[0], {5}); }, {{3, 4}}},
    {"roll",
     [](const Inputs& x) {
       return roll(x[0], {1, 2}, {-1, -1});
     },
     {{2, 5}}},
    {"pad",
     [](const Inputs& x) {
       return pad(x[0], {1, 2});
     },
     {{2, 3}},
     -2,
     2,
     true},
    {"pad",
     [](const Inputs& x) {
       return pad(x[0], {-1, 2, 1, 0}, "constant", 1.5);
     },
     {{3, 4}}},
    {"pad",
     [](const Inputs& x) {
       return pad(x[0], {2, 1, 1, 2}, "reflect");
     },
     {{2, 3, 4}},
     -2,
     2,
     true},
    {"pad",
     [](const Inputs& x) {
       return pad(x[0], {-1, 2}, "reflect");
     },
     {{2, 4}}},
    {"pad",
     [](const Inputs& x) {
       return pad(x[0], {2, 3}, "replicate");
     },
     {{2, 3}},
     -2,
     2,
     true},
    {"pad",
     [](const Inputs& x) {
       return pad(x[0], {1, 0, 0, 2}, "replicate");
     },
     {{2, 2, 3}}},
    {"repeat",
     [](const Inputs& x) {
       return x[0].repeat({2, 1, 3});
     },
     {{2, 3}},
     -2,
     2,
     true},
    {"repeat",
     [](const Inputs& x) {
       return x[0].repeat({3, 2});
     },
     {{2, 2}}},
    {"tril", [](const Inputs& x) { return x[0].tril(); }, {{3, 4}}, -2, 2, true},
    {"tril", [](const Inputs& x) { return x[0].tril(-1); }, {{2, 3, 3}}},
    {"triu", [](const Inputs& x) { return x[0].triu(1); }, {{3, 4}}, -2, 2, true},
    {"triu", [](const Inputs& x) { return x[0].triu(-1); }, {{2, 4, 3}}},
    {"masked_select",
     [](const Inputs& x) {
       return x[0].masked_select(tensor({true, false, true, true}).to(x[0].device()));
     },
     {{3, 4}}},
    {"index_select",
     [](const Inputs& x) {
       return x[0].index_select(0, idx({2, 0, 2}, x[0]));
     },
     {{3, 4}},
     -2,
     2,
     true},
    {"index_select",
     [](const Inputs& x) {
       return x[0].index_select(-1, tensor({3, 1}, TensorOptions(kInt32).device(x[0].device()))) * x[0].sum();
     },
     {{2, 3, 4}}},
    // Repeated and negative picks add up; two index tensors apart put the picks in front.
    {"index",
     [](const Inputs& x) {
       return x[0].index({idx({{1, -1}, {0, 1}}, x[0]), Slice(), idx({3, 0}, x[0])});
     },
     {{2, 3, 4}},
     -2,
     2,
     true},
    {"index",
     [](const Inputs& x) {
       return x[0].index({Slice(), tensor({true, false, true}).to(x[0].device())}) * x[0].sum();
     },
     {{2, 3}}},
    {"index_put",
     [](const Inputs& x) {
       return index_put(x[0], {Tensor(), idx({2, 0, 2}, x[0])}, x[1], true);
     },
     {{2, 3}, {2, 3}},
     -2,
     2,
     true},
    // Assignment: x's gradient is cut where values land; the repeated pick is not used.
    {"index_put",
     [](const Inputs& x) {
       return index_put(x[0], {idx({1, 0}, x[0]), idx({2, 1}, x[0])}, x[1]) * x[0].sum();
     },
     {{3, 4}, {2}}},
    // In place on a tensor of the graph: x[:, [2, 0]] += v, then a mask assigned.
    {"index_put",
     [](const Inputs& x) {
       Tensor y = x[0] * 1;
       y.index_put_({Slice(), idx({2, 0}, x[0])}, x[1], true);
       y.index_put_({tensor({true, false}).to(x[0].device())}, x[1].sum(1).slice(0, 0, 1));
       return y;
     },
     {{2, 3}, {2, 2}}},
    {"gather",
     [](const Inputs& x) {
       return x[0].gather(1, idx({{0, 2, 2}, {1, 0, 3}}, x[0]));
     },
     {{3, 4}},
     -2,
     2,
     true},
    {"gather",
     [](const Inputs& x) {
       return x[0].gather(0, idx({{1, 0}, {1, 1}}, x[0])) * x[0][0][0];
     },
     {{2, 3}}},
    {"scatter",
     [](const Inputs& x) {
       return scatter(x[0], 1, idx({{0, 3}, {2, 1}}, x[0]), x[1]);
     },
     {{3, 4}, {2, 3}},
     -2,
     2,
     true},
    {"scatter",
     [](const Inputs& x) {
       return scatter(x[0], 0, idx({{1, 0, 1}}, x[0]), x[1]);
     },
     {{2, 3}, {1, 3}}},
    {"scatter",
     [](const Inputs& x) {
       return scatter(x[0], 0, idx({{2, 0}}, x[0]), Scalar(0.5));
     },
     {{3, 2}}},
    {"scatter_add",
     [](const Inputs& x) {
       return scatter_add(x[0], 1, idx({{0, 0, 3}, {2, 1, 2}}, x[0]), x[1]);
     },
     {{2, 4}, {2, 4}},
     -2,
     2,
     true},
    {"scatter_add",
     [](const Inputs& x) {
       return scatter_add(x[0], 0, idx({{1}, {1}}, x[0]), x[1]);
     },
     {{2, 3}, {3, 1}}},
    {"index_add",
     [](const Inputs& x) {
       return index_add(x[0], 0, idx({2, 0, 2}, x[0]), x[1], 2.5);
     },
     {{3, 4}, {3, 4}},
     -2,
     2,
     true},
    {"index_add", [](const Inputs& x) { return index_add(x[0], 1, idx({1}, x[0]), x[1]); }, {{2, 3}, {2, 1}}},
    {"take_along_dim",
     [](const Inputs& x) {
       return take_along_dim(x[0], idx({{{1, 3}, {0, 0}, {2, 1}}}, x[0]), 2);
     },
     {{2, 1, 4}}},
    {"take_along_dim",
     [](const Inputs& x) {
       return take_along_dim(x[0], idx({5, 0, 5}, x[0]));
     },
     {{2, 3}}},
    {"sort", [](const Inputs& x) { return std::get<0>(sort(x[0], 0, true)); }, {{4, 3}}, -2, 2, true},
    {"sort", [](const Inputs& x) { return std::get<0>(sort(x[0])) * x[0]; }, {{2, 4}}},
    {"topk", [](const Inputs& x) { return std::get<0>(topk(x[0], 2)); }, {{3, 4}}, -2, 2, true},
    // Unsorted: any order, so sorted after (the CUDA suite compares with the CPU's order).
    {"topk",
     [](const Inputs& x) { return std::get<0>(sort(std::get<0>(topk(x[0], 3, 0, false, false)), 0)); },
     {{5, 2}}},
    {"cumsum", [](const Inputs& x) { return x[0].cumsum(1); }, {{3, 4}}, -2, 2, true},
    {"cumsum", [](const Inputs& x) { return cumsum(x[0], 0) * x[0]; }, {{4, 2}}, -2, 2, true},
});

}  // namespace
}  // namespace ember::testing
