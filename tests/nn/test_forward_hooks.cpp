// Module forward hooks (register_forward_pre_hook, register_forward_hook): when they run, what
// they see, output replacement, removal, and a feature extractor over ResNet's stages.
#include <string>
#include <vector>

#include "ember/examples/models/resnet.h"
#include "ember/nn/activation.h"
#include "ember/nn/attention.h"
#include "ember/nn/container.h"
#include "ember/nn/linear.h"
#include "test_util.h"

namespace ember::testing {
namespace {

TEST(ForwardHooks, RunAroundACallInOrder) {
  nn::Linear lin(3, 2);
  std::vector<std::string> log;
  Tensor seen_in, seen_out;
  lin->register_forward_pre_hook([&](nn::Module& m, const std::vector<Tensor>& in) {
    log.push_back("pre " + m.name());
    ASSERT_EQ(in.size(), 1u);
    seen_in = in[0];
  });
  lin->register_forward_hook([&](nn::Module&, const std::vector<Tensor>& in,
                                 const std::vector<Tensor>& out) -> std::optional<Tensor> {
    log.push_back("post");
    EXPECT_TRUE(in[0].is_same(seen_in));
    seen_out = out.at(0);
    return std::nullopt;
  });
  Tensor x = randn({4, 3});
  Tensor y = lin(x);
  EXPECT_EQ(log, (std::vector<std::string>{"pre Linear", "post"}));
  EXPECT_TRUE(seen_in.is_same(x));
  EXPECT_TRUE(seen_out.is_same(y));
  // forward() itself runs no hooks, as PyTorch's m.forward(x).
  lin->forward(x);
  EXPECT_EQ(log.size(), 2u);
}

TEST(ForwardHooks, ReplaceTheOutputAndKeepTheGraph) {
  nn::Linear lin(3, 2);
  lin->register_forward_hook(
      [](nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>& out) -> std::optional<Tensor> {
        return out[0] * 2;
      });
  Tensor seen;
  lin->register_forward_hook(
      [&](nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>& out) -> std::optional<Tensor> {
        seen = out[0];  // the first hook's replacement
        return std::nullopt;
      });
  Tensor x = randn({4, 3});
  Tensor y = lin(x);
  EXPECT_TRUE(assert_close(y, lin->forward(x) * 2));
  EXPECT_TRUE(seen.is_same(y));
  y.sum().backward();
  EXPECT_TRUE(assert_close(lin->bias.grad(), full({2}, 8.0)));  // 4 rows, times 2
}

TEST(ForwardHooks, RemoveStopsTheHook) {
  nn::ReLU relu;
  int calls = 0;
  nn::RemovableHandle h =
      relu->register_forward_pre_hook([&](nn::Module&, const std::vector<Tensor>&) { ++calls; });
  relu(randn({2}));
  h.remove();
  h.remove();  // twice: nothing
  relu(randn({2}));
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(relu->has_forward_hooks());
  nn::RemovableHandle outlives;
  {
    nn::ReLU gone;
    outlives = gone->register_forward_pre_hook([](nn::Module&, const std::vector<Tensor>&) {});
  }
  outlives.remove();  // the module is gone: nothing
}

TEST(ForwardHooks, AHookMayRemoveItself) {
  nn::ReLU relu;
  int calls = 0;
  auto handle = std::make_shared<nn::RemovableHandle>();
  *handle =
      relu->register_forward_hook([&calls, handle](nn::Module&, const std::vector<Tensor>&,
                                                   const std::vector<Tensor>&) -> std::optional<Tensor> {
        ++calls;
        handle->remove();
        return std::nullopt;
      });
  relu(randn({2}));
  relu(randn({2}));
  EXPECT_EQ(calls, 1);
}

TEST(ForwardHooks, SequentialCallsItsChildrenThroughTheirHooks) {
  nn::Sequential seq(nn::Linear(3, 4), nn::ReLU(), nn::Linear(4, 1));
  std::vector<DimVector> shapes;
  for (const auto& child : seq->children())
    child->register_forward_hook([&](nn::Module&, const std::vector<Tensor>&,
                                     const std::vector<Tensor>& out) -> std::optional<Tensor> {
      shapes.emplace_back(out[0].sizes().begin(), out[0].sizes().end());
      return std::nullopt;
    });
  seq(randn({5, 3}));
  EXPECT_EQ(shapes, (std::vector<DimVector>{{5, 4}, {5, 4}, {5, 1}}));
}

// A module whose forward returns a tuple: the hook sees its tensors; a replacement is refused.
TEST(ForwardHooks, TupleOutputs) {
  nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(8, 2).batch_first(true));
  size_t n = 0;
  nn::RemovableHandle h =
      mha->register_forward_hook([&](nn::Module&, const std::vector<Tensor>& in,
                                     const std::vector<Tensor>& out) -> std::optional<Tensor> {
        EXPECT_EQ(in.size(), 3u);  // query, key, value
        n = out.size();
        return std::nullopt;
      });
  Tensor q = randn({2, 5, 8});
  mha(q, q, q);
  EXPECT_EQ(n, 2u);  // output and attention weights
  h.remove();
  mha->register_forward_hook([](nn::Module&, const std::vector<Tensor>&,
                                const std::vector<Tensor>& out) -> std::optional<Tensor> { return out[0]; });
  EXPECT_EMBER_ERROR(mha(q, q, q), "MultiheadAttention", "replacement", "does not return a Tensor");
}

TEST(ForwardHooks, EmptyHookIsRefused) {
  nn::ReLU relu;
  EXPECT_EMBER_ERROR(relu->register_forward_hook(nullptr), "ReLU", "register_forward_hook", "empty");
  EXPECT_EMBER_ERROR(relu->register_forward_pre_hook(nullptr), "ReLU", "register_forward_pre_hook", "empty");
}

// The everyday use: a feature extractor over a pretrained network's stages.
TEST(ForwardHooks, ResNetStageFeatures) {
  models::ResNet net = models::resnet18(models::ResNetOptions().num_classes(10));
  net->eval();
  std::vector<DimVector> features;
  for (const nn::Sequential& stage : {net->layer1, net->layer2, net->layer3, net->layer4})
    stage->register_forward_hook([&](nn::Module&, const std::vector<Tensor>&,
                                     const std::vector<Tensor>& out) -> std::optional<Tensor> {
      features.emplace_back(out[0].sizes().begin(), out[0].sizes().end());
      return std::nullopt;
    });
  NoGradGuard no_grad;
  net(randn({2, 3, 64, 64}));
  EXPECT_EQ(features,
            (std::vector<DimVector>{{2, 64, 16, 16}, {2, 128, 8, 8}, {2, 256, 4, 4}, {2, 512, 2, 2}}));
}

}  // namespace
}  // namespace ember::testing
