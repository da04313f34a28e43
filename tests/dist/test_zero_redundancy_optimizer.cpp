// ZeroRedundancyOptimizer over Gloo with 2 and 4 processes: DDP averages the gradients, each rank
// steps its share of the parameters, and after every step the parameters match one process
// running the plain optimizer on the whole batch (float32, AdamW and SGD with momentum). Each
// rank's optimizer state is 1/world of the plain optimizer's; the consolidated state dict equals
// the plain optimizer's and loads into a fresh ZeRO and into the plain optimizer, which then go
// on alike. Stage 2 (no DDP: the gradients reduced onto their owners) matches the same run and
// leaves each rank its own gradients only. A ShardedGradScaler makes every rank skip the step
// that one rank's share finds infinite, at both stages. In one process: the partition, a group of
// one, and the errors.
#include <limits>
#include <optional>
#include <set>

#include <ember/core/serialize.h>
#include <ember/distributed/ddp.h>
#include <ember/distributed/sharded_grad_scaler.h>
#include <ember/distributed/zero_redundancy_optimizer.h>
#include <ember/nn/linear.h>
#include <ember/optim/adam.h>
#include <ember/optim/grad_scaler.h>
#include <ember/optim/sgd.h>

#include "dist_test_util.h"

namespace ember::testing::dist {
namespace {

namespace d = ember::distributed;

constexpr int64_t kWidth = 16, kPerRank = 4;
const Tolerance kF32{1e-5, 1e-6};
const Tolerance kExact{0, 0};

// Four equal layers: 8 parameters (4 of 256 elements, 4 of 16), spread evenly over 2 or 4 ranks.
struct MlpImpl : nn::Module {
  MlpImpl() {
    for (int i = 1; i <= 4; ++i)
      layers.push_back(register_module("fc" + std::to_string(i), nn::Linear(kWidth, kWidth)));
  }
  Tensor forward(Tensor x) {
    for (size_t i = 0; i < layers.size(); ++i) x = i + 1 < layers.size() ? tanh(layers[i](x)) : layers[i](x);
    return x;
  }
  std::vector<nn::Linear> layers;
};
EMBER_MODULE(Mlp);

Mlp make_mlp() {
  manual_seed(7);
  return Mlp();
}

// Step `step`'s whole batch; rank r trains on rows r*kPerRank...
std::pair<Tensor, Tensor> global_batch(int step, int world) {
  manual_seed(1000 + step);
  return {randn({world * kPerRank, kWidth}), randn({world * kPerRank, kWidth})};
}

d::OptimizerFactory adamw() { return d::optimizer_factory<optim::AdamW>(optim::AdamWOptions(1e-2)); }
d::OptimizerFactory sgd() { return d::optimizer_factory<optim::SGD>(optim::SGDOptions(0.1).momentum(0.9)); }
// ZERO_OPTIM: sgd, adamw_fused (the multi-tensor step with its CPU kernel), else adamw.
d::OptimizerFactory factory_from_env() {
  const char* env = std::getenv("ZERO_OPTIM");
  const std::string name = env ? env : "adamw";
  if (name == "sgd") return sgd();
  if (name == "adamw_fused") return d::optimizer_factory<optim::AdamW>(optim::AdamWOptions(1e-2).fused(true));
  return adamw();
}

// The bytes of every state tensor (buffers and step counts).
size_t state_bytes(const optim::Optimizer& opt) {
  size_t n = 0;
  for (const auto& [param, s] : opt.state()) {
    if (s.step.defined()) n += s.step.nbytes();
    for (const auto& [name, t] : s.buffers) n += t.nbytes();
  }
  return n;
}

void check_same_params(const Mlp& actual, const Mlp& expected, const std::string& what) {
  std::vector<Tensor> a = actual->parameters(), e = expected->parameters();
  for (size_t i = 0; i < a.size(); ++i)
    check_close(a[i], e[i], what + ", parameter " + std::to_string(i), kF32);
}

// One training step on this rank's share (DDP averages the gradients) and, for the reference, on
// the whole batch.
void train_share(d::DistributedDataParallel<MlpImpl>& ddp, d::ZeroRedundancyOptimizer& opt, int iteration,
                 bool set_to_none = true) {
  int rank = d::get_rank(), world = d::get_world_size();
  auto [x, y] = global_batch(iteration, world);
  opt.zero_grad(set_to_none);
  mse_loss(ddp(x.narrow(0, rank * kPerRank, kPerRank)), y.narrow(0, rank * kPerRank, kPerRank)).backward();
  opt.step();
}
void train_whole(Mlp& model, optim::Optimizer& opt, int iteration, int world) {
  auto [x, y] = global_batch(iteration, world);
  opt.zero_grad();
  mse_loss(model(x), y).backward();
  opt.step();
}

// Same keys in the same order, the same metadata, tensors within f32 rounding.
void check_state_dicts(const StateDict& actual, const StateDict& expected) {
  EMBER_CHECK(actual.metadata == expected.metadata, "the state dicts' metadata differ");
  EMBER_CHECK(actual.tensors.keys() == expected.tensors.keys(), "the state dicts' tensors differ");
  for (const auto& [key, t] : expected.tensors) check_close(actual.tensors.at(key), t, key, kF32);
}

// ZERO_BUCKET_VIEW=1: parameters_as_bucket_view. Then rank r's parameters lie one after the other
// in one buffer (checked here), which the step broadcasts whole.
d::ZeroOptions options_from_env(int stage) {
  const char* view = std::getenv("ZERO_BUCKET_VIEW");
  return d::ZeroOptions().stage(stage).parameters_as_bucket_view(view && std::string(view) == "1");
}
void check_bucket_views(const d::ZeroRedundancyOptimizer& zero) {
  const char* view = std::getenv("ZERO_BUCKET_VIEW");
  if (!view || std::string(view) != "1") return;
  for (int r = 0; r < d::get_world_size(); ++r) {
    const float* next = nullptr;
    for (size_t i = 0; i < zero.parameters().size(); ++i) {
      if (zero.param_to_rank()[i] != r) continue;
      const Tensor& p = zero.parameters()[i];
      EMBER_CHECK(!next || p.data_ptr<float>() == next, "rank ", r, "'s parameter ", i,
                  " does not follow the previous one in its buffer");
      next = p.data_ptr<float>() + p.numel();
    }
  }
}

// --- Workers ---

DIST_WORKER(zero_matches_one_process) {
  d::init_process_group("gloo");
  int rank = d::get_rank(), world = d::get_world_size();
  Mlp net = make_mlp(), ref = make_mlp();
  d::DistributedDataParallel ddp(net);
  d::OptimizerFactory factory = factory_from_env();
  d::ZeroRedundancyOptimizer zero(ddp->parameters(), factory, nullptr, options_from_env(1));
  check_bucket_views(zero);
  auto ref_opt = factory({ref->parameters()});
  for (int step = 0; step < 5; ++step) {
    train_share(ddp, zero, step);
    train_whole(ref, *ref_opt, step, world);
    check_same_params(net, ref, "step " + std::to_string(step));
  }
  // State only for this rank's parameters: a quarter (a half) of the whole.
  std::vector<Tensor> params = net->parameters();
  for (size_t i = 0; i < params.size(); ++i)
    EMBER_CHECK(
        zero.optim().state().count(params[i].unsafe_impl()) == (zero.param_to_rank()[i] == rank ? 1u : 0u),
        "rank ", rank, ": the state of parameter ", i, " (owned by rank ", zero.param_to_rank()[i],
        ") is here where it should not be, or missing where it should be");
  size_t mine = state_bytes(zero.optim()), whole = state_bytes(*ref_opt);
  EMBER_CHECK(mine * static_cast<size_t>(world) == whole, "rank ", rank, " holds ", mine,
              " bytes of optimizer state, the whole is ", whole);
  d::destroy_process_group();
}

// Stage 2, no DDP: the reduces average the gradients onto their owners. The parameters follow the
// one-process run, and after each step a rank holds the gradients of its own parameters only.
DIST_WORKER(zero2_matches_one_process) {
  d::init_process_group("gloo");
  int rank = d::get_rank(), world = d::get_world_size();
  Mlp net = make_mlp(), ref = make_mlp();
  d::OptimizerFactory factory = factory_from_env();
  d::ZeroOptions options = options_from_env(2);
  if (const char* mb = std::getenv("ZERO_BUCKET_MB")) options.bucket_cap_mb(std::stod(mb));
  d::ZeroRedundancyOptimizer zero(net->parameters(), factory, nullptr, options);
  check_bucket_views(zero);
  auto ref_opt = factory({ref->parameters()});
  std::vector<Tensor> params = net->parameters();
  int64_t owned = 0, total = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    total += params[i].numel();
    if (zero.param_to_rank()[i] == rank) owned += params[i].numel();
  }
  for (int step = 0; step < 5; ++step) {
    auto [x, y] = global_batch(step, world);
    zero.zero_grad();
    const bool closure = step == 4;  // the last step runs its backward inside step()
    auto loss = [&] {
      Tensor l =
          mse_loss(net(x.narrow(0, rank * kPerRank, kPerRank)), y.narrow(0, rank * kPerRank, kPerRank));
      l.backward();
      return l;
    };
    if (closure) {
      zero.step(loss);
    } else {
      loss();
      zero.step();
    }
    train_whole(ref, *ref_opt, step, world);
    check_same_params(net, ref, "step " + std::to_string(step));
    int64_t held = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      const bool mine = zero.param_to_rank()[i] == rank;
      EMBER_CHECK(params[i].grad().defined() == mine, "rank ", rank, ": parameter ", i, " (owned by rank ",
                  zero.param_to_rank()[i], ") ", mine ? "lost" : "kept", " its gradient");
      if (mine) held += params[i].grad().numel();
    }
    EMBER_CHECK(held == owned && owned * world == total, "rank ", rank, " holds ", held,
                " gradient elements of ", total);
  }
  // A second backward before step() would reduce the averaged gradients again: refused.
  auto [x, y] = global_batch(5, world);
  zero.zero_grad();
  mse_loss(net(x), y).backward();
  bool refused = false;
  try {
    mse_loss(net(x), y).backward();
  } catch (const Error& e) {
    refused = std::string(e.what()).find("got a gradient twice before step()") != std::string::npos;
  }
  EMBER_CHECK(refused, "rank ", rank, ": a second backward before step() was not refused");
  zero.zero_grad();
  d::destroy_process_group();
}

// The stage-2 gradient path alone: a bucket goes as one reduce per owner in it, buckets in reverse
// parameter order; each owner ends with the average of the ranks' gradients (checked against an
// all-reduce of a copy), the other ranks with none.
DIST_WORKER(sharded_gradients_buckets) {
  d::init_process_group("gloo");
  const int rank = d::get_rank(), world = d::get_world_size();
  Mlp net = make_mlp();
  std::vector<Tensor> params = net->parameters();
  std::vector<optim::OptimizerParamGroup> groups;
  groups.emplace_back(params);
  const std::vector<int> owner = d::partition_parameters(groups, world);
  auto [x, y] = global_batch(0, world);
  // The whole net, or its first layer only (the other parameters get no gradient).
  auto backward = [&](bool first_only) {
    for (const Tensor& p : params) p.set_grad(Tensor());
    Tensor xs = x.narrow(0, rank * kPerRank, kPerRank), ys = y.narrow(0, rank * kPerRank, kPerRank);
    mse_loss(first_only ? net->layers[0](xs) : net(xs), ys).backward();
  };
  // The references: the gradients all-reduced and averaged.
  auto averaged = [&](bool first_only) {
    backward(first_only);
    std::vector<Tensor> out;
    for (const Tensor& p : params) {
      out.push_back(p.grad().defined() ? p.grad().clone() : Tensor());
      if (out.back().defined()) {
        d::all_reduce(out.back());
        out.back().div_(world);
      }
    }
    return out;
  };
  const std::vector<Tensor> expected = averaged(false), expected_first = averaged(true);
  for (int64_t cap : {int64_t{25} << 20, int64_t{1024}}) {
    for (const Tensor& p : params) p.set_grad(Tensor());
    d::detail::ShardedGradients sharded(params, owner, d::default_group(), cap);
    const auto buckets = sharded.bucket_indices();
    // What each bucket costs: one reduce per owner among its parameters.
    int64_t expected_reduces = 0;
    size_t covered = 0;
    for (const auto& b : buckets) {
      std::set<int> owners;
      for (size_t i : b) owners.insert(owner[i]);
      expected_reduces += static_cast<int64_t>(owners.size());
      covered += b.size();
    }
    EMBER_CHECK(covered == params.size(), "the buckets cover ", covered, " of ", params.size(),
                " parameters");
    if (cap == (int64_t{25} << 20))
      EMBER_CHECK(buckets.size() == 1 && buckets[0].front() == params.size() - 1 && expected_reduces == world,
                  "one bucket, last parameter first, one reduce per rank");
    else
      EMBER_CHECK(buckets.size() > 1, "1 KiB buckets: ", buckets.size(), " bucket");
    for (int round = 0; round < 2; ++round) {  // the next backward reduces again
      backward(false);
      sharded.finish();
      EMBER_CHECK(sharded.reduces_started() == expected_reduces * (round + 1), "rank ", rank, ": ",
                  sharded.reduces_started(), " reduces, expected ", expected_reduces * (round + 1));
      for (size_t i = 0; i < params.size(); ++i) {
        const bool mine = owner[i] == rank;
        EMBER_CHECK(params[i].grad().defined() == mine, "rank ", rank, ": parameter ", i,
                    " kept or lost its gradient");
        if (mine) check_close(params[i].grad(), expected[i], "averaged gradient " + std::to_string(i), kF32);
      }
    }
    // The first layer alone: its bucket never fills during backward and goes at finish(), with
    // the two gradients this backward made.
    backward(true);
    sharded.finish();
    for (size_t i = 0; i < params.size(); ++i) {
      const bool held = owner[i] == rank && expected_first[i].defined();
      EMBER_CHECK(params[i].grad().defined() == held, "rank ", rank, ": parameter ", i,
                  " (first layer only)");
      if (held)
        check_close(params[i].grad(), expected_first[i], "first-layer gradient " + std::to_string(i), kF32);
    }
  }
  d::destroy_process_group();
}

// Mixed precision through a ShardedGradScaler (ZERO_STAGE 1 with DDP, or 2): at step 2, rank 1
// alone makes the gradient of a parameter it owns infinite. Only rank 1's share check can see it,
// yet every rank skips that step and backs its scale off, as one process does when its step-2
// gradients are infinite; the other steps match that process's GradScaler run.
DIST_WORKER(zero_grad_scaler_skips_together) {
  d::init_process_group("gloo");
  const int rank = d::get_rank(), world = d::get_world_size();
  const int stage = std::stoi(std::getenv("ZERO_STAGE"));
  Mlp net = make_mlp(), ref = make_mlp();
  std::optional<d::DistributedDataParallel<MlpImpl>> ddp;
  if (stage == 1) ddp.emplace(net);
  d::ZeroRedundancyOptimizer zero(stage == 1 ? (*ddp)->parameters() : net->parameters(), factory_from_env(),
                                  nullptr, d::ZeroOptions().stage(stage));
  auto ref_opt = factory_from_env()({ref->parameters()});
  d::ShardedGradScaler scaler(1024.0);
  amp::GradScaler ref_scaler(1024.0);
  std::vector<Tensor> params = net->parameters();
  size_t k = 0;
  while (zero.param_to_rank()[k] != 1) ++k;
  int step = 0;
  params[k].register_hook([&](const Tensor& g) {
    return step == 2 && rank == 1 ? g * std::numeric_limits<float>::infinity() : Tensor();
  });
  for (; step < 5; ++step) {
    auto [x, y] = global_batch(step, world);
    zero.zero_grad();
    Tensor xs = x.narrow(0, rank * kPerRank, kPerRank), ys = y.narrow(0, rank * kPerRank, kPerRank);
    scaler.scale(mse_loss(stage == 1 ? (*ddp)(xs) : net(xs), ys)).backward();
    zero.step(scaler);
    scaler.update();
    ref_opt->zero_grad();
    Tensor ref_loss = mse_loss(ref(x), y);
    if (step == 2) ref_loss = ref_loss * std::numeric_limits<float>::infinity();
    ref_scaler.scale(ref_loss).backward();
    ref_scaler.step(*ref_opt);
    ref_scaler.update();
    check_same_params(net, ref, "step " + std::to_string(step));
    EMBER_CHECK(scaler.get_scale() == ref_scaler.get_scale(), "rank ", rank, ", step ", step, ": scale ",
                scaler.get_scale(), ", one process's ", ref_scaler.get_scale());
  }
  d::destroy_process_group();
}

DIST_WORKER(zero_state_dict_round_trip) {
  // Two parameter groups (the second with its own lr), 3 steps, every rank gets the consolidated
  // state (gathered to each rank in turn), then 3 more steps of four optimizers that must agree.
  d::init_process_group("gloo");
  int rank = d::get_rank(), world = d::get_world_size();
  auto groups = [](const Mlp& m) {
    std::vector<Tensor> p = m->parameters();
    return std::vector<optim::OptimizerParamGroup>{
        optim::OptimizerParamGroup({p.begin(), p.begin() + 4}),
        optim::OptimizerParamGroup({p.begin() + 4, p.end()}, std::make_unique<optim::AdamWOptions>(3e-3))};
  };
  Mlp net = make_mlp(), ref = make_mlp();
  d::DistributedDataParallel ddp(net);
  d::ZeroRedundancyOptimizer zero(groups(net), adamw());
  auto ref_opt = adamw()(groups(ref));
  for (int step = 0; step < 3; ++step) {
    train_share(ddp, zero, step);
    train_whole(ref, *ref_opt, step, world);
  }
  StateDict full;
  for (int to = 0; to < world; ++to) {
    zero.consolidate_state_dict(to);
    if (rank == to) full = zero.state_dict();
  }
  check_state_dicts(full, ref_opt->state_dict());
  std::vector<uint8_t> checkpoint = save_to_buffer(full.tensors, full.metadata);
  full = load_from_buffer(checkpoint.data(), checkpoint.size());

  // Fresh models with the same parameters: a new ZeRO and a plain AdamW load the full state.
  Mlp net2 = make_mlp(), ref2 = make_mlp();
  net2->load_state_dict(net->state_dict());
  ref2->load_state_dict(ref->state_dict());
  d::DistributedDataParallel ddp2(net2);
  d::ZeroRedundancyOptimizer zero2(groups(net2), adamw());
  zero2.load_state_dict(full);
  EMBER_CHECK(zero2.optim().state().size() == zero2.optim().size(), "rank ", rank, " loaded state for ",
              zero2.optim().state().size(), " parameters, it owns ", zero2.optim().size());
  auto plain2 = adamw()(groups(ref2));
  plain2->load_state_dict(full);
  for (int step = 3; step < 6; ++step) {
    train_share(ddp, zero, step);
    train_share(ddp2, zero2, step, /*set_to_none=*/false);
    train_whole(ref, *ref_opt, step, world);
    train_whole(ref2, *plain2, step, world);
    check_same_params(net, ref, "the ZeRO that consolidated, step " + std::to_string(step));
    check_same_params(net2, ref, "a fresh ZeRO that loaded the state, step " + std::to_string(step));
    check_same_params(ref2, ref, "a plain AdamW that loaded the state, step " + std::to_string(step));
  }
  d::destroy_process_group();
}

// Names a backend and runs no collective: enough for the constructor, in one process.
struct FakeGroup : d::ProcessGroup {
  FakeGroup(std::string backend, int size) : ProcessGroup(0, size, {}), backend_(std::move(backend)) {}
  std::string backend_name() const override { return backend_; }
  std::string name() const override { return "FakeGroup"; }
  std::shared_ptr<d::Work> all_reduce_impl(const Tensor&, d::ReduceOp) override { return none(); }
  std::shared_ptr<d::Work> broadcast_impl(const Tensor&, int) override { return none(); }
  std::shared_ptr<d::Work> reduce_impl(const Tensor&, int, d::ReduceOp) override { return none(); }
  std::shared_ptr<d::Work> all_gather_impl(const Tensor&, const Tensor&) override { return none(); }
  std::shared_ptr<d::Work> reduce_scatter_impl(const Tensor&, const Tensor&, d::ReduceOp) override {
    return none();
  }
  std::shared_ptr<d::Work> all_to_all_impl(const Tensor&, const Tensor&, const std::vector<int64_t>&,
                                           const std::vector<int64_t>&) override {
    return none();
  }
  std::shared_ptr<d::Work> send_impl(const Tensor&, int, int) override { return none(); }
  std::shared_ptr<d::Work> recv_impl(const Tensor&, int, int) override { return none(); }
  std::shared_ptr<d::Work> barrier_impl() override { return none(); }
  void check_tensor(const char*, const Tensor&) const override {}
  static std::shared_ptr<d::Work> none() { throw Error("FakeGroup: no collectives"); }
  std::string backend_;
};

}  // namespace

class Zero : public ::testing::TestWithParam<int> {};
TEST_P(Zero, AdamWMatchesOneProcessOnTheWholeBatch) {
  run_workers("zero_matches_one_process", GetParam(), {{"ZERO_OPTIM", "adamw"}});
}
TEST_P(Zero, SGDMomentumMatchesOneProcessOnTheWholeBatch) {
  run_workers("zero_matches_one_process", GetParam(), {{"ZERO_OPTIM", "sgd"}});
}
// The fused AdamW (one multi-tensor step over the rank's share) at both stages, with and without
// a ShardedGradScaler (whose inf check and unscale the fused step takes as tensors).
TEST_P(Zero, FusedAdamWMatchesOneProcessAtBothStages) {
  run_workers("zero_matches_one_process", GetParam(), {{"ZERO_OPTIM", "adamw_fused"}});
  run_workers("zero2_matches_one_process", GetParam(), {{"ZERO_OPTIM", "adamw_fused"}});
  run_workers("zero_grad_scaler_skips_together", GetParam(),
              {{"ZERO_STAGE", "1"}, {"ZERO_OPTIM", "adamw_fused"}});
  run_workers("zero_grad_scaler_skips_together", GetParam(),
              {{"ZERO_STAGE", "2"}, {"ZERO_OPTIM", "adamw_fused"}});
}
TEST_P(Zero, Stage2ShardsTheGradientsAndMatchesOneProcess) {
  run_workers("zero2_matches_one_process", GetParam());
  // Buckets of about 1 KiB: a weight (1 KiB) closes one, so the gradients go in several.
  run_workers("zero2_matches_one_process", GetParam(), {{"ZERO_BUCKET_MB", "0.0009765625"}});
}
TEST_P(Zero, Stage2ReducesABucketOncePerOwner) { run_workers("sharded_gradients_buckets", GetParam()); }
// parameters_as_bucket_view: one broadcast per rank's buffer, at both stages.
TEST_P(Zero, ParametersAsBucketViewMatchesOneProcess) {
  run_workers("zero_matches_one_process", GetParam(), {{"ZERO_OPTIM", "adamw"}, {"ZERO_BUCKET_VIEW", "1"}});
  run_workers("zero2_matches_one_process", GetParam(), {{"ZERO_BUCKET_VIEW", "1"}});
}
TEST_P(Zero, ShardedGradScalerSkipsOnEveryRankAtBothStages) {
  run_workers("zero_grad_scaler_skips_together", GetParam(), {{"ZERO_STAGE", "1"}});
  run_workers("zero_grad_scaler_skips_together", GetParam(), {{"ZERO_STAGE", "2"}});
}
TEST_P(Zero, ConsolidatedStateDictLoadsAndTrainingGoesOn) {
  run_workers("zero_state_dict_round_trip", GetParam());
}
INSTANTIATE_TEST_SUITE_P(Gloo, Zero, ::testing::Values(2, 4),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

TEST(ZeroPartition, GreedyBySizeAsPyTorch) {
  auto sized = [](std::vector<int64_t> numels) {
    std::vector<Tensor> out;
    for (int64_t n : numels) out.push_back(zeros({n}));
    return optim::OptimizerParamGroup(out);
  };
  // Largest first, each to the emptiest rank (the lowest on a tie); equal sizes keep their order.
  EXPECT_EQ(d::partition_parameters({sized({3, 9, 5, 7})}, 2), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(d::partition_parameters({sized({4, 4, 4, 4, 4})}, 4), (std::vector<int>{0, 1, 2, 3, 0}));
  // The ranks' totals carry over from group to group.
  EXPECT_EQ(d::partition_parameters({sized({10}), sized({1, 2})}, 2), (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(d::partition_parameters({sized({1, 2})}, 1), (std::vector<int>{0, 0}));
  EXPECT_EMBER_ERROR(d::partition_parameters({sized({1})}, 0),
                     "partition_parameters: world_size must be positive");
}

TEST(Zero, WorldOfOneIsThePlainOptimizer) {
  Mlp net = make_mlp(), ref = make_mlp();
  d::ZeroRedundancyOptimizer zero(net->parameters(), adamw(), group_of_one());
  auto ref_opt = adamw()({ref->parameters()});
  EXPECT_EMBER_ERROR(zero.state_dict(),
                     "ZeroRedundancyOptimizer.state_dict: the state is not consolidated on this rank (0)",
                     "call consolidate_state_dict(to=0)");
  for (int step = 0; step < 3; ++step) {
    auto [x, y] = global_batch(step, 1);
    zero.zero_grad();
    mse_loss(net(x), y).backward();
    zero.step();
    train_whole(ref, *ref_opt, step, 1);
  }
  for (size_t i = 0; i < 8; ++i) EXPECT_CLOSE(net->parameters()[i], ref->parameters()[i], kExact);
  // 1088 float32 elements x (exp_avg, exp_avg_sq), and 8 float32 step counts (docs/distributed.md).
  EXPECT_EQ(state_bytes(zero.optim()), 8736u);
  zero.consolidate_state_dict();
  StateDict sd = zero.state_dict(), expected = ref_opt->state_dict();
  EXPECT_EQ(sd.metadata, expected.metadata);
  ASSERT_EQ(sd.tensors.keys(), expected.tensors.keys());
  for (const auto& [key, t] : expected.tensors) EXPECT_CLOSE(sd.tensors.at(key), t, kExact);
  // A step makes the consolidated state stale: it is dropped.
  zero.step();
  EXPECT_EMBER_ERROR(zero.state_dict(), "again after each step");
  // zero_grad(false) zeroes every gradient.
  zero.zero_grad(false);
  for (const Tensor& p : net->parameters()) EXPECT_CLOSE(p.grad(), zeros_like(p), kExact);
}

TEST(Zero, EachRankGetsItsShare) {
  // The constructor runs no collective, so each rank's view can be built in one process.
  Mlp net = make_mlp();
  for (int world : {2, 4}) {
    d::ZeroRedundancyOptimizer zero(net->parameters(), adamw(), std::make_shared<FakeGroup>("gloo", world));
    // fc1..fc4: weight, bias; the weights go round the ranks first, then the biases.
    std::vector<int> expected =
        world == 2 ? std::vector<int>{0, 0, 1, 1, 0, 0, 1, 1} : std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3};
    EXPECT_EQ(zero.param_to_rank(), expected);
    EXPECT_EQ(zero.optim().size(), size_t(8 / world));
  }
}

TEST(ZeroErrors, Arguments) {
  auto pg = group_of_one();
  Mlp net = make_mlp();
  std::vector<Tensor> params = net->parameters();
  EXPECT_EMBER_ERROR(d::ZeroRedundancyOptimizer(std::vector<Tensor>{}, adamw(), pg),
                     "ZeroRedundancyOptimizer: got an empty parameter list");
  EXPECT_EMBER_ERROR(d::ZeroRedundancyOptimizer(params, nullptr, pg),
                     "ZeroRedundancyOptimizer: the optimizer factory is empty");
  EXPECT_EMBER_ERROR(d::ZeroRedundancyOptimizer(
                         params, [](auto) { return nullptr; }, pg),
                     "ZeroRedundancyOptimizer: the optimizer factory returned null");
  EXPECT_EMBER_ERROR(
      d::ZeroRedundancyOptimizer(std::vector<Tensor>{params[0], params[1], params[0]}, adamw(), pg),
      "ZeroRedundancyOptimizer: parameter 2 is given twice");
  EXPECT_EMBER_ERROR(d::ZeroRedundancyOptimizer(std::vector<Tensor>{params[0] * 2}, adamw(), pg),
                     "parameter 0 is undefined or not a leaf");
  EXPECT_EMBER_ERROR(d::ZeroRedundancyOptimizer(params, adamw(), std::make_shared<FakeGroup>("nccl", 1)),
                     "ZeroRedundancyOptimizer: the parameters are on cpu",
                     "backend (nccl) takes CUDA tensors");
  // Three parameters for four ranks: every rank says so (none goes on to a lone collective).
  EXPECT_EMBER_ERROR(d::ZeroRedundancyOptimizer(std::vector<Tensor>{params[0], params[1], params[2]}, adamw(),
                                                std::make_shared<FakeGroup>("gloo", 4)),
                     "ZeroRedundancyOptimizer: rank 3 of 4 would own no parameter (there are 3)");
  EXPECT_EMBER_ERROR(d::ZeroRedundancyOptimizer(params, adamw()), "default_group");
  EXPECT_EMBER_ERROR(d::ZeroRedundancyOptimizer(params, adamw(), pg, d::ZeroOptions().stage(3)),
                     "ZeroRedundancyOptimizer: stage must be 1 or 2, got 3");
  EXPECT_EMBER_ERROR(
      d::ZeroRedundancyOptimizer(params, adamw(), pg, d::ZeroOptions().stage(2).bucket_cap_mb(0)),
      "ZeroRedundancyOptimizer: bucket_cap_mb must be positive, got 0");

  d::ZeroRedundancyOptimizer zero(params, adamw(), pg);
  EXPECT_EMBER_ERROR(
      zero.consolidate_state_dict(1),
      "ZeroRedundancyOptimizer.consolidate_state_dict: to is 1, not a rank of the group (size 1)");
  auto sgd_opt = sgd()({params});
  EXPECT_EMBER_ERROR(zero.load_state_dict(sgd_opt->state_dict()), "the state dict is from SGD, not AdamW");
  auto fewer = adamw()({std::vector<Tensor>(params.begin(), params.begin() + 6)});
  EXPECT_EMBER_ERROR(
      zero.load_state_dict(fewer->state_dict()),
      "ZeroRedundancyOptimizer.load_state_dict: parameter group 0 has 6 parameters in the state dict, 8 "
      "in the optimizer");
  auto two_groups = adamw()({std::vector<Tensor>(params.begin(), params.begin() + 4),
                             std::vector<Tensor>(params.begin() + 4, params.end())});
  EXPECT_EMBER_ERROR(
      zero.load_state_dict(two_groups->state_dict()),
      "ZeroRedundancyOptimizer.load_state_dict: the state dict has 2 parameter groups, the optimizer has 1");
  StateDict stray = adamw()({params})->state_dict();
  stray.metadata["state.8.step"] = "1";
  EXPECT_EMBER_ERROR(
      zero.load_state_dict(stray),
      "ZeroRedundancyOptimizer.load_state_dict: the state dict has state for parameter 8, the optimizer "
      "has 8 parameters");
}

}  // namespace ember::testing::dist
