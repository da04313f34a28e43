// A training step never waits for the GPU: a transformer step (embedding, attention with a key
// padding mask, dropout, a classifier and a masked-LM head gathered at positions, cross_entropy
// with ignored targets, backward, clipping, fused AdamW, GradScaler, an LR schedule) runs with the
// stream held behind a host gate and the sync debug mode at Error. The index checks that used to
// read indices back now run in the kernels: a bad index is raised at the next synchronization,
// naming the op, and the GPU stays usable.
#include <ember/core/autocast_mode.h>
#include <ember/cuda/stream.h>
#include <ember/cuda/sync_debug.h>
#include <ember/ember.h>

#include <cmath>
#include <functional>

#include "cuda_test_util.h"
#include "host_gate.h"

namespace ember::testing {
namespace {

class NoSyncCuda : public CudaTest {
 protected:
  void TearDown() override { cuda::set_sync_debug_mode(cuda::SyncDebugMode::Default); }
};

const Device kGpu(kCUDA, 0);
constexpr int64_t kVocab = 100, kWidth = 32, kClasses = 3, kBatch = 4, kLength = 12;

// A one-layer BERT-like encoder with both heads.
struct Encoder : nn::Module {
  nn::Embedding embed{nullptr};
  nn::TransformerEncoderLayer layer{nullptr};
  nn::Linear classifier{nullptr}, lm_head{nullptr};
  Encoder() : Module("Encoder") {
    embed = register_module("embed", nn::Embedding(kVocab, kWidth));
    layer = register_module(
        "layer",
        nn::TransformerEncoderLayer(
            nn::TransformerEncoderLayerOptions(kWidth, 4).dim_feedforward(64).activation("gelu").batch_first(
                true)));
    classifier = register_module("classifier", nn::Linear(kWidth, kClasses));
    lm_head = register_module("lm_head", nn::Linear(kWidth, kVocab));
  }
};

// One batch, on the GPU before the step: ids [B, L] with padding, its padding mask, labels,
// masked positions into the flattened tokens and their targets (one ignored).
struct Batch {
  Tensor ids, padding, labels, positions, targets;
  Batch() {
    Tensor lengths = tensor({12, 9, 5, 12}, kInt64);
    ids = randint(1, kVocab, {kBatch, kLength}).to(kGpu);
    padding = (arange(kLength, kInt64).unsqueeze(0) >= lengths.unsqueeze(1)).to(kGpu);  // true: padding
    labels = tensor({0, 2, 1, 2}, kInt64).to(kGpu);
    positions = tensor({1, 5, 13, 20, 26, 40}, kInt64).to(kGpu);
    targets = tensor({7, 8, -100, 9, 10, 11}, kInt64).to(kGpu);
  }
};

struct Trainer {
  std::shared_ptr<Encoder> model = std::make_shared<Encoder>();
  std::vector<Tensor> params;
  std::unique_ptr<optim::AdamW> opt;
  std::unique_ptr<optim::LambdaLR> sched;
  amp::GradScaler scaler;
  ScalarType dtype;

  explicit Trainer(ScalarType compute)
      : scaler(1024.0, 2.0, 0.5, 2000, /*enabled=*/compute == kFloat16), dtype(compute) {
    model->to(kGpu);
    params = model->parameters();
    opt = std::make_unique<optim::AdamW>(params, optim::AdamWOptions(1e-3).fused(true));
    sched = std::make_unique<optim::LambdaLR>(*opt, [](int64_t s) { return 1.0 / (1.0 + 0.1 * s); });
    model->train();
  }

  void step(const Batch& b) {
    opt->zero_grad();
    Tensor loss;
    {
      amp::AutocastGuard autocast(kCUDA, dtype);
      Tensor h = model->layer(model->embed(b.ids), Tensor(), b.padding);  // [B, L, W]
      Tensor logits = model->classifier(h.select(1, 0));
      Tensor lm = model->lm_head(h.flatten(0, 1).index_select(0, b.positions));
      loss = cross_entropy(logits, b.labels) + cross_entropy(lm, b.targets);
    }
    scaler.scale(loss).backward();
    scaler.unscale_(*opt);
    nn::utils::clip_grad_norm_(params, 1.0);
    scaler.step(*opt);
    scaler.update();
    sched->step();
  }
};

TEST_F(NoSyncCuda, TransformerTrainingStepNeverWaitsForTheGpu) {
  for (ScalarType dtype : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    manual_seed(5);
    Trainer t(dtype);
    Batch b;
    // Warm-up: optimizer state, the scale, cached blocks and lazily loaded kernels exist.
    for (int i = 0; i < 3; ++i) t.step(b);
    cuda::synchronize(0);
    cuda::set_sync_debug_mode(cuda::SyncDebugMode::Error);
    EXPECT_TRUE(returns_without_waiting(cuda::current_stream(0), [&] { EXPECT_NO_THROW(t.step(b)); }))
        << "a training step waited for the device";
    cuda::set_sync_debug_mode(cuda::SyncDebugMode::Default);
    cuda::synchronize(0);
    for (const Tensor& p : t.params) EXPECT_TRUE(std::isfinite(p.abs().sum().item<float>()));
  }
}

TEST_F(NoSyncCuda, SyncDebugModeNamesTheOpThatWaits) {
  Tensor x = random_tensor({8}, kFloat32).to(kGpu), idx = tensor({1, 2}, kInt64).to(kGpu);
  cuda::set_sync_debug_mode(cuda::SyncDebugMode::Error);
  EXPECT_EQ(cuda::get_sync_debug_mode(), cuda::SyncDebugMode::Error);
  EXPECT_EMBER_ERROR(x.sum().item<float>(), "copy_ to the host (item(), cpu(), to(kCPU)): waits for the GPU",
                     "sync debug mode is Error");
  EXPECT_EMBER_ERROR(x.cpu(), "copy_ to the host");
  // one_hot infers num_classes from the values (it must read them); given, it does not.
  EXPECT_EMBER_ERROR(one_hot(idx), "one_hot: waits for the GPU");
  EXPECT_NO_THROW(one_hot(idx, 3));
  // Explicit waits are what the user asked for.
  EXPECT_NO_THROW(cuda::synchronize(0));
  EXPECT_NO_THROW(cuda::current_stream(0).synchronize());
  cuda::set_sync_debug_mode(cuda::SyncDebugMode::Warn);
  EXPECT_NO_THROW(x.sum().item<float>());
  cuda::set_sync_debug_mode(cuda::SyncDebugMode::Default);
  EXPECT_CLOSE(one_hot(idx, 3).cpu(), tensor({{0, 1, 0}, {0, 0, 1}}, kInt64));
}

TEST_F(NoSyncCuda, IndexErrorsAreRaisedAtTheNextSynchronization) {
  Tensor w = random_tensor({4, 5}, kFloat32).to(kGpu);
  auto i64 = [](std::initializer_list<int64_t> v) {
    return tensor(std::vector<int64_t>(v), kInt64).to(kGpu);
  };
  struct Case {
    const char* what;
    std::function<Tensor()> op;
    const char* message;
  };
  const std::vector<Case> cases{
      {"gather",
       [&] {
         return gather(w, 1, i64({0, 5}).view({1, 2}));
       },
       "gather: index 5 is out of bounds for dimension 1 with size 5"},
      {"index_select",
       [&] {
         return index_select(w, 0, i64({1, -1}));
       },
       "index_select: index -1 is out of bounds for dimension 0 with size 4"},
      {"take_along_dim",
       [&] {
         return take_along_dim(w, i64({0, 9}).view({1, 2}), 1);
       },
       "take_along_dim: index 9 is out of bounds for dimension 1 with size 5"},
      {"scatter_add",
       [&] {
         return scatter_add(w, 0, i64({-1}).view({1, 1}), w);
       },
       "scatter_add: index -1 is out of bounds for dimension 0 with size 4"},
      {"scatter",
       [&] {
         return scatter(w, 1, i64({7}).view({1, 1}), 2.0);
       },
       "scatter: index 7 is out of bounds for dimension 1 with size 5"},
      {"index_add",
       [&] {
         return index_add(w, 0, i64({7}), ones({1, 5}, kFloat32).to(kGpu));
       },
       "index_add: index 7 is out of bounds for dimension 0 with size 4"},
      {"index",
       [&] {
         return w.index({i64({1, -6})});
       },
       "index: index -6 is out of bounds for dimension 0 with size 4"},
      {"embedding",
       [&] {
         return embedding(w, tensor({1, 4, 0}, kInt32).to(kGpu));
       },
       "embedding: index 4 is out of range for a weight with 4 rows"},
      {"cross_entropy",
       [&] {
         return cross_entropy(w, i64({0, 5, 1, 2}));
       },
       "cross_entropy: target 5 is out of bounds for 5 classes"},
      {"nll_loss",
       [&] {
         return nll_loss(w, i64({0, -3, 1, -100}));
       },
       "nll_loss: target -3 is out of bounds for 5 classes"},
      {"one_hot",
       [&] {
         return one_hot(i64({1, -2}), 3);
       },
       "one_hot: index -2 is out of bounds"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Tensor out;
    EXPECT_NO_THROW(out = c.op());  // nothing waits for the GPU here
    EXPECT_EMBER_ERROR(cuda::synchronize(0), c.message, "raised at the first synchronization after it");
    // Raised once; the GPU works on.
    EXPECT_NO_THROW(cuda::synchronize(0));
    EXPECT_CLOSE((w * 2).cpu(), w.cpu() * 2);
  }
  // item() raises it too, and an ignored target is not an error.
  EXPECT_EMBER_ERROR(cross_entropy(w, i64({0, 5, 1, 2})).item<float>(), "cross_entropy: target 5");
  EXPECT_NO_THROW(cross_entropy(w, i64({0, -100, 1, 2})).item<float>());
  // A bad index reads as 0 and the good ones are right; one of the errors is raised.
  Tensor g = gather(w, 1, i64({0, 5, 2, -7}).view({1, 4}));
  EXPECT_EMBER_ERROR(cuda::synchronize(0), "gather: index ");
  Tensor want = w.cpu().narrow(0, 0, 1);
  EXPECT_CLOSE(g.cpu(), stack({want[0][0], zeros({}), want[0][2], zeros({})}).view({1, 4}));
}

}  // namespace
}  // namespace ember::testing
