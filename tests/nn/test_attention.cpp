// MultiheadAttention against PyTorch (float64 default dtype, eval mode): plain, key padding mask,
// causal mask, batch_first without bias, unbatched; gradcheck; parameter names; errors.
#include "ember/nn/attention.h"
#include "ember/nn/transformer.h"
#include "nn_test_util.h"

namespace ember::testing {
namespace {

namespace nn = ember::nn;

// m = nn.MultiheadAttention(4, 2, batch_first=bf, bias=bias)
// m.in_proj_weight = wave([12, 4]) * 0.5; m.out_proj.weight = wave([4, 4], 0.9, 0.4) * 0.5
// with bias: m.in_proj_bias = wave([12], 0.5, 0.2) * 0.1; m.out_proj.bias = wave([4], 1.1, 0.3) * 0.1
// m.eval()
nn::MultiheadAttention make_mha(bool batch_first = false, bool bias = true) {
  nn::MultiheadAttention m(nn::MultiheadAttentionOptions(4, 2).batch_first(batch_first).bias(bias));
  m->to(kFloat64);
  assign(m->in_proj_weight, wave({12, 4}) * 0.5);
  assign(m->out_proj->weight, wave({4, 4}, 0.9, 0.4) * 0.5);
  if (bias) {
    assign(m->in_proj_bias, wave({12}, 0.5, 0.2) * 0.1);
    assign(m->out_proj->bias, wave({4}, 1.1, 0.3) * 0.1);
  }
  m->eval();
  return m;
}

// q = wave([3, 2, 4], 0.7, 0.3); k = wave([5, 2, 4], 0.6, -0.2); v = wave([5, 2, 4], 0.8, 0.5)
// kpm = [[F, F, F, T, T], [F, T, F, F, F]]
Tensor query() { return wave({3, 2, 4}, 0.7, 0.3); }
Tensor key() { return wave({5, 2, 4}, 0.6, -0.2); }
Tensor value() { return wave({5, 2, 4}, 0.8, 0.5); }
Tensor padding_mask() {
  return tensor({{false, false, false, true, true}, {false, true, false, false, false}});
}

TEST(NnMultiheadAttention, MatchesPyTorch) {
  nn::MultiheadAttention m = make_mha();
  // o, w = m(q, k, v)
  auto [out, weights] = m(query(), key(), value());
  EXPECT_CLOSE(out, f64({{{0.547920346923, -0.517914135907, 0.647108676627, -0.481056253088},
                          {-0.682900214653, 0.863294786476, -0.599292213521, 0.373175801265}},
                         {{0.552305643731, -0.528358321956, 0.661455203302, -0.49634280412},
                          {-0.692453112387, 0.885525431303, -0.629610351487, 0.405321247213}},
                         {{0.561392668789, -0.547224277182, 0.686204586506, -0.521865284268},
                          {-0.705410070591, 0.915073906403, -0.669649080754, 0.447582907012}}}));
  EXPECT_CLOSE(weights,
               f64({{{0.310541161362, 0.0539476480388, 0.0379440627402, 0.204619202212, 0.392947925647},
                     {0.29218006208, 0.110766519543, 0.078777793721, 0.195113737572, 0.323161887084},
                     {0.194709968787, 0.252306117372, 0.213533866348, 0.159523850388, 0.179926197104}},
                    {{0.180625005725, 0.0493382329643, 0.0985702756701, 0.409630483894, 0.261836001746},
                     {0.227216867618, 0.137159895861, 0.143356430107, 0.24119714747, 0.251069658944},
                     {0.207106983906, 0.341445690251, 0.183258835813, 0.100728856884, 0.167459633147}}}));
  // list(m.state_dict().keys())
  EXPECT_EQ(keys_of(m->state_dict()),
            (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}));
}

TEST(NnMultiheadAttention, KeyPaddingMaskMatchesPyTorch) {
  nn::MultiheadAttention m = make_mha();
  // o, w = m(q, k, v, key_padding_mask=kpm); the same output with need_weights=False
  Tensor expected_out = f64({{{0.589610019998, -0.626884122705, 0.80085850913, -0.647839178903},
                              {-0.680231544083, 0.857950330438, -0.592375512226, 0.366115037103}},
                             {{0.588123358466, -0.617730090881, 0.7859272605, -0.630213764975},
                              {-0.686200546312, 0.873012274038, -0.613420359377, 0.388797381108}},
                             {{0.583392716842, -0.597743768624, 0.754812096732, -0.594394517264},
                              {-0.693733749887, 0.891117039696, -0.63835835776, 0.415419335325}}});
  Tensor expected_weights = f64({{{0.772325791968, 0.133691273928, 0.0939829341038, 0, 0},
                                  {0.607566009414, 0.229393758983, 0.163040231603, 0, 0},
                                  {0.295547638294, 0.381664560774, 0.322787800932, 0, 0}},
                                 {{0.190029665265, 0, 0.103733401389, 0.430812504991, 0.275424428355},
                                  {0.263430444113, 0, 0.166341097445, 0.279299934915, 0.290928523527},
                                  {0.314624082486, 0, 0.27889900091, 0.152464028421, 0.254012888183}}});
  auto [out, weights] = m(query(), key(), value(), padding_mask());
  EXPECT_CLOSE(out, expected_out);
  EXPECT_CLOSE(weights, expected_weights);
  auto [fast, none] = m(query(), key(), value(), padding_mask(), /*need_weights=*/false);
  EXPECT_CLOSE(fast, expected_out);
  EXPECT_FALSE(none.defined());
  // A float mask of 0 / -inf is the same mask.
  Tensor float_mask = zeros({2, 5}, kFloat64).masked_fill(padding_mask(), -INFINITY);
  EXPECT_CLOSE(std::get<0>(m(query(), key(), value(), float_mask)), expected_out);
  // Unbatched: m(q[:, 0], k[:, 0], v[:, 0], key_padding_mask=kpm[0])
  auto [single, single_weights] =
      m(query().select(1, 0), key().select(1, 0), value().select(1, 0), padding_mask()[0]);
  EXPECT_CLOSE(single, expected_out.select(1, 0));
  EXPECT_CLOSE(single_weights, expected_weights[0]);
}

TEST(NnMultiheadAttention, CausalMaskMatchesPyTorch) {
  nn::MultiheadAttention m = make_mha();
  // x = wave([4, 2, 4], 0.7, 0.3); cm = nn.Transformer.generate_square_subsequent_mask(4)
  // o, w = m(x, x, x, attn_mask=cm, is_causal=True)
  Tensor x = wave({4, 2, 4}, 0.7, 0.3);
  Tensor cm = nn::generate_square_subsequent_mask(4, kFloat64);
  Tensor expected_out = f64({{{0.626633331881, -0.772208264054, 1.02447649095, -0.903577652034},
                              {-0.656008690709, 1.07788896974, -1.01106201733, 0.897097692327}},
                             {{0.484304588828, -0.651944836204, 0.951110751799, -0.892258391777},
                              {-0.454236632507, 0.865468088605, -0.831853649618, 0.788105349404}},
                             {{0.232940075396, -0.374424824878, 0.704738453517, -0.727905539031},
                              {-0.104031741006, 0.443486261433, -0.425227031007, 0.480795491486}},
                             {{-0.201052850796, 0.179093671623, 0.145986639041, -0.279293250984},
                              {0.313581381881, -0.134240734503, 0.193322938004, -0.050857293846}}});
  Tensor expected_weights = f64({{{1, 0, 0, 0},
                                  {0.52347975188, 0.47652024812, 0, 0},
                                  {0.285234224184, 0.331043681046, 0.383722094769, 0},
                                  {0.105908779444, 0.146434531021, 0.265148602892, 0.482508086642}},
                                 {{1, 0, 0, 0},
                                  {0.513191215889, 0.486808784111, 0, 0},
                                  {0.226129822199, 0.315521860195, 0.458348317606, 0},
                                  {0.0734171807508, 0.129250008623, 0.278141834776, 0.51919097585}}});
  auto [out, weights] = m(x, x, x, Tensor(), true, cm, true, /*is_causal=*/true);
  EXPECT_CLOSE(out, expected_out);
  EXPECT_CLOSE(weights, expected_weights);
  // The same from is_causal alone (PyTorch requires the mask as a hint; ember builds it), with
  // and without weights, and from a bool mask (true = masked).
  EXPECT_CLOSE(std::get<0>(m(x, x, x, Tensor(), false, Tensor(), true, true)), expected_out);
  EXPECT_CLOSE(std::get<1>(m(x, x, x, Tensor(), true, Tensor(), true, true)), expected_weights);
  EXPECT_CLOSE(std::get<0>(m(x, x, x, Tensor(), false, cm.lt(0))), expected_out);
  // Causal plus key padding, weights per head: o, w = m(x, x, x, attn_mask=cm,
  //   key_padding_mask=[[F, F, F, T], [F, F, F, F]], average_attn_weights=False); w[1, 0]; o[3, 0]
  Tensor kpm = tensor({{false, false, false, true}, {false, false, false, false}});
  auto [out2, per_head] = m(x, x, x, kpm, true, cm, /*average_attn_weights=*/false);
  ASSERT_TRUE(per_head.sizes().equals({2, 2, 4, 4}));
  EXPECT_CLOSE(per_head[1][0], f64({{1, 0, 0, 0},
                                    {0.504343741308, 0.495656258692, 0, 0},
                                    {0.212055323024, 0.309295736978, 0.478648939999, 0},
                                    {0.0640253800539, 0.118770710686, 0.274505144404, 0.542698764856}}));
  EXPECT_CLOSE(out2[3][0], f64({0.146718312053, -0.280528521986, 0.622555617097, -0.674405541447}));
  EXPECT_CLOSE(std::get<0>(m(x, x, x, kpm, false, Tensor(), true, true)), out2);
  // A 3D mask [N * num_heads, L, S] is per batch and head.
  EXPECT_CLOSE(std::get<0>(m(x, x, x, Tensor(), false, cm.expand({4, 4, 4}))), expected_out);
}

TEST(NnMultiheadAttention, BatchFirstWithoutBiasMatchesPyTorch) {
  nn::MultiheadAttention m = make_mha(/*batch_first=*/true, /*bias=*/false);
  // mb(q.transpose(0,1), k.transpose(0,1), v.transpose(0,1))[0][1]
  Tensor out = std::get<0>(m(query().transpose(0, 1), key().transpose(0, 1), value().transpose(0, 1)));
  ASSERT_TRUE(out.sizes().equals({2, 3, 4}));
  EXPECT_CLOSE(out[1], f64({{-0.60840127676, 0.671947290886, -0.596747500111, 0.398329395415},
                            {-0.617348947629, 0.693842456034, -0.627069176488, 0.430816667245},
                            {-0.630490826389, 0.723586479861, -0.667273705133, 0.473180142292}}));
  EXPECT_EQ(keys_of(m->state_dict()), (std::vector<std::string>{"in_proj_weight", "out_proj.weight"}));
}

TEST(NnMultiheadAttention, Gradcheck) {
  nn::MultiheadAttention m = make_mha();
  Tensor x = wave({3, 2, 4}, 0.7, 0.3), k = wave({2, 2, 4}, 0.6, -0.2);
  Tensor kpm = tensor({{false, true}, {false, false}});
  // Separate key/value (the sdpa path) and self-attention (one packed projection, weights path).
  gradcheck_module(
      *m, [&](const Tensor& q) { return std::get<0>(m(q, k, k * 2, kpm, false)); }, x);
  gradcheck_module(
      *m,
      [&](const Tensor& q) {
        return std::get<0>(m(q, q, q, Tensor(), true, Tensor(), true, /*is_causal=*/true));
      },
      x);
}

TEST(NnMultiheadAttention, DropoutOnlyInTraining) {
  manual_seed(0);
  nn::MultiheadAttention m(nn::MultiheadAttentionOptions(4, 2).dropout(0.5));
  Tensor x = randn({3, 2, 4});
  m->eval();
  Tensor a = std::get<0>(m(x, x, x)), b = std::get<0>(m(x, x, x, Tensor(), false));
  EXPECT_CLOSE(a, b, Tolerance{1e-5, 1e-6});
  m->train();
  auto [c, w] = m(x, x, x);
  EXPECT_GT((c - a).abs().max().item<double>(), 1e-3);
  // Dropped weights are zeros or 2x the eval weights: rows no longer sum to one.
  EXPECT_GT((w.sum({-1}) - 1).abs().max().item<double>(), 1e-3);
}

TEST(NnMultiheadAttention, Errors) {
  nn::MultiheadAttention m(4, 2);
  Tensor q = randn({3, 2, 4}), k = randn({5, 2, 4});
  EXPECT_EMBER_ERROR(m(randn({3, 2, 5}), k, k),
                     "MultiheadAttention: query has 5 features, expected embed_dim 4", "[3, 2, 5]");
  EXPECT_EMBER_ERROR(m(q, randn({5, 2, 3}), randn({5, 2, 3})), "MultiheadAttention: key has 3 features");
  EXPECT_EMBER_ERROR(m(randn({1, 3, 2, 4}), k, k),
                     "MultiheadAttention: expected query to be unbatched 2D or batched 3D", "[1, 3, 2, 4]");
  EXPECT_EMBER_ERROR(m(q, randn({5, 4}), randn({5, 4})),
                     "MultiheadAttention: for 3D query, expected 3D key and value");
  EXPECT_EMBER_ERROR(m(q, k, randn({4, 2, 4})),
                     "MultiheadAttention: key [5, 2, 4] does not match value [4, 2, 4]");
  EXPECT_EMBER_ERROR(m(q, randn({5, 3, 4}), randn({5, 3, 4})),
                     "MultiheadAttention: query has batch size 2 but key and value 3");
  EXPECT_EMBER_ERROR(m(q, k, k, tensor({{false, true}})),
                     "MultiheadAttention: expected key_padding_mask of shape [2, 5], got [1, 2]");
  EXPECT_EMBER_ERROR(m(q, k, k, Tensor(), true, zeros({3, 4})),
                     "MultiheadAttention: the 2D attn_mask is [3, 4], but should be [3, 5]");
  EXPECT_EMBER_ERROR(m(q, k, k, Tensor(), true, zeros({2, 3, 5})),
                     "MultiheadAttention: the 3D attn_mask is [2, 3, 5], but should be [4, 3, 5]");
  EXPECT_EMBER_ERROR(m(q, k, k, Tensor(), true, zeros({1, 1, 3, 5})),
                     "MultiheadAttention: attn_mask must be 2D or 3D");
  EXPECT_EMBER_ERROR(m(q, k, k, tensor({{1, 0, 0, 0, 0}, {0, 0, 0, 0, 1}})),
                     "key_padding_mask of dtype bool or floating point, got int64");
  EXPECT_EMBER_ERROR(m(q.to(kFloat64), k.to(kFloat64), k.to(kFloat64)),
                     "MultiheadAttention: input has dtype float64");
  EXPECT_EMBER_ERROR(nn::MultiheadAttention(6, 4),
                     "MultiheadAttention: embed_dim (6) must be divisible by num_heads (4)");
  EXPECT_EMBER_ERROR(nn::MultiheadAttention(nn::MultiheadAttentionOptions(4, 2).dropout(2)),
                     "MultiheadAttention: dropout probability");
}

TEST(NnMultiheadAttention, InitIsXavierWithZeroBiases) {
  manual_seed(2);
  nn::MultiheadAttention m(64, 4);
  // xavier_uniform_ on [192, 64]: bound sqrt(6 / 256).
  EXPECT_LE(m->in_proj_weight.abs().max().item<double>(), std::sqrt(6.0 / 256));
  EXPECT_GT(m->in_proj_weight.abs().max().item<double>(), 0.99 * std::sqrt(6.0 / 256));
  EXPECT_EQ(m->in_proj_bias.abs().max().item<double>(), 0);
  EXPECT_EQ(m->out_proj->bias.abs().max().item<double>(), 0);
  EXPECT_LE(m->out_proj->weight.abs().max().item<double>(), 1 / 8.0);  // Linear's default
}

}  // namespace
}  // namespace ember::testing
