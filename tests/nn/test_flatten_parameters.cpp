// nn::utils::flatten_parameters_: the parameters become views of one buffer per dtype and device,
// keep their identity and values, and train as before; under autocast the buffer is cast once
// instead of each parameter (one copy_ kernel for four), with the same results bit for bit; a
// state dict saves and loads through the views.
#include <ember/core/profiler.h>
#include <ember/nn/flatten_parameters.h>

#include "test_util.h"

namespace ember::testing {
namespace {

using nn::utils::flatten_parameters_;

nn::Sequential make_net() {
  manual_seed(5);
  return nn::Sequential(nn::Linear(8, 16), nn::LayerNorm(nn::LayerNormOptions({16})), nn::ReLU(),
                        nn::Linear(16, 4));
}

TEST(FlattenParameters, ParametersBecomeViewsOfOneBufferPerDtype) {
  nn::Sequential net = make_net();
  std::vector<Tensor> params = net->parameters();
  std::vector<Tensor> before;
  for (const Tensor& p : params) before.push_back(p.clone());
  std::vector<TensorImpl*> impls;
  for (const Tensor& p : params) impls.push_back(p.unsafe_impl());
  std::vector<Tensor> buffers = flatten_parameters_(params);
  ASSERT_EQ(buffers.size(), 1u);
  EXPECT_EQ(buffers[0].dim(), 1);
  int64_t offset = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(params[i].unsafe_impl(), impls[i]);  // the same tensors
    EXPECT_TRUE(params[i].is_leaf() && params[i].requires_grad());
    EXPECT_TRUE(params[i].sizes().equals(before[i].sizes()));
    EXPECT_CLOSE(params[i], before[i], Tolerance{0, 0});
    EXPECT_EQ(params[i].data_ptr<float>(), buffers[0].data_ptr<float>() + offset);
    offset += params[i].numel();
  }
  EXPECT_EQ(buffers[0].numel(), offset);

  // One buffer per dtype (and device), in order of first appearance.
  Tensor a = randn({3}).requires_grad_(), b = randn({2, 2}, kFloat64).requires_grad_(),
         c = randn({5}).requires_grad_();
  std::vector<Tensor> mixed = flatten_parameters_({a, b, c});
  ASSERT_EQ(mixed.size(), 2u);
  EXPECT_EQ(mixed[0].dtype(), kFloat32);
  EXPECT_EQ(mixed[0].numel(), 8);
  EXPECT_EQ(mixed[1].dtype(), kFloat64);
  EXPECT_EQ(c.data_ptr<float>(), mixed[0].data_ptr<float>() + 3);

  EXPECT_EMBER_ERROR(flatten_parameters_({a, a}), "flatten_parameters_: parameter 1 is given twice");
  EXPECT_EMBER_ERROR(flatten_parameters_({a, Tensor()}), "flatten_parameters_: parameter 1 is undefined");
  EXPECT_EMBER_ERROR(flatten_parameters_({zeros({2}, kInt64)}), "flatten_parameters_: parameter 0 is int64");
}

// The copy_ kernels of one forward under CPU autocast: bfloat16 casts of the input and
// activations, and of the four Linear parameters, or of their one buffer.
int64_t casts_in_forward(nn::Sequential& net, const Tensor& x, Tensor* out) {
  profiler::Profile prof({profiler::ProfilerActivity::CPU});
  {
    amp::AutocastGuard autocast(kCPU, kBFloat16);
    *out = net->forward(x);
  }
  prof.stop();
  const profiler::KeyAverages calls = prof.key_averages();
  const profiler::FunctionEventAvg* copies = calls.find("copy_");
  return copies ? copies->count : 0;
}

TEST(FlattenParameters, AutocastCastsTheBufferOnceAndTrainsAsBefore) {
  nn::Sequential plain = make_net(), flat = make_net();
  flatten_parameters_(flat->parameters());
  optim::AdamW plain_opt(plain->parameters(), optim::AdamWOptions(1e-2)),
      flat_opt(flat->parameters(), optim::AdamWOptions(1e-2));
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    manual_seed(100 + step);
    Tensor x = randn({6, 8}), y = randn({6, 4});
    Tensor plain_out, flat_out;
    const int64_t plain_casts = casts_in_forward(plain, x, &plain_out);
    const int64_t flat_casts = casts_in_forward(flat, x, &flat_out);
    EXPECT_EQ(plain_casts - flat_casts, 3) << plain_casts << " against " << flat_casts;
    EXPECT_EQ(flat_out.dtype(), kBFloat16);
    EXPECT_CLOSE(flat_out.to(kFloat32), plain_out.to(kFloat32), Tolerance{0, 0});
    plain_opt.zero_grad();
    flat_opt.zero_grad();
    mse_loss(plain_out.to(kFloat32), y).backward();
    mse_loss(flat_out.to(kFloat32), y).backward();
    std::vector<Tensor> pp = plain->parameters(), fp = flat->parameters();
    for (size_t i = 0; i < pp.size(); ++i) {
      ASSERT_TRUE(fp[i].grad().defined());
      EXPECT_EQ(fp[i].grad().dtype(), kFloat32);
      EXPECT_CLOSE(fp[i].grad(), pp[i].grad(), Tolerance{0, 0});
    }
    plain_opt.step();
    flat_opt.step();
    for (size_t i = 0; i < pp.size(); ++i) EXPECT_CLOSE(fp[i], pp[i], Tolerance{0, 0});
  }
  // The region's cache is gone with it: nothing holds the cast buffer.
  EXPECT_EQ(amp::autocast_cache_size(), 0u);
}

TEST(FlattenParameters, StateDictSavesAndLoadsThroughTheViews) {
  TempDir dir;
  nn::Sequential net = make_net();
  std::vector<Tensor> buffers = flatten_parameters_(net->parameters());
  save(net->state_dict(), dir.file("net.safetensors"));
  nn::Sequential other = make_net();
  std::vector<Tensor> other_buffers = flatten_parameters_(other->parameters());
  {
    NoGradGuard no_grad;
    other_buffers[0].zero_();
  }
  other->load_state_dict(load(dir.file("net.safetensors")));
  EXPECT_CLOSE(other_buffers[0], buffers[0], Tolerance{0, 0});  // loaded into the buffer itself
  std::vector<Tensor> a = net->parameters(), b = other->parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_CLOSE(b[i], a[i], Tolerance{0, 0});
}

}  // namespace
}  // namespace ember::testing
