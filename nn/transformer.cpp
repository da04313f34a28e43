#include "ember/nn/transformer.h"

#include <cmath>

#include "ember/core/factories.h"
#include "ember/core/ops/dropout.h"
#include "ember/core/ops/dropout_add_layer_norm.h"
#include "ember/core/ops/elementwise.h"

namespace ember::nn {

TransformerActivation::TransformerActivation(std::string_view name) : name_(name) {
  if (name == "relu")
    fn_ = [](const Tensor& x) { return relu(x); };
  else if (name == "gelu")
    fn_ = [](const Tensor& x) { return gelu(x); };
  else
    throw Error(ember::detail::str_cat(
        "TransformerEncoderLayer: activation should be \"relu\" or \"gelu\", got \"", name, "\""));
}

Tensor activation_then_dropout(const TransformerActivation& activation, DropoutImpl& dropout,
                               const Tensor& x) {
  // GELU and dropout in one pass each way: the same mask and values, rounded once.
  if (activation.name() == "gelu") return gelu_dropout(x, dropout.options.p(), dropout.is_training());
  return dropout.forward(activation(x));
}

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(const TransformerEncoderLayerOptions& options_)
    : Module("TransformerEncoderLayer"), options(options_) {
  int64_t d = options.d_model(), ff = options.dim_feedforward();
  bool bias = options.bias();
  self_attn = register_module("self_attn", MultiheadAttention(MultiheadAttentionOptions(d, options.nhead())
                                                                  .dropout(options.dropout())
                                                                  .bias(bias)
                                                                  .batch_first(options.batch_first())));
  linear1 = register_module("linear1", Linear(LinearOptions(d, ff).bias(bias)));
  dropout = register_module("dropout", Dropout(options.dropout()));
  linear2 = register_module("linear2", Linear(LinearOptions(ff, d).bias(bias)));
  auto norm_options = LayerNormOptions({d}).eps(options.layer_norm_eps()).bias(bias);
  norm1 = register_module("norm1", LayerNorm(norm_options));
  norm2 = register_module("norm2", LayerNorm(norm_options));
  dropout1 = register_module("dropout1", Dropout(options.dropout()));
  dropout2 = register_module("dropout2", Dropout(options.dropout()));
}

Tensor TransformerEncoderLayerImpl::forward(const Tensor& src, const Tensor& src_mask,
                                            const Tensor& src_key_padding_mask, bool is_causal) {
  // The sublayers' outputs before their dropout.
  auto self_attention = [&](const Tensor& x) {
    return std::get<0>(self_attn(x, x, x, src_key_padding_mask, /*need_weights=*/false, src_mask,
                                 /*average_attn_weights=*/true, is_causal));
  };
  auto feed_forward = [&](const Tensor& x) {
    return linear2(activation_then_dropout(options.activation(), *dropout, linear1(x)));
  };
  Tensor x = src;
  if (options.norm_first()) {
    x = x + dropout1(self_attention(norm1(x)));
    return x + dropout2(feed_forward(norm2(x)));
  }
  // norm(x + dropout(h)) as one op each way; under autocast its output stays in the sublayer's
  // dtype, which the next layer's matmuls read with no cast.
  auto join = [](const Tensor& h, const Tensor& residual, LayerNormImpl& norm, DropoutImpl& drop) {
    return dropout_add_layer_norm(h, residual, norm.weight, norm.bias, drop.options.p(), norm.options.eps(),
                                  drop.is_training());
  };
  x = join(self_attention(x), x, *norm1, *dropout1);
  return join(feed_forward(x), x, *norm2, *dropout2);
}

TransformerEncoderImpl::TransformerEncoderImpl(const TransformerEncoderLayer& layer, int64_t num_layers,
                                               LayerNorm norm_)
    : Module("TransformerEncoder") {
  EMBER_CHECK(layer, "TransformerEncoder: the encoder layer is empty (a null holder)");
  EMBER_CHECK(num_layers >= 0, "TransformerEncoder: num_layers must not be negative, got ", num_layers);
  layers = register_module("layers", ModuleList());
  OrderedDict<Tensor> state = layer->state_dict();
  const Tensor& like = state[state.keys()[0]];
  for (int64_t i = 0; i < num_layers; ++i) {
    TransformerEncoderLayer copy(layer->options);
    copy->to(like.device(), like.dtype());
    copy->load_state_dict(state);
    copy->train(layer->is_training());
    layers->push_back(copy);
  }
  if (norm_) norm = register_module("norm", norm_);
}

Tensor TransformerEncoderImpl::forward(const Tensor& src, const Tensor& mask,
                                       const Tensor& src_key_padding_mask, bool is_causal) {
  Tensor x = src;
  for (size_t i = 0; i < layers->size(); ++i)
    x = layers->at<TransformerEncoderLayerImpl>(static_cast<int64_t>(i))
            .forward(x, mask, src_key_padding_mask, is_causal);
  return norm ? norm(x) : x;
}

Tensor generate_square_subsequent_mask(int64_t sz, TensorOptions options) {
  return full({sz, sz}, -INFINITY, options).triu(1);
}

}  // namespace ember::nn
