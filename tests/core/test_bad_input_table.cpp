// Issue 25, item 7: a table of bad input over the public CPU API. Every entry of kBadInputs must
// throw ember::Error whose message labels the op ("op: ..."); a crash, another exception type, no
// error or another label fails. kKnownGaps holds cases that throw ember::Error under another label:
// they run to show that they fail cleanly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "ember/ember.h"
#include "test_util.h"

namespace ember::testing {
namespace {

using namespace nn;
namespace F = nn::functional;

struct BadInput {
  const char* op;  // the message must contain "op:"
  std::function<void()> call;
};

constexpr int64_t k62 = int64_t{1} << 62, k32 = int64_t{1} << 32;
constexpr int64_t kMaxI64 = std::numeric_limits<int64_t>::max();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor f32(IntArrayRef sizes) { return zeros(sizes); }
Tensor f64(IntArrayRef sizes) { return zeros(sizes, kFloat64); }
Tensor i64(IntArrayRef sizes) { return zeros(sizes, kInt64); }
Tensor i32(IntArrayRef sizes) { return zeros(sizes, kInt32); }
Tensor b8(IntArrayRef sizes) { return zeros(sizes, kBool); }
Tensor img() { return ones({1, 3, 5, 5}); }  // [N, C, H, W]
Tensor seq() { return f32({1, 2, 4}); }      // [N, L, E]
Tensor param() { return zeros({2}).requires_grad_(); }

optim::SGD& sgd() {
  static Tensor p = param();
  static optim::SGD opt({p}, optim::SGDOptions(0.1));
  return opt;
}

const std::vector<BadInput> kBadInputs = {
    // --- Matrix products: inner dims, ranks, batch dims, dtypes ---
    {"matmul", [] { return matmul(f32({2, 3}), f32({4, 5})); }},
    {"matmul", [] { return matmul(f32({3}), f32({4})); }},
    {"matmul", [] { return matmul(f32({2, 3}), f32({4})); }},
    {"matmul", [] { return matmul(f32({4}), f32({3, 2})); }},
    {"matmul", [] { return matmul(f32({2, 2, 3}), f32({3, 3, 2})); }},
    {"matmul", [] { return matmul(f32({}), f32({3})); }},
    {"matmul", [] { return matmul(f32({2, 3}), i64({3, 2})); }},
    {"matmul", [] { return f32({2, 3}).matmul(f32({2, 3})); }},
    {"mm", [] { return mm(f32({2, 3}), f32({4, 5})); }},
    {"mm", [] { return mm(f32({2, 3, 4}), f32({4, 5})); }},
    {"mm", [] { return mm(f32({3}), f32({3, 2})); }},
    {"mm", [] { return mm(f32({2, 3}), f64({3, 2})); }},
    {"mm", [] { return f32({2, 3}).mm(f32({2, 3})); }},
    {"bmm", [] { return bmm(f32({2, 2, 3}), f32({2, 4, 5})); }},
    {"bmm", [] { return bmm(f32({2, 2, 3}), f32({3, 3, 5})); }},
    {"bmm", [] { return bmm(f32({2, 3}), f32({3, 2})); }},
    {"bmm", [] { return bmm(f32({2, 2, 3}), f64({2, 3, 2})); }},
    {"bmm", [] { return f32({2, 2, 3}).bmm(f32({2, 2, 3})); }},
    {"addmm", [] { return addmm(f32({2, 2}), f32({2, 3}), f32({4, 2})); }},
    {"addmm", [] { return addmm(f32({3, 3}), f32({2, 3}), f32({3, 2})); }},
    {"addmm", [] { return addmm(f32({2, 2}), f32({2, 3, 1}), f32({3, 2})); }},
    {"addmm", [] { return addmm(f32({2, 2}), f32({2, 3}), f64({3, 2})); }},
    {"baddbmm", [] { return baddbmm(f32({2, 2, 2}), f32({2, 2, 3}), f32({2, 4, 2})); }},
    {"baddbmm", [] { return baddbmm(f32({3, 2, 2}), f32({2, 2, 3}), f32({2, 3, 2})); }},
    {"baddbmm", [] { return baddbmm(f32({2, 2}), f32({2, 3}), f32({3, 2})); }},
    {"outer", [] { return outer(f32({2, 2}), f32({3})); }},
    {"dot", [] { return dot(f32({3}), f32({4})); }},
    {"dot", [] { return dot(f32({2, 2}), f32({2, 2})); }},
    {"dot", [] { return dot(f32({3}), f64({3})); }},
    {"einsum", [] { return einsum("ij,jk->ik", {f32({2, 3}), f32({4, 5})}); }},
    {"einsum", [] { return einsum("ij,jk->ik", {f32({2, 3})}); }},
    {"einsum", [] { return einsum("ij->ik", {f32({2, 3})}); }},
    {"einsum", [] { return einsum("ijk->i", {f32({2, 3})}); }},
    {"einsum", [] { return einsum("ii->i", {f32({2, 3})}); }},
    {"einsum", [] { return einsum("i#->i", {f32({2, 3})}); }},
    {"einsum", [] { return einsum("ij,jk->ik", {f32({2, 3}), f64({3, 2})}); }},

    // --- cat and stack ---
    {"cat", [] { return cat({f32({2, 3}), f32({2, 4})}, 0); }},
    {"cat", [] { return cat({f32({2, 3}), f32({2, 3, 1})}, 0); }},
    {"cat", [] { return cat(std::vector<Tensor>{}, 0); }},
    {"cat", [] { return cat({f32({2, 3}), f32({2, 3})}, 2); }},
    {"cat", [] { return cat({f32({2, 3}), f32({2, 3})}, -3); }},
    {"cat", [] { return cat({f32({}), f32({})}, 0); }},
    {"stack", [] { return stack({f32({2, 3}), f32({2, 4})}); }},
    {"stack", [] { return stack(std::vector<Tensor>{}); }},
    {"stack", [] { return stack({f32({2, 3}), f32({2, 3})}, 3); }},
    {"stack", [] { return stack({f32({2, 3}), f32({2, 3})}, -4); }},
    {"stack", [] { return stack({f32({2, 3}), f32({3, 2})}, 0); }},

    // --- view, reshape, flatten, squeeze and friends ---
    {"view", [] { return f32({2, 3}).view({4}); }},
    {"view", [] { return f32({2, 3}).view({-1, -1}); }},
    {"view", [] { return f32({2, 3}).view({-1, 4}); }},
    {"view", [] { return f32({2, 3}).view({-2, 3}); }},
    {"view", [] { return f32({2, 3}).t().view({6}); }},
    {"view", [] { return f32({0}).view({-1, 0}); }},
    {"view", [] { return f32({2, 3}).view_as(f32({5})); }},
    {"reshape", [] { return f32({2, 3}).reshape({5}); }},
    {"reshape", [] { return f32({2, 3}).reshape({-1, -1}); }},
    {"reshape", [] { return f32({2, 3}).reshape({-3, 2}); }},
    {"reshape", [] { return f32({2, 3}).reshape({-1, 4}); }},
    {"flatten", [] { return f32({2, 3, 4}).flatten(2, 1); }},
    {"flatten", [] { return f32({2, 3}).flatten(0, 5); }},
    {"unflatten", [] { return f32({2, 6}).unflatten(1, {2, 2}); }},
    {"unflatten", [] { return f32({2, 6}).unflatten(5, {3, 2}); }},
    {"unflatten", [] { return f32({2, 6}).unflatten(1, {-1, -1}); }},
    {"squeeze", [] { return f32({2, 1}).squeeze(3); }},
    {"squeeze", [] { return f32({2, 1}).squeeze(-3); }},
    {"unsqueeze", [] { return f32({2, 3}).unsqueeze(4); }},
    {"unsqueeze", [] { return f32({2, 3}).unsqueeze(-4); }},
    {"as_strided", [] { return f32({6}).as_strided({3}, {-1}); }},
    {"as_strided", [] { return f32({6}).as_strided({-1}, {1}); }},
    {"as_strided", [] { return f32({6}).as_strided({3}, {1}, 4); }},
    {"as_strided", [] { return f32({6}).as_strided({3, 3}, {1}); }},
    {"transpose", [] { return f32({2, 3}).transpose(0, 2); }},
    {"transpose", [] { return f32({2, 3}).transpose(-3, 0); }},
    {"transpose", [] { return f32({3}).mT(); }},
    {"t", [] { return f32({2, 3, 4}).t(); }},
    {"permute", [] { return f32({2, 3}).permute({0}); }},
    {"permute", [] { return f32({2, 3}).permute({0, 0}); }},
    {"permute", [] { return f32({2, 3}).permute({0, 2}); }},
    {"contiguous", [] { return f32({2, 3}).contiguous(MemoryFormat::ChannelsLast); }},

    // --- expand ---
    {"expand", [] { return f32({2, 3}).expand({3}); }},
    {"expand", [] { return f32({2, 3}).expand({2, 2}); }},
    {"expand", [] { return f32({2, 3}).expand({4, 3}); }},
    {"expand", [] { return f32({2, 3}).expand({-1, -1, 3}); }},
    {"expand", [] { return f32({1}).expand({-2}); }},
    {"expand", [] { return f32({3}).expand({2, 2}); }},
    {"expand", [] { return f32({2, 3}).expand_as(f32({3, 3})); }},

    // --- Broadcasting and dtypes in elementwise ops ---
    {"add", [] { return add(f32({2, 3}), f32({4})); }},
    {"add", [] { return f32({2}) + f32({3}); }},
    {"sub", [] { return sub(f32({2, 3}), f32({4})); }},
    {"sub", [] { return sub(b8({2}), b8({2})); }},
    {"mul", [] { return mul(f32({2, 3}), f32({2, 2})); }},
    {"div", [] { return div(f32({2, 3}), f32({3, 3})); }},
    {"pow", [] { return pow(f32({2, 3}), f32({4})); }},
    {"maximum", [] { return maximum(f32({2, 3}), f32({4})); }},
    {"minimum", [] { return minimum(f32({2, 3}), f32({4})); }},
    {"eq", [] { return eq(f32({2, 3}), f32({4})); }},
    {"ne", [] { return ne(f32({2, 3}), f32({4})); }},
    {"lt", [] { return lt(f32({2, 3}), f32({4})); }},
    {"le", [] { return le(f32({2, 3}), f32({4})); }},
    {"gt", [] { return gt(f32({2, 3}), f32({4})); }},
    {"ge", [] { return ge(f32({2, 3}), f32({4})); }},
    {"logical_and", [] { return logical_and(b8({2, 3}), b8({4})); }},
    {"logical_or", [] { return logical_or(b8({2, 3}), b8({4})); }},
    {"logical_xor", [] { return logical_xor(b8({2, 3}), b8({4})); }},
    {"where", [] { return where(b8({2}), f32({3}), f32({4})); }},
    {"where", [] { return where(f32({3}), f32({3}), f32({3})); }},
    {"masked_fill", [] { return masked_fill(f32({2, 3}), b8({4}), 0); }},
    {"masked_fill", [] { return masked_fill(f32({3}), f32({3}), 0); }},
    {"masked_fill_", [] { return f32({3}).masked_fill_(f32({3}), 0); }},
    {"masked_fill_", [] { return f32({3}).masked_fill_(b8({2, 3}), 0); }},
    {"isclose", [] { return isclose(f32({2}), f32({3})); }},
    {"isclose", [] { return isclose(f32({3}), f32({3}), -1.0); }},
    {"isclose", [] { return isclose(f32({3}), f32({3}), 1e-5, -1.0); }},
    {"allclose", [] { return allclose(f32({2}), f32({3})); }},
    {"add_", [] { return f32({3}).add_(f32({2, 3})); }},
    {"mul_", [] { return f32({1}).mul_(f32({3})); }},
    {"add_", [] { return i64({3}).add_(f32({3})); }},
    {"div_", [] { return i64({3}).div_(i64({3})); }},
    {"mul_", [] { return i64({3}).mul_(1.5); }},
    {"sqrt_", [] { return i64({3}).sqrt_(); }},
    {"exp_", [] { return i64({3}).exp_(); }},
    {"clamp", [] { return clamp(f32({3}), std::nullopt, std::nullopt); }},
    {"gelu", [] { return gelu(f32({3}), "bogus"); }},
    {"gelu_backward", [] { return gelu_backward(f32({3}), f32({4})); }},
    {"threshold_backward", [] { return threshold_backward(f32({3}), f32({4}), 0); }},
    {"threshold_backward", [] { return threshold_backward(i64({3}), i64({3}), 0); }},
    {"copy_", [] { return f32({3}).copy_(f32({4})); }},
    {"copy_", [] { return f32({3}).copy_(f32({2, 3})); }},

    // --- Ops that need floating input ---
    {"mean", [] { return mean(i64({3})); }},
    {"mean", [] { return mean(b8({3})); }},
    {"mean", [] { return mean(f32({3}), kInt64); }},
    {"var", [] { return var(i64({3})); }},
    {"std", [] { return ember::std(i64({3})); }},
    {"norm", [] { return norm(i64({3})); }},
    {"softmax", [] { return softmax(i64({3}), 0); }},
    {"softmax", [] { return softmax(b8({3}), 0); }},
    {"log_softmax", [] { return log_softmax(i64({3}), 0); }},
    {"layer_norm", [] { return layer_norm(i64({2, 3}), {3}); }},
    {"batch_norm", [] { return batch_norm(i64({2, 3}), {}, {}, {}, {}, true); }},
    {"group_norm", [] { return group_norm(i64({2, 4}), 2); }},
    {"conv2d", [] { return conv2d(i64({1, 1, 3, 3}), i64({1, 1, 2, 2})); }},
    {"conv2d", [] { return conv2d(f32({1, 1, 3, 3}), f64({1, 1, 2, 2})); }},
    {"conv2d", [] { return conv2d(f32({1, 1, 3, 3}), f32({1, 1, 2, 2}), f64({1})); }},
    {"conv_transpose2d", [] { return conv_transpose2d(i64({1, 1, 3, 3}), i64({1, 1, 2, 2})); }},
    {"max_pool2d", [] { return max_pool2d(b8({1, 1, 4, 4}), 2); }},
    {"avg_pool2d", [] { return avg_pool2d(i64({1, 1, 4, 4}), 2); }},
    {"adaptive_avg_pool2d", [] { return adaptive_avg_pool2d(i64({1, 1, 4, 4}), 2); }},
    {"dropout", [] { return dropout(i64({3}), 0.5); }},
    {"bernoulli", [] { return bernoulli(i64({3})); }},
    {"uniform_", [] { return uniform_(i64({3})); }},
    {"normal_", [] { return normal_(i64({3})); }},
    {"rand", [] { return rand({3}, kInt64); }},
    {"randn", [] { return randn({3}, kInt64); }},
    {"cross_entropy", [] { return cross_entropy(i64({2, 3}), i64({2})); }},
    {"mse_loss", [] { return mse_loss(b8({3}), b8({3})); }},
    {"binary_cross_entropy_with_logits",
     [] { return binary_cross_entropy_with_logits(i64({3}), i64({3})); }},
    {"scaled_dot_product_attention",
     [] { return scaled_dot_product_attention(seq(), f64({1, 2, 4}), seq()); }},
    {"scaled_dot_product_attention",
     [] { return scaled_dot_product_attention(i64({1, 2, 4}), i64({1, 2, 4}), i64({1, 2, 4})); }},
    {"scaled_dot_product_attention",
     [] { return scaled_dot_product_attention(seq(), seq(), seq(), i64({2, 2})); }},

    // --- Index tensors of the wrong dtype ---
    {"gather", [] { return gather(f32({2, 3}), 0, f32({1, 3})); }},
    {"gather", [] { return gather(f32({2, 3}), 0, i32({1, 3})); }},
    {"scatter", [] { return scatter(f32({2, 3}), 0, f32({1, 3}), f32({1, 3})); }},
    {"scatter", [] { return scatter(f32({2, 3}), 0, f32({1, 3}), 1.0); }},
    {"scatter", [] { return scatter(f32({2, 3}), 0, i64({1, 3}), f64({1, 3})); }},
    {"scatter_add", [] { return scatter_add(f32({2, 3}), 0, f32({1, 3}), f32({1, 3})); }},
    {"scatter_add", [] { return scatter_add(f32({2, 3}), 0, i64({1, 3}), f64({1, 3})); }},
    {"scatter_", [] { return scatter_(f32({2, 3}), 0, b8({1, 3}), f32({1, 3})); }},
    {"scatter_add_", [] { return scatter_add_(f32({2, 3}), 0, f32({1, 3}), f32({1, 3})); }},
    {"index_select", [] { return index_select(f32({3}), 0, f32({1})); }},
    {"index_select", [] { return index_select(f32({3}), 0, b8({1})); }},
    {"index_select", [] { return f32({3}).index_select(0, f64({1})); }},
    {"index_add", [] { return index_add(f32({3, 2}), 0, f32({1}), f32({1, 2})); }},
    {"index_add", [] { return index_add(f32({3, 2}), 0, i64({1}), f64({1, 2})); }},
    {"index_add_", [] { return index_add_(f32({3, 2}), 0, b8({1}), f32({1, 2})); }},
    {"take_along_dim", [] { return take_along_dim(f32({2, 3}), f32({2, 1}), 1); }},
    {"one_hot", [] { return one_hot(f32({3}), 4); }},
    {"embedding", [] { return embedding(f32({4, 2}), f32({1})); }},
    {"embedding", [] { return embedding(f32({4, 2}), b8({1})); }},
    {"nll_loss", [] { return nll_loss(f32({2, 3}), f32({2})); }},
    {"nll_loss", [] { return nll_loss(f32({2, 3}), b8({2})); }},
    {"cross_entropy", [] { return cross_entropy(f32({2, 3}), b8({2})); }},
    {"set_rng_state", [] { set_rng_state(f32({16})); }},
    {"set_rng_state", [] { set_rng_state(zeros({15}, kUInt8)); }},
    {"data_ptr", [] { return f32({3}).data_ptr<double>(); }},

    // --- Negative sizes ---
    {"zeros", [] { return zeros({-1}); }},
    {"zeros", [] { return zeros({2, -3}); }},
    {"ones", [] { return ones({-1}); }},
    {"full", [] { return full({-2}, 1); }},
    {"empty", [] { return empty({-1}); }},
    {"empty_strided", [] { return empty_strided({-1}, {1}); }},
    {"empty_strided", [] { return empty_strided({2, 2}, {1}); }},
    {"rand", [] { return rand({-1}); }},
    {"randn", [] { return randn({-1}); }},
    {"randint", [] { return randint(0, 5, {-1}); }},
    {"randperm", [] { return randperm(-1); }},
    {"linspace", [] { return linspace(0, 1, -1); }},
    {"eye", [] { return eye(-1); }},
    {"eye", [] { return eye(2, -1); }},
    {"arange", [] { return arange(0, 10, 0); }},
    {"arange", [] { return arange(10, 0, 1); }},
    {"arange", [] { return arange(0, kNaN, 1); }},
    {"arange", [] { return arange(0, kInf, 1); }},
    {"narrow", [] { return f32({3}).narrow(0, 0, -1); }},
    {"repeat", [] { return f32({2}).repeat({-1}); }},
    {"repeat", [] { return f32({2, 3}).repeat({2}); }},
    {"chunk", [] { return f32({4}).chunk(0); }},
    {"chunk", [] { return f32({4}).chunk(-1); }},
    {"split", [] { return f32({4}).split(int64_t{0}); }},
    {"split", [] { return f32({4}).split(int64_t{-1}); }},
    {"split", [] { return f32({4}).split(IntArrayRef{1, 1}); }},
    {"split", [] { return f32({4}).split(IntArrayRef{5, -1}); }},
    {"topk", [] { return topk(f32({2, 3}), -1); }},
    {"randint", [] { return randint(5, 5, {3}); }},
    {"randint", [] { return randint(10, 0, {3}); }},

    // --- Dims out of range ---
    {"narrow", [] { return f32({2, 3}).narrow(2, 0, 1); }},
    {"narrow", [] { return f32({3}).narrow(0, -5, 1); }},
    {"narrow", [] { return f32({3}).narrow(0, 2, 5); }},
    {"slice", [] { return f32({2, 3}).slice(3); }},
    {"slice", [] { return f32({2, 3}).slice(-3); }},
    {"slice", [] { return f32({3}).slice(0, 0, 2, 0); }},
    {"slice", [] { return f32({3}).slice(0, 0, 2, -1); }},
    {"select", [] { return f32({2, 3}).select(2, 0); }},
    {"select", [] { return f32({2, 3}).select(0, 5); }},
    {"select", [] { return f32({2, 3}).select(0, -6); }},
    {"select", [] { return f32({}).select(0, 0); }},
    {"select", [] { return f32({2, 3})[2]; }},
    {"size", [] { return f32({2, 3}).size(5); }},
    {"stride", [] { return f32({2, 3}).stride(-3); }},
    {"index", [] { return f32({2, 3}).index({0, 0, 0}); }},
    {"index", [] { return f32({2, 3}).index({Ellipsis, 0, Ellipsis}); }},
    {"sum", [] { return f32({2, 3}).sum({5}); }},
    {"sum", [] { return f32({2, 3}).sum({0, 0}); }},
    {"mean", [] { return f32({2, 3}).mean({-3}); }},
    {"prod", [] { return f32({2, 3}).prod(4); }},
    {"max", [] { return f32({2, 3}).max(3); }},
    {"min", [] { return f32({2, 3}).min(-4); }},
    {"amax", [] { return f32({2, 3}).amax({3}); }},
    {"amin", [] { return f32({2, 3}).amin({0, 0}); }},
    {"argmax", [] { return f32({2, 3}).argmax(2); }},
    {"argmin", [] { return f32({2, 3}).argmin(-3); }},
    {"var", [] { return f32({2, 3}).var({3}); }},
    {"std", [] { return f32({2, 3}).std({2}); }},
    {"norm", [] { return f32({2, 3}).norm(2, {5}); }},
    {"logsumexp", [] { return f32({2, 3}).logsumexp({3}); }},
    {"all", [] { return f32({2, 3}).all(3); }},
    {"any", [] { return f32({2, 3}).any(-3); }},
    {"softmax", [] { return softmax(f32({2, 3}), 2); }},
    {"log_softmax", [] { return log_softmax(f32({2, 3}), -3); }},
    {"cumsum", [] { return cumsum(f32({2, 3}), 2); }},
    {"sort", [] { return sort(f32({2, 3}), 2); }},
    {"argsort", [] { return argsort(f32({2, 3}), -3); }},
    {"topk", [] { return topk(f32({2, 3}), 4); }},
    {"topk", [] { return topk(f32({2, 3}), 1, 5); }},
    {"flip", [] { return f32({2, 3}).flip({2}); }},
    {"flip", [] { return f32({2, 3}).flip({0, 0}); }},
    {"roll", [] { return roll(f32({2, 3}), {1}, {2}); }},
    {"roll", [] { return roll(f32({2, 3}), {1, 2}, {0}); }},
    {"gather", [] { return gather(f32({2, 3}), 2, i64({2, 3})); }},
    {"index_select", [] { return index_select(f32({2, 3}), 3, i64({1})); }},
    {"scatter", [] { return scatter(f32({2, 3}), -3, i64({1, 1}), 1.0); }},
    {"chunk", [] { return f32({4}).chunk(2, 5); }},
    {"unbind", [] { return f32({2, 3}).unbind(2); }},
    {"tril", [] { return f32({3}).tril(); }},
    {"triu", [] { return triu(f32({3})); }},
    {"pad", [] { return pad(f32({2, 3}), {1}); }},
    {"pad", [] { return pad(f32({2, 3}), {1, 1, 1, 1, 1, 1}); }},
    {"pad", [] { return pad(f32({2, 3}), {1, 1}, "bogus"); }},
    {"pad", [] { return pad(f32({2, 3}), {3, 3}, "reflect"); }},
    {"pad", [] { return pad(f32({2, 3}), {-5, 0}); }},
    {"pad", [] { return pad(f32({2, 3}), {1, 1}, "reflect", 2.0); }},

    // --- Element counts that overflow int64 ---
    {"zeros", [] { return zeros({k62, 4}); }},
    {"ones", [] { return ones({k32, k32}); }},
    {"empty", [] { return empty({k62, 4}); }},
    {"full", [] { return full({k62, 4}, 1); }},
    {"rand", [] { return rand({k62, 4}); }},
    {"randn", [] { return randn({k32, k32}); }},
    {"randperm", [] { return randperm(k62); }},
    {"eye", [] { return eye(k62); }},
    {"linspace", [] { return linspace(0, 1, int64_t{1} << 61); }},
    {"view", [] { return arange(6.0).view({-1, k62, k62}); }},
    {"view", [] { return arange(4.0).view({-1, k62, 4}); }},
    {"reshape", [] { return arange(6.0).reshape({k62, 4}); }},
    {"expand", [] { return ones({1, 1}).expand({k62, k62}); }},
    {"repeat", [] { return ones({2}).repeat({k62}); }},
    {"repeat", [] { return ones({2}).repeat({k32, k32}); }},
    {"narrow", [] { return arange(6.0).narrow(0, 2, kMaxI64); }},
    {"narrow", [] { return arange(6.0).narrow(0, kMaxI64, 1); }},
    {"as_strided", [] { return arange(6.0).as_strided({k62, 4}, {4, 1}); }},
    {"unflatten", [] { return arange(4.0).unflatten(0, {k62, 4}); }},
    {"unflatten", [] { return arange(4.0).unflatten(0, {-1, k62, 4}); }},
    {"conv2d", [] { return conv2d(img(), ones({1, 3, 3, 3}), {}, {1, 1}, {0, 0}, {k62, 1}); }},
    {"conv_transpose2d", [] { return conv_transpose2d(img(), ones({3, 1, 3, 3}), {}, {k62, 1}); }},
    {"max_pool2d", [] { return max_pool2d(img(), {2, 2}, {1, 1}, {0, 0}, {k62, 1}); }},
    {"avg_pool2d", [] { return avg_pool2d(img(), {k62, 2}); }},

    // --- Indices out of range on the CPU ---
    {"gather", [] { return gather(f32({2, 3}), 1, tensor({{0, 3}})); }},
    {"gather", [] { return gather(f32({2, 3}), 1, tensor({{0, -1}})); }},
    {"gather", [] { return gather(f32({2, 3}), 1, i64({3, 1})); }},
    {"gather", [] { return gather(f32({2, 3}), 1, i64({2})); }},
    {"gather", [] { return f32({2, 3}).gather(0, tensor({{kMaxI64, 0, 0}})); }},
    {"scatter", [] { return scatter(f32({2, 3}), 1, tensor({{5}}), f32({1, 1})); }},
    {"scatter", [] { return scatter(f32({2, 3}), 1, tensor({{-1}}), 1.0); }},
    {"scatter", [] { return scatter(f32({2, 3}), 1, i64({2, 3}), f32({1, 1})); }},
    {"scatter_add", [] { return scatter_add(f32({2, 3}), 0, tensor({{2}}), f32({1, 1})); }},
    {"scatter_", [] { return scatter_(f32({2, 3}), 0, tensor({{-3}}), 1.0); }},
    {"index_select", [] { return index_select(f32({3}), 0, tensor({3})); }},
    {"index_select", [] { return index_select(f32({3}), 0, tensor({-1})); }},
    {"index_select", [] { return index_select(f32({3}), 0, i64({1, 1})); }},
    // Indexing: integers, slices, index tensors, masks, and the writes.
    {"index", [] { return f32({2, 3}).index({Slice(), 7}); }},
    {"index", [] { return f32({2, 3}).index({Slice(0, 2, 0)}); }},
    {"index", [] { return f32({2, 3}).index({0, 0, 0}); }},
    {"index", [] { return f32({2, 3}).index({Ellipsis, Ellipsis}); }},
    {"index", [] { return f32({2, 3}).index({tensor({2})}); }},
    {"index", [] { return f32({2, 3}).index({f32({1})}); }},
    {"index", [] { return f32({2, 3}).index({Tensor()}); }},
    {"index", [] { return f32({2, 3}).index({b8({3})}); }},
    {"index", [] { return f32({2, 3}).index({tensor({0, 1}), tensor({0, 1, 2})}); }},
    {"index_put_", [] { return f32({2, 3}).index_put_({tensor({0})}, f32({2})); }},
    {"index_put_", [] { return f32({2, 3}).index_put_({tensor({5})}, 1.0); }},
    {"index_put_", [] { return f32({2, 3}).requires_grad_().index_put_({tensor({0})}, 1.0); }},
    {"index_put_", [] { return f32({2, 3}).index_put_({tensor({0})}, Tensor()); }},
    {"index_put", [] { return index_put(f32({2, 3}), {Tensor()}, f32({1})); }},
    {"index_put", [] { return index_put(f32({2, 3}), {tensor({0})}, f32({4})); }},
    {"index_add", [] { return index_add(f32({3, 2}), 0, tensor({3}), f32({1, 2})); }},
    {"index_add", [] { return index_add(f32({3, 2}), 0, tensor({0}), f32({1, 3})); }},
    {"index_add", [] { return index_add(f32({3, 2}), 0, tensor({0, 1}), f32({1, 2})); }},
    {"index_add_", [] { return index_add_(f32({3, 2}), 0, tensor({-1}), f32({1, 2})); }},
    {"embedding", [] { return embedding(f32({4, 2}), tensor({4})); }},
    {"embedding", [] { return embedding(f32({4, 2}), tensor({-1})); }},
    {"embedding", [] { return embedding(f32({4, 2}), tensor({0, 1}, kInt32) + 7); }},
    {"embedding", [] { return embedding(f32({4}), tensor({0})); }},
    {"embedding", [] { return embedding(f32({4, 2}), tensor({0}), 10); }},
    {"take_along_dim", [] { return take_along_dim(f32({2, 3}), tensor({{3}, {0}}), 1); }},
    {"take_along_dim", [] { return take_along_dim(f32({2, 3}), tensor({6})); }},
    {"one_hot", [] { return one_hot(tensor({3}), 3); }},
    {"one_hot", [] { return one_hot(tensor({-1})); }},
    {"cross_entropy", [] { return cross_entropy(f32({2, 3}), tensor({0, 3})); }},
    {"cross_entropy", [] { return cross_entropy(f32({2, 3}), tensor({0, -2})); }},
    {"cross_entropy", [] { return cross_entropy(f32({2, 3, 2}), tensor({{0, 1}, {2, 9}})); }},
    {"nll_loss", [] { return nll_loss(f32({2, 3}), tensor({0, 5})); }},
    {"nll_loss", [] { return nll_loss(f32({3}), tensor(-5)); }},

    // --- Empty tensors where a value is needed ---
    {"max", [] { return max(f32({0})); }},
    {"min", [] { return min(f32({0})); }},
    {"argmax", [] { return argmax(f32({0})); }},
    {"argmin", [] { return argmin(f32({0})); }},
    {"max", [] { return max(f32({2, 0}), 1); }},
    {"min", [] { return min(f32({0, 2}), 0); }},
    {"argmax", [] { return argmax(f32({2, 0}), 1); }},
    {"amax", [] { return amax(f32({0})); }},
    {"amin", [] { return amin(f32({2, 0}), {1}); }},
    {"item", [] { return f32({0}).item(); }},
    {"item", [] { return f32({2}).item(); }},
    {"topk", [] { return topk(f32({0}), 1); }},
    {"max_pool2d", [] { return max_pool2d(f32({1, 1, 1, 1}), 2); }},
    {"avg_pool2d", [] { return avg_pool2d(f32({1, 1, 1, 1}), 2); }},
    {"adaptive_avg_pool2d", [] { return adaptive_avg_pool2d(f32({1, 1, 0, 4}), {2, 2}); }},
    {"conv2d", [] { return conv2d(f32({1, 1, 2, 2}), f32({1, 1, 3, 3})); }},

    // --- In-place writes whose output partly overlaps an input ---
    {"add_", [] { Tensor x = arange(6.0); return x.slice(0, 1).add_(x.slice(0, 0, 5)); }},
    {"sub_", [] { Tensor x = arange(6.0); return x.slice(0, 1).sub_(x.slice(0, 0, 5)); }},
    {"mul_", [] { Tensor x = arange(6.0); return x.slice(0, 0, 5).mul_(x.slice(0, 1)); }},
    {"div_", [] { Tensor x = arange(6.0); return x.slice(0, 1).div_(x.slice(0, 0, 5)); }},
    {"copy_", [] { Tensor x = arange(6.0); return x.slice(0, 1).copy_(x.slice(0, 0, 5)); }},
    {"mul_", [] { Tensor m = arange(9.0).view({3, 3}); return m.mul_(m.t()); }},
    {"add_", [] { Tensor m = arange(9.0).view({3, 3}); return m.add_(m[0]); }},
    {"add_", [] { return ones({1}).expand({3}).add_(1); }},
    {"fill_", [] { return ones({1}).expand({3}).fill_(2); }},
    {"relu_", [] { return ones({1}).expand({3}).relu_(); }},
    {"neg_", [] { return ones({1}).expand({3}).neg_(); }},
    {"copy_", [] { return ones({1}).expand({3}).copy_(f32({3})); }},
    {"masked_fill_", [] { return ones({1}).expand({3}).masked_fill_(b8({3}), 0); }},
    {"clamp_", [] { return ones({1}).expand({3}).clamp_(0); }},

    // --- Shape errors in the nn ops ---
    {"conv2d", [] { return conv2d(img(), f32({4, 2, 3, 3})); }},
    {"conv2d", [] { return conv2d(f32({5}), f32({4, 3, 3, 3})); }},
    {"conv2d", [] { return conv2d(img(), f32({4, 3, 3})); }},
    {"conv2d", [] { return conv2d(img(), f32({4, 3, 3, 3}), f32({5})); }},
    {"conv2d", [] { return conv2d(img(), f32({4, 1, 3, 3}), {}, 1, 0, 1, 2); }},
    {"conv2d", [] { return conv2d(img(), f32({4, 3, 3, 3}), {}, 1, 0, 1, 0); }},
    {"conv2d", [] { return conv2d(img(), f32({4, 3, 3, 3}), {}, 0); }},
    {"conv2d", [] { return conv2d(img(), f32({4, 3, 3, 3}), {}, 1, -1); }},
    {"conv2d", [] { return conv2d(img(), f32({4, 3, 3, 3}), {}, 1, 0, 0); }},
    {"conv2d", [] { return conv2d(img(), f32({4, 3, 3, 3}), {}, {1, 1, 1}); }},
    {"conv2d", [] { return conv2d(img(), f32({4, 3, 3, 3}), {}, 2, "same"); }},
    {"conv2d", [] { return conv2d(img(), f32({4, 3, 3, 3}), {}, 1, "bogus"); }},
    {"conv2d", [] { return conv2d(f32({1, 4, 5, 5}), f32({3, 2, 3, 3}), {}, 1, 0, 1, 2); }},
    {"conv1d", [] { return conv1d(f32({1, 3, 5}), f32({4, 2, 3})); }},
    {"conv1d", [] { return conv1d(img(), f32({4, 3, 3})); }},
    {"conv1d", [] { return conv1d(f32({1, 3, 5}), f32({4, 3, 3}), {}, 0); }},
    {"conv3d", [] { return conv3d(f32({1, 3, 4, 5, 5}), f32({4, 3, 3, 3})); }},
    {"conv3d", [] { return conv3d(f32({1, 3, 4, 5, 5}), f32({4, 2, 3, 3, 3})); }},
    {"conv3d", [] { return conv3d(f32({1, 3, 2, 5, 5}), f32({4, 3, 3, 3, 3})); }},
    {"conv3d", [] { return conv3d(f32({1, 3, 4, 5, 5}), f32({4, 3, 3, 3, 3}), {}, {1, 1}); }},
    {"conv3d", [] { return conv3d(f32({1, 3, 4, 5, 5}), f32({4, 3, 3, 3, 3}), {}, 2, "same"); }},
    {"conv_transpose2d", [] { return conv_transpose2d(img(), f32({2, 4, 3, 3})); }},
    {"conv_transpose2d", [] { return conv_transpose2d(img(), f32({3, 4, 3, 3}), {}, 1, 0, 1); }},
    {"conv_transpose2d", [] { return conv_transpose2d(img(), f32({3, 4, 3, 3}), {}, 0); }},
    {"conv_transpose2d", [] { return conv_transpose2d(img(), f32({3, 4, 3, 3}), f32({5})); }},
    {"conv_transpose2d", [] { return conv_transpose2d(img(), f32({3, 4, 3, 3}), {}, 1, 0, 0, 0); }},
    {"conv_transpose2d", [] { return conv_transpose2d(f32({1, 1, 1, 1}), f32({1, 1, 1, 1}), {}, 1, 2); }},
    {"conv_transpose2d", [] { return conv_transpose2d(f32({5}), f32({1, 1, 1, 1})); }},
    {"max_pool2d", [] { return max_pool2d(img(), 0); }},
    {"max_pool2d", [] { return max_pool2d(img(), 2, 2, 2); }},
    {"max_pool2d", [] { return max_pool2d(f32({4}), 2); }},
    {"max_pool2d", [] { return max_pool2d(img(), 2, 0); }},
    {"max_pool2d", [] { return max_pool2d(img(), 2, 2, 0, 0); }},
    {"max_pool2d", [] { return max_pool2d(img(), {2, 2, 2}); }},
    {"max_pool2d", [] { return max_pool2d(img(), 2, -1); }},
    {"max_pool2d_with_indices", [] { return max_pool2d_with_indices(f32({4}), 2); }},
    {"max_pool2d_with_indices", [] { return max_pool2d_with_indices(img(), 0); }},
    {"avg_pool2d", [] { return avg_pool2d(img(), 0); }},
    {"avg_pool2d", [] { return avg_pool2d(img(), 2, 2, 2); }},
    {"avg_pool2d", [] { return avg_pool2d(img(), 2, 2, 0, false, true, 0); }},
    {"avg_pool2d", [] { return avg_pool2d(f32({4}), 2); }},
    {"avg_pool2d", [] { return avg_pool2d(img(), 2, -1); }},
    {"adaptive_avg_pool2d", [] { return adaptive_avg_pool2d(img(), {-1, 2}); }},
    {"adaptive_avg_pool2d", [] { return adaptive_avg_pool2d(f32({4}), 2); }},
    {"adaptive_avg_pool2d", [] { return adaptive_avg_pool2d(img(), {1, 2, 3}); }},
    {"batch_norm", [] { return batch_norm(f32({2, 3, 4}), f32({4}), f32({4})); }},
    {"batch_norm", [] { return batch_norm(f32({2, 3}), f32({3}), f32({3}), f32({4})); }},
    {"batch_norm", [] { return batch_norm(f32({2, 3}), f32({3}), f32({3}), {}, f32({2})); }},
    {"batch_norm", [] { return batch_norm(f32({2}), f32({2}), f32({2})); }},
    {"batch_norm", [] { return batch_norm(f32({1, 3}), {}, {}, {}, {}, true); }},
    {"batch_norm", [] { return batch_norm(f32({2, 3}), f32({3}), {}, {}, {}, true); }},
    {"batch_norm_relu", [] { return batch_norm_relu(f32({2, 3}), {}, {}, {}, {}, true, 0.1, 1e-5, f32({2, 4})); }},
    {"batch_norm_relu", [] { return batch_norm_relu(f32({2, 3}), {}, {}, {}, {}, true, 0.1, 1e-5, i64({2, 3})); }},
    {"layer_norm", [] { return layer_norm(f32({2, 3}), {4}); }},
    {"layer_norm", [] { return layer_norm(f32({2, 3}), {2, 3, 4}); }},
    {"layer_norm", [] { return layer_norm(f32({2, 3}), {3}, f32({4})); }},
    {"layer_norm", [] { return layer_norm(f32({2, 3}), {3}, {}, f32({2})); }},
    {"layer_norm", [] { return layer_norm(f32({2, 3}), {}); }},
    {"layer_norm", [] { return layer_norm(f32({2, 3}), {-3}); }},
    {"group_norm", [] { return group_norm(f32({2, 4, 3}), 3); }},
    {"group_norm", [] { return group_norm(f32({2, 4, 3}), 0); }},
    {"group_norm", [] { return group_norm(f32({2, 4, 3}), -2); }},
    {"group_norm", [] { return group_norm(f32({2, 4, 3}), 2, f32({3})); }},
    {"group_norm", [] { return group_norm(f32({2, 4, 3}), 2, {}, f32({5})); }},
    {"group_norm", [] { return group_norm(f32({4}), 2); }},
    {"rms_norm", [] { return F::rms_norm(f32({2, 3}), {4}); }},
    {"rms_norm", [] { return F::rms_norm(f32({2, 3}), {3}, f32({2})); }},
    {"linear", [] { return F::linear(f32({2, 3}), f32({4, 5})); }},
    {"linear", [] { return F::linear(f32({2, 3}), f32({4, 3}), f32({5})); }},
    {"linear", [] { return F::linear(f32({2, 3}), f32({2, 4, 3})); }},
    {"linear", [] { return F::linear(f32({}), f32({4, 3})); }},
    {"linear", [] { return F::linear(f32({2, 3}), f64({4, 3})); }},
    {"cross_entropy", [] { return cross_entropy(f32({2, 3}), i64({3})); }},
    {"cross_entropy", [] { return cross_entropy(f32({2, 3}), i64({2, 1})); }},
    {"cross_entropy", [] { return cross_entropy(f32({2, 3}), f32({2, 4})); }},
    {"cross_entropy", [] { return cross_entropy(f32({2, 3}), i64({2}), f32({4})); }},
    {"cross_entropy", [] { return cross_entropy(f32({}), i64({})); }},
    {"cross_entropy", [] { return cross_entropy(f32({2, 3}), i64({2}), {}, -100, "bogus"); }},
    {"cross_entropy", [] { return cross_entropy(f32({2, 3}), i64({2}), {}, -100, "mean", 1.5); }},
    {"cross_entropy", [] { return cross_entropy(f32({2, 3}), i64({2}), {}, -100, "mean", -0.1); }},
    {"nll_loss", [] { return nll_loss(f32({2, 3}), i64({3})); }},
    {"nll_loss", [] { return nll_loss(f32({2, 3}), i64({2}), f32({2})); }},
    {"nll_loss", [] { return nll_loss(f32({2, 3, 4}), i64({2, 3})); }},
    {"nll_loss", [] { return nll_loss(f32({2, 3}), i64({2}), {}, -100, "bogus"); }},
    {"nll_loss", [] { return nll_loss(f32({2, 3, 4, 5}), i64({2, 4})); }},
    {"mse_loss", [] { return mse_loss(f32({2, 3}), f32({4})); }},
    {"mse_loss", [] { return mse_loss(f32({3}), f32({3}), "bogus"); }},
    {"l1_loss", [] { return F::l1_loss(f32({2, 3}), f32({4})); }},
    {"l1_loss", [] { return F::l1_loss(f32({3}), f32({3}), "bogus"); }},
    {"smooth_l1_loss", [] { return F::smooth_l1_loss(f32({2, 3}), f32({4})); }},
    {"smooth_l1_loss", [] { return F::smooth_l1_loss(f32({3}), f32({3}), "bogus"); }},
    {"smooth_l1_loss", [] { return F::smooth_l1_loss(f32({3}), f32({3}), "mean", -1.0); }},
    {"binary_cross_entropy", [] { return F::binary_cross_entropy(f32({2, 3}), f32({3})); }},
    {"binary_cross_entropy", [] { return F::binary_cross_entropy(f32({2, 3}), f32({2, 3}), f32({2})); }},
    {"binary_cross_entropy", [] { return F::binary_cross_entropy(f32({3}), f32({3}), {}, "bogus"); }},
    {"kl_div", [] { return F::kl_div(f32({2, 3}), f32({4})); }},
    {"kl_div", [] { return F::kl_div(f32({3}), f32({3}), "bogus"); }},
    {"binary_cross_entropy_with_logits",
     [] { return binary_cross_entropy_with_logits(f32({2, 3}), f32({2, 4})); }},
    {"binary_cross_entropy_with_logits",
     [] { return binary_cross_entropy_with_logits(f32({2, 3}), f32({2, 3}), f32({4})); }},
    {"binary_cross_entropy_with_logits",
     [] { return binary_cross_entropy_with_logits(f32({2, 3}), f32({2, 3}), {}, "mean", f32({4})); }},
    {"binary_cross_entropy_with_logits",
     [] { return binary_cross_entropy_with_logits(f32({3}), f32({3}), {}, "bogus"); }},
    {"scaled_dot_product_attention",
     [] { return scaled_dot_product_attention(seq(), f32({1, 2, 5}), seq()); }},
    {"scaled_dot_product_attention",
     [] { return scaled_dot_product_attention(seq(), f32({1, 3, 4}), seq()); }},
    {"scaled_dot_product_attention",
     [] { return scaled_dot_product_attention(f32({4}), f32({4}), f32({4})); }},
    {"scaled_dot_product_attention",
     [] { return scaled_dot_product_attention(seq(), seq(), seq(), b8({3, 3})); }},
    {"scaled_dot_product_attention",
     [] { return scaled_dot_product_attention(seq(), seq(), seq(), {}, 1.5); }},
    {"scaled_dot_product_attention",
     [] { return scaled_dot_product_attention(seq(), seq(), seq(), b8({2, 2}), 0.0, true); }},

    // --- Probabilities that are out of range, NaN or inf ---
    {"bernoulli", [] { return bernoulli(full({3}, 1.5)); }},
    {"bernoulli", [] { return bernoulli(tensor({0.5, -0.1})); }},
    {"bernoulli", [] { return bernoulli(tensor({kNaN})); }},
    {"bernoulli", [] { return bernoulli(f32({3}), 1.5); }},
    {"bernoulli", [] { return bernoulli(f32({3}), -0.1); }},
    {"bernoulli", [] { return bernoulli(f32({3}), kNaN); }},
    {"bernoulli_", [] { return bernoulli_(f32({3}), 2.0); }},
    {"bernoulli_", [] { return bernoulli_(f32({3}), kNaN); }},
    {"dropout", [] { return dropout(f32({3}), 1.5); }},
    {"dropout", [] { return dropout(f32({3}), -0.1); }},
    {"dropout", [] { return dropout(f32({3}), kNaN); }},
    {"dropout", [] { return dropout(f32({3}), 1.5, false); }},
    {"native_dropout", [] { return native_dropout(f32({3}), 2.0); }},
    {"native_dropout_backward", [] { return native_dropout_backward(f32({3}), f32({3}), 2.0); }},
    {"uniform_", [] { return uniform_(f32({3}), 1, 0); }},
    {"uniform_", [] { return uniform_(f32({3}), 0, kInf); }},
    {"uniform_", [] { return uniform_(f32({3}), kNaN, 1); }},
    {"normal_", [] { return normal_(f32({3}), 0, -1); }},
    {"normal_", [] { return normal_(f32({3}), 0, kNaN); }},

    // --- Misconfigured modules ---
    {"Conv2d", [] { return Conv2d(0, 4, 3); }},
    {"Conv2d", [] { return Conv2d(4, 0, 3); }},
    {"Conv2d", [] { return Conv2d(-1, 4, 3); }},
    {"Conv2d", [] { return Conv2d(Conv2dOptions(3, 4, 3).groups(2)); }},
    {"Conv2d", [] { return Conv2d(Conv2dOptions(4, 3, 3).groups(2)); }},
    {"Conv2d", [] { return Conv2d(Conv2dOptions(4, 4, 3).groups(0)); }},
    {"Conv2d", [] { return Conv2d(Conv2dOptions(4, 4, 0)); }},
    {"Conv2d", [] { return Conv2d(Conv2dOptions(4, 4, {3, -1})); }},
    {"Conv2d", [] { return Conv2d(Conv2dOptions(4, 4, 3).stride(0)); }},
    {"Conv2d", [] { return Conv2d(Conv2dOptions(4, 4, 3).padding(-1)); }},
    {"Conv2d", [] { return Conv2d(Conv2dOptions(4, 4, 3).dilation(0)); }},
    {"Conv2d", [] { return Conv2d(Conv2dOptions(4, 4, 3).stride(2).padding("same")); }},
    {"Conv1d", [] { return Conv1d(0, 4, 3); }},
    {"Conv1d", [] { return Conv1d(Conv1dOptions(4, 4, 3).stride(0)); }},
    {"ConvTranspose2d", [] { return ConvTranspose2d(0, 4, 3); }},
    {"conv_transpose2d",
     [] {
       ConvTranspose2d up(ConvTranspose2dOptions(3, 4, 3).stride(2).output_padding(2));
       return up(img());
     }},
    {"ConvTranspose2d", [] { return ConvTranspose2d(ConvTranspose2dOptions(4, 4, 3).groups(3)); }},
    {"Linear", [] { return Linear(-1, 4); }},
    {"Linear", [] { return Linear(4, -2); }},
    {"Embedding", [] { return Embedding(-1, 4); }},
    {"Embedding", [] { return Embedding(4, -1); }},
    {"Embedding", [] { return Embedding(EmbeddingOptions(4, 2).padding_idx(4)); }},
    {"Embedding", [] { return Embedding(EmbeddingOptions(4, 2).padding_idx(-5)); }},
    {"BatchNorm2d", [] { return BatchNorm2d(BatchNormOptions(-1)); }},
    {"BatchNorm1d", [] { return BatchNorm1d(BatchNormOptions(-3)); }},
    {"LayerNorm", [] { return LayerNorm(LayerNormOptions({-1})); }},
    {"LayerNorm", [] { return LayerNorm(LayerNormOptions({})); }},
    {"GroupNorm", [] { return GroupNorm(3, 4); }},
    {"GroupNorm", [] { return GroupNorm(0, 4); }},
    {"RMSNorm", [] { return RMSNorm(RMSNormOptions({-1})); }},
    {"Dropout", [] { return Dropout(1.5); }},
    {"Dropout", [] { return Dropout(-0.1); }},
    {"Dropout", [] { return Dropout(kNaN); }},
    {"MultiheadAttention", [] { return MultiheadAttention(4, 3); }},
    {"MultiheadAttention", [] { return MultiheadAttention(4, 0); }},
    {"MultiheadAttention", [] { return MultiheadAttention(MultiheadAttentionOptions(4, 2).dropout(1.5)); }},
      {"GELU", [] { return GELU(GELUOptions().approximate("bogus")); }},
    {"register_parameter", [] { Module m("M"); m.register_parameter("", f32({1})); }},
    {"register_parameter", [] { Module m("M"); m.register_parameter("a.b", f32({1})); }},
    {"register_buffer",
     [] {
       Module m("M");
       m.register_parameter("w", f32({1}));
       m.register_buffer("w", f32({1}));
     }},
    {"Sequential", [] { return Sequential(Linear(2, 2))[3]; }},
    {"load_state_dict",
     [] {
       Linear lin(2, 2);
       lin->load_state_dict(OrderedDict<Tensor>{});
     }},

    // --- Module forwards on inputs that do not fit ---
    {"Linear", [] { return Linear(3, 4)(f32({2, 5})); }},
    {"Conv2d", [] { return Conv2d(3, 4, 3)(f32({1, 2, 5, 5})); }},
    {"BatchNorm2d", [] { return BatchNorm2d(BatchNormOptions(3))(f32({2, 4, 2, 2})); }},
    {"BatchNorm2d", [] { return BatchNorm2d(BatchNormOptions(3))(f32({2, 3})); }},
    {"BatchNorm1d", [] { return BatchNorm1d(BatchNormOptions(3))(f32({2, 3, 2, 2})); }},
    {"LayerNorm", [] { return LayerNorm(LayerNormOptions({3}))(f32({2, 4})); }},
    {"GroupNorm", [] { return GroupNorm(2, 4)(f32({2, 3, 2})); }},
    {"embedding", [] { return Embedding(4, 2)(tensor({4})); }},
    {"cross_entropy", [] { return CrossEntropyLoss()(f32({2, 3}), tensor({3, 0})); }},
    {"max_pool2d", [] { return MaxPool2d(0)(img()); }},
    {"avg_pool2d", [] { return AvgPool2d(AvgPool2dOptions(2).divisor_override(0))(img()); }},

    // --- Misconfigured optimizers and schedulers ---
    {"SGD", [] { return optim::SGD(std::vector<Tensor>{}, optim::SGDOptions(0.1)); }},
    {"SGD", [] { return optim::SGD({param()}, optim::SGDOptions(-0.1)); }},
    {"SGD", [] { return optim::SGD({param()}, optim::SGDOptions(kNaN)); }},
    {"SGD", [] { return optim::SGD({param()}, optim::SGDOptions(0.1).momentum(-1)); }},
    {"SGD", [] { return optim::SGD({param()}, optim::SGDOptions(0.1).weight_decay(-1)); }},
    {"SGD", [] { return optim::SGD({param()}, optim::SGDOptions(0.1).nesterov(true)); }},
    {"SGD",
     [] {
       auto options = optim::SGDOptions(0.1).momentum(0.9).dampening(0.5).nesterov(true);
       return optim::SGD({param()}, options);
     }},
    {"SGD", [] { return optim::SGD({Tensor()}, optim::SGDOptions(0.1)); }},
    {"SGD", [] { return optim::SGD({param() * 2}, optim::SGDOptions(0.1)); }},
    {"SGD", [] { Tensor p = param(); return optim::SGD({p, p}, optim::SGDOptions(0.1)); }},
    {"SGD",
     [] {
       std::vector<optim::OptimizerParamGroup> groups;
       groups.emplace_back(std::vector<Tensor>{param()}, std::make_unique<optim::AdamOptions>(0.1));
       return optim::SGD(std::move(groups), optim::SGDOptions(0.1));
     }},
    {"SGD",
     [] {
       Tensor p = param();
       optim::SGD opt({p}, optim::SGDOptions(0.1));
       opt.add_param_group(optim::OptimizerParamGroup({p}));
     }},
    {"Adam", [] { return optim::Adam(std::vector<Tensor>{}); }},
    {"Adam", [] { return optim::Adam({param()}, optim::AdamOptions(-1)); }},
    {"Adam", [] { return optim::Adam({param()}, optim::AdamOptions().betas({1.0, 0.999})); }},
    {"Adam", [] { return optim::Adam({param()}, optim::AdamOptions().betas({0.9, 1.5})); }},
    {"Adam", [] { return optim::Adam({param()}, optim::AdamOptions().betas({-0.1, 0.9})); }},
    {"Adam", [] { return optim::Adam({param()}, optim::AdamOptions().eps(-1)); }},
    {"Adam", [] { return optim::Adam({param()}, optim::AdamOptions().weight_decay(-1)); }},
    {"Adam", [] { return optim::Adam({param()}, optim::AdamOptions(kNaN)); }},
    {"AdamW", [] { return optim::AdamW(std::vector<Tensor>{}); }},
    {"AdamW", [] { return optim::AdamW({param()}, optim::AdamWOptions(-1)); }},
    {"AdamW", [] { return optim::AdamW({param()}, optim::AdamWOptions().betas({0.9, -0.5})); }},
    {"AdamW", [] { return optim::AdamW({param()}, optim::AdamWOptions().weight_decay(-0.01)); }},
    {"load_state_dict", [] { sgd().load_state_dict(StateDict{}); }},
    {"GradScaler", [] { return amp::GradScaler(65536.0, 0.5); }},
    {"GradScaler", [] { return amp::GradScaler(65536.0, 2.0, 1.5); }},
    {"GradScaler", [] { return amp::GradScaler(65536.0, 2.0, 0.5, 0); }},
    {"clip_grad_norm_",
     [] {
       Tensor p = param();
       p.set_grad(full({2}, kInf));
       return nn::utils::clip_grad_norm_({p}, 1.0, 2, /*error_if_nonfinite=*/true);
     }},
    {"StepLR", [] { optim::StepLR s(sgd(), 0); }},
    {"StepLR", [] { optim::StepLR s(sgd(), -1); }},
    {"CosineAnnealingLR", [] { optim::CosineAnnealingLR s(sgd(), 0); }},
    {"CosineAnnealingLR", [] { optim::CosineAnnealingLR s(sgd(), -1); }},
    {"LinearLR", [] { optim::LinearLR s(sgd(), 0.0); }},
    {"LinearLR", [] { optim::LinearLR s(sgd(), 1.5); }},
    {"LinearLR", [] { optim::LinearLR s(sgd(), 0.5, 1.5); }},
    {"LinearLR", [] { optim::LinearLR s(sgd(), 0.5, 1.0, -1); }},
    {"LambdaLR", [] { optim::LambdaLR s(sgd(), std::vector<optim::LambdaLR::Lambda>{}); }},
    {"LambdaLR", [] { optim::LambdaLR s(sgd(), optim::LambdaLR::Lambda()); }},
    {"OneCycleLR", [] { optim::OneCycleLR s(sgd(), {0.1}, 0); }},
    {"OneCycleLR", [] { optim::OneCycleLR s(sgd(), {0.1}, -5); }},
    {"OneCycleLR", [] { optim::OneCycleLR s(sgd(), {0.1, 0.2}, 10); }},
    {"OneCycleLR", [] { optim::OneCycleLR s(sgd(), {0.1}, 10, {.pct_start = 1.5}); }},
    {"OneCycleLR", [] { optim::OneCycleLR s(sgd(), {0.1}, 10, {.anneal_strategy = "bogus"}); }},
    {"OneCycleLR", [] { optim::OneCycleLR s(sgd(), {0.1}, 10, {.base_momentum = {0.8, 0.9}}); }},
    {"SequentialLR", [] { optim::SequentialLR s(sgd(), {}, {}); }},
    {"SequentialLR",
     [] {
       auto a = std::make_shared<optim::StepLR>(sgd(), 2);
       optim::SequentialLR s(sgd(), {a}, {3});
     }},

    // --- Undefined (default-constructed) tensors, where the op checks for them ---
    {"equal", [] { return equal(Tensor(), f32({2})); }},
    {"isclose", [] { return isclose(f32({2}), Tensor()); }},
    {"allclose", [] { return allclose(Tensor(), f32({2})); }},

    // --- Autograd misuse ---
    {"backward", [] { param().backward(); }},
    {"backward", [] { f32({1}).backward(); }},
    {"backward", [] { (param() * 2).backward(f32({3})); }},
    {"requires_grad_", [] { return i64({2}).requires_grad_(); }},
    {"grad", [] { return autograd::grad({(param() * 2).sum()}, {f32({2})}); }},
    {"tensor", [] { return tensor({{1, 2}, {3}}); }},
};

// Cases that throw ember::Error labelled with something other than the op called: the check
// lives in a shared place that does not know the op.
const std::vector<BadInput> kKnownGaps = {
    // Tensor::impl() (core/tensor.h) throws "tensor is undefined (default-constructed)" for every
    // op below: no op checks its tensor arguments for defined() first.
    {"add", [] { return add(Tensor(), f32({2})); }},
    {"add", [] { return add(f32({2}), Tensor()); }},
    {"mul", [] { return f32({2}) * Tensor(); }},
    {"relu", [] { return relu(Tensor()); }},
    {"exp", [] { return exp(Tensor()); }},
    {"sum", [] { return sum(Tensor()); }},
    {"max", [] { return max(Tensor()); }},
    {"matmul",
     [] {
       return matmul(Tensor(), f32({2, 2}));
     }},
    {"mm",
     [] {
       return mm(f32({2, 2}), Tensor());
     }},
    {"cat",
     [] {
       return cat({f32({2}), Tensor()});
     }},
    {"stack", [] { return stack({Tensor()}); }},
    {"where", [] { return where(Tensor(), f32({2}), f32({2})); }},
    {"softmax", [] { return softmax(Tensor(), 0); }},
    {"conv2d",
     [] {
       return conv2d(Tensor(), f32({1, 1, 1, 1}));
     }},
    {"conv2d", [] { return conv2d(img(), Tensor()); }},
    {"linear",
     [] {
       return F::linear(f32({2, 3}), Tensor());
     }},
    {"layer_norm", [] { return layer_norm(Tensor(), {3}); }},
    {"batch_norm", [] { return batch_norm(Tensor(), {}, {}, {}, {}, true); }},
    {"embedding", [] { return embedding(Tensor(), tensor({0})); }},
    {"embedding",
     [] {
       return embedding(f32({4, 2}), Tensor());
     }},
    {"cross_entropy", [] { return cross_entropy(Tensor(), i64({2})); }},
    {"cross_entropy",
     [] {
       return cross_entropy(f32({2, 3}), Tensor());
     }},
    {"mse_loss", [] { return mse_loss(Tensor(), f32({2})); }},
    {"gather", [] { return gather(f32({2}), 0, Tensor()); }},
    {"index_select", [] { return index_select(f32({2}), 0, Tensor()); }},
    {"dropout", [] { return dropout(Tensor()); }},
    {"sort", [] { return sort(Tensor()); }},
    {"zeros_like", [] { return zeros_like(Tensor()); }},
    {"view", [] { return Tensor().view({1}); }},
    {"clone", [] { return Tensor().clone(); }},
    {"copy_", [] { return f32({2}).copy_(Tensor()); }},
    {"item", [] { return Tensor().item(); }},
    {"to", [] { return Tensor().to(kFloat64); }},
    {"backward", [] { Tensor().backward(); }},
    {"linear", [] { return Linear(3, 4)(Tensor()); }},
    // The layer's self_attn reports it, naming its own options ("MultiheadAttention: embed_dim (6)
    // must be divisible by num_heads (4)"), which tests/nn/test_transformer.cpp expects.
    {"TransformerEncoderLayer", [] { return TransformerEncoderLayer(6, 4); }},
    // A parameter too large to allocate: the message is empty()'s ("empty: ... overflows int64"),
    // not the module's.
    {"Linear", [] { return Linear(int64_t{1} << 31, int64_t{1} << 31); }},
    {"Embedding", [] { return Embedding(k62, 4); }},
};

TEST(BadInputTable, EveryCaseIsAnEmberErrorNamingItsOp) {
  EXPECT_GE(kBadInputs.size(), 300u);
  int passed = 0;
  for (size_t i = 0; i < kBadInputs.size(); ++i) {
    std::string what = unlabelled_error(kBadInputs[i].call, kBadInputs[i].op);
    if (what.empty())
      ++passed;
    else
      ADD_FAILURE() << "case " << i << " (" << kBadInputs[i].op << "): " << what;
  }
  int gaps = 0;
  for (size_t i = 0; i < kKnownGaps.size(); ++i) {
    try {
      kKnownGaps[i].call();
      ADD_FAILURE() << "known gap " << i << " (" << kKnownGaps[i].op << "): no error";
    } catch (const Error&) {
      ++gaps;
    }
  }
  std::cout << "[ BadInput ] " << passed << " of " << kBadInputs.size()
            << " cases throw ember::Error naming the op; " << gaps << " of " << kKnownGaps.size()
            << " known gaps throw ember::Error\n";
}

}  // namespace
}  // namespace ember::testing
