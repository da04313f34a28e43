// Tensor parallelism (Megatron-LM style) over Gloo with 2 and 4 processes: an MLP of a
// ColumnParallelLinear and a RowParallelLinear starts as the single-process MLP drawn from the
// same seed, gives its outputs, loss and input gradient, each rank's gradients are the slices of
// the whole model's, and after AdamW steps the parameters still are; the full state dict round-trips.
// The vocabulary-parallel embedding and loss against nn::Embedding and cross_entropy. The regions'
// forward and backward by hand; in one process a group of one and the errors.
#include <ember/distributed/parallel_linear.h>
#include <ember/distributed/parallel_regions.h>
#include <ember/distributed/parallel_transformer.h>
#include <ember/distributed/tensor_parallel_state.h>
#include <ember/distributed/vocab_parallel.h>
#include <ember/examples/models/bert.h>
#include <ember/nn/embedding.h>
#include <ember/nn/linear.h>
#include <ember/nn/transformer.h>
#include <ember/optim/adam.h>
#include <ember/optim/sgd.h>

#include "dist_test_util.h"

namespace ember::testing::dist {
namespace {

namespace d = ember::distributed;

constexpr int64_t kIn = 8, kHidden = 16, kOut = 6;
const Tolerance kF32{1e-5, 1e-6};

// The whole MLP, the reference.
struct MlpImpl : nn::Module {
  MlpImpl() : Module("Mlp") {
    fc1 = register_module("fc1", nn::Linear(kIn, kHidden));
    fc2 = register_module("fc2", nn::Linear(kHidden, kOut));
  }
  Tensor forward(const Tensor& x) { return fc2(gelu(fc1(x))); }
  nn::Linear fc1{nullptr}, fc2{nullptr};
};
EMBER_MODULE(Mlp);

// The same MLP split over the default group: fc1 by output features, fc2 by input features.
// `gather`: fc1 gathers its output and fc2 scatters it again (the other pair of regions).
struct ParallelMlpImpl : nn::Module {
  explicit ParallelMlpImpl(bool gather) : Module("ParallelMlp") {
    fc1 = register_module(
        "fc1", d::ColumnParallelLinear(d::ColumnParallelLinearOptions(kIn, kHidden).gather_output(gather)));
    fc2 = register_module(
        "fc2", d::RowParallelLinear(d::RowParallelLinearOptions(kHidden, kOut).input_is_parallel(!gather)));
  }
  Tensor forward(const Tensor& x) { return fc2(gelu(fc1(x))); }
  d::ColumnParallelLinear fc1{nullptr};
  d::RowParallelLinear fc2{nullptr};
};
EMBER_MODULE(ParallelMlp);

// The slice of `whole` that rank holds of a parameter split along dim (-1: all of it).
Tensor shard(const Tensor& whole, int64_t dim, int rank, int world) {
  if (dim < 0) return whole;
  const int64_t n = whole.size(dim) / world;
  return whole.narrow(dim, rank * n, n);
}

// fc1.weight, fc1.bias, fc2.weight, fc2.bias: split along these dims.
constexpr int64_t kShardDims[] = {0, 0, 1, -1};

void check_shards(const std::vector<Tensor>& parallel, const std::vector<Tensor>& whole,
                  const std::string& what) {
  const int rank = d::get_rank(), world = d::get_world_size();
  for (size_t i = 0; i < whole.size(); ++i)
    check_close(parallel[i], shard(whole[i], kShardDims[i], rank, world), what + " " + std::to_string(i),
                kF32);
}

std::vector<Tensor> grads(const std::vector<Tensor>& params) {
  std::vector<Tensor> g;
  for (const Tensor& p : params) g.push_back(p.grad());
  return g;
}

DIST_WORKER(tp_mlp_matches_one_process) {
  d::init_process_group("gloo");
  for (bool gather : {false, true}) {
    manual_seed(5);
    Mlp ref;
    manual_seed(5);
    ParallelMlp net(gather);
    check_shards(net->parameters(), ref->parameters(), "initial parameter");
    optim::AdamW ref_opt(ref->parameters(), optim::AdamWOptions(1e-2));
    optim::AdamW opt(net->parameters(), optim::AdamWOptions(1e-2));
    for (int step = 0; step < 3; ++step) {
      manual_seed(100 + step);  // every rank the same batch
      Tensor x = randn({5, kIn}), y = randn({5, kOut});
      Tensor ref_x = x.clone().requires_grad_(), net_x = x.clone().requires_grad_();
      ref_opt.zero_grad();
      opt.zero_grad();
      Tensor ref_out = ref(ref_x), out = net(net_x);
      check_close(out, ref_out, "output", kF32);
      Tensor ref_loss = mse_loss(ref_out, y), loss = mse_loss(out, y);
      check_close(loss, ref_loss, "loss", kF32);
      ref_loss.backward();
      loss.backward();
      check_shards(grads(net->parameters()), grads(ref->parameters()), "gradient");
      check_close(net_x.grad(), ref_x.grad(), "input gradient", kF32);
      ref_opt.step();
      opt.step();
      check_shards(net->parameters(), ref->parameters(), "parameter after a step");
    }
    // The whole state dict is the reference's; loaded into a fresh split model it gives its outputs.
    OrderedDict<Tensor> full = d::full_state_dict(*net), expected = ref->state_dict();
    if (full.keys() != expected.keys()) throw Error("full_state_dict: keys differ from the whole model's");
    for (const auto& [key, value] : expected) check_close(full.at(key), value, "full " + key, kF32);
    manual_seed(77);
    ParallelMlp fresh(gather);
    d::load_full_state_dict(*fresh, expected);
    Tensor x = randn({3, kIn});
    check_close(fresh(x), ref(x), "output after load_full_state_dict", kF32);
  }
}

// The regions by hand: rank r holds x = (r + 1) * [1, 2, 3, 4]-shaped values.
DIST_WORKER(tp_regions_by_hand) {
  d::init_process_group("gloo");
  const int rank = d::get_rank(), world = d::get_world_size();
  const double w = world, sum_ranks = world * (world + 1) / 2.0;    // sum of (r + 1)
  Tensor base = arange(1.0, 1.0 + 2 * world).view({1, 2 * world});  // [1, 2W]
  Tensor x = (base * (rank + 1)).requires_grad_();
  // f: the identity forward, the gradient summed.
  Tensor f = d::copy_to_tensor_parallel_region(x);
  check_close(f, x, "copy_to forward");
  check_close(autograd::grad({f}, {x}, {ones_like(f)})[0], full({1, 2 * world}, w), "copy_to backward");
  // g: the sum forward, the identity backward.
  Tensor g = d::reduce_from_tensor_parallel_region(x);
  check_close(g, base * sum_ranks, "reduce_from forward");
  check_close(autograd::grad({g}, {x}, {ones_like(g)})[0], ones_like(x), "reduce_from backward");
  // scatter: this rank's two columns; its gradient all-gathered (zero-free: every slot filled).
  Tensor s = d::scatter_to_tensor_parallel_region(x);
  check_close(s, x.detach().narrow(1, 2 * rank, 2), "scatter forward");
  Tensor gs = autograd::grad({s}, {x}, {full({1, 2}, rank + 1.0)})[0];
  Tensor expected_gs = empty({1, 2 * world});
  for (int r = 0; r < world; ++r) expected_gs.narrow(1, 2 * r, 2).fill_(r + 1.0);
  check_close(gs, expected_gs, "scatter backward");
  // gather: every rank's x side by side; the gradient's own slice.
  Tensor ga = d::gather_from_tensor_parallel_region(x);
  Tensor expected_ga = empty({1, 2 * world * world});
  for (int r = 0; r < world; ++r) expected_ga.narrow(1, 2 * world * r, 2 * world).copy_(base * (r + 1));
  check_close(ga, expected_ga, "gather forward");
  Tensor gg = autograd::grad({ga}, {x}, {arange(0.0, 2.0 * world * world).view({1, -1})})[0];
  check_close(gg, arange(2.0 * world * rank, 2.0 * world * (rank + 1)).view({1, -1}), "gather backward");

  // The sequence-parallel regions along the middle dim of [2, L, 3] (rank r's values: r + 1 times t).
  Tensor t = arange(0.0, 2.0 * 2 * world * 3).view({2, 2 * world, 3});
  Tensor xs = (t * (rank + 1)).requires_grad_();
  // reduce-scatter: the sum over ranks, this rank's two positions; the gradient all-gathered.
  Tensor rs = d::reduce_scatter_to_sequence_parallel_region(xs, 1);
  check_close(rs, t.narrow(1, 2 * rank, 2) * sum_ranks, "reduce_scatter forward");
  Tensor grs = autograd::grad({rs}, {xs}, {full({2, 2, 3}, rank + 1.0)})[0];
  Tensor expected_grs = empty({2, 2 * world, 3});
  for (int r = 0; r < world; ++r) expected_grs.narrow(1, 2 * r, 2).fill_(r + 1.0);
  check_close(grs, expected_grs, "reduce_scatter backward");
  // gather: every rank's tensor one after the other along dim 1; the gradient summed over the
  // ranks, this rank's slice.
  Tensor gq = d::gather_from_sequence_parallel_region(xs, 1);
  std::vector<Tensor> parts;
  for (int r = 0; r < world; ++r) parts.push_back(t * (r + 1));
  check_close(gq, cat(parts, 1), "sequence gather forward");
  Tensor gout = arange(0.0, 2.0 * 2 * world * world * 3).view({2, 2 * world * world, 3});
  Tensor ggq = autograd::grad({gq}, {xs}, {gout * (rank + 1)})[0];
  check_close(ggq, gout.narrow(1, 2 * world * rank, 2 * world) * sum_ranks, "sequence gather backward");
  // scatter: this rank's slice; the gradient all-gathered.
  Tensor sq = d::scatter_to_sequence_parallel_region(xs, -2);
  check_close(sq, xs.detach().narrow(1, 2 * rank, 2), "sequence scatter forward");
  Tensor gsq = autograd::grad({sq}, {xs}, {full({2, 2, 3}, rank + 1.0)})[0];
  check_close(gsq, expected_grs, "sequence scatter backward");
}

// A vocabulary of 12 words split over the group: the embedding, and a head's logits split by
// class with their loss, against nn::Embedding, nn::Linear and cross_entropy on the whole.
DIST_WORKER(tp_vocab_parallel_matches_one_process) {
  d::init_process_group("gloo");
  const int rank = d::get_rank(), world = d::get_world_size();
  constexpr int64_t kVocab = 12, kDim = 5;
  manual_seed(9);
  nn::Embedding ref_emb(kVocab, kDim);
  manual_seed(9);
  d::VocabParallelEmbedding emb(d::VocabParallelEmbeddingOptions(kVocab, kDim));
  check_close(emb->weight, shard(ref_emb->weight, 0, rank, world), "embedding weight");
  check_close(d::full_state_dict(*emb).at("weight"), ref_emb->weight, "full embedding weight");
  manual_seed(10);
  Tensor ids = randint(0, kVocab, {4, 3}), gy = randn({4, 3, kDim});
  Tensor out = emb(ids), ref_out = ref_emb(ids);
  check_close(out, ref_out, "embedding output");
  (out * gy).sum().backward();
  (ref_out * gy).sum().backward();
  check_close(emb->weight.grad(), shard(ref_emb->weight.grad(), 0, rank, world), "embedding gradient");

  manual_seed(11);
  nn::Linear ref_head(kDim, kVocab);
  manual_seed(11);
  d::ColumnParallelLinear head(d::ColumnParallelLinearOptions(kDim, kVocab).gather_output(false));
  manual_seed(12);
  Tensor h = randn({6, kDim}), target = randint(0, kVocab, {6});
  target[1].fill_(-100);
  for (const char* reduction : {"mean", "sum", "none"}) {
    head->zero_grad();
    ref_head->zero_grad();
    Tensor hp = h.clone().requires_grad_(), hr = h.clone().requires_grad_();
    Tensor loss = d::vocab_parallel_cross_entropy(head(hp), target, -100, reduction);
    Tensor ref_loss = cross_entropy(ref_head(hr), target, {}, -100, reduction);
    check_close(loss, ref_loss, std::string("loss, ") + reduction, kF32);
    Tensor g = randn(loss.sizes());
    (loss * g).sum().backward();
    (ref_loss * g).sum().backward();
    check_close(hp.grad(), hr.grad(), std::string("hidden gradient, ") + reduction, kF32);
    check_close(head->weight.grad(), shard(ref_head->weight.grad(), 0, rank, world),
                std::string("head gradient, ") + reduction, kF32);
  }
}

// The layers both transformer workers try: post-norm ReLU [L, N, E], or pre-norm GELU batch first;
// dropout 0 (a split layer draws other numbers).
nn::TransformerEncoderLayerOptions layer_options(bool pre_norm_gelu) {
  auto options = nn::TransformerEncoderLayerOptions(8, 4).dim_feedforward(16).dropout(0.0);
  options.norm_first(pre_norm_gelu).batch_first(pre_norm_gelu).activation(pre_norm_gelu ? "gelu" : "relu");
  return options;
}

// A transformer encoder layer (4 heads, feed-forward 16) split over the group, post-norm with ReLU
// and pre-norm with GELU, sequence-first and batch-first: drawn from the same seed it is the
// nn::TransformerEncoderLayer (its full state dict), with its outputs (keys padded), input
// gradient and, after SGD steps, parameters.
DIST_WORKER(tp_transformer_layer_matches_one_process) {
  d::init_process_group("gloo");
  for (bool pre_norm_gelu : {false, true}) {
    const auto options = layer_options(pre_norm_gelu);
    manual_seed(31);
    nn::TransformerEncoderLayer ref(options);
    manual_seed(31);
    d::ParallelTransformerEncoderLayer net(options);
    auto check_same_state = [&](const std::string& what) {
      OrderedDict<Tensor> full = d::full_state_dict(*net), expected = ref->state_dict();
      if (full.keys() != expected.keys()) throw Error("full_state_dict: keys differ from the layer's");
      for (const auto& [key, value] : expected) check_close(full.at(key), value, what + " " + key, kF32);
    };
    check_same_state("initial");
    // SGD: the key bias's gradient is zero up to rounding (softmax ignores a shift shared by all
    // keys), which Adam would scale up to whole steps of either sign.
    optim::SGD ref_opt(ref->parameters(), optim::SGDOptions(0.1));
    optim::SGD opt(net->parameters(), optim::SGDOptions(0.1));
    Tensor padding = tensor({{false, false, false, true, true}, {false, false, false, false, false}});
    for (int step = 0; step < 3; ++step) {
      manual_seed(500 + step);
      Tensor x = randn({2, 5, 8}), gy = randn({2, 5, 8});
      if (!pre_norm_gelu) x = x.transpose(0, 1).contiguous(), gy = gy.transpose(0, 1).contiguous();
      Tensor rx = x.clone().requires_grad_(), nx = x.clone().requires_grad_();
      ref_opt.zero_grad();
      opt.zero_grad();
      Tensor ref_out = ref(rx, Tensor(), padding), out = net(nx, padding);
      check_close(out, ref_out, "output", kF32);
      (ref_out * gy).sum().backward();
      (out * gy).sum().backward();
      check_close(nx.grad(), rx.grad(), "input gradient", kF32);
      ref_opt.step();
      opt.step();
      check_same_state("after a step");
    }
  }
}

// Sequence parallelism: each rank feeds the layer its slice of the sequence and gets that slice of
// the output, the input's gradient and (after SGD steps) the parameters of the whole layer, for
// post-norm [L, N, E] and pre-norm batch-first layers (dropout 0: the draws would differ).
DIST_WORKER(tp_sequence_parallel_layer_matches_one_process) {
  d::init_process_group("gloo");
  const int rank = d::get_rank(), world = d::get_world_size();
  const int64_t L = 8, part = L / world;
  for (bool pre_norm_gelu : {false, true}) {
    const auto options = layer_options(pre_norm_gelu);
    manual_seed(31);
    nn::TransformerEncoderLayer ref(options);
    manual_seed(31);
    d::ParallelTransformerEncoderLayer net(options, nullptr, /*sequence_parallel=*/true);
    optim::SGD ref_opt(ref->parameters(), optim::SGDOptions(0.1));
    optim::SGD opt(net->parameters(), optim::SGDOptions(0.1));
    Tensor padding = zeros({2, L}, kBool);
    padding.narrow(1, L - 3, 3).select(0, 0).fill_(true);
    const int64_t seq = pre_norm_gelu ? 1 : 0;  // the sequence dim of the layer's input
    for (int step = 0; step < 3; ++step) {
      manual_seed(500 + step);
      Tensor x = randn({2, L, 8}), gy = randn({2, L, 8});
      if (!pre_norm_gelu) x = x.transpose(0, 1).contiguous(), gy = gy.transpose(0, 1).contiguous();
      Tensor rx = x.clone().requires_grad_(), nx = x.narrow(seq, rank * part, part).clone().requires_grad_();
      ref_opt.zero_grad();
      opt.zero_grad();
      Tensor ref_out = ref(rx, Tensor(), padding), out = net(nx, padding);
      check_close(out, ref_out.narrow(seq, rank * part, part), "output slice", kF32);
      (ref_out * gy).sum().backward();
      (out * gy.narrow(seq, rank * part, part)).sum().backward();
      check_close(nx.grad(), rx.grad().narrow(seq, rank * part, part), "input gradient slice", kF32);
      ref_opt.step();
      opt.step();
      OrderedDict<Tensor> full = d::full_state_dict(*net), expected = ref->state_dict();
      for (const auto& [key, value] : expected)
        check_close(full.at(key), value, "after a step: " + key, kF32);
    }
  }
}

// The BERT-style model with tensor_parallel: drawn from the same seed it is the single-process
// model (its full state dict), with its loss, and after SGD steps its parameters, checkpointing
// the layers or not.
DIST_WORKER(tp_bert_like_matches_one_process) {
  d::init_process_group("gloo");
  for (bool sequence_parallel : {false, true}) {
    auto options = models::BertLikeOptions()
                       .vocab_size(16)
                       .max_positions(8)
                       .d_model(8)
                       .heads(4)
                       .dim_feedforward(16)
                       .layers(2)
                       .dropout(0.0);
    manual_seed(41);
    models::BertLike ref(options);
    manual_seed(41);
    models::BertLike net(options.tensor_parallel(d::default_group()).sequence_parallel(sequence_parallel));
    optim::SGD ref_opt(ref->parameters(), optim::SGDOptions(0.1));
    optim::SGD opt(net->parameters(), optim::SGDOptions(0.1));
    Tensor positions = arange(8);
    for (int step = 0; step < 3; ++step) {
      const std::string what = sequence_parallel ? "sequence parallel: " : "";
      OrderedDict<Tensor> full = d::full_state_dict(*net), expected = ref->state_dict();
      if (full.keys() != expected.keys()) throw Error("full_state_dict: keys differ from the model's");
      for (const auto& [key, value] : expected) check_close(full.at(key), value, what + key, kF32);
      manual_seed(600 + step);
      Tensor ids = randint(0, 16, {2, 8}), labels = randint(0, 16, {2, 8});
      ref_opt.zero_grad();
      opt.zero_grad();
      Tensor ref_loss = ref(ids, positions, labels),
             loss = net(ids, positions, labels, /*checkpoint=*/step == 1);
      check_close(loss, ref_loss, what + "loss", kF32);
      ref_loss.backward();
      loss.backward();
      ref_opt.step();
      opt.step();
    }
  }
}

class TensorParallel : public ::testing::TestWithParam<int> {};

TEST_P(TensorParallel, MlpMatchesOneProcess) { run_workers("tp_mlp_matches_one_process", GetParam()); }
TEST_P(TensorParallel, RegionsByHand) { run_workers("tp_regions_by_hand", GetParam()); }
TEST_P(TensorParallel, TransformerLayerMatchesOneProcess) {
  run_workers("tp_transformer_layer_matches_one_process", GetParam());
}
TEST_P(TensorParallel, SequenceParallelLayerMatchesOneProcess) {
  run_workers("tp_sequence_parallel_layer_matches_one_process", GetParam());
}
TEST_P(TensorParallel, BertLikeMatchesOneProcess) {
  run_workers("tp_bert_like_matches_one_process", GetParam());
}
TEST_P(TensorParallel, VocabParallelEmbeddingAndLossMatchOneProcess) {
  run_workers("tp_vocab_parallel_matches_one_process", GetParam());
}
INSTANTIATE_TEST_SUITE_P(Gloo, TensorParallel, ::testing::Values(2, 4),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

// A group of one: the layers are nn::Linear, drawn alike from the same seed.
TEST(TensorParallel, GroupOfOneIsLinear) {
  auto pg = group_of_one();
  manual_seed(3);
  nn::Linear ref(kIn, kHidden);
  manual_seed(3);
  d::ColumnParallelLinear col(d::ColumnParallelLinearOptions(kIn, kHidden).group(pg));
  manual_seed(3);
  d::RowParallelLinear row(d::RowParallelLinearOptions(kIn, kHidden).group(pg));
  Tensor x = randn({4, kIn});
  EXPECT_CLOSE(col(x), ref(x));
  EXPECT_CLOSE(row(x), ref(x));
  EXPECT_EQ(col->shard_spec("weight")->dim, 0);
  EXPECT_EQ(row->shard_spec("weight")->dim, 1);
  EXPECT_FALSE(row->shard_spec("bias").has_value());
}

TEST(TensorParallelErrors, Arguments) {
  auto pg = group_of_one();
  EXPECT_EMBER_ERROR(d::ColumnParallelLinear(d::ColumnParallelLinearOptions(4, 0).group(pg)),
                     "ColumnParallelLinear", "out_features (0) must be positive");
  EXPECT_EMBER_ERROR(d::RowParallelLinear(d::RowParallelLinearOptions(-2, 4).group(pg)), "RowParallelLinear",
                     "in_features (-2)");
  d::ColumnParallelLinear col(d::ColumnParallelLinearOptions(4, 6).group(pg));
  EXPECT_EMBER_ERROR(col(randn({2, 5})), "ColumnParallelLinear", "features");
  nn::Linear other(4, 7);
  EXPECT_EMBER_ERROR(d::load_full_state_dict(*col, other->state_dict()), "load_full_state_dict", "weight");
  OrderedDict<Tensor> extra = col->state_dict();
  extra.insert("scale", ones({1}));
  EXPECT_EMBER_ERROR(d::load_full_state_dict(*col, extra), "load_full_state_dict",
                     "unexpected key \"scale\"");
  OrderedDict<Tensor> missing;
  missing.insert("weight", ones({6, 4}));
  EXPECT_EMBER_ERROR(d::load_full_state_dict(*col, missing), "load_full_state_dict", "missing key \"bias\"");
  EXPECT_EMBER_ERROR(d::scatter_to_tensor_parallel_region(ones({}), pg), "scatter_to_tensor_parallel_region",
                     "expected at least 1 dim");
  EXPECT_EMBER_ERROR(d::gather_from_sequence_parallel_region(ones({2, 3}), 2, pg),
                     "gather_from_sequence_parallel_region: dim 2 is out of range for [2, 3]");
  EXPECT_EMBER_ERROR(d::reduce_scatter_to_sequence_parallel_region(ones({2, 3}), -3, pg),
                     "reduce_scatter_to_sequence_parallel_region: dim -3 is out of range");
  EXPECT_EMBER_ERROR(d::scatter_to_sequence_parallel_region(ones({}), 0, pg),
                     "scatter_to_sequence_parallel_region", "expected at least 1 dim");
  EXPECT_EMBER_ERROR(
      d::RowParallelLinear(d::RowParallelLinearOptions(4, 4).sequence_parallel(true).group(pg)),
      "RowParallelLinear: sequence_parallel needs input_is_parallel");
  EXPECT_EMBER_ERROR(d::VocabParallelEmbedding(d::VocabParallelEmbeddingOptions(0, 4).group(pg)),
                     "VocabParallelEmbedding", "num_embeddings (0)");
  d::VocabParallelEmbedding emb(d::VocabParallelEmbeddingOptions(6, 4).group(pg));
  EXPECT_EMBER_ERROR(emb(ones({2})), "VocabParallelEmbedding", "int64 ids");
  EXPECT_THROW(emb(tensor({1, 6}, kInt64)), Error);  // outside the vocabulary: embedding's own check
  Tensor logits = randn({3, 6});
  EXPECT_EMBER_ERROR(d::vocab_parallel_cross_entropy(logits, tensor({0, 6, 1}, kInt64), -100, "mean", pg),
                     "vocab_parallel_cross_entropy", "outside [0, 6)");
  EXPECT_EMBER_ERROR(d::vocab_parallel_cross_entropy(logits, tensor({0, 1}, kInt64), -100, "mean", pg),
                     "vocab_parallel_cross_entropy", "target [N]");
  EXPECT_EMBER_ERROR(d::vocab_parallel_cross_entropy(logits, tensor({0, 1, 2}, kInt64), -100, "avg", pg),
                     "vocab_parallel_cross_entropy", "reduction");
  EXPECT_EMBER_ERROR(d::ParallelSelfAttention(8, 3, 0.0, true, pg), "ParallelSelfAttention",
                     "embed_dim (8) must be a positive multiple of num_heads (3)");
  d::ParallelSelfAttention attn(8, 2, 0.0, true, pg);
  EXPECT_EMBER_ERROR(attn(randn({2, 3, 8}), ones({2, 4}, kBool)), "ParallelSelfAttention",
                     "key_padding_mask");
  EXPECT_EMBER_ERROR(attn(randn({3, 8})), "ParallelSelfAttention", "expected x [N, L, E]");
  // A group of one is cross_entropy, an ignored target included.
  Tensor target = tensor({5, -100, 0}, kInt64);
  EXPECT_CLOSE(d::vocab_parallel_cross_entropy(logits, target, -100, "mean", pg),
               cross_entropy(logits, target));
}

}  // namespace
}  // namespace ember::testing::dist
