// Gradcheck cases for the nn ops: softmax, normalization, losses, dropout, embedding, attention.
// Integer inputs (targets, indices) and masks are fixed literals built inside each case.
#include "test_util.h"

namespace ember::testing {
namespace {

// Literals on the device of `like`: the CUDA suite runs these cases on the GPU too.
Tensor i64(const NestedList& l, const Tensor& like) {
  return tensor(l, TensorOptions(kInt64).device(like.device()));
}
Tensor f64(const NestedList& l, const Tensor& like) {
  return tensor(l, TensorOptions(kFloat64).device(like.device()));
}

// Fixed draws: every call of a case must see the same mask.
Tensor fixed_dropout(const Tensor& x, double p) {
  Generator gen(5);
  return dropout(x, p, true, &gen);
}

// native_dropout's output (its mask, fixed as above, is not differentiable).
Tensor fixed_native_dropout(const Tensor& x, double p) {
  Generator gen(5);
  return std::get<0>(native_dropout(x, p, true, &gen));
}

Tensor sdpa(const std::vector<Tensor>& x, const Tensor& mask = {}, bool causal = false) {
  return scaled_dot_product_attention(x[0], x[1], x[2], mask, 0.0, causal);
}

const GradcheckRegistrar registrar({
    {"softmax", [](const auto& x) { return softmax(x[0], 1); }, {{3, 4}}, -2, 2, true},
    {"softmax", [](const auto& x) { return softmax(x[0], 0) * x[0]; }, {{2, 3, 2}}, -2, 2, true},
    {"softmax", [](const auto& x) { return softmax(x[0].sum(), 0); }, {{2}}},
    {"log_softmax", [](const auto& x) { return log_softmax(x[0], 1); }, {{3, 4}}, -2, 2, true},
    {"log_softmax", [](const auto& x) { return log_softmax(x[0], -1) * x[0]; }, {{2, 2, 3}}, -2, 2, true},
    // The backward ops with arbitrary (not only softmax-shaped) outputs: their formulas are
    // polynomials in both inputs.
    {"_softmax_backward_data",
     [](const auto& x) { return _softmax_backward_data(x[0], x[1], 1, kFloat64); },
     {{3, 4}, {3, 4}},
     -2,
     2,
     true},
    {"_softmax_backward_data",
     [](const auto& x) { return _softmax_backward_data(x[0], softmax(x[1], 0), 0, kFloat64); },
     {{3, 2, 2}, {3, 2, 2}},
     -2,
     2,
     true},
    {"_log_softmax_backward_data",
     [](const auto& x) { return _log_softmax_backward_data(x[0], x[1], -1, kFloat64); },
     {{2, 3, 4}, {2, 3, 4}},
     -2,
     2,
     true},
    {"_log_softmax_backward_data",
     [](const auto& x) { return _log_softmax_backward_data(x[0], log_softmax(x[1], 1), 1, kFloat64); },
     {{2, 3, 2}, {2, 3, 2}},
     -2,
     2,
     true},
    {"layer_norm",
     [](const auto& x) { return layer_norm(x[0], {4}, x[1], x[2]); },
     {{2, 3, 4}, {4}, {4}},
     -2,
     2,
     true},
    {"layer_norm",
     [](const auto& x) {
       return layer_norm(x[0], {3, 2}, {}, {}, 0.1);
     },
     {{2, 3, 2}},
     -2,
     2,
     true},
    {"layer_norm", [](const auto& x) { return layer_norm(x[0], {5}, x[1]); }, {{3, 5}, {5}}},
    {"batch_norm",
     [](const auto& x) { return batch_norm(x[0], {}, {}, x[1], x[2], true); },
     {{3, 2, 2}, {2}, {2}},
     -2,
     2,
     true},
    {"batch_norm",  // channels-last input (NHWC memory)
     [](const auto& x) {
       Tensor cl = x[0].permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
       return batch_norm(cl, {}, {}, x[1], x[2], true);
     },
     {{2, 4, 3, 2}, {4}, {4}},
     -2,
     2,
     true},
    {"batch_norm",
     [](const auto& x) {
       Tensor rm = zeros({3}, x[0].options()), rv = ones({3}, x[0].options());
       return batch_norm(x[0], rm, rv, {}, x[1], true, 0.1, 0.01);
     },
     {{4, 3}, {3}}},
    {"batch_norm",
     [](const auto& x) {
       return batch_norm(x[0], f64({0.5, -1}, x[0]), f64({2, 0.5}, x[0]), x[1], x[2], false);
     },
     {{2, 2, 3}, {2}, {2}},
     -2,
     2,
     true},
    {"batch_norm_relu",  // x, residual, weight, bias
     [](const auto& x) { return batch_norm_relu(x[0], {}, {}, x[2], x[3], true, 0.1, 1e-5, x[1]); },
     {{3, 2, 2}, {3, 2, 2}, {2}, {2}},
     -2,
     2,
     true},
    {"batch_norm_relu",  // channels-last, no residual
     [](const auto& x) {
       Tensor cl = x[0].permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
       return batch_norm_relu(cl, {}, {}, x[1], x[2], true);
     },
     {{2, 4, 3, 2}, {4}, {4}}},
    {"batch_norm_relu",  // eval, with running statistics
     [](const auto& x) {
       return batch_norm_relu(x[0], f64({0.5, -1}, x[0]), f64({2, 0.5}, x[0]), x[1], x[2], false, 0.1, 1e-5,
                              x[3]);
     },
     {{2, 2, 3}, {2}, {2}, {2, 2, 3}}},
    {"group_norm",
     [](const auto& x) { return group_norm(x[0], 2, x[1], x[2]); },
     {{2, 4, 3}, {4}, {4}},
     -2,
     2,
     true},
    {"group_norm", [](const auto& x) { return group_norm(x[0], 3, {}, {}, 0.1); }, {{2, 3, 2, 2}}},
    {"dropout", [](const auto& x) { return fixed_dropout(x[0], 0.4); }, {{3, 4}}, -2, 2, true},
    {"dropout", [](const auto& x) { return fixed_dropout(x[0], 1) + dropout(x[0], 0.5, false); }, {{5}}},
    {"dropout", [](const auto& x) { return std::get<0>(native_dropout(x[0], 0, true)); }, {{2, 2}}},
    {"native_dropout", [](const auto& x) { return fixed_native_dropout(x[0], 0.3); }, {{4, 3}}, -2, 2, true},
    {"native_dropout", [](const auto& x) { return fixed_native_dropout(x[0], 1) + x[0]; }, {{3}}},
    {"gelu_dropout",
     [](const auto& x) {
       Generator gen(5);
       return gelu_dropout(x[0], 0.3, true, &gen);
     },
     {{4, 3}},
     -2,
     2,
     true},
    {"gelu_dropout",
     [](const auto& x) { return gelu_dropout(x[0], 0.3, false) + gelu_dropout(x[0], 1); },
     {{3}}},
    // Rows of 5 over two leading dims: most rows start inside a 4-element mask block.
    {"dropout_add_layer_norm",
     [](const auto& x) {
       Generator gen(5);
       return dropout_add_layer_norm(x[0], x[1], x[2], x[3], 0.3, 1e-5, true, &gen);
     },
     {{2, 3, 5}, {2, 3, 5}, {5}, {5}},
     -2,
     2,
     true},
    // Eval mode and p = 0 (the plain sum, no draw), and p = 1 (every x dropped: residual alone).
    {"dropout_add_layer_norm",
     [](const auto& x) {
       return dropout_add_layer_norm(x[0], x[1], x[2], x[3], 0.3, 0.1, false) +
              dropout_add_layer_norm(x[0], x[1], x[2], x[3], 0) +
              dropout_add_layer_norm(x[0], x[1], x[2], x[3], 1);
     },
     {{3, 4}, {3, 4}, {4}, {4}},
     -2,
     2,
     true},
    {"native_dropout_backward",
     [](const auto& x) {
       return native_dropout_backward(x[0], i64({{1, 0, 1}, {0, 1, 1}}, x[0]).ne(0), 1.5);
     },
     {{2, 3}},
     -2,
     2,
     true},
    {"embedding",
     [](const auto& x) {
       return embedding(x[0], i64({{0, 2, 4}, {2, 1, 0}}, x[0]));
     },
     {{5, 3}},
     -2,
     2,
     true},
    {"embedding",
     [](const auto& x) {
       return embedding(x[0], tensor({3, 1, 3, 0}, TensorOptions(kInt32).device(x[0].device())), 2).square();
     },
     {{4, 2}},
     -2,
     2,
     true},
    {"embedding", [](const auto& x) { return embedding(x[0].t(), i64(1, x[0]), 0); }, {{2, 3}}},
    {"scaled_dot_product_attention",
     [](const auto& x) { return sdpa(x); },
     {{2, 3, 4}, {2, 5, 4}, {2, 5, 3}},
     -2,
     2,
     true},
    {"scaled_dot_product_attention",
     [](const auto& x) { return sdpa(x, x[3]); },
     {{1, 3, 2}, {2, 4, 2}, {4, 3}, {3, 4}}},
    {"scaled_dot_product_attention",
     [](const auto& x) {
       return sdpa(x, tensor({{true, false, true}, {false, true, true}}).to(x[0].device()));
     },
     {{2, 1, 2, 2}, {3, 2}, {2, 1, 3, 2}}},
    {"scaled_dot_product_attention",
     [](const auto& x) { return sdpa(x, {}, true); },
     {{3, 2}, {4, 2}, {4, 2}},
     -2,
     2,
     true},
    {"scaled_dot_product_attention",
     [](const auto& x) {
       manual_seed(11);
       return scaled_dot_product_attention(x[0], x[1], x[2], {}, 0.3, false, 0.7);
     },
     {{2, 3, 2}, {2, 3, 2}, {2, 3, 2}}},
    // Losses. Class targets, weights and masks are literals; probability targets are inputs.
    {"cross_entropy",
     [](const auto& x) {
       return cross_entropy(x[0], i64({0, 3, 1}, x[0]));
     },
     {{3, 4}},
     -2,
     2,
     true},
    {"cross_entropy",
     [](const auto& x) {
       return cross_entropy(x[0], i64({2, 1, 2}, x[0]), f64({0.5, 2, 1.5}, x[0]), 1, "sum");
     },
     {{3, 3}}},
    {"cross_entropy",
     [](const auto& x) {
       return cross_entropy(x[0], i64({{0, 2}, {-100, 1}}, x[0]), f64({0.5, 2, 1.5}, x[0]), -100, "mean",
                            0.2);
     },
     {{2, 3, 2}},
     -2,
     2,
     true},
    {"cross_entropy",
     [](const auto& x) {
       return cross_entropy(x[0], i64({{0, 2}, {3, 1}}, x[0]), {}, 3, "none", 0.3);
     },
     {{2, 4, 2}}},
    {"cross_entropy", [](const auto& x) { return cross_entropy(x[0], i64(2, x[0])); }, {{4}}},
    {"cross_entropy",
     [](const auto& x) {
       return cross_entropy(x[0], x[1], f64({1, 2, 0.5, 1}, x[0]), -100, "mean", 0.1);
     },
     {{3, 4}, {3, 4}},
     -2,
     2,
     true},
    {"cross_entropy",
     [](const auto& x) { return cross_entropy(x[0], x[1], {}, -100, "none"); },
     {{2, 3, 2}, {2, 3, 2}},
     0,
     1},
    {"nll_loss",
     [](const auto& x) {
       return nll_loss(x[0], i64({0, 3, 1}, x[0]));
     },
     {{3, 4}}},
    {"nll_loss",
     [](const auto& x) {
       return nll_loss(x[0], i64({{0, 2}, {1, 1}}, x[0]), f64({0.5, 2, 1.5}, x[0]), 2, "mean");
     },
     {{2, 3, 2}}},
    {"nll_loss",
     [](const auto& x) {
       return nll_loss(x[0], i64({{0, 2}, {1, 1}}, x[0]), {}, 2, "none");
     },
     {{2, 3, 2}}},
    {"nll_loss",
     [](const auto& x) {
       return nll_loss(x[0].log_softmax(1), i64({2, 0}, x[0]), {}, -100, "sum");
     },
     {{2, 3}},
     -2,
     2,
     true},
    {"mse_loss", [](const auto& x) { return mse_loss(x[0], x[1]); }, {{3, 4}, {3, 4}}, -2, 2, true},
    {"mse_loss", [](const auto& x) { return mse_loss(x[0], x[1], "sum"); }, {{3, 4}, {4}}},
    {"mse_loss", [](const auto& x) { return mse_loss(x[0], x[1], "none"); }, {{3, 1}, {2, 3, 2}}},
    {"binary_cross_entropy_with_logits",
     [](const auto& x) { return binary_cross_entropy_with_logits(x[0], x[1]); },
     {{3, 4}, {3, 4}},
     -2,
     2,
     true},
    {"binary_cross_entropy_with_logits",
     [](const auto& x) {
       return binary_cross_entropy_with_logits(x[0], x[1], f64({{0.5}, {2}, {1}}, x[0]), "sum",
                                               f64({1, 3, 0.5, 2}, x[0]));
     },
     {{3, 4}, {3, 4}},
     0,
     1,
     true},
    {"binary_cross_entropy_with_logits",
     [](const auto& x) {
       return binary_cross_entropy_with_logits(x[0], x[1], {}, "none", f64({2, 0.5}, x[0]));
     },
     {{3, 2}, {3, 2}}},
});

}  // namespace
}  // namespace ember::testing
