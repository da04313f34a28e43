#include "ember/distributed/parallel_transformer.h"

#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/ops/attention.h"
#include "ember/distributed/parallel_regions.h"
#include "ember/nn/functional.h"
#include "ember/nn/init.h"
#include "ember/nn/layer_util.h"

namespace ember::distributed {

namespace {
const char* kAttention = "ParallelSelfAttention";
}  // namespace

ParallelSelfAttentionImpl::ParallelSelfAttentionImpl(int64_t embed_dim_, int64_t num_heads_, double dropout_,
                                                     bool bias, const std::shared_ptr<ProcessGroup>& group,
                                                     bool sequence_parallel)
    : Module(kAttention),
      embed_dim(embed_dim_),
      num_heads(num_heads_),
      dropout(dropout_),
      group_(group_or_default(kAttention, group)),
      sequence_parallel_(sequence_parallel) {
  EMBER_CHECK(embed_dim > 0 && num_heads > 0 && embed_dim % num_heads == 0, kAttention, ": embed_dim (",
              embed_dim, ") must be a positive multiple of num_heads (", num_heads, ")");
  const int64_t local_heads = shard_size(kAttention, "num_heads", num_heads, *group_);
  const int64_t local = local_heads * (embed_dim / num_heads), first = group_->rank() * local;
  // nn::MultiheadAttention's draws, in its order: out_proj (Linear's init), then in_proj_weight.
  out_proj = register_module("out_proj", RowParallelLinear(RowParallelLinearOptions(embed_dim, embed_dim)
                                                               .bias(bias)
                                                               .input_is_parallel(true)
                                                               .sequence_parallel(sequence_parallel)
                                                               .sequence_dim(1)
                                                               .group(group_)));
  Tensor whole = empty({3 * embed_dim, embed_dim});
  nn::init::xavier_uniform_(whole);
  std::vector<Tensor> mine;
  for (int64_t b = 0; b < 3; ++b) mine.push_back(whole.narrow(0, b * embed_dim + first, local));
  in_proj_weight = register_parameter("in_proj_weight", cat(mine, 0));
  if (bias) {
    in_proj_bias = register_parameter("in_proj_bias", zeros({3 * local}));
    NoGradGuard no_grad;
    out_proj->bias.zero_();
  }
}

Tensor ParallelSelfAttentionImpl::forward(const Tensor& x, const Tensor& key_padding_mask) {
  EMBER_CHECK(x.dim() == 3, kAttention, ": expected x [N, L, E], got ", x.sizes());
  nn::detail::check_input_size(kAttention, x, -1, embed_dim, "features");
  nn::detail::check_like_param(kAttention, x, in_proj_weight);
  const Tensor whole = sequence_parallel_ ? gather_from_sequence_parallel_region(x, 1, group_)
                                          : copy_to_tensor_parallel_region(x, group_);
  const int64_t N = x.size(0), L = whole.size(1), D = embed_dim / num_heads,
                H = in_proj_weight.size(0) / (3 * D);
  Tensor mask;
  if (key_padding_mask.defined()) {
    EMBER_CHECK(key_padding_mask.dtype() == kBool && key_padding_mask.sizes().equals({N, L}), kAttention,
                ": expected a bool key_padding_mask [", N, ", ", L, "], got ", key_padding_mask.dtype(), " ",
                key_padding_mask.sizes());
    mask = key_padding_mask.logical_not().view({N, 1, 1, L});  // true = attend
  }
  std::vector<Tensor> qkv = nn::functional::linear(whole, in_proj_weight, in_proj_bias).chunk(3, -1);
  auto heads = [&](const Tensor& t) { return t.reshape({N, L, H, D}).transpose(1, 2); };
  Tensor out = scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), mask,
                                            is_training() ? dropout : 0.0);
  return out_proj(out.transpose(1, 2).reshape({N, L, H * D}));
}

// in_proj_weight and in_proj_bias: q, k and v split alike.
std::optional<ShardSpec> ParallelSelfAttentionImpl::shard_spec(const std::string&) const {
  return ShardSpec{0, 3};
}

ParallelTransformerEncoderLayerImpl::ParallelTransformerEncoderLayerImpl(
    const nn::TransformerEncoderLayerOptions& options_, const std::shared_ptr<ProcessGroup>& group,
    bool sequence_parallel)
    : Module("ParallelTransformerEncoderLayer"),
      options(options_),
      group_(group_or_default("ParallelTransformerEncoderLayer", group)),
      sequence_parallel_(sequence_parallel) {
  const int64_t d = options.d_model(), ff = options.dim_feedforward();
  const bool bias = options.bias();
  // Inside, the layer is batch first: the sequence is dim 1.
  self_attn = register_module("self_attn", ParallelSelfAttention(d, options.nhead(), options.dropout(), bias,
                                                                 group_, sequence_parallel));
  linear1 = register_module("linear1", ColumnParallelLinear(ColumnParallelLinearOptions(d, ff)
                                                                .bias(bias)
                                                                .gather_output(false)
                                                                .sequence_parallel(sequence_parallel)
                                                                .sequence_dim(1)
                                                                .group(group_)));
  dropout = register_module("dropout", nn::Dropout(options.dropout()));
  linear2 = register_module("linear2", RowParallelLinear(RowParallelLinearOptions(ff, d)
                                                             .bias(bias)
                                                             .input_is_parallel(true)
                                                             .sequence_parallel(sequence_parallel)
                                                             .sequence_dim(1)
                                                             .group(group_)));
  auto norm_options = nn::LayerNormOptions({d}).eps(options.layer_norm_eps()).bias(bias);
  norm1 = register_module("norm1", nn::LayerNorm(norm_options));
  norm2 = register_module("norm2", nn::LayerNorm(norm_options));
  dropout1 = register_module("dropout1", nn::Dropout(options.dropout()));
  dropout2 = register_module("dropout2", nn::Dropout(options.dropout()));
}

Tensor ParallelTransformerEncoderLayerImpl::forward(const Tensor& src, const Tensor& src_key_padding_mask) {
  auto self_attention = [&](const Tensor& x) { return dropout1(self_attn(x, src_key_padding_mask)); };
  auto feed_forward = [&](const Tensor& x) {
    return dropout2(linear2(nn::activation_then_dropout(options.activation(), *dropout, linear1(x))));
  };
  Tensor x = options.batch_first() ? src : src.transpose(0, 1);
  if (options.norm_first()) {
    x = x + self_attention(norm(norm1, x));
    x = x + feed_forward(norm(norm2, x));
  } else {
    x = norm(norm1, x + self_attention(x));
    x = norm(norm2, x + feed_forward(x));
  }
  return options.batch_first() ? x : x.transpose(0, 1);
}

Tensor ParallelTransformerEncoderLayerImpl::norm(const nn::LayerNorm& m, const Tensor& x) const {
  if (!sequence_parallel_) return m(x);
  // Each rank normalizes its own tokens: the weight's and bias's gradients sum over the group.
  auto shared = [&](const Tensor& p) { return p.defined() ? copy_to_tensor_parallel_region(p, group_) : p; };
  return layer_norm(x, m->options.normalized_shape(), shared(m->weight), shared(m->bias), m->options.eps());
}

}  // namespace ember::distributed
