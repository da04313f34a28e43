#include "ember/core/ops/multinomial.h"

#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/ops/nn_util.h"
#include "ember/core/ops/reduce.h"
#include "ember/core/ops/scan.h"
#include "ember/core/ops/shape_ops.h"
#include "ember/core/ops/sorting.h"
#include "ember/core/random.h"

namespace ember {
namespace {

constexpr int64_t kMaxCompares = int64_t{1} << 26;  // elements of one chunk's [R, n, C] comparison

// Throws for weights PyTorch refuses, from one read-back of three flags.
void check_weights(const Tensor& w, int64_t num_samples, bool replacement) {
  const Tensor flags =
      stack({(w < 0).logical_or(w.isnan()).logical_or(w.isinf()).any(), (w.sum({1}) <= 0).any(),
             replacement ? zeros({}, TensorOptions(kBool).device(w.device()))
                         : ((w > 0).sum({1}) < num_samples).any()},
            0)
          .cpu();
  const bool* f = flags.data_ptr<bool>();
  EMBER_CHECK(!f[0], "multinomial: probability tensor contains either inf, nan or element < 0");
  EMBER_CHECK(!f[1], "multinomial: invalid multinomial distribution (sum of probabilities <= 0)");
  EMBER_CHECK(!f[2],
              "multinomial: invalid multinomial distribution (with replacement=False, not enough "
              "categories with a positive weight to draw ",
              num_samples, ")");
}

// Each draw: the first category whose cumulative weight exceeds u * total, in chunks of samples so
// the comparison stays under kMaxCompares elements.
Tensor with_replacement(const Tensor& w, int64_t n, Generator* gen) {
  const int64_t R = w.size(0), C = w.size(1);
  const Tensor cdf = cumsum(w, 1);
  const Tensor total = cdf.narrow(1, C - 1, 1);
  // u * total can round up to total: such a draw takes the last category with a positive weight.
  const Tensor last =
      ((w > 0).to(kInt64) * arange(C, TensorOptions(kInt64).device(w.device()))).amax({1}, true);
  const int64_t chunk = std::max<int64_t>(1, kMaxCompares / std::max<int64_t>(R * C, 1));
  std::vector<Tensor> parts;
  for (int64_t s = 0; s < n; s += chunk) {
    const int64_t k = std::min(chunk, n - s);
    const Tensor u = rand({R, k}, w.options(), gen) * total;
    const Tensor idx = (cdf.unsqueeze(1) <= u.unsqueeze(2)).sum({2});
    parts.push_back(minimum(idx, last));
  }
  return parts.size() == 1 ? parts[0] : cat(parts, 1);
}

}  // namespace

Tensor multinomial(const Tensor& input, int64_t num_samples, bool replacement, Generator* gen) {
  detail::OpRange op_range("multinomial", input);
  const char* op = "multinomial";
  EMBER_CHECK(input.defined(), op, ": the probability tensor is undefined (default-constructed)");
  EMBER_CHECK(input.dim() == 1 || input.dim() == 2, op, ": prob_dist must be 1 or 2 dim, got ", input.dim(),
              "D (shape ", input.sizes(), ")");
  EMBER_CHECK(input.is_floating_point(), op, ": expected a floating point probability tensor, got ",
              input.dtype());
  EMBER_CHECK(num_samples > 0, op, ": cannot sample n_sample <= 0 samples, got ", num_samples);
  const int64_t C = input.size(-1);
  EMBER_CHECK(C > 0, op, ": the probability tensor has no categories (shape ", input.sizes(), ")");
  EMBER_CHECK(replacement || num_samples <= C, op, ": cannot sample n_sample > prob_dist.size(-1) samples ",
              "without replacement (", num_samples, " > ", C, ")");
  NoGradGuard no_grad;
  const Tensor w =
      (input.dim() == 1 ? input.unsqueeze(0) : input).to(nn_detail::compute_dtype(input.dtype()));
  check_weights(w, num_samples, replacement);
  Tensor out;
  if (replacement) {
    out = with_replacement(w, num_samples, gen);
  } else {
    // Keys log(u) / w: the largest num_samples of a row are a draw without replacement (weight 0
    // gives -inf, never among them once enough weights are positive).
    const Tensor keys = log(rand(w.sizes(), w.options(), gen)) / w;
    out = std::get<1>(topk(keys, num_samples, 1));
  }
  return input.dim() == 1 ? out.squeeze(0) : out;
}

}  // namespace ember
