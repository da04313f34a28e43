// DistributedDataParallel over Gloo with 2 and 4 processes. The reference is one process
// training a copy of rank 0's model on the whole batch (every rank's share concatenated): the
// gradients averaged over ranks are that batch's gradients, so after N SGD steps the parameters
// agree to float64 rounding. Also: buckets (many, one), no_sync, find_unused_parameters, the
// broadcasts from rank 0, comm hooks, and the errors; the same with gradient_as_bucket_view
// (DDP_GRAD_AS_VIEW=1), and that option against the copies.
#include <ember/distributed/ddp.h>
#include <ember/nn/conv.h>
#include <ember/nn/flatten_parameters.h>
#include <ember/nn/linear.h>
#include <ember/optim/sgd.h>

#include "dist_test_util.h"

namespace ember::testing::dist {
namespace {

namespace d = ember::distributed;

constexpr int64_t kIn = 4, kHidden = 6, kOut = 3, kPerRank = 4;
const Tolerance kF64{1e-9, 1e-12};
const Tolerance kExact{0, 0};

// tanh MLP with a buffer (broadcast before each forward) and a branch `extra` that forward
// uses only when asked, and `dead` that it never uses.
struct NetImpl : nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", nn::Linear(kIn, kHidden));
    fc2 = register_module("fc2", nn::Linear(kHidden, kHidden));
    fc3 = register_module("fc3", nn::Linear(kHidden, kOut));
    extra = register_module("extra", nn::Linear(kHidden, kOut));
    dead = register_module("dead", nn::Linear(kHidden, kOut));
    running = register_buffer("running", zeros({2}));
    to(kFloat64);
  }
  Tensor forward(const Tensor& x, bool use_extra = false) {
    Tensor h = tanh(fc2(tanh(fc1(x))));
    return use_extra ? fc3(h) + extra(h) : fc3(h);
  }
  nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr}, extra{nullptr}, dead{nullptr};
  Tensor running;
};
EMBER_MODULE(Net);

// Rank r's model: initialized from its own seed, so only the broadcast makes them agree.
Net make_net(int rank) {
  manual_seed(100 + rank);
  return Net();
}

// Step `step`'s whole batch (every rank's share, rank r's rows r*kPerRank...).
std::pair<Tensor, Tensor> global_batch(int step, int world) {
  manual_seed(1000 + step);
  return {randn({world * kPerRank, kIn}, kFloat64), randn({world * kPerRank, kOut}, kFloat64)};
}

// Without find_unused_parameters, a parameter without a gradient is an error (ddp_unused_error).
void freeze_unused(const Net& net) {
  for (const Tensor& p : {net->extra->weight, net->extra->bias, net->dead->weight, net->dead->bias})
    p.requires_grad_(false);
}

Tensor share(const Tensor& t, int rank) { return t.narrow(0, rank * kPerRank, kPerRank); }

void check_params(const nn::Module& actual, const nn::Module& expected, const std::string& what,
                  Tolerance tol = kF64) {
  auto a = actual.named_parameters(), e = expected.named_parameters();
  for (size_t i = 0; i < a.size(); ++i)
    check_close(a.items()[i].second, e.items()[i].second, what + " " + a.items()[i].first, tol);
}

// Throws unless fn throws an ember::Error whose message has every part.
void expect_error(const std::function<void()>& fn, std::initializer_list<const char*> parts) {
  try {
    fn();
  } catch (const Error& e) {
    for (const char* part : parts)
      EMBER_CHECK(std::string(e.what()).find(part) != std::string::npos, "message \"", e.what(),
                  "\" lacks \"", part, "\"");
    return;
  }
  EMBER_CHECK(false, "expected an ember::Error with \"", *parts.begin(), "\"");
}

bool grad_as_view_from_env() { return std::getenv("DDP_GRAD_AS_VIEW") != nullptr; }

d::DistributedDataParallelOptions options_from_env() {
  d::DistributedDataParallelOptions o;
  if (const char* mb = std::getenv("DDP_BUCKET_MB"))
    o.bucket_cap_mb(std::atof(mb)).first_bucket_cap_mb(std::atof(mb));
  return o.gradient_as_bucket_view(grad_as_view_from_env());
}

// The parameters DDP reduces (bucket_indices index into these).
std::vector<Tensor> trainable(const nn::Module& m) {
  std::vector<Tensor> out;
  for (const Tensor& p : m.parameters())
    if (p.requires_grad()) out.push_back(p);
  return out;
}

// Where each parameter's .grad starts in memory, bucket by bucket; throws unless the gradients of
// each bucket lie one after the other (views of one flat buffer).
std::vector<const void*> grad_addresses(const std::vector<std::vector<size_t>>& buckets,
                                        const std::vector<Tensor>& params) {
  std::vector<const void*> out;
  for (const auto& bucket : buckets) {
    const char* next = nullptr;
    for (size_t i : bucket) {
      const Tensor g = params[i].grad();
      EMBER_CHECK(g.defined(), "parameter ", i, " has no gradient");
      const char* p = static_cast<const char*>(g.data_ptr());
      EMBER_CHECK(next == nullptr || p == next, "the gradient of parameter ", i,
                  " does not follow the previous one in its bucket");
      next = p + g.nbytes();
      out.push_back(p);
    }
  }
  return out;
}

// --- Workers ---

DIST_WORKER(ddp_matches_one_process) {
  d::init_process_group("gloo");
  int rank = d::get_rank(), world = d::get_world_size();
  Net net = make_net(rank), ref = make_net(0);
  freeze_unused(net);
  // DDP_FLAT_PARAMS: the parameters in one buffer (nn::utils::flatten_parameters_), which the
  // broadcast and the steps must keep.
  const bool flat = std::getenv("DDP_FLAT_PARAMS") != nullptr;
  const Tensor buffer = flat ? nn::utils::flatten_parameters_(net->parameters()).at(0) : Tensor();
  auto check_flat = [&] {
    if (!flat) return;
    const char* next = static_cast<const char*>(buffer.data_ptr());
    for (const Tensor& p : net->parameters()) {
      EMBER_CHECK(p.data_ptr() == next, "a parameter left the buffer");
      next += p.nbytes();
    }
  };
  d::DistributedDataParallel ddp(net, nullptr, options_from_env());
  check_params(*net, *ref, "after the broadcast at construction", kExact);
  check_flat();

  // 6 parameters require grad: 1 bucket, or one each, starting from the last one (fc3.bias).
  auto buckets = ddp->bucket_indices();
  size_t expected_buckets = std::getenv("DDP_BUCKET_MB") ? 6 : 1;
  EMBER_CHECK(buckets.size() == expected_buckets, "expected ", expected_buckets, " buckets, got ",
              buckets.size());
  EMBER_CHECK(buckets.front().front() == 5, "the first bucket starts with the last parameter, got ",
              buckets.front().front());
  optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD ref_opt(ref->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < 5; ++step) {
    auto [x, y] = global_batch(step, world);
    net->running.fill_(rank + step);
    opt.zero_grad();
    mse_loss(ddp(share(x, rank)), share(y, rank)).backward();
    if (grad_as_view_from_env()) grad_addresses(ddp->bucket_indices(), trainable(*net));
    check_close(net->running, full({2}, double(step), kFloat64), "buffer broadcast before forward", kExact);
    opt.step();
    ref_opt.zero_grad();
    mse_loss(ref(x), y).backward();
    ref_opt.step();
  }
  check_params(*net, *ref, "after 5 SGD steps");
  check_flat();
  d::destroy_process_group();
}

DIST_WORKER(ddp_unused_error) {
  // extra and dead require grad but get none: the reduction cannot finish, and says so.
  d::init_process_group("gloo");
  int rank = d::get_rank(), world = d::get_world_size();
  Net net = make_net(rank);
  d::DistributedDataParallel ddp(net, nullptr, d::DistributedDataParallelOptions().bucket_cap_mb(1e-4));
  auto [x, y] = global_batch(0, world);
  for (int iteration = 0; iteration < 2; ++iteration) {  // the error leaves the reducer ready for the next
    expect_error([&] { mse_loss(ddp(share(x, rank)), share(y, rank)).backward(); },
                 {"DistributedDataParallel: Expected to have finished reduction", "'extra.weight' (index 6)",
                  "'dead.bias' (index 9)", "find_unused_parameters(true)"});
  }
  Tensor t = ones({2});
  d::all_reduce(t);
  check_close(t, full({2}, double(world)), "all_reduce after the error", kExact);
  d::destroy_process_group();
}

DIST_WORKER(ddp_no_sync) {
  // Two micro-batches (the first under no_sync) give the gradients of the whole batch.
  d::init_process_group("gloo");
  int rank = d::get_rank(), world = d::get_world_size();
  Net net = make_net(rank), ref = make_net(0), local = make_net(0);
  freeze_unused(net);
  d::DistributedDataParallel ddp(
      net, nullptr, d::DistributedDataParallelOptions().gradient_as_bucket_view(grad_as_view_from_env()));
  optim::SGD opt(ddp->parameters(), 0.1);
  optim::SGD ref_opt(ref->parameters(), 0.1);
  for (int step = 0; step < 3; ++step) {
    auto [x, y] = global_batch(step, world);
    Tensor xr = share(x, rank), yr = share(y, rank);
    opt.zero_grad();
    {
      auto guard = ddp->no_sync();
      (mse_loss(ddp(xr.narrow(0, 0, 2)), yr.narrow(0, 0, 2)) * 0.5).backward();
    }
    // Untouched by other ranks: what this rank's model gives alone.
    local->load_state_dict(net->state_dict());
    local->zero_grad();
    (mse_loss(local(xr.narrow(0, 0, 2)), yr.narrow(0, 0, 2)) * 0.5).backward();
    check_close(net->fc1->weight.grad(), local->fc1->weight.grad(), "no_sync leaves local gradients", kF64);
    (mse_loss(ddp(xr.narrow(0, 2, 2)), yr.narrow(0, 2, 2)) * 0.5).backward();
    opt.step();
    ref_opt.zero_grad();
    mse_loss(ref(x), y).backward();
    ref_opt.step();
  }
  check_params(*net, *ref, "no_sync accumulation");
  d::destroy_process_group();
}

DIST_WORKER(ddp_find_unused) {
  // `dead` is unused everywhere (its grad stays undefined); `extra` only on rank 0: every rank
  // gets rank 0's gradient of it divided by the world size.
  d::init_process_group("gloo");
  int rank = d::get_rank(), world = d::get_world_size();
  Net net = make_net(rank), ref = make_net(0);
  d::DistributedDataParallel ddp(net, nullptr,
                                 d::DistributedDataParallelOptions()
                                     .find_unused_parameters(true)
                                     .bucket_cap_mb(1e-4)
                                     .gradient_as_bucket_view(grad_as_view_from_env()));
  for (int step = 0; step < 3; ++step) {
    auto [x, y] = global_batch(step, world);
    net->zero_grad();
    mse_loss(ddp(share(x, rank), rank == 0), share(y, rank)).backward();
    ref->load_state_dict(net->state_dict());
    ref->zero_grad();
    Tensor loss = mse_loss(ref(share(x, 0), true), share(y, 0)) / world;
    for (int r = 1; r < world; ++r) loss = loss + mse_loss(ref(share(x, r)), share(y, r)) / world;
    loss.backward();
    EMBER_CHECK(!net->dead->weight.grad().defined(), "dead.weight got a gradient");
    EMBER_CHECK(net->extra->weight.grad().defined(), "extra.weight got no gradient on rank ", rank);
    check_close(net->extra->weight.grad(), ref->extra->weight.grad(), "extra.weight.grad", kF64);
    check_close(net->fc1->weight.grad(), ref->fc1->weight.grad(), "fc1.weight.grad", kF64);
    NoGradGuard no_grad;
    for (const Tensor& p : net->parameters())
      if (p.grad().defined()) p.sub_(p.grad() * 0.1);
  }
  d::destroy_process_group();
}

DIST_WORKER(ddp_grad_as_view_matches_copies) {
  // Two models trained alike, one with gradient_as_bucket_view: the same bits after every step,
  // whether zero_grad sets the gradients to none (copied into the bucket, then views again) or
  // zeroes them (the views kept), with a no_sync micro-batch accumulating into the views.
  d::init_process_group("gloo");
  int rank = d::get_rank(), world = d::get_world_size();
  Net copies = make_net(rank), views = make_net(rank);
  freeze_unused(copies);
  freeze_unused(views);
  auto options = d::DistributedDataParallelOptions().bucket_cap_mb(1e-3).first_bucket_cap_mb(1e-4);
  d::DistributedDataParallel ddp_copies(copies, nullptr, options);
  d::DistributedDataParallel ddp_views(views, nullptr, options.gradient_as_bucket_view(true));
  EMBER_CHECK(ddp_views->bucket_indices().size() > 1, "expected several buckets");
  optim::SGD opt_copies(ddp_copies->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD opt_views(ddp_views->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  std::vector<Tensor> params = trainable(*views), copied = trainable(*copies);
  std::vector<const void*> addresses;
  for (int step = 0; step < 6; ++step) {
    auto [x, y] = global_batch(step, world);
    Tensor xr = share(x, rank), yr = share(y, rank);
    const bool set_to_none = step % 2 == 0;
    opt_copies.zero_grad(set_to_none);
    opt_views.zero_grad(set_to_none);
    if (step >= 3) {
      auto guard_copies = ddp_copies->no_sync();
      auto guard_views = ddp_views->no_sync();
      mse_loss(ddp_copies(xr), yr).backward();
      mse_loss(ddp_views(xr), yr).backward();
    }
    mse_loss(ddp_copies(xr), yr).backward();
    mse_loss(ddp_views(xr), yr).backward();
    std::vector<const void*> now = grad_addresses(ddp_views->bucket_indices(), params);
    EMBER_CHECK(step == 0 || now == addresses, "step ", step, ": the gradients moved to other memory");
    addresses = now;
    for (size_t i = 0; i < params.size(); ++i)
      check_close(params[i].grad(), copied[i].grad(),
                  "step " + std::to_string(step) + " grad " + std::to_string(i), kExact);
    opt_copies.step();
    opt_views.step();
  }
  check_params(*views, *copies, "gradient_as_bucket_view", kExact);
  d::destroy_process_group();
}

DIST_WORKER(ddp_shape_mismatch) {
  d::init_process_group("gloo");
  int rank = d::get_rank();
  nn::Linear lin(4, rank == 1 ? 5 : 3);
  if (rank == 1) {
    expect_error(
        [&] { d::DistributedDataParallel ddp(lin); },
        {"DistributedDataParallel: parameter 0 ('weight') has shape [5, 4] and dtype float32 on rank 1",
         "shape [3, 4] and dtype float32 on rank 0"});
  } else {
    expect_error([&] { d::DistributedDataParallel ddp(lin); },
                 {"DistributedDataParallel: the parameters of rank 1 do not match rank 0's"});
  }
  // The group still works: nobody is left inside a collective.
  Tensor t = ones({2});
  d::all_reduce(t);
  check_close(t, full({2}, double(d::get_world_size())), "all_reduce after the error", kExact);
  d::destroy_process_group();
}

DIST_WORKER(ddp_comm_hooks) {
  // bf16 / fp16 compression: the averaged gradients to half precision.
  d::init_process_group("gloo");
  int rank = d::get_rank(), world = d::get_world_size();
  for (auto hook : {&d::default_hooks::bf16_compress_hook, &d::default_hooks::fp16_compress_hook}) {
    Net net = make_net(rank), ref = make_net(0);
    freeze_unused(net);
    d::DistributedDataParallel ddp(net, nullptr, d::DistributedDataParallelOptions().bucket_cap_mb(1e-4));
    ddp->register_comm_hook(hook);
    auto [x, y] = global_batch(0, world);
    mse_loss(ddp(share(x, rank)), share(y, rank)).backward();
    mse_loss(ref(x), y).backward();
    Tolerance half{hook == &d::default_hooks::bf16_compress_hook ? 1e-2 : 2e-3, 1e-3};
    check_close(net->fc1->weight.grad(), ref->fc1->weight.grad(), "compressed fc1.weight.grad", half);
    check_close(net->fc3->bias.grad(), ref->fc3->bias.grad(), "compressed fc3.bias.grad", half);
  }
  d::destroy_process_group();
}

}  // namespace

class DDP : public ::testing::TestWithParam<int> {};
TEST_P(DDP, MatchesOneProcessOnTheWholeBatch) { run_workers("ddp_matches_one_process", GetParam()); }
TEST_P(DDP, OneBucketPerParameterMatchesToo) {
  run_workers("ddp_matches_one_process", GetParam(), {{"DDP_BUCKET_MB", "1e-5"}});
}
TEST_P(DDP, FlattenedParametersMatchOneProcess) {
  run_workers("ddp_matches_one_process", GetParam(), {{"DDP_FLAT_PARAMS", "1"}});
  run_workers("ddp_matches_one_process", GetParam(), {{"DDP_FLAT_PARAMS", "1"}, {"DDP_GRAD_AS_VIEW", "1"}});
}
TEST_P(DDP, NoSyncAccumulatesLocally) { run_workers("ddp_no_sync", GetParam()); }
TEST_P(DDP, FindUnusedParameters) { run_workers("ddp_find_unused", GetParam()); }
TEST_P(DDP, GradientAsBucketViewMatchesOneProcess) {
  run_workers("ddp_matches_one_process", GetParam(), {{"DDP_GRAD_AS_VIEW", "1"}});
  run_workers("ddp_matches_one_process", GetParam(), {{"DDP_GRAD_AS_VIEW", "1"}, {"DDP_BUCKET_MB", "1e-5"}});
}
TEST_P(DDP, GradientAsBucketViewMatchesCopies) { run_workers("ddp_grad_as_view_matches_copies", GetParam()); }
TEST_P(DDP, GradientAsBucketViewNoSync) {
  run_workers("ddp_no_sync", GetParam(), {{"DDP_GRAD_AS_VIEW", "1"}});
}
TEST_P(DDP, GradientAsBucketViewFindUnused) {
  run_workers("ddp_find_unused", GetParam(), {{"DDP_GRAD_AS_VIEW", "1"}});
}
INSTANTIATE_TEST_SUITE_P(Gloo, DDP, ::testing::Values(2, 4),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

TEST(DDPErrors, UnusedParameterWithoutFindUnused) { run_workers("ddp_unused_error", 2); }
TEST(DDPErrors, ParameterShapesDifferAcrossRanks) { run_workers("ddp_shape_mismatch", 2); }
TEST(DDPCommHook, HalfPrecisionCompression) { run_workers("ddp_comm_hooks", 2); }

// --- One process: a group of one, and the argument checks ---

struct NoParamsImpl : nn::Module {
  NoParamsImpl() { register_parameter("frozen", ones({2}), /*requires_grad=*/false); }
  int forward(const Tensor&) { return 0; }
};

TEST(DDPErrors, Arguments) {
  auto store = std::make_shared<d::TCPStore>("127.0.0.1", 0, std::nullopt, true, milliseconds(5000));
  auto pg = d::make_process_group_gloo(std::make_shared<d::PrefixStore>("g", store), 0, 1);
  EXPECT_EMBER_ERROR((void)d::DistributedDataParallel(std::shared_ptr<nn::LinearImpl>(), pg),
                     "DistributedDataParallel: the module is null");
  EXPECT_EMBER_ERROR((void)d::DistributedDataParallel(std::make_shared<NoParamsImpl>(), pg),
                     "DistributedDataParallel: the module has no parameter that requires grad");
  nn::Linear lin(2, 2);
  EXPECT_EMBER_ERROR(
      (void)d::DistributedDataParallel(lin, pg, d::DistributedDataParallelOptions().bucket_cap_mb(0)),
      "DistributedDataParallel: bucket sizes must be positive", "bucket_cap_mb 0");
  EXPECT_EMBER_ERROR((void)d::DistributedDataParallel(lin), "default_group");
  // find_unused_parameters needs tensors to search from.
  auto odd = std::make_shared<NoParamsImpl>();
  odd->register_parameter("w", ones({2}));
  d::DistributedDataParallel ddp(odd, pg, d::DistributedDataParallelOptions().find_unused_parameters(true));
  EXPECT_EMBER_ERROR(ddp(ones({1})), "find_unused_parameters searches the graph from the forward's outputs");
  EXPECT_EMBER_ERROR(ddp->register_comm_hook(nullptr), "register_comm_hook: the hook is empty");
}

TEST(DDP, WorldOfOneIsPlainTraining) {
  auto store = std::make_shared<d::TCPStore>("127.0.0.1", 0, std::nullopt, true, milliseconds(5000));
  auto pg = d::make_process_group_gloo(std::make_shared<d::PrefixStore>("g", store), 0, 1);
  Net net = make_net(0), ref = make_net(0);
  d::DistributedDataParallel ddp(net, pg);
  EXPECT_EQ(ddp->named_parameters().keys().front(), "module.fc1.weight");
  auto [x, y] = global_batch(0, 1);
  // extra and dead take no part: with a group of one the reducer still wants every gradient.
  EXPECT_EMBER_ERROR(mse_loss(ddp(x), y).backward(), "'dead.bias' (index 9)");
  Net frozen = make_net(0);
  freeze_unused(frozen);
  d::DistributedDataParallel ddp2(frozen, pg);
  mse_loss(ddp2(x), y).backward();
  mse_loss(ref(x), y).backward();
  EXPECT_CLOSE(frozen->fc2->weight.grad(), ref->fc2->weight.grad(), kExact);
}

TEST(DDP, GradientAsBucketViewWorldOfOne) {
  auto store = std::make_shared<d::TCPStore>("127.0.0.1", 0, std::nullopt, true, milliseconds(5000));
  auto pg = d::make_process_group_gloo(std::make_shared<d::PrefixStore>("g", store), 0, 1);
  Net net = make_net(0), ref = make_net(0);
  freeze_unused(net);
  freeze_unused(ref);
  auto [x, y] = global_batch(0, 1);
  // Gradients that exist before DDP move into the buckets with their values.
  mse_loss(net(x), y).backward();
  mse_loss(ref(x), y).backward();
  d::DistributedDataParallel ddp(
      net, pg, d::DistributedDataParallelOptions().first_bucket_cap_mb(1e-4).gradient_as_bucket_view(true));
  std::vector<Tensor> params = trainable(*net), ref_params = trainable(*ref);
  ASSERT_EQ(ddp->bucket_indices().size(), 2u);
  std::vector<const void*> addresses = grad_addresses(ddp->bucket_indices(), params);
  for (size_t i = 0; i < params.size(); ++i) EXPECT_CLOSE(params[i].grad(), ref_params[i].grad(), kExact);

  std::vector<Tensor> buffers;  // the buckets' flat buffers, as the comm hook sees them
  ddp->register_comm_hook([&](d::ProcessGroup& group, d::GradBucket& bucket) {
    if (buffers.size() < 2) buffers.push_back(bucket.buffer);
    return d::default_hooks::allreduce_hook(group, bucket);
  });
  optim::SGD opt(params, 0.1), ref_opt(ref_params, 0.1);
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    auto [xs, ys] = global_batch(step, 1);
    opt.zero_grad(step % 2 == 0);
    ref_opt.zero_grad(step % 2 == 0);
    mse_loss(ddp(xs), ys).backward();
    mse_loss(ref(xs), ys).backward();
    EXPECT_EQ(grad_addresses(ddp->bucket_indices(), params), addresses);
    for (size_t i = 0; i < params.size(); ++i) EXPECT_CLOSE(params[i].grad(), ref_params[i].grad(), kExact);
    opt.step();
    ref_opt.step();
  }
  check_params(*net, *ref, "gradient_as_bucket_view, world of one", kExact);
  // .grad is the bucket's memory: writing the buffer writes the gradients; zero_grad(false) zeroes
  // the buffer.
  ASSERT_EQ(buffers.size(), 2u);
  buffers[1].fill_(7.0);
  EXPECT_CLOSE(net->fc1->weight.grad(), full({kHidden, kIn}, 7.0, kFloat64), kExact);
  net->zero_grad(false);
  EXPECT_CLOSE(buffers[1], zeros(buffers[1].sizes(), kFloat64), kExact);
}

// A convolution in channels-last memory (model.to(memory_format=torch.channels_last)).
struct ConvNetImpl : nn::Module {
  ConvNetImpl() {
    conv = register_module("conv", nn::Conv2d(nn::Conv2dOptions(2, 3, 3)));
    to(kFloat64);
    to(MemoryFormat::ChannelsLast);
  }
  Tensor forward(const Tensor& x) { return conv(x); }
  nn::Conv2d conv{nullptr};
};
EMBER_MODULE(ConvNet);

TEST(DDP, ChannelsLastWeightsKeepTheirLayoutInTheBuckets) {
  // As PyTorch's reducer: a dense parameter's bucket view has the parameter's strides, so a
  // channels-last weight gets a channels-last gradient, copied or as the bucket's view.
  auto store = std::make_shared<d::TCPStore>("127.0.0.1", 0, std::nullopt, true, milliseconds(5000));
  auto pg = d::make_process_group_gloo(std::make_shared<d::PrefixStore>("g", store), 0, 1);
  manual_seed(7);
  Tensor x = randn({2, 2, 5, 5}, kFloat64).contiguous(MemoryFormat::ChannelsLast);
  for (bool as_view : {false, true}) {
    SCOPED_TRACE(as_view ? "gradient_as_bucket_view" : "copied");
    manual_seed(3);
    ConvNet net;
    manual_seed(3);
    ConvNet ref;
    d::DistributedDataParallel ddp(net, pg,
                                   d::DistributedDataParallelOptions().gradient_as_bucket_view(as_view));
    ddp(x).square().sum().backward();
    ref(x).square().sum().backward();
    const Tensor g = net->conv->weight.grad();
    EXPECT_TRUE(g.is_contiguous(MemoryFormat::ChannelsLast));
    EXPECT_EQ(g.strides().vec(), net->conv->weight.strides().vec());
    EXPECT_CLOSE(g, ref->conv->weight.grad(), kExact);
    EXPECT_CLOSE(net->conv->bias.grad(), ref->conv->bias.grad(), kExact);
  }
}

TEST(DDP, BucketsStartDuringBackwardInIndexOrder) {
  auto store = std::make_shared<d::TCPStore>("127.0.0.1", 0, std::nullopt, true, milliseconds(5000));
  auto pg = d::make_process_group_gloo(std::make_shared<d::PrefixStore>("g", store), 0, 1);
  Net net = make_net(0);
  freeze_unused(net);
  d::DistributedDataParallel ddp(
      net, pg, d::DistributedDataParallelOptions().bucket_cap_mb(1e-5).first_bucket_cap_mb(1e-5));
  // A comm hook that records each launch: the bucket, and whether backward had reached fc1.weight.
  std::vector<std::pair<size_t, bool>> launches;
  ddp->register_comm_hook([&](d::ProcessGroup& group, d::GradBucket& bucket) {
    launches.emplace_back(bucket.index, net->fc1->weight.grad().defined());
    return d::default_hooks::allreduce_hook(group, bucket);
  });
  auto [x, y] = global_batch(0, 1);
  mse_loss(ddp(x), y).backward();
  ASSERT_EQ(launches.size(), 6u);
  for (size_t i = 0; i < launches.size(); ++i) EXPECT_EQ(launches[i].first, i);
  EXPECT_FALSE(launches[0].second) << "fc3.bias's bucket waited for the end of backward";
  EXPECT_TRUE(launches[5].second);
}

TEST(DDPErrors, BackwardThatStopsPartWay) {
  auto store = std::make_shared<d::TCPStore>("127.0.0.1", 0, std::nullopt, true, milliseconds(5000));
  auto pg = d::make_process_group_gloo(std::make_shared<d::PrefixStore>("g", store), 0, 1);
  Net net = make_net(0);
  freeze_unused(net);
  d::DistributedDataParallel ddp(net, pg);
  auto [x, y] = global_batch(0, 1);
  // The input's hook throws after fc3's gradients were marked ready: the end-of-backward
  // callback never runs, and the next forward says so (once).
  Tensor xg = x.clone().requires_grad_();
  xg.register_hook([](const Tensor&) -> Tensor { throw Error("boom"); });
  EXPECT_EMBER_ERROR(mse_loss(ddp(xg), y).backward(), "boom");
  EXPECT_EMBER_ERROR(ddp->register_comm_hook(d::default_hooks::allreduce_hook),
                     "register_comm_hook: a backward pass is reducing gradients");
  EXPECT_EMBER_ERROR(ddp(x), "Expected to have finished reduction in the prior iteration",
                     "did not reach its end");
  mse_loss(ddp(x), y).backward();

  // With find_unused_parameters, a parameter used outside the forward's outputs.
  Net other = make_net(0);
  d::DistributedDataParallel unused(other, pg,
                                    d::DistributedDataParallelOptions().find_unused_parameters(true));
  EXPECT_EMBER_ERROR((mse_loss(unused(x), y) + other->dead->bias.sum()).backward(),
                     "parameter 9 ('dead.bias') was marked ready twice in one backward");
}

TEST(DDPBuckets, AssignmentBySize) {
  // f32 tensors of 1200, 400, 2000, 1200 bytes and an f64 one of 800; limits 1000 then 2500
  // bytes per dtype: [a] closes the first f32 bucket, [b, d, e] the second, [c] stays open.
  std::vector<Tensor> ts = {zeros({300}), zeros({100}), zeros({100}, kFloat64), zeros({500}), zeros({300})};
  auto buckets = d::compute_bucket_assignment_by_size(ts, {1000, 2500});
  std::vector<std::vector<size_t>> expected = {{0}, {1, 3, 4}, {2}};
  EXPECT_EQ(buckets, expected);
  EXPECT_EMBER_ERROR((void)d::compute_bucket_assignment_by_size(ts, {}),
                     "compute_bucket_assignment_by_size: no bucket");
}

TEST(DDPErrors, ReducerArguments) {
  auto store = std::make_shared<d::TCPStore>("127.0.0.1", 0, std::nullopt, true, milliseconds(5000));
  auto pg = d::make_process_group_gloo(std::make_shared<d::PrefixStore>("g", store), 0, 1);
  std::vector<Tensor> ps = {zeros({2}).requires_grad_(), zeros({2}, kFloat64).requires_grad_()};
  std::vector<std::string> names = {"a", "b"};
  using Buckets = std::vector<std::vector<size_t>>;
  EXPECT_EMBER_ERROR((void)d::Reducer(ps, names, Buckets{{0}, {1}}, nullptr, false),
                     "Reducer: no process group");
  EXPECT_EMBER_ERROR((void)d::Reducer(ps, {"a"}, Buckets{{0}, {1}}, pg, false),
                     "Reducer: 1 names for 2 parameters");
  EXPECT_EMBER_ERROR((void)d::Reducer(ps, names, Buckets{{0}, {2}}, pg, false),
                     "parameter index 2 is out of range");
  EXPECT_EMBER_ERROR((void)d::Reducer(ps, names, Buckets{{0}, {0}}, pg, false), "parameter index 0",
                     "in two buckets");
  EXPECT_EMBER_ERROR((void)d::Reducer(ps, names, Buckets{{0, 1}}, pg, false),
                     "Reducer: bucket 0 mixes dtypes");
  EXPECT_EMBER_ERROR((void)d::Reducer(ps, names, Buckets{{0}, {}, {1}}, pg, false),
                     "Reducer: bucket 1 is empty");
  EXPECT_EMBER_ERROR((void)d::Reducer(ps, names, Buckets{{1}}, pg, false),
                     "parameter 0 ('a') is in no bucket");
}

}  // namespace ember::testing::dist
