// TransformerEncoderLayer and TransformerEncoder against PyTorch (float64 default dtype, eval
// mode), their state_dict keys, gradcheck and errors.
#include "ember/nn/transformer.h"
#include "nn_test_util.h"

namespace ember::testing {
namespace {

namespace nn = ember::nn;

// fill(m) in the Python below is fill_with_waves (nn_test_util.h).

// src = wave([3, 2, 4], 0.7, 0.3)
Tensor source() { return wave({3, 2, 4}, 0.7, 0.3); }

TEST(NnTransformerEncoderLayer, MatchesPyTorch) {
  // layer = fill(nn.TransformerEncoderLayer(4, 2, dim_feedforward=6)); layer(src)
  nn::TransformerEncoderLayer layer(nn::TransformerEncoderLayerOptions(4, 2).dim_feedforward(6));
  fill_with_waves(*layer);
  EXPECT_EQ(keys_of(layer->state_dict()),
            (std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.in_proj_bias",
                                      "self_attn.out_proj.weight", "self_attn.out_proj.bias",
                                      "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
                                      "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"}));
  EXPECT_EQ(layer->named_children().keys(),
            (std::vector<std::string>{"self_attn", "linear1", "dropout", "linear2", "norm1", "norm2",
                                      "dropout1", "dropout2"}));
  EXPECT_CLOSE(layer(source()), f64({{{0.810052492093, -0.308105411637, -0.00519843844594, 0.252521372771},
                                      {0.944782522276, -0.28284353453, 0.0774004735456, 0.216966817408}},
                                     {{0.771448733929, -0.310568013239, -0.148152441394, 0.296271802676},
                                      {0.981657062265, -0.274874272658, 0.0595255131911, 0.219965888439}},
                                     {{0.776924585648, -0.307037890405, -0.206401567582, 0.31207274774},
                                      {0.961401570555, -0.279499152332, 0.0635399279729, 0.221088526602}}}));
  gradcheck_module(
      *layer, [&](const Tensor& x) { return layer(x); }, wave({2, 1, 4}, 0.7, 0.3));
}

TEST(NnTransformerEncoderLayer, NormFirstGeluBatchFirstMatchesPyTorch) {
  // pre = fill(nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, activation="gelu",
  //                                       batch_first=True, norm_first=True))
  // pre(src.transpose(0, 1), src_key_padding_mask=[[F, F, T], [F, F, F]])
  nn::TransformerEncoderLayer pre(nn::TransformerEncoderLayerOptions(4, 2)
                                      .dim_feedforward(6)
                                      .activation("gelu")
                                      .batch_first(true)
                                      .norm_first(true));
  fill_with_waves(*pre);
  Tensor kpm = tensor({{false, false, true}, {false, false, false}});
  Tensor expected = f64({{{0.906716412858, 2.78246339864, 1.60729238293, -0.37397591717},
                          {0.249635304307, 2.28596976266, 1.49704397703, -0.0534803541436},
                          {-0.252167575495, 1.61817271881, 0.977644944016, -0.181323198647}},
                         {{0.371580712975, 0.604171892598, 0.470319176048, -1.90404794817},
                          {0.990575176415, 1.1999924705, 0.773447663569, -2.02341485531},
                          {1.31819264702, 1.83958975921, 1.4204954808, -1.67688140302}}});
  EXPECT_CLOSE(pre(source().transpose(0, 1), Tensor(), kpm), expected);
  // A callable activation: the same GELU as a lambda.
  nn::TransformerEncoderLayer custom(nn::TransformerEncoderLayerOptions(4, 2)
                                         .dim_feedforward(6)
                                         .activation([](const Tensor& x) { return gelu(x); })
                                         .batch_first(true)
                                         .norm_first(true));
  fill_with_waves(*custom);
  EXPECT_CLOSE(custom(source().transpose(0, 1), Tensor(), kpm), expected);
}

// Training with "gelu": GELU and dropout run as one op (gelu_dropout), with the values and
// gradients of the same layer whose GELU is a function, for the same seed.
TEST(NnTransformerEncoderLayer, NamedGeluTrainsAsTheFunction) {
  auto make = [](nn::TransformerActivation activation) {
    nn::TransformerEncoderLayer layer(
        nn::TransformerEncoderLayerOptions(4, 2).dim_feedforward(16).dropout(0.3).activation(activation));
    fill_with_waves(*layer);
    return layer;
  };
  nn::TransformerEncoderLayer named = make("gelu"), function = make([](const Tensor&x) { return gelu(x); });
  manual_seed(4);
  Tensor a = named(source());
  manual_seed(4);
  Tensor b = function(source());
  EXPECT_CLOSE(a, b, Tolerance{0, 0});
  a.sum().backward();
  b.sum().backward();
  EXPECT_CLOSE(named->linear1->weight.grad(), function->linear1->weight.grad(), Tolerance{0, 0});
  EXPECT_FALSE(named->linear1->weight.grad().equal(zeros_like(named->linear1->weight)));
}

TEST(NnTransformerEncoder, CopiesTheLayerAndMatchesPyTorch) {
  // enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(4)).eval()
  // enc(src, mask=nn.Transformer.generate_square_subsequent_mask(3), is_causal=True)
  nn::TransformerEncoderLayer layer(nn::TransformerEncoderLayerOptions(4, 2).dim_feedforward(6));
  fill_with_waves(*layer);
  nn::LayerNorm norm(nn::LayerNormOptions({4}));
  norm->to(kFloat64);
  nn::TransformerEncoder enc(layer, 2, norm);
  enc->eval();
  std::vector<std::string> keys = keys_of(enc->state_dict());
  ASSERT_EQ(keys.size(), 26u);
  EXPECT_EQ(keys[0], "layers.0.self_attn.in_proj_weight");
  EXPECT_EQ(keys[12], "layers.1.self_attn.in_proj_weight");
  EXPECT_EQ(keys[23], "layers.1.norm2.bias");
  EXPECT_EQ(keys[24], "norm.weight");
  EXPECT_EQ(keys[25], "norm.bias");
  // Copies: equal values, separate tensors.
  auto first = enc->layers->ptr<nn::TransformerEncoderLayerImpl>(0);
  EXPECT_CLOSE(first->linear1->weight, layer->linear1->weight);
  EXPECT_FALSE(first->linear1->weight.is_same(layer->linear1->weight));
  Tensor mask = nn::generate_square_subsequent_mask(3, kFloat64);
  EXPECT_CLOSE(enc(source(), mask, Tensor(), /*is_causal=*/true),
               f64({{{1.60041412151, -1.13828754632, -0.365240799202, -0.0968857759907},
                     {1.60784356738, -1.12414136037, -0.372192195963, -0.111510011044}},
                    {{1.59943200597, -1.13996717325, -0.364915860631, -0.0945489720904},
                     {1.60790068479, -1.12445418475, -0.370591645351, -0.112854854688}},
                    {{1.59943031954, -1.14060685408, -0.362434393716, -0.0963890717434},
                     {1.60601350994, -1.12840186877, -0.367624263848, -0.109987377322}}}));
  EXPECT_CLOSE(enc(source(), Tensor(), Tensor(), true), enc(source(), mask));
  EXPECT_TRUE(nn::TransformerEncoder(layer, 1)->named_children().keys() ==
              std::vector<std::string>{"layers"});
}

TEST(NnTransformerEncoderLayer, Errors) {
  EXPECT_EMBER_ERROR(nn::TransformerEncoderLayerOptions(4, 2).activation("swish"),
                     "TransformerEncoderLayer: activation should be \"relu\" or \"gelu\", got \"swish\"");
  EXPECT_EMBER_ERROR(nn::TransformerEncoderLayer(6, 4),
                     "MultiheadAttention: embed_dim (6) must be divisible");
  nn::TransformerEncoderLayer layer(4, 2);
  EXPECT_EMBER_ERROR(layer(randn({3, 2, 5})), "MultiheadAttention: query has 5 features");
  EXPECT_EMBER_ERROR(nn::TransformerEncoder(nn::TransformerEncoderLayer(nullptr), 2),
                     "TransformerEncoder: the encoder layer is empty");
  EXPECT_EMBER_ERROR(nn::TransformerEncoder(layer, -1),
                     "TransformerEncoder: num_layers must not be negative");
}

}  // namespace
}  // namespace ember::testing
