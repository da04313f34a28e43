#include "ember/distributed/parallel_linear.h"

#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/distributed/parallel_regions.h"
#include "ember/nn/functional.h"
#include "ember/nn/layer_util.h"

namespace ember::distributed {

namespace {

// nn::Linear's initialization of the whole [out, in] layer (weight, then bias, from the current
// RNG state), of which the caller keeps a slice.
std::pair<Tensor, Tensor> whole_linear(int64_t in, int64_t out, bool with_bias) {
  Tensor w = empty({out, in}), b = with_bias ? empty({out}) : Tensor();
  nn::detail::reset_fan_in_uniform(w, b);
  return {w, b};
}

const char* kColumn = "ColumnParallelLinear";
const char* kRow = "RowParallelLinear";

}  // namespace

ColumnParallelLinearImpl::ColumnParallelLinearImpl(const ColumnParallelLinearOptions& options_)
    : Module(kColumn), options(options_), group_(group_or_default(kColumn, options_.group())) {
  const int64_t rows = shard_size(kColumn, "out_features", options.out_features(), *group_);
  EMBER_CHECK(options.in_features() > 0, kColumn, ": in_features must be positive, got ",
              options.in_features());
  auto [w, b] = whole_linear(options.in_features(), options.out_features(), options.bias());
  const int64_t first = group_->rank() * rows;
  weight = register_parameter("weight", w.narrow(0, first, rows).clone());
  if (options.bias()) bias = register_parameter("bias", b.narrow(0, first, rows).clone());
}

Tensor ColumnParallelLinearImpl::forward(const Tensor& x) {
  nn::detail::check_input_size(kColumn, x, -1, options.in_features(), "features");
  nn::detail::check_like_param(kColumn, x, weight);
  const Tensor whole = options.sequence_parallel()
                           ? gather_from_sequence_parallel_region(x, options.sequence_dim(), group_)
                           : copy_to_tensor_parallel_region(x, group_);
  Tensor y = nn::functional::linear(whole, weight, bias);
  return options.gather_output() ? gather_from_tensor_parallel_region(y, group_) : y;
}

std::optional<ShardSpec> ColumnParallelLinearImpl::shard_spec(const std::string&) const {
  return ShardSpec{};
}

std::string ColumnParallelLinearImpl::extra_repr() const {
  return ember::detail::str_cat(
      "in_features=", options.in_features(), ", out_features=", options.out_features(),
      ", bias=", nn::detail::bool_str(options.bias()),
      ", gather_output=", nn::detail::bool_str(options.gather_output()),
      options.sequence_parallel()
          ? ember::detail::str_cat(", sequence_parallel=true, sequence_dim=", options.sequence_dim())
          : "",
      ", world=", group_->size());
}

RowParallelLinearImpl::RowParallelLinearImpl(const RowParallelLinearOptions& options_)
    : Module(kRow), options(options_), group_(group_or_default(kRow, options_.group())) {
  const int64_t cols = shard_size(kRow, "in_features", options.in_features(), *group_);
  EMBER_CHECK(options.out_features() > 0, kRow, ": out_features must be positive, got ",
              options.out_features());
  EMBER_CHECK(!options.sequence_parallel() || options.input_is_parallel(), kRow,
              ": sequence_parallel needs input_is_parallel (the input split by features, as a "
              "ColumnParallelLinear without gather_output leaves it)");
  auto [w, b] = whole_linear(options.in_features(), options.out_features(), options.bias());
  weight = register_parameter("weight", w.narrow(1, group_->rank() * cols, cols).clone());
  if (options.bias()) bias = register_parameter("bias", b);
}

Tensor RowParallelLinearImpl::forward(const Tensor& x) {
  const int64_t in = options.input_is_parallel() ? weight.size(1) : options.in_features();
  nn::detail::check_input_size(kRow, x, -1, in, "features");
  nn::detail::check_like_param(kRow, x, weight);
  Tensor part = options.input_is_parallel() ? x : scatter_to_tensor_parallel_region(x, group_);
  const Tensor partial = nn::functional::linear(part, weight, Tensor());
  if (!options.sequence_parallel()) {
    Tensor y = reduce_from_tensor_parallel_region(partial, group_);
    return bias.defined() ? y + bias : y;
  }
  // Each rank adds the bias to its own tokens: the bias's gradient is the sum over the group.
  Tensor y = reduce_scatter_to_sequence_parallel_region(partial, options.sequence_dim(), group_);
  return bias.defined() ? y + copy_to_tensor_parallel_region(bias, group_) : y;
}

std::optional<ShardSpec> RowParallelLinearImpl::shard_spec(const std::string& name) const {
  return name == "weight" ? std::optional<ShardSpec>(ShardSpec{1}) : std::nullopt;
}

std::string RowParallelLinearImpl::extra_repr() const {
  return ember::detail::str_cat(
      "in_features=", options.in_features(), ", out_features=", options.out_features(),
      ", bias=", nn::detail::bool_str(options.bias()),
      ", input_is_parallel=", nn::detail::bool_str(options.input_is_parallel()),
      options.sequence_parallel()
          ? ember::detail::str_cat(", sequence_parallel=true, sequence_dim=", options.sequence_dim())
          : "",
      ", world=", group_->size());
}

}  // namespace ember::distributed
