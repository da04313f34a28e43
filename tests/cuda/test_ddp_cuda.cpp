// DistributedDataParallel over ProcessGroupNCCL with one rank on one GPU: the averaging is the
// identity, so training through DDP gives exactly the parameters plain training gives (the
// bucket copies, the all-reduce on the NCCL stream and the stream waits must not change a bit).
// Several ranks: see the dist suite (Gloo).
#include <ember/distributed/ddp.h>
#include <ember/distributed/distributed.h>
#include <ember/nn/linear.h>
#include <ember/optim/sgd.h>

#include "cuda_test_util.h"

namespace ember::testing {
namespace {

namespace d = ember::distributed;

struct TwoLayerImpl : nn::Module {
  TwoLayerImpl() {
    fc1 = register_module("fc1", nn::Linear(16, 32));
    fc2 = register_module("fc2", nn::Linear(32, 4));
    to(Device(kCUDA));
  }
  Tensor forward(const Tensor& x) { return fc2(tanh(fc1(x))); }
  nn::Linear fc1{nullptr}, fc2{nullptr};
};
EMBER_MODULE(TwoLayer);

class DDPCuda : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    if (!d::is_nccl_available()) GTEST_SKIP() << "ember built without NCCL";
    store_ =
        std::make_shared<d::TCPStore>("127.0.0.1", 0, std::nullopt, true, std::chrono::milliseconds(30'000));
    pg_ = d::make_process_group_nccl(std::make_shared<d::PrefixStore>("test", store_), 0, 1);
  }

  // Three SGD steps of `model` (through `forward`), on batches every run draws alike.
  template <class Forward>
  static void train(nn::Module& model, Forward forward) {
    optim::SGD opt(model.parameters(), optim::SGDOptions(0.1).momentum(0.9));
    for (int step = 0; step < 3; ++step) {
      manual_seed(500 + step);
      Tensor x = randn({8, 16}).cuda(), y = randn({8, 4}).cuda();
      opt.zero_grad();
      mse_loss(forward(x), y).backward();
      opt.step();
    }
  }

  std::shared_ptr<d::Store> store_;
  std::shared_ptr<d::ProcessGroup> pg_;
};

TEST_F(DDPCuda, WorldOfOneMatchesPlainTraining) {
  manual_seed(1);
  TwoLayer plain;
  manual_seed(1);
  TwoLayer net;
  // Two buckets: fc2's parameters, then fc1's.
  d::DistributedDataParallel ddp(net, pg_, d::DistributedDataParallelOptions().first_bucket_cap_mb(1e-4));
  ASSERT_EQ(ddp->bucket_indices().size(), 2u);
  train(*plain, [&](const Tensor& x) { return plain(x); });
  train(*ddp, [&](const Tensor& x) { return ddp(x); });
  for (size_t i = 0; i < 4; ++i)
    EXPECT_CLOSE(net->parameters()[i].cpu(), plain->parameters()[i].cpu(), Tolerance{0, 0});
}

TEST_F(DDPCuda, GradientAsBucketViewMatchesPlainTraining) {
  // The same bits as plain training, with every .grad left a view of its bucket: the gradients
  // of one bucket lie one after the other in GPU memory, at the same place every step.
  manual_seed(1);
  TwoLayer plain;
  manual_seed(1);
  TwoLayer net;
  d::DistributedDataParallel ddp(
      net, pg_, d::DistributedDataParallelOptions().first_bucket_cap_mb(1e-4).gradient_as_bucket_view(true));
  ASSERT_EQ(ddp->bucket_indices().size(), 2u);
  auto addresses = [&] {
    std::vector<const char*> out;
    for (const auto& bucket : ddp->bucket_indices()) {
      const char* next = nullptr;
      for (size_t i : bucket) {
        const Tensor g = net->parameters()[i].grad();
        out.push_back(static_cast<const char*>(g.data_ptr()));
        if (next) {
          EXPECT_EQ(out.back(), next) << "parameter " << i << " does not follow the previous one";
        }
        next = out.back() + g.nbytes();
      }
    }
    return out;
  };
  train(*plain, [&](const Tensor& x) { return plain(x); });
  train(*ddp, [&](const Tensor& x) { return ddp(x); });
  std::vector<const char*> first = addresses();
  for (size_t i = 0; i < 4; ++i)
    EXPECT_CLOSE(net->parameters()[i].cpu(), plain->parameters()[i].cpu(), Tolerance{0, 0});
  // zero_grad(false) keeps the views: the next backward accumulates into the buckets.
  manual_seed(9);
  Tensor x = randn({8, 16}).cuda(), y = randn({8, 4}).cuda();
  ddp->zero_grad(false);
  plain->zero_grad(false);
  mse_loss(ddp(x), y).backward();
  mse_loss(plain(x), y).backward();
  EXPECT_EQ(addresses(), first);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_CLOSE(net->parameters()[i].grad().cpu(), plain->parameters()[i].grad().cpu(), Tolerance{0, 0});
}

TEST_F(DDPCuda, Bf16CompressionRoundsTheGradients) {
  manual_seed(2);
  TwoLayer plain;
  manual_seed(2);
  TwoLayer net;
  d::DistributedDataParallel ddp(net, pg_);
  ddp->register_comm_hook(d::default_hooks::bf16_compress_hook);
  manual_seed(3);
  Tensor x = randn({8, 16}).cuda(), y = randn({8, 4}).cuda();
  mse_loss(ddp(x), y).backward();
  mse_loss(plain(x), y).backward();
  Tensor expected = plain->fc1->weight.grad().to(kBFloat16).to(kFloat32);
  EXPECT_CLOSE(net->fc1->weight.grad().cpu(), expected.cpu(), Tolerance{0, 0});
}

}  // namespace
}  // namespace ember::testing
