// SyncBatchNorm over 2 and 4 Gloo processes against BatchNorm on the concatenated batch: the
// forward, the running stats and the input, weight and bias gradients; equal, unequal and empty
// per-rank batches; eval; gradcheck of the functional form; the errors.
#include <numeric>

#include "dist_test_util.h"

#include "ember/distributed/sync_batch_norm.h"

namespace ember::testing::dist {
namespace {

namespace d = ember::distributed;

struct Case {
  std::function<int64_t(int rank)> rows;  // rank r's batch size
  ScalarType dtype = kFloat64;
  std::optional<double> momentum = 0.1;
  bool affine = true;
  std::vector<int64_t> sample = {3, 2, 3};  // one sample's shape [C, *]
};

// Every rank builds the whole batch (the same draws everywhere), runs BatchNorm on it and
// SyncBatchNorm (converted from that BatchNorm) on its own rows, for two training steps and one
// in eval. float64 matches to 1e-10; float32 within 1e-5 (the ranks' statistics are combined in
// another order than BatchNorm's single pass).
void check_against_batch_norm(const Case& c) {
  d::init_process_group("gloo");
  int rank = d::get_rank(), size = d::get_world_size();
  std::vector<int64_t> rows(size);
  for (int r = 0; r < size; ++r) rows[r] = c.rows(r);
  int64_t total = std::accumulate(rows.begin(), rows.end(), int64_t{0});
  int64_t start = std::accumulate(rows.begin(), rows.begin() + rank, int64_t{0}), mine = rows[rank];
  Tolerance tol = c.dtype == kFloat64 ? Tolerance{1e-10, 1e-10} : Tolerance{1e-5, 1e-5};
  int64_t C = c.sample[0];
  std::vector<int64_t> shape = {total};
  shape.insert(shape.end(), c.sample.begin(), c.sample.end());

  Generator gen(1234);
  auto opts = nn::BatchNormOptions(C).momentum(c.momentum).affine(c.affine);
  nn::BatchNorm1d ref1{nullptr};
  nn::BatchNorm2d ref2{nullptr};
  nn::BatchNormImplBase* ref = shape.size() == 4
                                   ? static_cast<nn::BatchNormImplBase*>((ref2 = nn::BatchNorm2d(opts)).get())
                                   : (ref1 = nn::BatchNorm1d(opts)).get();
  auto call_ref = [&](const Tensor& x) { return ref2 ? ref2(x) : ref1(x); };
  ref->to(c.dtype);
  if (c.affine) {
    NoGradGuard no_grad;
    ref->weight.copy_(randn({C}, kFloat64, &gen) + 1);
    ref->bias.copy_(randn({C}, kFloat64, &gen));
  }
  nn::SyncBatchNorm sync = nn::convert_sync_batchnorm(*ref);
  EMBER_CHECK(sync->name() == "SyncBatchNorm" && sync->is_training(),
              "convert_sync_batchnorm: ", sync->name());
  EMBER_CHECK(sync->state_dict().keys() == ref->state_dict().keys(), "SyncBatchNorm's state_dict keys");

  auto check_stats = [&](const std::string& at) {
    if (!ref->running_mean.defined()) return;
    check_close(sync->running_mean, ref->running_mean, at + ": running_mean", tol);
    check_close(sync->running_var, ref->running_var, at + ": running_var", tol);
    check_close(sync->num_batches_tracked, ref->num_batches_tracked, at + ": num_batches_tracked",
                Tolerance{0, 0});
  };
  for (int step = 0; step < 2; ++step) {
    std::string at = "step " + std::to_string(step);
    Tensor x = (randn(shape, kFloat64, &gen) * 2 + step).to(c.dtype);
    Tensor gy = randn(shape, kFloat64, &gen).to(c.dtype);
    Tensor xr = x.clone().requires_grad_();
    Tensor out_ref = call_ref(xr);
    (out_ref * gy).sum().backward();
    Tensor xs = x.narrow(0, start, mine).clone().requires_grad_();
    Tensor out = sync(xs);
    (out * gy.narrow(0, start, mine)).sum().backward();
    check_close(out, out_ref.detach().narrow(0, start, mine), at + ": output", tol);
    check_close(xs.grad(), xr.grad().narrow(0, start, mine), at + ": input grad", tol);
    check_stats(at);
    if (!c.affine) continue;
    // Each rank's weight and bias gradients are its share; their sum is BatchNorm's.
    for (auto [s, r, what] :
         {std::tuple{sync->weight, ref->weight, "weight"}, {sync->bias, ref->bias, "bias"}}) {
      Tensor g = s.grad().clone();
      d::all_reduce(g);
      check_close(g, r.grad(), at + ": summed " + what + " grad", tol);
    }
    sync->zero_grad();
    ref->zero_grad();
  }
  // Eval: the running stats, no communication (rank 0 alone runs one more, which would hang if
  // it communicated).
  sync->eval();
  ref->eval();
  Tensor x = randn(shape, kFloat64, &gen).to(c.dtype);
  check_close(sync(x.narrow(0, start, mine)), call_ref(x).narrow(0, start, mine), "eval output", tol);
  if (rank == 0) sync(x);
  d::destroy_process_group();
}

DIST_WORKER(sync_bn_equal) {
  check_against_batch_norm({.rows = [](int) { return 3; }});
}

// Unequal batches (rank r has r + 1 rows), the cumulative average, [N, C, L] input.
DIST_WORKER(sync_bn_unequal) {
  check_against_batch_norm({.rows = [](int r) { return r + 1; }, .momentum = std::nullopt, .sample = {4, 5}});
}

// float32 [N, C] input without affine; one rank has a single row.
DIST_WORKER(sync_bn_float32) {
  check_against_batch_norm(
      {.rows = [](int r) { return r == 1 ? 1 : 4; }, .dtype = kFloat32, .affine = false, .sample = {6}});
}

// The last rank has no rows at all.
DIST_WORKER(sync_bn_empty_rank) {
  int size = env_int("WORLD_SIZE");
  check_against_batch_norm({.rows = [size](int r) { return r == size - 1 ? 0 : 2; }});
}

// One value per channel over the whole group is an error on every rank (rank 0 has the value).
DIST_WORKER(sync_bn_one_value) {
  d::init_process_group("gloo");
  int rank = d::get_rank();
  nn::SyncBatchNorm bn(nn::BatchNormOptions(2));
  Tensor x = zeros({rank == 0 ? 1 : 0, 2, 1});
  bool threw = false;
  try {
    bn(x);
  } catch (const Error& e) {
    threw = std::string(e.what()).find(
                "sync_batch_norm: expected more than 1 value per channel when "
                "training, got 1 over the group") != std::string::npos;
    EMBER_CHECK(threw, "unexpected message: ", e.what());
  }
  EMBER_CHECK(threw, "one value over the group did not throw");
  d::destroy_process_group();
}

// Typed BatchNorm members, one in a child, as a ResNet's blocks hold them.
struct NormBlockImpl : nn::Module {
  NormBlockImpl() { bn = register_module("bn", nn::BatchNorm2d(nn::BatchNormOptions(3))); }
  Tensor forward(const Tensor& x) { return bn(x); }
  nn::BatchNorm2d bn{nullptr};
};
EMBER_MODULE(NormBlock);

struct TwoNormsImpl : nn::Module {
  TwoNormsImpl() {
    bn = register_module("bn", nn::BatchNorm2d(nn::BatchNormOptions(3)));
    block = register_module("block", NormBlock());
    to(kFloat64);
  }
  Tensor forward(const Tensor& x) { return block(tanh(bn(x)) * 2); }
  nn::BatchNorm2d bn{nullptr};
  NormBlock block{nullptr};
};
EMBER_MODULE(TwoNorms);

// A whole model converted in place trains on each rank's rows as the unconverted model on the
// whole batch: outputs, input gradients, running stats and the summed parameter gradients.
DIST_WORKER(sync_bn_whole_model) {
  d::init_process_group("gloo");
  const int rank = d::get_rank(), size = d::get_world_size();
  const int64_t rows = 3;
  TwoNorms model, ref;
  for (TwoNorms m : {model, ref}) {
    NoGradGuard no_grad;
    Generator gen(5);  // the same affine parameters in both models
    for (nn::BatchNorm2d bn : {m->bn, m->block->bn}) {
      bn->weight.copy_(randn({3}, kFloat64, &gen) + 1);
      bn->bias.copy_(randn({3}, kFloat64, &gen));
    }
  }
  EMBER_CHECK(nn::convert_sync_batchnorm(*model) == 2, "convert_sync_batchnorm: expected 2 layers");
  const Tolerance tol{1e-10, 1e-10};
  Generator gen(77);
  for (int step = 0; step < 2; ++step) {
    const std::string at = "step " + std::to_string(step);
    Tensor x = randn({size * rows, 3, 2, 2}, kFloat64, &gen) * 2 + step,
           gy = randn({size * rows, 3, 2, 2}, kFloat64, &gen);
    Tensor xr = x.clone().requires_grad_(), xs = x.narrow(0, rank * rows, rows).clone().requires_grad_();
    Tensor out_ref = ref(xr), out = model(xs);
    (out_ref * gy).sum().backward();
    (out * gy.narrow(0, rank * rows, rows)).sum().backward();
    check_close(out, out_ref.detach().narrow(0, rank * rows, rows), at + ": output", tol);
    check_close(xs.grad(), xr.grad().narrow(0, rank * rows, rows), at + ": input grad", tol);
    for (auto [m, r] : {std::pair{model->bn, ref->bn}, {model->block->bn, ref->block->bn}}) {
      check_close(m->running_mean, r->running_mean, at + ": running_mean", tol);
      check_close(m->running_var, r->running_var, at + ": running_var", tol);
      Tensor g = m->weight.grad().clone();
      d::all_reduce(g);
      check_close(g, r->weight.grad(), at + ": summed weight grad", tol);
    }
    model->zero_grad();
    ref->zero_grad();
  }
  d::destroy_process_group();
}

class SyncBatchNormDist : public ::testing::TestWithParam<int> {};

TEST_P(SyncBatchNormDist, EqualBatchesMatchBatchNorm) { run_workers("sync_bn_equal", GetParam()); }
TEST_P(SyncBatchNormDist, UnequalBatchesMatchBatchNorm) { run_workers("sync_bn_unequal", GetParam()); }
TEST_P(SyncBatchNormDist, Float32MatchesBatchNorm) { run_workers("sync_bn_float32", GetParam()); }
TEST_P(SyncBatchNormDist, EmptyRankMatchesBatchNorm) { run_workers("sync_bn_empty_rank", GetParam()); }
TEST_P(SyncBatchNormDist, WholeModelConvertedInPlace) { run_workers("sync_bn_whole_model", GetParam()); }
INSTANTIATE_TEST_SUITE_P(Gloo, SyncBatchNormDist, ::testing::Values(2, 4),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

TEST(SyncBatchNorm, OneValueOverTheGroupIsAnError) { run_workers("sync_bn_one_value", 2); }

// --- In one process: a group of one ---

std::shared_ptr<d::ProcessGroup> group_of_one(std::shared_ptr<d::Store>& store) {
  store = std::make_shared<d::TCPStore>("127.0.0.1", 0, std::nullopt, true, milliseconds(5000));
  return d::make_process_group_gloo(std::make_shared<d::PrefixStore>("g", store), 0, 1);
}

// The functional form's backward (the formula written for the group) in float64.
TEST(SyncBatchNorm, Gradcheck) {
  std::shared_ptr<d::Store> store;
  auto pg = group_of_one(store);
  Generator gen(7);
  Tensor x = randn({4, 3, 2}, kFloat64, &gen).requires_grad_();
  Tensor w = (randn({3}, kFloat64, &gen) + 1).requires_grad_();
  Tensor b = randn({3}, kFloat64, &gen).requires_grad_();
  EXPECT_TRUE(autograd::gradcheck(
      [&](const std::vector<Tensor>& in) {
        return d::sync_batch_norm(in[0], {}, {}, in[1], in[2], 0.1, 1e-5, pg);
      },
      {x, w, b}));
  EXPECT_TRUE(autograd::gradcheck(
      [&](const std::vector<Tensor>& in) { return d::sync_batch_norm(in[0], {}, {}, {}, {}, 0.1, 1e-5, pg); },
      {x}));
}

// A group of one is BatchNorm: the functional form (always the synchronized path) and the layer.
TEST(SyncBatchNorm, GroupOfOneIsBatchNorm) {
  std::shared_ptr<d::Store> store;
  auto pg = group_of_one(store);
  Generator gen(3);
  Tensor x = randn({5, 2, 3, 3}, kFloat64, &gen) * 3 + 1;
  Tensor rm = zeros({2}, kFloat64), rv = ones({2}, kFloat64), rm2 = rm.clone(), rv2 = rv.clone();
  Tensor w = tensor({0.5, 2.0}).to(kFloat64), b = tensor({1.0, -1.0}).to(kFloat64);
  Tensor out = d::sync_batch_norm(x, rm, rv, w, b, 0.3, 1e-5, pg);
  EXPECT_CLOSE(out, batch_norm(x, rm2, rv2, w, b, true, 0.3, 1e-5), Tolerance{1e-12, 1e-12});
  EXPECT_CLOSE(rm, rm2, Tolerance{1e-12, 1e-12});
  EXPECT_CLOSE(rv, rv2, Tolerance{1e-12, 1e-12});

  nn::SyncBatchNorm sync(nn::BatchNormOptions(2), pg);
  nn::BatchNorm2d bn(nn::BatchNormOptions(2));
  EXPECT_CLOSE(sync(x.to(kFloat32)), bn(x.to(kFloat32)));
  EXPECT_CLOSE(sync->running_var, bn->running_var);
  std::ostringstream os;
  os << *sync;
  EXPECT_EQ(os.str(),
            "SyncBatchNorm(2, eps=1e-05, momentum=0.1, affine=true, bias=true, track_running_stats=true)");
}

TEST(SyncBatchNorm, ConvertingAWholeModel) {
  // Without a group, training a converted layer is an error naming it; eval needs no group; a
  // group of one is the layer's own forward.
  TwoNorms model, ref;
  ref->load_state_dict(model->state_dict());
  EXPECT_EQ(nn::convert_sync_batchnorm(*model), 2);
  Tensor x = randn({4, 3, 2, 2}, kFloat64);
  ASSERT_FALSE(d::is_initialized());
  EXPECT_EMBER_ERROR(model(x), "BatchNorm2d: training needs a process group",
                     "distributed::init_process_group");
  model->eval();
  ref->eval();
  EXPECT_CLOSE(model(x), ref(x), Tolerance{0, 0});
  model->train();
  ref->train();
  std::shared_ptr<d::Store> store;
  EXPECT_EQ(nn::convert_sync_batchnorm(*model, group_of_one(store)), 2);
  EXPECT_CLOSE(model(x), ref(x), Tolerance{0, 0});
  EXPECT_CLOSE(model->block->bn->running_var, ref->block->bn->running_var, Tolerance{0, 0});
  // The single-layer form still makes a SyncBatchNorm.
  nn::SyncBatchNorm one = nn::convert_sync_batchnorm(*model->bn);
  EXPECT_EQ(one->name(), "SyncBatchNorm");
}

TEST(SyncBatchNorm, Errors) {
  nn::SyncBatchNorm bn(nn::BatchNormOptions(3));
  EXPECT_EMBER_ERROR(bn(zeros({3})), "SyncBatchNorm: expected at least 2D input, got 1D input [3]");
  ASSERT_FALSE(d::is_initialized());
  EXPECT_EMBER_ERROR(bn(zeros({4, 3})), "SyncBatchNorm: training needs a process group",
                     "distributed::init_process_group");
  bn->eval();  // eval needs no group
  EXPECT_CLOSE(bn(ones({2, 3})), ones({2, 3}) / std::sqrt(1 + 1e-5));
  bn->train();

  std::shared_ptr<d::Store> store;
  auto pg = group_of_one(store);
  nn::SyncBatchNorm with_group(nn::BatchNormOptions(3), pg);
  EXPECT_EMBER_ERROR(with_group(zeros({4, 5})), "SyncBatchNorm", "channels", "[4, 5]");
  Tensor x = randn({4, 3});
  EXPECT_EMBER_ERROR(d::sync_batch_norm(x, {}, {}, {}, {}, 0.1, 1e-5, nullptr),
                     "sync_batch_norm: the process group is null");
  EXPECT_EMBER_ERROR(d::sync_batch_norm(zeros({4}), {}, {}, {}, {}, 0.1, 1e-5, pg),
                     "sync_batch_norm: expected an input [N, C, *] with at least 2 dims, got [4]");
  EXPECT_EMBER_ERROR(d::sync_batch_norm(zeros({4, 3}, kInt64), {}, {}, {}, {}, 0.1, 1e-5, pg),
                     "sync_batch_norm: expected a floating point input, got int64");
  EXPECT_EMBER_ERROR(d::sync_batch_norm(x, zeros({3}), {}, {}, {}, 0.1, 1e-5, pg),
                     "sync_batch_norm: running_mean and running_var must both be given");
  EXPECT_EMBER_ERROR(d::sync_batch_norm(x, {}, {}, ones({4}), {}, 0.1, 1e-5, pg),
                     "sync_batch_norm: expected weight to be a floating point [3] tensor", "[4]");
  EXPECT_EMBER_ERROR(d::sync_batch_norm(zeros({1, 3}), {}, {}, {}, {}, 0.1, 1e-5, pg),
                     "sync_batch_norm: expected more than 1 value per channel when training, got 1");
}

}  // namespace
}  // namespace ember::testing::dist
