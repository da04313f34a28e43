#include "ember/nn/transformer.h"

#include <cmath>

#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/ops/dropout.h"
#include "ember/core/ops/dropout_add_layer_norm.h"
#include "ember/core/ops/elementwise.h"
#include "ember/nn/init.h"

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

namespace {

MultiheadAttention attention(const TransformerEncoderLayerOptions& o) {
  return MultiheadAttention(MultiheadAttentionOptions(o.d_model(), o.nhead())
                                .dropout(o.dropout())
                                .bias(o.bias())
                                .batch_first(o.batch_first()));
}

LayerNorm make_norm(int64_t d_model, double eps, bool bias) {
  return LayerNorm(LayerNormOptions({d_model}).eps(eps).bias(bias));
}

// linear2(dropout(activation(linear1(x)))): the feed-forward block before its own dropout.
Tensor feed_forward(const TransformerActivation& activation, Linear& linear1, DropoutImpl& dropout,
                    Linear& linear2, const Tensor& x) {
  return linear2(activation_then_dropout(activation, dropout, linear1(x)));
}

// norm(residual + drop(h)) as one op each way; under autocast its output stays in the sublayer's
// dtype, which the next layer's matmuls read with no cast.
Tensor add_norm(const Tensor& h, const Tensor& residual, LayerNormImpl& norm, DropoutImpl& drop) {
  return dropout_add_layer_norm(h, residual, norm.weight, norm.bias, drop.options.p(), norm.options.eps(),
                                drop.is_training());
}

// num_layers copies of `layer` (same options, same weights: PyTorch's deep copies), for `who`.
template <class Layer>
ModuleList copies_of(const char* who, const char* kind, const Layer& layer, int64_t num_layers) {
  EMBER_CHECK(layer, who, ": the ", kind, " layer is empty (a null holder)");
  EMBER_CHECK(num_layers >= 0, who, ": num_layers must not be negative, got ", num_layers);
  ModuleList list;
  OrderedDict<Tensor> state = layer->state_dict();
  const Tensor& like = state[state.keys()[0]];
  for (int64_t i = 0; i < num_layers; ++i) {
    Layer copy(layer->options);
    copy->to(like.device(), like.dtype());
    copy->load_state_dict(state);
    copy->train(layer->is_training());
    list->push_back(copy);
  }
  return list;
}

}  // namespace

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(const TransformerEncoderLayerOptions& options_)
    : Module("TransformerEncoderLayer"), options(options_) {
  const int64_t d = options.d_model(), ff = options.dim_feedforward();
  const bool bias = options.bias();
  self_attn = register_module("self_attn", attention(options));
  linear1 = register_module("linear1", Linear(LinearOptions(d, ff).bias(bias)));
  dropout = register_module("dropout", Dropout(options.dropout()));
  linear2 = register_module("linear2", Linear(LinearOptions(ff, d).bias(bias)));
  norm1 = register_module("norm1", make_norm(d, options.layer_norm_eps(), bias));
  norm2 = register_module("norm2", make_norm(d, options.layer_norm_eps(), bias));
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
  auto ff = [&](const Tensor& x) {
    return feed_forward(options.activation(), linear1, *dropout, linear2, x);
  };
  Tensor x = src;
  if (options.norm_first()) {
    x = x + dropout1(self_attention(norm1(x)));
    return x + dropout2(ff(norm2(x)));
  }
  x = add_norm(self_attention(x), x, *norm1, *dropout1);
  return add_norm(ff(x), x, *norm2, *dropout2);
}

TransformerEncoderImpl::TransformerEncoderImpl(const TransformerEncoderLayer& layer, int64_t num_layers,
                                               LayerNorm norm_)
    : Module("TransformerEncoder") {
  layers = register_module("layers", copies_of("TransformerEncoder", "encoder", layer, num_layers));
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

TransformerDecoderLayerImpl::TransformerDecoderLayerImpl(const TransformerDecoderLayerOptions& options_)
    : Module("TransformerDecoderLayer"), options(options_) {
  const int64_t d = options.d_model(), ff = options.dim_feedforward();
  const bool bias = options.bias();
  self_attn = register_module("self_attn", attention(options));
  multihead_attn = register_module("multihead_attn", attention(options));
  linear1 = register_module("linear1", Linear(LinearOptions(d, ff).bias(bias)));
  dropout = register_module("dropout", Dropout(options.dropout()));
  linear2 = register_module("linear2", Linear(LinearOptions(ff, d).bias(bias)));
  norm1 = register_module("norm1", make_norm(d, options.layer_norm_eps(), bias));
  norm2 = register_module("norm2", make_norm(d, options.layer_norm_eps(), bias));
  norm3 = register_module("norm3", make_norm(d, options.layer_norm_eps(), bias));
  dropout1 = register_module("dropout1", Dropout(options.dropout()));
  dropout2 = register_module("dropout2", Dropout(options.dropout()));
  dropout3 = register_module("dropout3", Dropout(options.dropout()));
}

Tensor TransformerDecoderLayerImpl::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                            const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                            const Tensor& memory_key_padding_mask, bool tgt_is_causal,
                                            bool memory_is_causal) {
  auto self_attention = [&](const Tensor& x) {
    return std::get<0>(self_attn(x, x, x, tgt_key_padding_mask, /*need_weights=*/false, tgt_mask,
                                 /*average_attn_weights=*/true, tgt_is_causal));
  };
  auto cross_attention = [&](const Tensor& x) {
    return std::get<0>(multihead_attn(x, memory, memory, memory_key_padding_mask, /*need_weights=*/false,
                                      memory_mask, /*average_attn_weights=*/true, memory_is_causal));
  };
  auto ff = [&](const Tensor& x) {
    return feed_forward(options.activation(), linear1, *dropout, linear2, x);
  };
  Tensor x = tgt;
  if (options.norm_first()) {
    x = x + dropout1(self_attention(norm1(x)));
    x = x + dropout2(cross_attention(norm2(x)));
    return x + dropout3(ff(norm3(x)));
  }
  x = add_norm(self_attention(x), x, *norm1, *dropout1);
  x = add_norm(cross_attention(x), x, *norm2, *dropout2);
  return add_norm(ff(x), x, *norm3, *dropout3);
}

TransformerDecoderImpl::TransformerDecoderImpl(const TransformerDecoderLayer& layer, int64_t num_layers,
                                               LayerNorm norm_)
    : Module("TransformerDecoder") {
  layers = register_module("layers", copies_of("TransformerDecoder", "decoder", layer, num_layers));
  if (norm_) norm = register_module("norm", norm_);
}

Tensor TransformerDecoderImpl::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                       const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                       const Tensor& memory_key_padding_mask, bool tgt_is_causal,
                                       bool memory_is_causal) {
  Tensor x = tgt;
  for (size_t i = 0; i < layers->size(); ++i)
    x = layers->at<TransformerDecoderLayerImpl>(static_cast<int64_t>(i))
            .forward(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                     tgt_is_causal, memory_is_causal);
  return norm ? norm(x) : x;
}

TransformerImpl::TransformerImpl(const TransformerOptions& options_)
    : Module("Transformer"), options(options_) {
  const TransformerEncoderLayerOptions layer_options =
      TransformerEncoderLayerOptions(options.d_model(), options.nhead())
          .dim_feedforward(options.dim_feedforward())
          .dropout(options.dropout())
          .activation(options.activation())
          .layer_norm_eps(options.layer_norm_eps())
          .batch_first(options.batch_first())
          .norm_first(options.norm_first())
          .bias(options.bias());
  auto norm = [&] { return make_norm(options.d_model(), options.layer_norm_eps(), options.bias()); };
  encoder = register_module("encoder", TransformerEncoder(TransformerEncoderLayer(layer_options),
                                                          options.num_encoder_layers(), norm()));
  decoder = register_module("decoder", TransformerDecoder(TransformerDecoderLayer(layer_options),
                                                          options.num_decoder_layers(), norm()));
  NoGradGuard no_grad;
  for (const Tensor& p : parameters())
    if (p.dim() > 1) init::xavier_uniform_(p);
}

Tensor TransformerImpl::forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask,
                                const Tensor& tgt_mask, const Tensor& memory_mask,
                                const Tensor& src_key_padding_mask, const Tensor& tgt_key_padding_mask,
                                const Tensor& memory_key_padding_mask, bool src_is_causal, bool tgt_is_causal,
                                bool memory_is_causal) {
  EMBER_CHECK(src.defined() && tgt.defined(), "Transformer: expected defined src and tgt");
  EMBER_CHECK(src.dim() == tgt.dim() && (src.dim() == 2 || src.dim() == 3),
              "Transformer: src and tgt must both be batched (3-D) or both unbatched (2-D), got src ",
              src.sizes(), " and tgt ", tgt.sizes());
  const int64_t batch_dim = options.batch_first() ? 0 : 1;
  EMBER_CHECK(src.dim() == 2 || src.size(batch_dim) == tgt.size(batch_dim),
              "Transformer: the batch number of src and tgt must be equal, got src ", src.sizes(),
              " and tgt ", tgt.sizes(), options.batch_first() ? " (batch_first)" : "");
  EMBER_CHECK(src.size(-1) == options.d_model() && tgt.size(-1) == options.d_model(),
              "Transformer: the feature number of src and tgt must be equal to d_model (", options.d_model(),
              "), got src ", src.sizes(), " and tgt ", tgt.sizes());
  const Tensor memory = encoder(src, src_mask, src_key_padding_mask, src_is_causal);
  return decoder(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                 tgt_is_causal, memory_is_causal);
}

Tensor generate_square_subsequent_mask(int64_t sz, TensorOptions options) {
  return full({sz, sz}, -INFINITY, options).triu(1);
}

}  // namespace ember::nn
