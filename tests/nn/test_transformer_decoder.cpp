// TransformerDecoderLayer, TransformerDecoder and Transformer: each layer is its three blocks over
// MultiheadAttention, LayerNorm and Linear (themselves checked against PyTorch), with PyTorch's
// state_dict keys and parameter count, masks that hide what they should, gradcheck, a model that
// learns, and errors.
#include "ember/nn/transformer.h"
#include "ember/optim/adam.h"
#include "nn_test_util.h"

namespace ember::testing {
namespace {

namespace nn = ember::nn;

// PyTorch's TransformerDecoderLayer.forward with ReLU and no dropout, written out from the layer's
// submodules.
Tensor decoder_layer_reference(nn::TransformerDecoderLayerImpl& l, const Tensor& tgt, const Tensor& memory,
                               const Tensor& tgt_mask, const Tensor& memory_key_padding_mask) {
  auto sa = [&](const Tensor& x) { return std::get<0>(l.self_attn(x, x, x, Tensor(), false, tgt_mask)); };
  auto ca = [&](const Tensor& x) {
    return std::get<0>(l.multihead_attn(x, memory, memory, memory_key_padding_mask, false));
  };
  auto ff = [&](const Tensor& x) { return l.linear2(relu(l.linear1(x))); };
  Tensor x = tgt;
  if (l.options.norm_first()) {
    x = x + sa(l.norm1(x));
    x = x + ca(l.norm2(x));
    return x + ff(l.norm3(x));
  }
  x = l.norm1(x + sa(x));
  x = l.norm2(x + ca(x));
  return l.norm3(x + ff(x));
}

TEST(NnTransformerDecoderLayer, IsSelfAttentionCrossAttentionAndFeedForward) {
  const Tensor tgt = wave({3, 2, 4}, 0.7, 0.3), memory = wave({5, 2, 4}, 0.45, 0.1);
  const Tensor causal = nn::generate_square_subsequent_mask(3, kFloat64);
  const Tensor padding = tensor({{false, false, false, false, true}, {false, false, false, false, false}});
  for (bool norm_first : {false, true}) {
    SCOPED_TRACE(norm_first ? "norm_first" : "post-norm");
    nn::TransformerDecoderLayer layer(
        nn::TransformerDecoderLayerOptions(4, 2).dim_feedforward(6).norm_first(norm_first));
    fill_with_waves(*layer);
    EXPECT_CLOSE(layer(tgt, memory, causal, Tensor(), Tensor(), padding),
                 decoder_layer_reference(*layer, tgt, memory, causal, padding));
    // batch_first: the same numbers, the batch first.
    nn::TransformerDecoderLayer bf(
        nn::TransformerDecoderLayerOptions(4, 2).dim_feedforward(6).norm_first(norm_first).batch_first(true));
    fill_with_waves(*bf);
    EXPECT_CLOSE(bf(tgt.transpose(0, 1), memory.transpose(0, 1), causal, Tensor(), Tensor(), padding),
                 layer(tgt, memory, causal, Tensor(), Tensor(), padding).transpose(0, 1));
  }
  nn::TransformerDecoderLayer layer(nn::TransformerDecoderLayerOptions(4, 2).dim_feedforward(6));
  fill_with_waves(*layer);
  EXPECT_EQ(keys_of(layer->state_dict()),
            (std::vector<std::string>{
                "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                "self_attn.out_proj.bias", "multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias",
                "multihead_attn.out_proj.weight", "multihead_attn.out_proj.bias", "linear1.weight",
                "linear1.bias", "linear2.weight", "linear2.bias", "norm1.weight", "norm1.bias",
                "norm2.weight", "norm2.bias", "norm3.weight", "norm3.bias"}));
  EXPECT_EQ(layer->named_children().keys(),
            (std::vector<std::string>{"self_attn", "multihead_attn", "linear1", "dropout", "linear2", "norm1",
                                      "norm2", "norm3", "dropout1", "dropout2", "dropout3"}));
  gradcheck_module(
      *layer, [&](const Tensor& x) { return layer(x, memory.slice(1, 0, 1)); }, wave({2, 1, 4}, 0.7, 0.3));
}

TEST(NnTransformerDecoder, CopiesTheLayerAndEndsInItsNorm) {
  nn::TransformerDecoderLayer layer(nn::TransformerDecoderLayerOptions(4, 2).dim_feedforward(6));
  fill_with_waves(*layer);
  nn::LayerNorm norm(nn::LayerNormOptions({4}));
  norm->to(kFloat64);
  nn::TransformerDecoder dec(layer, 2, norm);
  dec->eval();
  const std::vector<std::string> keys = keys_of(dec->state_dict());
  ASSERT_EQ(keys.size(), 38u);
  EXPECT_EQ(keys[18], "layers.1.self_attn.in_proj_weight");
  EXPECT_EQ(keys[37], "norm.bias");
  auto second = dec->layers->ptr<nn::TransformerDecoderLayerImpl>(1);
  EXPECT_CLOSE(second->multihead_attn->in_proj_weight, layer->multihead_attn->in_proj_weight);
  EXPECT_FALSE(second->linear1->weight.is_same(layer->linear1->weight));
  const Tensor tgt = wave({3, 2, 4}, 0.7, 0.3), memory = wave({5, 2, 4}, 0.45, 0.1);
  EXPECT_CLOSE(dec(tgt, memory), norm(layer(layer(tgt, memory), memory)));
}

// nn.Transformer(): 184 tensors, 44,140,544 parameters, under PyTorch's names.
TEST(NnTransformer, HasPyTorchsParametersAndNames) {
  nn::Transformer model;
  const std::vector<std::string> keys = keys_of(model->state_dict());
  ASSERT_EQ(keys.size(), 184u);
  EXPECT_EQ(keys[0], "encoder.layers.0.self_attn.in_proj_weight");
  EXPECT_EQ(keys[72], "encoder.norm.weight");
  EXPECT_EQ(keys[74], "decoder.layers.0.self_attn.in_proj_weight");
  EXPECT_EQ(keys[78], "decoder.layers.0.multihead_attn.in_proj_weight");
  EXPECT_EQ(keys[183], "decoder.norm.bias");
  int64_t n = 0;
  for (const Tensor& p : model->parameters()) n += p.numel();
  EXPECT_EQ(n, 44140544);
  // xavier_uniform_ on every matrix: bound sqrt(6 / (fan_in + fan_out)); each layer's own draw.
  const auto& layers = model->encoder->layers;
  const Tensor w0 = layers->ptr<nn::TransformerEncoderLayerImpl>(0)->linear1->weight;
  const Tensor w1 = layers->ptr<nn::TransformerEncoderLayerImpl>(1)->linear1->weight;
  EXPECT_LE(w0.abs().max().item<double>(), std::sqrt(6.0 / (512 + 2048)));
  EXPECT_GT(w0.abs().max().item<double>(), 0.9 * std::sqrt(6.0 / (512 + 2048)));
  EXPECT_FALSE(w0.equal(w1));
}

// A target position sees no later target position under the causal mask, and no position sees a
// padded source position.
TEST(NnTransformer, MasksHideTheFutureAndThePadding) {
  manual_seed(3);
  nn::Transformer model(nn::TransformerOptions()
                            .d_model(8)
                            .nhead(2)
                            .num_encoder_layers(1)
                            .num_decoder_layers(1)
                            .dim_feedforward(16));
  model->eval();
  const Tensor src = randn({5, 2, 8}), tgt = randn({4, 2, 8});
  const Tensor causal = nn::generate_square_subsequent_mask(4);
  const Tensor pad = tensor({{false, false, false, false, true}, {false, false, false, false, false}});
  auto run = [&](const Tensor& s, const Tensor& t) {
    return model(s, t, Tensor(), causal, Tensor(), pad, Tensor(), pad);
  };
  const Tensor out = run(src, tgt);
  EXPECT_EQ(out.sizes(), tgt.sizes());
  Tensor later = tgt.clone();
  later[3].fill_(5.0);
  const Tensor changed = run(src, later);
  EXPECT_CLOSE(changed.slice(0, 0, 3), out.slice(0, 0, 3));
  EXPECT_FALSE(changed[3].allclose(out[3]));
  Tensor padded = src.clone();
  padded[4][0].fill_(-7.0);
  const Tensor unseen = run(padded, tgt);
  EXPECT_CLOSE(unseen.select(1, 0), out.select(1, 0));
  // Without the padding masks the same change reaches batch 0.
  auto unmasked = [&](const Tensor& s) { return model(s, tgt, Tensor(), causal); };
  EXPECT_FALSE(unmasked(padded).select(1, 0).allclose(unmasked(src).select(1, 0)));
  // Unbatched inputs: the batch of one, squeezed.
  EXPECT_CLOSE(model(src.select(1, 1), tgt.select(1, 1), Tensor(), causal),
               model(src.slice(1, 1, 2), tgt.slice(1, 1, 2), Tensor(), causal).squeeze(1));
}

// Teacher-forced reversal: the decoder learns to emit the source sequence backwards, a token at a
// time, which it can only do by attending to the right source position.
TEST(NnTransformer, LearnsToReverseASequence) {
  manual_seed(0);
  constexpr int64_t kVocab = 8, kLen = 5, kBatch = 32, kDim = 32;
  nn::Embedding embed(kVocab, kDim), position(kLen, kDim);
  nn::Transformer model(nn::TransformerOptions()
                            .d_model(kDim)
                            .nhead(4)
                            .num_encoder_layers(1)
                            .num_decoder_layers(1)
                            .dim_feedforward(64)
                            .dropout(0.0)
                            .batch_first(true));
  nn::Linear head(kDim, kVocab);
  std::vector<Tensor> params = model->parameters();
  for (nn::Module* m : std::vector<nn::Module*>{embed.get(), position.get(), head.get()})
    for (const Tensor& p : m->parameters()) params.push_back(p);
  optim::Adam opt(params, optim::AdamOptions(3e-3));
  const Tensor positions = arange(kLen, kInt64), causal = nn::generate_square_subsequent_mask(kLen);
  auto inputs = [&](const Tensor& tokens) { return embed(tokens) + position(positions); };
  double accuracy = 0;
  for (int step = 0; step < 200; ++step) {
    const Tensor src = randint(1, kVocab, {kBatch, kLen}), reversed = src.flip({1});
    const Tensor tgt_in = cat({zeros({kBatch, 1}, kInt64), reversed.slice(1, 0, kLen - 1)}, 1);  // 0 starts
    const Tensor logits = head(model(inputs(src), inputs(tgt_in), Tensor(), causal, Tensor(), Tensor(),
                                     Tensor(), Tensor(), false, true));
    const Tensor loss = cross_entropy(logits.reshape({-1, kVocab}), reversed.reshape({-1}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    accuracy = (logits.argmax(-1) == reversed).to(kFloat32).mean().item<double>();
  }
  EXPECT_GT(accuracy, 0.95);
}

TEST(NnTransformer, Errors) {
  nn::Transformer model(
      nn::TransformerOptions().d_model(4).nhead(2).num_encoder_layers(1).num_decoder_layers(1));
  EXPECT_EMBER_ERROR(model(randn({3, 2, 4}), randn({3, 3, 4})),
                     "Transformer: the batch number of src and tgt", "[3, 2, 4]", "[3, 3, 4]");
  EXPECT_EMBER_ERROR(model(randn({3, 2, 4}), randn({3, 2, 5})), "Transformer: the feature number",
                     "d_model (4)");
  EXPECT_EMBER_ERROR(model(randn({3, 4}), randn({3, 2, 4})), "Transformer: src and tgt must both be batched");
  EXPECT_EMBER_ERROR(nn::TransformerDecoder(nn::TransformerDecoderLayer(nullptr), 2),
                     "TransformerDecoder: the decoder layer is empty");
  EXPECT_EMBER_ERROR(nn::TransformerDecoder(nn::TransformerDecoderLayer(4, 2), -1),
                     "TransformerDecoder: num_layers must not be negative");
  nn::TransformerDecoderLayer layer(4, 2);
  EXPECT_EMBER_ERROR(layer(randn({3, 2, 4}), randn({5, 2, 6})), "MultiheadAttention");
}

}  // namespace
}  // namespace ember::testing
