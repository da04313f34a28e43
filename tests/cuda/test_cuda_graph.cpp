// CUDA graphs: capture and replay, the private memory pool, graph-safe random numbers, the errors
// a capture raises for what it cannot contain, and whole training steps that, replayed, give what
// the same steps give eagerly (same seeds).
#include <ember/autograd/graphed_callables.h>
#include <ember/core/autocast_mode.h>
#include <ember/cuda/caching_allocator.h>
#include <ember/cuda/graph.h>
#include <ember/cuda/stream.h>
#include <ember/ember.h>
#include <ember/examples/common/graphed_step.h>

#include <functional>

#include "cuda_test_util.h"

namespace ember::testing {
namespace {

const Device kGpu(kCUDA, 0);

class CudaGraph : public CudaTest {};

TEST_F(CudaGraph, ReplaysCapturedWorkOnNewInputs) {
  Tensor x = zeros({1000}, TensorOptions(kFloat32).device(kGpu));
  (x * 2 + 1).sum();  // kernels loaded before the capture
  cuda::CUDAGraph g;
  Tensor y;
  {
    cuda::graph capture(g);
    EXPECT_TRUE(cuda::is_current_stream_capturing());
    y = (x * 2 + 1).relu();
  }
  EXPECT_FALSE(cuda::is_current_stream_capturing());
  ASSERT_TRUE(g.captured());
  for (float v : {1.5f, -3.0f, 7.0f}) {
    x.fill_(v);
    g.replay();
    EXPECT_TRUE(y.cpu().equal(full({1000}, std::max(0.0f, 2 * v + 1))));
  }
}

TEST_F(CudaGraph, CaptureAllocatesFromAPrivatePoolReleasedOnReset) {
  Tensor x = ones({1 << 18}, TensorOptions(kFloat32).device(kGpu));
  (x * 3).neg();
  cuda::synchronize();
  const size_t reserved_before = cuda::memory_reserved();
  auto g = std::make_unique<cuda::CUDAGraph>();
  Tensor y;
  {
    cuda::graph capture(*g);
    Tensor tmp = x * 3;  // freed within the capture: its block goes back to the graph's pool
    y = tmp.neg();
  }
  EXPECT_GT(cuda::memory_reserved(), reserved_before);
  // Eager allocations never get the graph's memory, even once its tensors are gone.
  const void* y_ptr = y.data_ptr();
  {
    Tensor a = empty({1 << 18}, TensorOptions(kFloat32).device(kGpu));
    Tensor b = empty({1 << 18}, TensorOptions(kFloat32).device(kGpu));
    EXPECT_NE(a.data_ptr(), y_ptr);
    EXPECT_NE(b.data_ptr(), y_ptr);
    a.fill_(5);
    b.fill_(6);
    x.fill_(2);
    g->replay();
    EXPECT_TRUE(y.cpu().equal(full({1 << 18}, -6.0f)));
    EXPECT_TRUE(a.cpu().equal(full({1 << 18}, 5.0f)));
    EXPECT_TRUE(b.cpu().equal(full({1 << 18}, 6.0f)));
  }
  // The pool outlives the graph while its output is alive, and goes with the output.
  g.reset();
  EXPECT_GT(cuda::memory_reserved(), reserved_before);
  EXPECT_TRUE(y.cpu().equal(full({1 << 18}, -6.0f)));
  y = Tensor();
  EXPECT_EQ(cuda::memory_reserved(), reserved_before);
}

TEST_F(CudaGraph, GraphsShareAPoolWhenAsked) {
  Tensor x = ones({4096}, TensorOptions(kFloat32).device(kGpu));
  (x + 1).mul(2);
  const cuda::MempoolId pool = cuda::graph_pool_handle();
  cuda::CUDAGraph first, second;
  Tensor y, z;
  {
    cuda::graph capture(first, pool);
    y = x + 1;
  }
  {
    cuda::graph capture(second, pool);
    z = y.mul(2);
  }
  EXPECT_EQ(first.pool(), pool);
  EXPECT_EQ(second.pool(), pool);
  x.fill_(4);
  first.replay();
  second.replay();
  EXPECT_TRUE(z.cpu().equal(full({4096}, 10.0f)));
}

// Replays draw what the same ops draw eagerly from the same generator state, and a new draw each
// time: the graph reads the seed and offset the generator has at each replay.
TEST_F(CudaGraph, RandomOpsDrawAsEagerOpsDoAndChangeEachReplay) {
  Tensor x = ones({4099}, TensorOptions(kFloat32).device(kGpu));
  auto draw = [&] {
    return std::vector<Tensor>{rand({1000}, TensorOptions(kFloat32).device(kGpu)),
                               randn({999}, TensorOptions(kFloat64).device(kGpu)), dropout(x, 0.3, true),
                               bernoulli(x, 0.5)};
  };
  draw();
  cuda::CUDAGraph g;
  std::vector<Tensor> captured;
  {
    cuda::graph capture(g);
    captured = draw();
  }
  manual_seed(123);
  std::vector<std::vector<Tensor>> replays;
  for (int i = 0; i < 2; ++i) {
    g.replay();
    replays.emplace_back();
    for (const Tensor& t : captured) replays.back().push_back(t.cpu());
  }
  manual_seed(123);
  for (int i = 0; i < 2; ++i) {
    std::vector<Tensor> eager = draw();
    for (size_t k = 0; k < eager.size(); ++k) {
      SCOPED_TRACE("replay " + std::to_string(i) + ", draw " + std::to_string(k));
      EXPECT_TRUE(replays[i][k].equal(eager[k].cpu()));
    }
  }
  for (size_t k = 0; k < captured.size(); ++k) EXPECT_FALSE(replays[0][k].equal(replays[1][k]));
}

TEST_F(CudaGraph, WhatWaitsForTheGpuRaisesDuringACapture) {
  Tensor x = ones({8}, TensorOptions(kFloat32).device(kGpu));
  Tensor idx = tensor({1, 2}, kInt64).to(kGpu);
  x.sum();
  const std::vector<std::pair<std::function<void()>, const char*>> cases = {
      {[&] { x.sum().item<float>(); }, "copy_ to the host (item(), cpu(), to(kCPU))"},
      {[&] { x.cpu(); }, "copy_ to the host"},
      {[&] { one_hot(idx); }, "one_hot"},
      {[&] { cuda::empty_cache(); }, "empty_cache"},
  };
  for (const auto& [fn, op] : cases) {
    SCOPED_TRACE(op);
    cuda::CUDAGraph g;
    Tensor y;
    {
      cuda::graph capture(g);
      y = x * 2;
      EXPECT_EMBER_ERROR(fn(), op, "CUDA graph");
    }
    // Raised before anything waited, so the capture is intact.
    ASSERT_TRUE(g.captured());
    g.replay();
    EXPECT_TRUE(y.cpu().equal(full({8}, 2.0f)));
  }
  // An error that leaves the scope abandons the capture; the stream and the graph stay usable.
  cuda::CUDAGraph g;
  EXPECT_THROW(
      {
        cuda::graph capture(g);
        Tensor t = x + 1;
        t.item<float>();
      },
      Error);
  EXPECT_FALSE(g.captured());
  EXPECT_FALSE(cuda::is_current_stream_capturing());
  EXPECT_TRUE((x + 1).cpu().equal(full({8}, 2.0f)));
  Tensor y;
  {
    cuda::graph capture(g);
    y = x * 5;
  }
  g.replay();
  EXPECT_TRUE(y.cpu().equal(full({8}, 5.0f)));
}

TEST_F(CudaGraph, MisuseRaisesClearErrors) {
  cuda::CUDAGraph g;
  EXPECT_EMBER_ERROR(g.replay(), "CUDAGraph::replay: nothing captured");
  EXPECT_EMBER_ERROR(g.capture_end(), "CUDAGraph::capture_end: the graph is not capturing");
  EXPECT_EMBER_ERROR(g.capture_begin(), "CUDAGraph::capture_begin", "legacy default stream");
  Tensor x = ones({8}, TensorOptions(kFloat32).device(kGpu));
  {
    cuda::graph capture(g);
    x.add_(1);
    EXPECT_EMBER_ERROR(g.capture_begin(), "CUDAGraph::capture_begin: this graph is already capturing");
    EXPECT_EMBER_ERROR(manual_seed(3), "manual_seed", "CUDA graph capture");
    EXPECT_EMBER_ERROR(get_rng_state(&default_generator(kCUDA)), "get_rng_state", "capturing a CUDA graph");
  }
  EXPECT_EMBER_ERROR(cuda::graph again(g), "CUDAGraph::capture_begin", "reset() it first");
  g.reset();
  EXPECT_FALSE(g.captured());
}

// A fused step reads its rate from the group's lr tensor, which a capture cannot make or write.
TEST_F(CudaGraph, OptimizerStepsNeedTheirLrTensorBeforeTheCapture) {
  Tensor w = ones({4}, TensorOptions(kFloat32).device(kGpu)).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(0.1));
  w.set_grad(ones({4}, TensorOptions(kFloat32).device(kGpu)));
  {
    cuda::CUDAGraph g;
    cuda::graph capture(g);
    EXPECT_EMBER_ERROR(opt.step(), "SGD", "first fused step", "run a step eagerly first");
  }
  opt.step();
  EXPECT_TRUE(w.cpu().equal(full({4}, 0.9f)));
  opt.param_groups()[0].options().set_lr(0.5);
  {
    cuda::CUDAGraph g;
    cuda::graph capture(g);
    EXPECT_EMBER_ERROR(opt.step(), "SGD", "lr changed", "write_lr_tensors()");
  }
  opt.write_lr_tensors();
  cuda::CUDAGraph g;
  {
    cuda::graph capture(g);
    opt.step();
  }
  g.replay();
  EXPECT_TRUE(w.cpu().allclose(full({4}, 0.4f)));
  opt.param_groups()[0].options().set_lr(0.25);
  opt.write_lr_tensors();
  g.replay();
  EXPECT_TRUE(w.cpu().allclose(full({4}, 0.15f)));
  // The per-tensor step's counts and rate live on the host: a replay would repeat them.
  optim::Adam per_tensor({w}, optim::AdamOptions(0.1).fused(false));
  per_tensor.step();
  cuda::CUDAGraph h;
  cuda::graph capture(h);
  EXPECT_EMBER_ERROR(per_tensor.step(), "Adam: the per-tensor step", "fused(true)");
}

// Whole training steps: a model trained by eager steps and a copy trained by replaying one
// captured step, from the same seeds and batches, end with the same weights and losses.
struct Batch {
  Tensor x, y;
};

struct Run {
  std::vector<Tensor> losses;
  OrderedDict<Tensor> state;
};

// One training step of a model; returns the loss (a tensor on the GPU).
using Step = std::function<Tensor(const Tensor& x, const Tensor& y)>;
// A model on the GPU: its step, what runs eagerly after each step (an LR scheduler), its state.
struct Trained {
  Step step;
  std::function<void()> after = [] {};
  std::function<OrderedDict<Tensor>()> state;
};
using ModelSetup = std::function<Trained()>;

constexpr int kWarmup = 3;

Run run_eager(const ModelSetup& setup, const std::vector<Batch>& batches) {
  manual_seed(11);
  Trained t = setup();
  Run r;
  for (size_t i = 0; i < batches.size(); ++i) {
    Tensor loss = t.step(batches[i].x, batches[i].y);
    t.after();
    if (i >= kWarmup) r.losses.push_back(loss.detach().cpu());
  }
  for (const auto& [k, v] : t.state()) r.state.insert(k, v.cpu());
  return r;
}

// Warm-up steps eagerly on the capture's stream, then one captured step replayed per batch.
Run run_graphed(const ModelSetup& setup, const std::vector<Batch>& batches) {
  manual_seed(11);
  Trained t = setup();
  const cuda::Stream side = cuda::get_stream_from_pool();
  side.synchronize();
  {
    cuda::StreamGuard guard(side);
    for (int i = 0; i < kWarmup; ++i) {
      t.step(batches[i].x, batches[i].y);
      t.after();
    }
  }
  Tensor x = batches[kWarmup].x.clone(), y = batches[kWarmup].y.clone();
  cuda::CUDAGraph g;
  Tensor loss;
  {
    cuda::graph capture(g, {}, &side);
    loss = t.step(x, y);
  }
  Run r;
  for (size_t i = kWarmup; i < batches.size(); ++i) {
    x.copy_(batches[i].x);
    y.copy_(batches[i].y);
    g.replay();
    t.after();
    r.losses.push_back(loss.detach().cpu());
  }
  for (const auto& [k, v] : t.state()) r.state.insert(k, v.cpu());
  return r;
}

// rtol 0: bit for bit.
void expect_same_runs(const ModelSetup& setup, const std::vector<Batch>& batches, double rtol = 0,
                      double atol = 0) {
  Run eager = run_eager(setup, batches), graphed = run_graphed(setup, batches);
  ASSERT_EQ(eager.losses.size(), graphed.losses.size());
  for (size_t i = 0; i < eager.losses.size(); ++i) {
    SCOPED_TRACE("loss " + std::to_string(i));
    EXPECT_TRUE(graphed.losses[i].allclose(eager.losses[i], rtol, atol, /*equal_nan=*/true))
        << graphed.losses[i] << " vs " << eager.losses[i];
  }
  ASSERT_EQ(eager.state.size(), graphed.state.size());
  for (const auto& [k, v] : eager.state) {
    SCOPED_TRACE(k);
    const Tensor& w = graphed.state[k];
    EXPECT_TRUE(w.allclose(v, rtol, atol))
        << "largest difference " << (w.to(kFloat64) - v.to(kFloat64)).abs().max();
  }
  // The runs trained: the losses moved.
  EXPECT_FALSE(eager.losses.front().equal(eager.losses.back()));
}

std::vector<Batch> batches(IntArrayRef x_shape, int64_t classes, int n) {
  manual_seed(3);
  std::vector<Batch> out;
  for (int i = 0; i < n; ++i)
    out.push_back({randn(x_shape).to(kGpu), randint(0, classes, {x_shape[0]}).to(kGpu)});
  return out;
}

template <class M>
std::function<OrderedDict<Tensor>()> state_of(std::shared_ptr<M> model) {
  return [model] { return model->state_dict(); };
}

// The scheduler changes the rate after every step, eagerly: the replays read it on the device.
TEST_F(CudaGraph, MlpStepWithDropoutSgdAndAnLrScheduleMatchesEagerBitForBit) {
  ModelSetup setup = [] {
    auto model = nn::Sequential(nn::Linear(32, 64), nn::ReLU(), nn::Dropout(0.2), nn::Linear(64, 10)).ptr();
    model->to(kGpu);
    auto opt = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    auto sched = std::make_shared<optim::LambdaLR>(*opt, [](int64_t s) { return 1.0 / (1.0 + 0.5 * s); });
    Step step = [model, opt](const Tensor& x, const Tensor& y) {
      opt->zero_grad();
      Tensor loss = cross_entropy(model->forward(x), y);
      loss.backward();
      opt->step();
      return loss;
    };
    return Trained{step, [opt, sched] { sched->step(); }, state_of(model)};
  };
  expect_same_runs(setup, batches({16, 32}, 10, kWarmup + 6));
}

// nudge: every other step, halves a weight between steps, a change the replays must see.
ModelSetup transformer_setup(ScalarType compute, bool nudge = false) {
  return [compute, nudge] {
    auto layer = nn::TransformerEncoderLayer(nn::TransformerEncoderLayerOptions(64, 4)
                                                 .dim_feedforward(128)
                                                 .dropout(0.1)
                                                 .activation("gelu")
                                                 .batch_first(true))
                     .ptr();
    auto head = nn::Linear(64, 5).ptr();
    layer->to(kGpu);
    head->to(kGpu);
    std::vector<Tensor> params = layer->parameters();
    for (const Tensor& p : head->parameters()) params.push_back(p);
    auto opt = std::make_shared<optim::AdamW>(params, optim::AdamWOptions(1e-3).fused(true));
    Step step = [=](const Tensor& x, const Tensor& y) {
      opt->zero_grad();
      Tensor loss;
      {
        std::optional<amp::AutocastGuard> autocast;
        if (compute != kFloat32) autocast.emplace(kCUDA, compute);
        loss = cross_entropy(head->forward(layer->forward(x).mean(1)), y);
      }
      loss.backward();
      nn::utils::clip_grad_norm_(params, 1.0);
      opt->step();
      return loss;
    };
    auto state = [layer, head] {
      OrderedDict<Tensor> s = layer->state_dict();
      for (const auto& [k, v] : head->state_dict()) s.insert("head." + k, v);
      return s;
    };
    std::function<void()> after = [] {};
    if (nudge)
      after = [w = params[0], steps = std::make_shared<int>(0)] {
        NoGradGuard no_grad;
        if (++*steps % 2 == 0) w.mul_(0.5);
      };
    return Trained{step, after, state};
  };
}

TEST_F(CudaGraph, TransformerLayerStepWithDropoutMatchesEager) {
  // float32 takes the math attention (dropout in its softmax kernel): bit for bit.
  expect_same_runs(transformer_setup(kFloat32), batches({4, 16, 64}, 5, kWarmup + 5));
}

TEST_F(CudaGraph, TransformerLayerStepInBFloat16MatchesEager) {
  // bfloat16 takes cuDNN's attention (dropout from the seed and offset it reads from memory),
  // whose backward sums the query gradient in a nondeterministic order: close, not identical.
  expect_same_runs(transformer_setup(kBFloat16), batches({4, 16, 64}, 5, kWarmup + 5), 1e-2, 1e-3);
}

// With use_deterministic_algorithms, cuDNN's attention backward sums in a fixed order: bit for bit.
TEST_F(CudaGraph, TransformerLayerStepInBFloat16MatchesEagerExactlyWhenDeterministic) {
  DeterministicMode mode(true);
  expect_same_runs(transformer_setup(kBFloat16), batches({4, 16, 64}, 5, kWarmup + 5));
}

// The captured step reads and writes the kept bfloat16 casts of the weights, not casting them
// (core/autocast_mode.h); a weight changed between replays is cast again before the next one.
TEST_F(CudaGraph, TransformerLayerStepSeesWeightsChangedBetweenReplays) {
  DeterministicMode mode(true);
  expect_same_runs(transformer_setup(kBFloat16, /*nudge=*/true), batches({4, 16, 64}, 5, kWarmup + 5));
}

// A ResNet basic block with batch norm, conv + bn + relu twice, its output added to its input.
ModelSetup resnet_block_setup() {
  return [] {
    auto conv1 = nn::Conv2d(nn::Conv2dOptions(8, 8, 3).padding(1).bias(false)).ptr();
    auto bn1 = nn::BatchNorm2d(8).ptr();
    auto conv2 = nn::Conv2d(nn::Conv2dOptions(8, 8, 3).padding(1).bias(false)).ptr();
    auto bn2 = nn::BatchNorm2d(8).ptr();
    auto fc = nn::Linear(8, 4).ptr();
    auto block = nn::Sequential(conv1, bn1, nn::ReLU(), conv2, bn2).ptr();
    block->to(kGpu);
    fc->to(kGpu);
    std::vector<Tensor> params = block->parameters();
    for (const Tensor& p : fc->parameters()) params.push_back(p);
    auto opt = std::make_shared<optim::SGD>(params, optim::SGDOptions(0.1).momentum(0.9));
    Step step = [=](const Tensor& x, const Tensor& y) {
      opt->zero_grad();
      Tensor h = (block->forward(x) + x).relu();
      Tensor loss = cross_entropy(fc->forward(adaptive_avg_pool2d(h, {1, 1}).flatten(1)), y);
      loss.backward();
      opt->step();
      return loss;
    };
    return Trained{step, [] {}, state_of(block)};
  };
}

// The running statistics advance in the replays too.
TEST_F(CudaGraph, ResNetBlockStepUpdatesRunningStatisticsAsEager) {
  // cuDNN's weight gradient may sum in a nondeterministic order: close, not identical.
  expect_same_runs(resnet_block_setup(), batches({8, 8, 12, 12}, 4, kWarmup + 5), 1e-5, 1e-6);
}

// With use_deterministic_algorithms, cuDNN keeps to its deterministic engines: bit for bit.
TEST_F(CudaGraph, ResNetBlockStepMatchesEagerExactlyWhenDeterministic) {
  DeterministicMode mode(true);
  expect_same_runs(resnet_block_setup(), batches({8, 8, 12, 12}, 4, kWarmup + 5));
}

// float16 with a GradScaler inside the graph: a batch with an inf skips its step on the device
// (the weights stay, the scale backs off), as eagerly.
TEST_F(CudaGraph, Float16GradScalerStepSkipsOnInfInsideTheGraph) {
  std::vector<double> scales;
  ModelSetup setup = [&scales] {
    auto model = nn::Sequential(nn::Linear(32, 64), nn::GELU(), nn::Linear(64, 10)).ptr();
    model->to(kGpu);
    auto opt = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions(1e-3).fused(true));
    auto scaler = std::make_shared<amp::GradScaler>(1024.0, 2.0, 0.5, 2);
    Step step = [model, opt, scaler](const Tensor& x, const Tensor& y) {
      opt->zero_grad();
      Tensor loss;
      {
        amp::AutocastGuard autocast(kCUDA, kFloat16);
        loss = cross_entropy(model->forward(x), y);
      }
      scaler->scale(loss).backward();
      scaler->step(*opt);
      scaler->update();
      return loss;
    };
    auto state = [model, scaler, &scales] {
      scales.push_back(scaler->get_scale());
      return model->state_dict();
    };
    return Trained{step, [] {}, state};
  };
  std::vector<Batch> data = batches({16, 32}, 10, kWarmup + 6);
  data[kWarmup + 2].x.select(0, 3).fill_(std::numeric_limits<double>::infinity());
  expect_same_runs(setup, data);
  ASSERT_EQ(scales.size(), 2u);
  EXPECT_EQ(scales[0], scales[1]);
}

// make_graphed_callables inside an eager loop: the loss, the optimizer and the LR schedule stay
// eager; weights and the input's gradient equal the eager run's (dropout included, same seeds).
TEST_F(CudaGraph, GraphedCallableTrainsAsTheEagerModule) {
  const std::vector<Batch> data = batches({16, 32}, 10, 5);
  auto train = [&](bool graphed) {
    manual_seed(11);
    auto model = nn::Sequential(nn::Linear(32, 64), nn::GELU(), nn::Dropout(0.1), nn::Linear(64, 10)).ptr();
    model->to(kGpu);
    cuda::TensorFn fn = [model](const std::vector<Tensor>& in) { return std::vector<Tensor>{model->forward(in[0])}; };
    Tensor sample = data[0].x.clone().requires_grad_();
    if (graphed) fn = cuda::make_graphed_callables(fn, {sample}, model->parameters());
    manual_seed(12);  // the warm-up drew numbers: both runs start from here
    optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    std::vector<Tensor> x_grads;
    for (const Batch& b : data) {
      opt.zero_grad();
      Tensor x = b.x.clone().requires_grad_();
      cross_entropy(fn({x})[0], b.y).backward();
      opt.step();
      x_grads.push_back(x.grad().cpu());
    }
    OrderedDict<Tensor> state;
    for (const auto& [k, v] : model->state_dict()) state.insert(k, v.cpu());
    return std::make_pair(x_grads, state);
  };
  const auto [eager_grads, eager_state] = train(false);
  const auto [graph_grads, graph_state] = train(true);
  for (size_t i = 0; i < eager_grads.size(); ++i) EXPECT_TRUE(graph_grads[i].equal(eager_grads[i])) << i;
  for (const auto& [k, v] : eager_state) EXPECT_TRUE(graph_state[k].equal(v)) << k;

  auto linear = nn::Linear(4, 2).ptr();
  linear->to(kGpu);
  cuda::TensorFn g = cuda::make_graphed_callables(
      [linear](const std::vector<Tensor>& in) { return std::vector<Tensor>{linear->forward(in[0])}; },
      {ones({3, 4}, TensorOptions(kFloat32).device(kGpu))}, linear->parameters(), 1);
  EXPECT_EMBER_ERROR(g({ones({5, 4}, TensorOptions(kFloat32).device(kGpu))}), "make_graphed_callables: argument 0",
                     "[3, 4]", "[5, 4]");
  EXPECT_EMBER_ERROR(cuda::make_graphed_callables(g, {ones({3, 4})}, {}), "make_graphed_callables",
                     "CUDA tensors");
}

// The trainers' --cuda-graphs: one graph per batch shape, warm-up calls eager, the same weights
// as eager steps (same seeds), and a scheduler stepping between calls.
TEST_F(CudaGraph, TrainersGraphedStepKeepsAGraphPerShape) {
  std::vector<Batch> data = batches({8, 32}, 10, 6);
  for (const Batch& b : batches({5, 32}, 10, 6)) data.push_back(b);
  std::vector<Batch> mixed;  // shapes alternating
  for (size_t i = 0; i < 6; ++i) mixed.insert(mixed.end(), {data[i], data[6 + i]});
  auto train = [&](bool graphs) {
    manual_seed(11);
    auto model = nn::Sequential(nn::Linear(32, 64), nn::ReLU(), nn::Dropout(0.1), nn::Linear(64, 10)).ptr();
    model->to(kGpu);
    optim::AdamW opt(model->parameters(), optim::AdamWOptions(1e-2).fused(true));
    optim::StepLR sched(opt, 2, 0.5);
    examples::GraphedStep step(
        [&](const std::vector<Tensor>& b) {
          opt.zero_grad();
          Tensor loss = cross_entropy(model->forward(b[0]), b[1]);
          loss.backward();
          opt.step();
          return loss;
        },
        graphs, /*warmup=*/2);
    std::vector<float> losses;
    for (const Batch& b : mixed) {
      losses.push_back(step({b.x, b.y}).item<float>());
      sched.step();
    }
    if (graphs) {
      EXPECT_EQ(step.graphs(), 2u);
      EXPECT_EQ(step.replays(), 8);  // 6 steps of each shape, 2 of them eager
    }
    OrderedDict<Tensor> state;
    for (const auto& [k, v] : model->state_dict()) state.insert(k, v.cpu());
    return std::make_pair(losses, state);
  };
  const auto [eager_losses, eager_state] = train(false);
  const auto [graph_losses, graph_state] = train(true);
  EXPECT_EQ(graph_losses, eager_losses);
  for (const auto& [k, v] : eager_state) EXPECT_TRUE(graph_state[k].equal(v)) << k;
  EXPECT_EMBER_ERROR(
      examples::GraphedStep([](const std::vector<Tensor>& b) { return b[0]; }, true)({ones({2})}),
      "GraphedStep: CUDA graphs need the step's inputs on a CUDA device");
}

}  // namespace
}  // namespace ember::testing
