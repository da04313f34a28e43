#pragma once

// TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer, TransformerDecoder and
// Transformer, as PyTorch's: the same submodule names (an encoder layer's self_attn, linear1,
// dropout, linear2, norm1, norm2, dropout1, dropout2; a decoder layer's adds multihead_attn, norm3
// and dropout3; a stack's "layers.i" and "norm"; Transformer's "encoder" and "decoder"), options,
// masks and layouts, so state_dict keys match.

#include <concepts>
#include <functional>
#include <string>

#include "ember/nn/attention.h"
#include "ember/nn/container.h"
#include "ember/nn/dropout.h"
#include "ember/nn/linear.h"
#include "ember/nn/normalization.h"

namespace ember::nn {

// The feed-forward activation: "relu", "gelu" or any Tensor -> Tensor callable.
class TransformerActivation {
 public:
  template <size_t N>
  TransformerActivation(const char (&name)[N]) : TransformerActivation(std::string_view(name)) {}
  explicit TransformerActivation(std::string_view name);
  template <class F>
  requires(std::is_invocable_r_v<Tensor, F, const Tensor&> && !std::same_as<F, TransformerActivation>)
      TransformerActivation(F fn)
      : fn_(std::move(fn)) {}

  Tensor operator()(const Tensor& x) const { return fn_(x); }
  // "relu" or "gelu" when named, else empty (a function).
  const std::string& name() const { return name_; }

 private:
  std::function<Tensor(const Tensor&)> fn_;
  std::string name_;
};

// dropout(activation(x)) as the feed-forward block applies it (GELU's with gelu_dropout).
Tensor activation_then_dropout(const TransformerActivation& activation, DropoutImpl& dropout,
                               const Tensor& x);

struct TransformerEncoderLayerOptions {
  TransformerEncoderLayerOptions(int64_t d_model, int64_t nhead) : d_model_(d_model), nhead_(nhead) {}
  EMBER_ARG(int64_t, d_model);
  EMBER_ARG(int64_t, nhead);
  EMBER_ARG(int64_t, dim_feedforward) = 2048;
  EMBER_ARG(double, dropout) = 0.1;
  EMBER_ARG(TransformerActivation, activation) = "relu";
  EMBER_ARG(double, layer_norm_eps) = 1e-5;
  EMBER_ARG(bool, batch_first) = false;
  EMBER_ARG(bool, norm_first) = false;  // pre-norm: x + sa(norm1(x)) rather than norm1(x + sa(x))
  EMBER_ARG(bool, bias) = true;         // in the linear and norm layers
};

// A decoder layer has the same options.
using TransformerDecoderLayerOptions = TransformerEncoderLayerOptions;

// Self-attention then a feed-forward block, each with a residual connection and a LayerNorm.
class TransformerEncoderLayerImpl : public Module {
 public:
  TransformerEncoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerEncoderLayerImpl(TransformerEncoderLayerOptions(d_model, nhead)) {}
  explicit TransformerEncoderLayerImpl(const TransformerEncoderLayerOptions& options);
  // src as MultiheadAttention's query; src_mask and src_key_padding_mask as its attn_mask and
  // key_padding_mask.
  Tensor forward(const Tensor& src, const Tensor& src_mask = {}, const Tensor& src_key_padding_mask = {},
                 bool is_causal = false);

  TransformerEncoderLayerOptions options;
  MultiheadAttention self_attn{nullptr};
  Linear linear1{nullptr};
  Dropout dropout{nullptr};
  Linear linear2{nullptr};
  LayerNorm norm1{nullptr}, norm2{nullptr};
  Dropout dropout1{nullptr}, dropout2{nullptr};
};
EMBER_MODULE(TransformerEncoderLayer);

// num_layers copies of `layer` (same options, same initial weights, as PyTorch's deep copies),
// then `norm` if given.
class TransformerEncoderImpl : public Module {
 public:
  TransformerEncoderImpl(const TransformerEncoderLayer& layer, int64_t num_layers, LayerNorm norm = nullptr);
  Tensor forward(const Tensor& src, const Tensor& mask = {}, const Tensor& src_key_padding_mask = {},
                 bool is_causal = false);

  ModuleList layers{nullptr};
  LayerNorm norm{nullptr};
};
EMBER_MODULE(TransformerEncoder);

// Self-attention over the target, attention from the target to the encoder's output (memory),
// then a feed-forward block, each with a residual connection and a LayerNorm.
class TransformerDecoderLayerImpl : public Module {
 public:
  TransformerDecoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerDecoderLayerImpl(TransformerDecoderLayerOptions(d_model, nhead)) {}
  explicit TransformerDecoderLayerImpl(const TransformerDecoderLayerOptions& options);
  // tgt as self_attn's query (with tgt_mask, tgt_key_padding_mask), then as multihead_attn's
  // query over memory's keys and values (with memory_mask, memory_key_padding_mask).
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = {},
                 const Tensor& memory_mask = {}, const Tensor& tgt_key_padding_mask = {},
                 const Tensor& memory_key_padding_mask = {}, bool tgt_is_causal = false,
                 bool memory_is_causal = false);

  TransformerDecoderLayerOptions options;
  MultiheadAttention self_attn{nullptr}, multihead_attn{nullptr};
  Linear linear1{nullptr};
  Dropout dropout{nullptr};
  Linear linear2{nullptr};
  LayerNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};
  Dropout dropout1{nullptr}, dropout2{nullptr}, dropout3{nullptr};
};
EMBER_MODULE(TransformerDecoderLayer);

// num_layers copies of `layer`, then `norm` if given, as TransformerEncoder.
class TransformerDecoderImpl : public Module {
 public:
  TransformerDecoderImpl(const TransformerDecoderLayer& layer, int64_t num_layers, LayerNorm norm = nullptr);
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = {},
                 const Tensor& memory_mask = {}, const Tensor& tgt_key_padding_mask = {},
                 const Tensor& memory_key_padding_mask = {}, bool tgt_is_causal = false,
                 bool memory_is_causal = false);

  ModuleList layers{nullptr};
  LayerNorm norm{nullptr};
};
EMBER_MODULE(TransformerDecoder);

struct TransformerOptions {
  EMBER_ARG(int64_t, d_model) = 512;
  EMBER_ARG(int64_t, nhead) = 8;
  EMBER_ARG(int64_t, num_encoder_layers) = 6;
  EMBER_ARG(int64_t, num_decoder_layers) = 6;
  EMBER_ARG(int64_t, dim_feedforward) = 2048;
  EMBER_ARG(double, dropout) = 0.1;
  EMBER_ARG(TransformerActivation, activation) = "relu";
  EMBER_ARG(double, layer_norm_eps) = 1e-5;
  EMBER_ARG(bool, batch_first) = false;
  EMBER_ARG(bool, norm_first) = false;
  EMBER_ARG(bool, bias) = true;
};

// "Attention Is All You Need": an encoder and a decoder stack, each ending in a LayerNorm, every
// matrix initialized xavier_uniform_ (PyTorch's _reset_parameters). Embeddings and the output
// projection are the caller's, as in PyTorch.
class TransformerImpl : public Module {
 public:
  explicit TransformerImpl(const TransformerOptions& options = {});
  // src [S, N, E] and tgt [T, N, E] ([N, S, E], [N, T, E] with batch_first; unbatched [S, E],
  // [T, E]); the output is like tgt. The masks as TransformerEncoder's and TransformerDecoder's:
  // src_mask [S, S], tgt_mask [T, T], memory_mask [T, S]; key padding masks [N, S], [N, T], [N, S].
  Tensor forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask = {},
                 const Tensor& tgt_mask = {}, const Tensor& memory_mask = {},
                 const Tensor& src_key_padding_mask = {}, const Tensor& tgt_key_padding_mask = {},
                 const Tensor& memory_key_padding_mask = {}, bool src_is_causal = false,
                 bool tgt_is_causal = false, bool memory_is_causal = false);

  TransformerOptions options;
  TransformerEncoder encoder{nullptr};
  TransformerDecoder decoder{nullptr};
};
EMBER_MODULE(Transformer);

// The [sz, sz] causal mask: 0 on and below the diagonal, -inf above (nn.Transformer's
// generate_square_subsequent_mask).
Tensor generate_square_subsequent_mask(int64_t sz, TensorOptions options = {});

}  // namespace ember::nn
