// docs/pytorch_names.md, checked: every row the table marks present is called here, section by
// section in the table's order, so a name that goes away breaks the build; and the table's count of
// present rows must equal kPresentRows, so the table and this file change together.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ember/autograd/functional.h"
#include "ember/autograd/graphed_callables.h"
#include "ember/cuda/attention_cudnn.h"
#include "ember/cuda/attention_flash.h"
#include "ember/cuda/caching_allocator.h"
#include "ember/cuda/conv_cudnn.h"
#include "ember/cuda/graph.h"
#include "ember/cuda/matmul_cublaslt.h"
#include "ember/cuda/nvtx.h"
#include "ember/data/distributed_sampler.h"
#include "ember/distributed/ddp.h"
#include "ember/distributed/device_mesh.h"
#include "ember/distributed/distributed.h"
#include "ember/distributed/object_collectives.h"
#include "ember/distributed/parallel_linear.h"
#include "ember/distributed/pipeline.h"
#include "ember/distributed/process_group_gloo.h"
#include "ember/distributed/process_group_nccl.h"
#include "ember/distributed/sync_batch_norm.h"
#include "ember/distributed/tcp_store.h"
#include "ember/distributed/zero_redundancy_optimizer.h"
#include "ember/ember.h"
#include "ember/optim/swa_utils.h"
#include "test_util.h"
#ifdef EMBER_WITH_CUDA
#include "ember/cuda/event.h"
#include "ember/cuda/stream.h"
#endif

namespace ember::testing {
namespace {

namespace F = nn::functional;

// The rows of docs/pytorch_names.md whose ember column is not "missing".
constexpr int64_t kPresentRows = 267;

using Sizes = std::vector<int64_t>;

// torch.autograd.Function's shape: static forward and backward, apply.
struct Square : autograd::Function<Square> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return x * x;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> grads) {
    return {grads[0] * 2 * ctx->get_saved_variables()[0]};
  }
};
// @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32) and @custom_bwd.
struct Float32Square : autograd::Function<Float32Square> {
  static constexpr amp::CustomFwd custom_fwd{kCPU, kFloat32};
  static constexpr amp::CustomBwd custom_bwd{kCPU};
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x) { return Square::forward(ctx, x); }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> grads) {
    return Square::backward(ctx, std::move(grads));
  }
};
Sizes shape(const Tensor& t) { return t.sizes().vec(); }

// Runs `call` where a GPU is present; elsewhere it must throw ember::Error.
template <class Call>
void on_gpu(Call call) {
  if (cuda::is_available())
    call();
  else
    EXPECT_THROW(call(), Error);
}

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "pytorch_names_" + name; }

// manual_seed reseeds every default generator; restoring their states keeps other tests' draws.
void manual_seed_then_restore(uint64_t seed) {
  Tensor cpu = get_rng_state(), gpu = get_rng_state(&default_generator(kCUDA));
  manual_seed(seed);
  set_rng_state(cpu);
  set_rng_state(gpu, &default_generator(kCUDA));
}

// A user model, as `class Net(nn.Module)`.
struct NetImpl : nn::Module {
  NetImpl() : nn::Module("Net") {
    w = register_parameter("w", ones({2}));
    register_buffer("count", zeros({1}), /*persistent=*/false);
    fc = register_module("fc", nn::Linear(2, 2));
  }
  Tensor forward(const Tensor& x) { return fc(x * w); }

  Tensor w;
  nn::Linear fc{nullptr};
};
EMBER_MODULE(Net);

TEST(PytorchNames, TensorMethods) {
  Tensor x = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  Tensor y = full({2, 3}, 2.0);
  EXPECT_EQ(shape(x), (Sizes{2, 3}));
  EXPECT_EQ(x.size(1), 3);
  EXPECT_EQ(x.dim(), 2);
  EXPECT_EQ(x.numel(), 6);
  EXPECT_EQ(x.dtype(), kFloat32);
  EXPECT_EQ(x.device(), Device(kCPU));
  EXPECT_FALSE(x.is_cuda());
  EXPECT_TRUE(x.is_contiguous());
  EXPECT_EQ(x.strides().vec(), (Sizes{3, 1}));
  EXPECT_EQ(x.sum().item<float>(), 21.0f);
  EXPECT_EQ(shape(x.view({3, -1})), (Sizes{3, 2}));
  EXPECT_EQ(shape(x.reshape({-1})), (Sizes{6}));
  EXPECT_EQ(shape(x.transpose(0, 1)), (Sizes{3, 2}));
  EXPECT_EQ(shape(x.t()), (Sizes{3, 2}));
  EXPECT_EQ(shape(x.mT()), (Sizes{3, 2}));
  EXPECT_EQ(shape(x.unsqueeze(0).permute({2, 0, 1})), (Sizes{3, 1, 2}));
  EXPECT_TRUE(x.t().contiguous().is_contiguous());
  EXPECT_EQ(shape(x.unsqueeze(0).squeeze(0)), (Sizes{2, 3}));
  EXPECT_EQ(shape(x.unsqueeze(2).flatten(1, 2)), (Sizes{2, 3}));
  EXPECT_EQ(shape(x[0].expand({4, 3})), (Sizes{4, 3}));
  EXPECT_EQ(shape(x[0].expand_as(y)), (Sizes{2, 3}));
  EXPECT_EQ(shape(x.repeat({2, 1})), (Sizes{4, 3}));
  EXPECT_EQ(x[1][2].item<float>(), 6.0f);
  EXPECT_EQ(shape(x.index({Slice(0, 1), Ellipsis, None})), (Sizes{1, 3, 1}));
  EXPECT_EQ(shape(x.index({x > 2})), (Sizes{4}));
  EXPECT_EQ(shape(x.index({tensor({1, 0, 1})})), (Sizes{3, 3}));
  EXPECT_EQ(shape(x.index({Slice(), tensor({0, 2}), None})), (Sizes{2, 2, 1}));
  {
    Tensor z = x.clone();
    z.index_put_({tensor({0})}, ones({3}));
    z.index_put_({z > 4}, 0);
    z.index_put_({tensor({1, 1})}, ones({3}), true);
    EXPECT_EQ(index_put(z, {tensor({0})}, zeros({3})).sum().item<float>(), 10.0f);
  }
  EXPECT_EQ(x.chunk(3, 1).size(), 3u);
  EXPECT_EQ(x.split(1, 0).size(), 2u);
  EXPECT_EQ(x.unbind(1).size(), 3u);
  EXPECT_FALSE(x.clone().is_same(x));
  EXPECT_EQ(x.to(Device(kCPU)).device(), Device(kCPU));
  EXPECT_EQ(x.to(kBFloat16).dtype(), kBFloat16);
  EXPECT_EQ(x.to(kInt64).to_float().dtype(), kFloat32);
  EXPECT_EQ(x.to(kHalf).dtype(), kFloat16);
  EXPECT_EQ(x.to(kLong).dtype(), kInt64);
  EXPECT_EQ(x.to(kBool).dtype(), kBool);
  EXPECT_EQ(x.to(kBool).to(y.dtype()).dtype(), kFloat32);
  EXPECT_TRUE(x.cpu().is_cpu());
  on_gpu([&] { EXPECT_TRUE(x.cuda().is_cuda()); });
  EXPECT_TRUE(
      zeros({1, 3, 2, 2}).contiguous(MemoryFormat::ChannelsLast).is_contiguous(MemoryFormat::ChannelsLast));
  on_gpu([&] { EXPECT_TRUE(x.pin_memory().to(Device(kCUDA), true).is_cuda()); });
  EXPECT_EQ(zeros({4}, x.options()).dtype(), x.dtype());
  Tensor z = zeros({2, 3});
  z.copy_(x);
  EXPECT_TRUE(z.equal(x));
  z.fill_(1);
  z.zero_();
  EXPECT_EQ(z.sum().item<float>(), 0.0f);
  EXPECT_CLOSE((x + y - y) * y / y, x);
  EXPECT_CLOSE(x.add(y, 2), x + 4);
  EXPECT_CLOSE(x.pow(2), x * x);
  EXPECT_EQ(shape(x.matmul(y.t())), (Sizes{2, 2}));
  EXPECT_EQ(shape(x.mm(y.t())), (Sizes{2, 2}));
  EXPECT_EQ(shape(x.unsqueeze(0).bmm(y.t().unsqueeze(0))), (Sizes{1, 2, 2}));
  z.add_(y, 0.5).mul_(y).div_(y);
  z += y;
  EXPECT_CLOSE(z, full({2, 3}, 3.0));
  z.addcmul_(y, y, 0.25).addcdiv_(y, y, -1).lerp_(x, 0.5);
  EXPECT_CLOSE(z, (x + 3) / 2);
  EXPECT_CLOSE(x.clamp(2, 5), tensor({{2.0, 2.0, 3.0}, {4.0, 5.0, 5.0}}));
  z.clamp_(std::nullopt, 1);
  EXPECT_CLOSE((-x).abs().exp().log().sqrt().rsqrt(), x.rsqrt().sqrt());
  EXPECT_EQ(shape(erf(x)), (Sizes{2, 3}));
  EXPECT_CLOSE((x / 2).floor() + (x / 2).ceil(), x);  // x is 1..6
  EXPECT_EQ(x.masked_select(x > 2).numel(), 4);
  EXPECT_EQ((x > 2).nonzero().sizes(), (IntArrayRef{4, 2}));
  EXPECT_CLOSE((x / 2).round() + (x / 2).trunc(), tensor({{0.0, 2.0, 3.0}, {4.0, 4.0, 6.0}}).to(x.dtype()));
  EXPECT_EQ(shape(x.sin().cos().tanh().sigmoid().relu()), (Sizes{2, 3}));
  EXPECT_FALSE(x.isnan().any().item<bool>() || x.isinf().any().item<bool>());
  EXPECT_TRUE(x.isfinite().all().item<bool>());
  EXPECT_CLOSE(x.maximum(y).minimum(y), y);
  Tensor mask = x > 3;
  EXPECT_EQ(x.masked_fill(mask, 0).sum().item<float>(), 6.0f);
  z.masked_fill_(mask, 7);
  EXPECT_TRUE((x == x).all().item<bool>());
  EXPECT_FALSE((x != x).any().item<bool>());
  EXPECT_TRUE((x < 10).logical_and(x >= y).logical_not().any().item<bool>());
  EXPECT_TRUE(x.eq(x).all().item<bool>());
  EXPECT_EQ(shape(x.sum({1}, true)), (Sizes{2, 1}));
  EXPECT_EQ(shape(x.mean({0})), (Sizes{3}));
  auto [values, indices] = x.max(1);
  EXPECT_EQ(indices.dtype(), kInt64);
  EXPECT_EQ(std::get<0>(x.min(0)).sum().item<float>(), 6.0f);
  EXPECT_EQ(x.argmax(1)[0].item<int64_t>(), 2);
  EXPECT_EQ(shape(x.var({1})), (Sizes{2}));
  EXPECT_EQ(shape(x.std({1})), (Sizes{2}));
  EXPECT_EQ(shape(x.norm(2, {1})), (Sizes{2}));
  EXPECT_TRUE(x.all().item<bool>());
  EXPECT_TRUE(x.any().item<bool>());
  EXPECT_EQ(shape(x.softmax(-1)), shape(x));
  EXPECT_EQ(shape(x.log_softmax(-1)), shape(x));
  EXPECT_EQ(x.cumsum(1)[0][2].item<float>(), 6.0f);
  Tensor idx = tensor({{0}, {2}});
  EXPECT_EQ(shape(x.gather(1, idx)), (Sizes{2, 1}));
  EXPECT_EQ(shape(x.index_select(1, tensor({0, 2}))), (Sizes{2, 2}));
  scatter_(z, 1, idx, ones({2, 1}));
  EXPECT_EQ(x.tril().triu().sum().item<float>(), 6.0f);  // the diagonal: 1 + 5
  uniform_(z, 0, 1);
  normal_(z, 0, 1);
}

TEST(PytorchNames, TorchFunctions) {
  Tensor x = tensor({{1, 2}, {3, 4}}, kFloat32);
  EXPECT_EQ(x.dtype(), kFloat32);
  EXPECT_EQ(shape(zeros({2, 3})), (Sizes{2, 3}));
  EXPECT_EQ(ones({2, 3}, kInt64).dtype(), kInt64);
  EXPECT_EQ(shape(empty({2, 3})), (Sizes{2, 3}));
  EXPECT_EQ(full({2, 3}, 7.0).sum().item<float>(), 42.0f);
  EXPECT_EQ(zeros_like(x).sum().item<float>(), 0.0f);
  EXPECT_EQ(ones_like(x).sum().item<float>(), 4.0f);
  EXPECT_EQ(full_like(x, 2).sum().item<float>(), 8.0f);
  EXPECT_EQ(shape(empty_like(x)), (Sizes{2, 2}));
  EXPECT_EQ(arange(10).numel(), 10);
  EXPECT_EQ(arange(0, 10, 2).numel(), 5);
  EXPECT_EQ(linspace(0, 1, 5).numel(), 5);
  EXPECT_EQ(eye(3).sum().item<float>(), 3.0f);
  EXPECT_EQ(shape(rand({2, 3})), (Sizes{2, 3}));
  EXPECT_EQ(shape(randn({2, 3})), (Sizes{2, 3}));
  EXPECT_EQ(shape(rand_like(x)), (Sizes{2, 2}));
  EXPECT_EQ(shape(randn_like(x)), (Sizes{2, 2}));
  EXPECT_EQ(randint(0, 10, {3}).dtype(), kInt64);
  EXPECT_EQ(randperm(10).sum().item<int64_t>(), 45);
  EXPECT_EQ(bernoulli(ones({4})).sum().item<float>(), 4.0f);
  EXPECT_EQ(multinomial(tensor({0.0, 1.0}), 3, true).sum().item<int64_t>(), 3);
  manual_seed_then_restore(1);
  Generator gen(1);
  EXPECT_EQ(gen.initial_seed(), 1u);
  std::vector<float> buffer = {1, 2, 3};
  EXPECT_EQ(from_blob(buffer.data(), {3}, kFloat32).sum().item<float>(), 6.0f);
  EXPECT_EQ(shape(cat({x, x}, 0)), (Sizes{4, 2}));
  EXPECT_EQ(shape(stack({x, x}, 0)), (Sizes{2, 2, 2}));
  EXPECT_CLOSE(where(x > 2, x, zeros_like(x)), tensor({{0, 0}, {3, 4}}, kFloat32));
  EXPECT_EQ(shape(addmm(x, x, x)), (Sizes{2, 2}));
  EXPECT_EQ(shape(baddbmm(x.unsqueeze(0), x.unsqueeze(0), x.unsqueeze(0))), (Sizes{1, 2, 2}));
  EXPECT_EQ(shape(outer(x[0], x[1])), (Sizes{2, 2}));
  EXPECT_CLOSE(einsum("ij,jk->ik", {x, x}), x.matmul(x));
  EXPECT_EQ(std::get<0>(topk(x, 1)).sum().item<float>(), 6.0f);
  EXPECT_EQ(std::get<1>(sort(x)).dtype(), kInt64);
  EXPECT_EQ(argsort(x).dtype(), kInt64);
  EXPECT_TRUE(allclose(x, x));
  EXPECT_TRUE(isclose(x, x).all().item<bool>());
  EXPECT_TRUE(equal(x, x));
  nn::Linear model(2, 2);
  const std::string path = temp_path("linear.safetensors");
  save(model->state_dict(), path);
  model->load_state_dict(load(path));
  std::remove(path.c_str());
  const int threads = get_num_threads();
  set_num_threads(threads);
  for (ScalarType t : {kFloat32, kFloat16, kBFloat16, kInt64, kBool}) EXPECT_EQ(zeros({1}, t).dtype(), t);
  EXPECT_EQ(Device("cuda:1"), Device(kCUDA, 1));
  EXPECT_EQ(zeros({1, 2, 2, 2}, memory_format(MemoryFormat::ChannelsLast)).suggest_memory_format(),
            MemoryFormat::ChannelsLast);
  EXPECT_EQ(promote_types(kInt64, kFloat16), kFloat16);
  EXPECT_EQ(result_type(x, ones({1}, kFloat64)), kFloat64);
  EXPECT_EQ(finfo(kFloat32).eps, std::numeric_limits<float>::epsilon());
  EXPECT_EQ(iinfo(kInt32).max, std::numeric_limits<int32_t>::max());
  use_deterministic_algorithms(are_deterministic_algorithms_enabled(),
                               is_deterministic_algorithms_warn_only_enabled());
}

TEST(PytorchNames, NnFunctional) {
  Tensor x = randn({2, 4});
  Tensor w = randn({3, 4}), b = randn({3});
  EXPECT_EQ(shape(F::linear(x, w, b)), (Sizes{2, 3}));
  EXPECT_EQ(shape(F::relu(x)), shape(x));
  EXPECT_EQ(shape(F::normalize(x, 2.0, 1)), shape(x));
  EXPECT_EQ(shape(F::cosine_similarity(x, x, 1)), (Sizes{2}));
  EXPECT_EQ(shape(F::hardswish(x)), shape(F::relu6(x)));
  EXPECT_EQ(shape(F::silu(x)), shape(x));
  EXPECT_EQ(shape(F::gelu(x, "tanh")), shape(x));
  EXPECT_EQ(shape(F::softplus(x)), shape(x));
  EXPECT_EQ(shape(F::leaky_relu(x, 0.2)), shape(x));
  EXPECT_EQ(shape(F::softmax(x, 1)), shape(x));
  EXPECT_EQ(shape(F::log_softmax(x, 1)), shape(x));
  EXPECT_CLOSE(F::dropout(x, 0.5, false), x);
  Tensor idx = tensor({0, 2});
  EXPECT_EQ(shape(F::embedding(w, idx)), (Sizes{2, 4}));
  EXPECT_EQ(shape(F::one_hot(idx, 3)), (Sizes{2, 3}));
  EXPECT_EQ(shape(F::pad(x, {1, 1})), (Sizes{2, 6}));
  EXPECT_EQ(shape(F::layer_norm(x, {4}, ones({4}), zeros({4}))), shape(x));
  EXPECT_EQ(shape(F::rms_norm(x, {4}, ones({4}))), shape(x));
  Tensor img = randn({2, 3, 4, 4});
  EXPECT_EQ(shape(F::batch_norm(img, zeros({3}), ones({3}), ones({3}), zeros({3}), true)), shape(img));
  EXPECT_EQ(shape(F::group_norm(randn({2, 4, 3}), 2, ones({4}), zeros({4}))), (Sizes{2, 4, 3}));
  EXPECT_EQ(shape(F::conv1d(randn({1, 2, 5}), randn({3, 2, 3}))), (Sizes{1, 3, 3}));
  EXPECT_EQ(shape(F::conv3d(randn({1, 2, 3, 4, 4}), randn({3, 2, 2, 3, 3}))), (Sizes{1, 3, 2, 2, 2}));
  EXPECT_EQ(shape(F::conv2d(img, randn({5, 3, 3, 3}), zeros({5}), 1, 1)), (Sizes{2, 5, 4, 4}));
  EXPECT_EQ(shape(F::conv_transpose2d(img, randn({3, 2, 2, 2}))), (Sizes{2, 2, 5, 5}));
  EXPECT_EQ(shape(F::max_pool2d(img, {2, 2})), (Sizes{2, 3, 2, 2}));
  const Tensor clip = randn({2, 3, 4, 4, 4});
  EXPECT_EQ(shape(F::max_pool3d(clip, 2)), (Sizes{2, 3, 2, 2, 2}));
  EXPECT_EQ(shape(F::avg_pool3d(clip, 2)), (Sizes{2, 3, 2, 2, 2}));
  EXPECT_EQ(shape(F::adaptive_avg_pool3d(clip, {1, 1, 1})), (Sizes{2, 3, 1, 1, 1}));
  EXPECT_EQ(shape(F::avg_pool2d(img, {2, 2})), (Sizes{2, 3, 2, 2}));
  EXPECT_EQ(shape(F::adaptive_avg_pool2d(img, {1, 1})), (Sizes{2, 3, 1, 1}));
  EXPECT_EQ(shape(F::interpolate(img, nn::InterpolateOptions().scale_factor({2}).mode("bilinear"))),
            (Sizes{2, 3, 8, 8}));
  Tensor q = randn({1, 2, 3, 4});
  EXPECT_EQ(shape(F::scaled_dot_product_attention(q, q, q, {}, 0.0, true)), shape(q));
  Tensor target = tensor({1, 2});
  EXPECT_EQ(F::cross_entropy(F::linear(x, w), target, {}, -100, "mean", 0.1).dim(), 0);
  EXPECT_EQ(F::nll_loss(F::log_softmax(F::linear(x, w), 1), target).dim(), 0);
  EXPECT_EQ(F::mse_loss(x, x).item<float>(), 0.0f);
  EXPECT_EQ(F::l1_loss(x, x).item<float>(), 0.0f);
  EXPECT_EQ(F::smooth_l1_loss(x, x).item<float>(), 0.0f);
  EXPECT_EQ(F::binary_cross_entropy_with_logits(x, ones_like(x)).dim(), 0);
  EXPECT_EQ(F::binary_cross_entropy(x.sigmoid(), ones_like(x)).dim(), 0);
  EXPECT_NEAR(F::kl_div(x.log_softmax(1), x.softmax(1), "batchmean").item<float>(), 0.0f, 1e-6);
}

TEST(PytorchNames, NnModules) {
  nn::LeakyReLU leaky(nn::LeakyReLUOptions().negative_slope(0.2));
  nn::Hardswish hardswish;
  nn::ReLU6 relu6;
  EXPECT_EQ(shape(relu6(hardswish(leaky(ones({2}))))), (Sizes{2}));
  Net net;
  Tensor x = ones({3, 2});
  EXPECT_EQ(shape(net(x)), (Sizes{3, 2}));
  EXPECT_EQ(shape(net->forward(x)), (Sizes{3, 2}));
  EXPECT_EQ(net->parameters().size(), 3u);
  EXPECT_EQ(net->named_parameters().keys().front(), "w");
  EXPECT_EQ(net->buffers().size(), 1u);
  EXPECT_EQ(net->children().size(), 1u);
  EXPECT_EQ(net->named_modules().size(), 2u);
  EXPECT_EQ(net->state_dict().size(), 3u);  // the non-persistent buffer is left out
  net->load_state_dict(net->state_dict(), /*strict=*/true);
  net->eval();
  EXPECT_FALSE(net->is_training());
  net->train();
  net->to(Device(kCPU));
  net->to(kFloat64);
  EXPECT_EQ(net->w.dtype(), kFloat64);
  net->to(kFloat32);
  nn::Conv2d conv(nn::Conv2dOptions(3, 8, 3).padding(1));
  conv->to(MemoryFormat::ChannelsLast);
  EXPECT_TRUE(conv->weight.is_contiguous(MemoryFormat::ChannelsLast));
  net->zero_grad();
  net->requires_grad_(false);
  EXPECT_FALSE(net->w.requires_grad());
  int visited = 0;
  net->apply([&](nn::Module&) { ++visited; });
  EXPECT_EQ(visited, 2);
  std::ostringstream printed;
  printed << *net;
  EXPECT_NE(printed.str().find("Linear"), std::string::npos);
  int hooked = 0;
  nn::Linear hooked_lin(4, 2);
  nn::RemovableHandle pre =
      hooked_lin->register_forward_pre_hook([&](nn::Module&, const std::vector<Tensor>&) { ++hooked; });
  hooked_lin->register_forward_hook(
      [&](nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>&) -> std::optional<Tensor> {
        ++hooked;
        return std::nullopt;
      });
  hooked_lin(ones({3, 4}));
  pre.remove();
  EXPECT_EQ(hooked, 2);

  nn::Sequential seq(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 2));
  EXPECT_EQ(shape(seq(ones({3, 4}))), (Sizes{3, 2}));
  nn::ModuleList list(nn::Linear(2, 2), nn::ReLU());
  EXPECT_EQ(list->size(), 2u);
  nn::ModuleDict dict;
  dict->insert("fc", nn::Linear(2, 2));
  EXPECT_TRUE(dict->contains("fc"));
  EXPECT_EQ(shape(nn::Linear(4, 2)(ones({3, 4}))), (Sizes{3, 2}));
  EXPECT_EQ(shape(nn::Identity()(x)), (Sizes{3, 2}));
  Tensor img = randn({2, 3, 4, 4});
  EXPECT_EQ(shape(nn::Flatten()(img)), (Sizes{2, 48}));
  EXPECT_EQ(shape(nn::Upsample(nn::UpsampleOptions().scale_factor({2}))(img)), (Sizes{2, 3, 8, 8}));
  EXPECT_EQ(shape(std::get<0>(nn::LSTM(nn::LSTMOptions(4, 3).num_layers(2))(randn({5, 2, 4})))),
            (Sizes{5, 2, 3}));
  EXPECT_EQ(shape(std::get<1>(nn::GRU(4, 3)(randn({5, 2, 4})))), (Sizes{1, 2, 3}));
  EXPECT_EQ(shape(nn::Conv1d(2, 3, 3)(randn({1, 2, 5}))), (Sizes{1, 3, 3}));
  EXPECT_EQ(shape(nn::Conv3d(nn::Conv3dOptions(3, 4, {3, 7, 7}).stride({1, 2, 2}).padding({1, 3, 3}))(
                randn({1, 3, 4, 16, 16}))),
            (Sizes{1, 4, 4, 8, 8}));
  EXPECT_EQ(shape(conv(img)), (Sizes{2, 8, 4, 4}));
  EXPECT_EQ(shape(nn::ConvTranspose2d(3, 2, 2)(img)), (Sizes{2, 2, 5, 5}));
  EXPECT_EQ(shape(nn::BatchNorm1d(4)(randn({3, 4}))), (Sizes{3, 4}));
  EXPECT_EQ(shape(nn::BatchNorm3d(2)(randn({3, 2, 2, 2, 2}))), (Sizes{3, 2, 2, 2, 2}));
  EXPECT_EQ(shape(nn::BatchNorm2d(3)(img)), shape(img));
  Tensor seq_x = randn({2, 5, 4});
  EXPECT_EQ(shape(nn::LayerNorm(nn::LayerNormOptions({4}))(seq_x)), shape(seq_x));
  EXPECT_EQ(shape(nn::GroupNorm(3, 3)(img)), shape(img));
  EXPECT_EQ(shape(nn::RMSNorm(nn::RMSNormOptions({4}))(seq_x)), shape(seq_x));
  EXPECT_EQ(shape(nn::Embedding(10, 4)(tensor({1, 2, 3}))), (Sizes{3, 4}));
  EXPECT_FALSE(nn::Embedding::from_pretrained(ones({5, 2}), /*freeze=*/true)->weight.requires_grad());
  EXPECT_EQ(shape(nn::utils::rnn::pad_sequence({ones({3}), ones({1})}, /*batch_first=*/true)), (Sizes{2, 3}));
  EXPECT_EQ(shape(nn::Dropout(0.1)(seq_x)), shape(seq_x));
  EXPECT_EQ(shape(nn::ReLU()(x)), shape(x));
  EXPECT_EQ(shape(nn::GELU()(x)), shape(x));
  EXPECT_EQ(shape(nn::SiLU()(x)), shape(x));
  EXPECT_EQ(shape(nn::Tanh()(x)), shape(x));
  EXPECT_EQ(shape(nn::Sigmoid()(x)), shape(x));
  EXPECT_EQ(shape(nn::Softmax(1)(x)), shape(x));
  EXPECT_EQ(shape(nn::MaxPool2d(2)(img)), (Sizes{2, 3, 2, 2}));
  const Tensor volume = randn({1, 2, 4, 4, 4});
  EXPECT_EQ(shape(nn::MaxPool3d(2)(volume)), (Sizes{1, 2, 2, 2, 2}));
  EXPECT_EQ(shape(nn::AvgPool3d(2)(volume)), (Sizes{1, 2, 2, 2, 2}));
  EXPECT_EQ(shape(nn::AdaptiveAvgPool3d(nn::AdaptiveAvgPool3dOptions({1, 1, 1}))(volume)),
            (Sizes{1, 2, 1, 1, 1}));
  EXPECT_EQ(shape(nn::AvgPool2d(2)(img)), (Sizes{2, 3, 2, 2}));
  EXPECT_EQ(shape(nn::AdaptiveAvgPool2d(1)(img)), (Sizes{2, 3, 1, 1}));
  Tensor tokens = randn({5, 2, 8});  // [L, N, E]
  nn::MultiheadAttention mha(8, 2);
  EXPECT_EQ(shape(std::get<0>(mha(tokens, tokens, tokens))), shape(tokens));
  nn::TransformerEncoderLayer layer(nn::TransformerEncoderLayerOptions(8, 2).dim_feedforward(16));
  nn::TransformerEncoder encoder(layer, 2);
  Tensor causal = nn::generate_square_subsequent_mask(5);
  EXPECT_EQ(shape(encoder(tokens, causal)), shape(tokens));
  nn::TransformerDecoder decoder(nn::TransformerDecoderLayer(nn::TransformerDecoderLayerOptions(8, 2)), 1);
  EXPECT_EQ(shape(decoder(tokens.slice(0, 0, 3), tokens)), (Sizes{3, 2, 8}));
  nn::Transformer transformer(
      nn::TransformerOptions().d_model(8).nhead(2).num_encoder_layers(1).num_decoder_layers(1));
  EXPECT_EQ(
      shape(transformer(tokens, tokens.slice(0, 0, 3), Tensor(), nn::generate_square_subsequent_mask(3))),
      (Sizes{3, 2, 8}));
  Tensor logits = randn({3, 4}), target = tensor({0, 1, 3});
  EXPECT_EQ(nn::CrossEntropyLoss()(logits, target).dim(), 0);
  EXPECT_EQ(nn::NLLLoss()(logits.log_softmax(1), target).dim(), 0);
  EXPECT_EQ(nn::MSELoss()(logits, logits).item<float>(), 0.0f);
  EXPECT_EQ(nn::L1Loss()(logits, logits).item<float>(), 0.0f);
  EXPECT_EQ(nn::SmoothL1Loss()(logits, logits).item<float>(), 0.0f);
  EXPECT_EQ(nn::BCEWithLogitsLoss()(logits, ones_like(logits)).dim(), 0);
  EXPECT_EQ(nn::BCELoss()(logits.sigmoid(), ones_like(logits)).dim(), 0);
  nn::KLDivLoss kl_div(nn::KLDivLossOptions().reduction("batchmean"));
  EXPECT_NEAR(kl_div(logits.log_softmax(1), logits.softmax(1)).item<float>(), 0.0f, 1e-6);

  Tensor weight = empty({4, 3}), bias = empty({4});
  nn::init::xavier_uniform_(weight);
  nn::init::xavier_normal_(weight);
  nn::init::kaiming_uniform_(weight);
  nn::init::kaiming_normal_(weight);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("relu"), std::sqrt(2.0));
  nn::init::normal_(weight, 0, 0.02);
  nn::init::trunc_normal_(weight);
  nn::init::uniform_(weight);
  nn::init::zeros_(bias);
  nn::init::ones_(bias);
  nn::init::constant_(bias, 0.5);
  EXPECT_EQ(bias.sum().item<float>(), 2.0f);
  nn::Linear fc(2, 2);
  fc(x).sum().backward();
  EXPECT_EQ(nn::utils::clip_grad_norm_(fc->parameters(), 1.0).dim(), 0);
  nn::utils::clip_grad_value_(fc->parameters(), 0.1);
  EXPECT_LE(fc->bias.grad().abs().max().item<float>(), 0.1f);
}

TEST(PytorchNames, OptimAndLrScheduler) {
  nn::Linear model(2, 1);
  auto train_step = [&](optim::Optimizer& opt) {
    opt.zero_grad();
    model(ones({4, 2})).sum().backward();
    opt.step();
  };
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
  train_step(sgd);
  optim::Adam adam(model->parameters(), optim::AdamOptions(1e-3));
  train_step(adam);
  optim::AdamW adamw(model->parameters(), optim::AdamWOptions(1e-3).weight_decay(0.1).fused(false));
  train_step(adamw);
  EXPECT_TRUE(optim::AdamWOptions(1e-3).fused(true).fused().value());
  optim::AdamW grouped(
      {optim::OptimizerParamGroup({model->weight}),
       optim::OptimizerParamGroup({model->bias}, std::make_unique<optim::AdamWOptions>(1e-2))});
  grouped.param_groups()[0].options().set_lr(0.5);
  EXPECT_EQ(grouped.param_groups()[0].options().get_lr(), 0.5);
  grouped.add_param_group(optim::OptimizerParamGroup({zeros({1}).requires_grad_()}));
  train_step(grouped);
  grouped.load_state_dict(grouped.state_dict());
  EXPECT_EQ(grouped.state().at(model->weight.unsafe_impl()).buffers.size(), 2u);  // exp_avg, exp_avg_sq
  optim::RMSprop rmsprop(model->parameters(), optim::RMSpropOptions(1e-2).momentum(0.9).centered(true));
  rmsprop.step();
  optim::Adagrad adagrad(model->parameters(), optim::AdagradOptions(1e-2).lr_decay(0.1));
  adagrad.step();

  optim::StepLR step(sgd, 2);
  optim::MultiStepLR multi_step(sgd, {30, 60});
  optim::ExponentialLR exponential(sgd, 0.9);
  optim::CosineAnnealingLR cosine(sgd, 10);
  optim::LinearLR linear(sgd, 0.5, 1.0, 4);
  optim::LambdaLR lambda(sgd, [](int64_t epoch) { return 1.0 / static_cast<double>(epoch + 1); });
  optim::OneCycleLR one_cycle(sgd, {0.1}, 10);
  optim::ReduceLROnPlateau plateau(sgd, {.factor = 0.5, .patience = 2});
  plateau.step(1.0);
  optim::CosineAnnealingWarmRestarts restarts(sgd, 5, 2);
  optim::PolynomialLR polynomial(sgd, 10, 2.0);
  auto warmup = std::make_shared<optim::LinearLR>(adam, 0.1, 1.0, 2);
  auto decay = std::make_shared<optim::CosineAnnealingLR>(adam, 8);
  optim::SequentialLR sequential(adam, {warmup, decay}, {2});
  train_step(adam);
  sequential.step();
  EXPECT_EQ(sequential.get_last_lr().size(), 1u);
  sequential.load_state_dict(sequential.state_dict());

  nn::Linear ema_copy(2, 1);
  optim::swa_utils::AveragedModel ema(ema_copy, optim::swa_utils::get_ema_multi_avg_fn(0.999));
  ema.update_parameters(*model);
  optim::swa_utils::AveragedModel swa(nn::Linear(2, 1), optim::swa_utils::get_swa_multi_avg_fn());
  optim::swa_utils::SWALR swa_lr(sgd, {0.05}, 5, "cos");
  optim::swa_utils::update_bn(std::vector<Tensor>{randn({4, 2})}, ema_copy);
}

TEST(PytorchNames, Amp) {
  Tensor x = randn({2, 4}), w = randn({3, 4}, TensorOptions(kFloat32)).requires_grad_();
  {
    amp::AutocastGuard autocast(kCPU, kBFloat16);
    EXPECT_TRUE(amp::is_autocast_enabled(kCPU));
    EXPECT_EQ(amp::get_autocast_dtype(kCPU), kBFloat16);
    EXPECT_EQ(F::linear(x, w).dtype(), kBFloat16);
    {
      amp::AutocastGuard off(kCPU, std::nullopt, false);
      EXPECT_EQ(F::linear(x, w).dtype(), kFloat32);
    }
    amp::clear_autocast_cache();
    EXPECT_EQ(Float32Square::apply(x.to(kBFloat16)).dtype(), kFloat32);
  }
  EXPECT_FALSE(amp::is_autocast_enabled(kCPU));

  optim::SGD opt({w}, optim::SGDOptions(0.1));
  amp::GradScaler scaler;
  scaler.scale(F::linear(x, w).sum()).backward();
  scaler.unscale_(opt);
  scaler.step(opt);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  scaler.load_state_dict(scaler.state_dict());
}

TEST(PytorchNames, Autograd) {
  Tensor w = ones({3});
  EXPECT_FALSE(w.requires_grad());
  w.requires_grad_();
  Tensor y = w * 2;
  EXPECT_TRUE(w.is_leaf());
  EXPECT_NE(y.grad_fn(), nullptr);
  y.retain_grad();
  bool hooked = false, accumulated = false;
  y.register_hook([&](const Tensor& g) {
    hooked = true;
    return g;
  });
  w.register_post_accumulate_grad_hook([&](const Tensor&) { accumulated = true; });
  y.backward(ones({3}), /*retain_graph=*/false, /*create_graph=*/false);
  EXPECT_TRUE(hooked && accumulated);
  EXPECT_CLOSE(w.grad(), full({3}, 2.0));
  EXPECT_CLOSE(y.grad(), ones({3}));
  EXPECT_FALSE(y.detach().requires_grad());
  w.set_data(zeros({3}));
  EXPECT_EQ(w.sum().item<float>(), 0.0f);
  {
    NoGradGuard no_grad;
    EXPECT_FALSE((w * 2).requires_grad());
    EnableGradGuard grad;
    EXPECT_TRUE((w * 2).requires_grad());
  }
  {
    InferenceMode inference;
    EXPECT_FALSE((w * 2).requires_grad());
  }
  GradMode::set_enabled(false);
  EXPECT_FALSE(GradMode::is_enabled());
  GradMode::set_enabled(true);
  Tensor out = (w * w).sum();
  EXPECT_EQ(autograd::grad({out}, {w}).size(), 1u);
  autograd::backward({(w * 3).sum()});
  auto cube = [](const std::vector<Tensor>& in) { return in[0].pow(3).sum(); };
  Tensor x = tensor({0.5, 1.5}, kFloat64).requires_grad_();
  EXPECT_TRUE(autograd::gradcheck(cube, {x}));
  EXPECT_TRUE(autograd::gradgradcheck(cube, {x}));
  EXPECT_CLOSE(Square::apply(x), x * x);
  {
    autograd::DetectAnomalyGuard anomaly;
    EXPECT_TRUE(autograd::is_anomaly_enabled());
  }
  EXPECT_EQ(autograd::functional::jacobian(cube, {x})[0].sizes(), (IntArrayRef{2}));
  EXPECT_EQ(autograd::functional::hessian(cube, {x})[0][0].sizes(), (IntArrayRef{2, 2}));
  EXPECT_EQ(autograd::functional::vjp(cube, {x}, ones({}, kFloat64)).second.size(), 1u);
  EXPECT_EQ(autograd::functional::jvp(cube, {x}, {ones({2}, kFloat64)}).second.dim(), 0);
  EXPECT_EQ(autograd::functional::hvp(cube, {x}, {ones({2}, kFloat64)}).second[0].sizes(), (IntArrayRef{2}));
  EXPECT_EQ(autograd::functional::vhp(cube, {x}, {ones({2}, kFloat64)}).second[0].sizes(), (IntArrayRef{2}));
  EXPECT_CLOSE(func::grad([](const Tensor& t) { return t.pow(3).sum(); })(x.detach()), 3 * x.detach().pow(2));
  nn::Sequential seq(nn::Linear(2, 2), nn::ReLU(), nn::Linear(2, 2));
  Tensor input = ones({1, 2}).requires_grad_();
  autograd::checkpoint([&](const Tensor& t) { return seq(t); }, input).sum().backward();
  nn::checkpoint_sequential(seq, 2, input).sum().backward();
  EXPECT_TRUE(input.grad().defined());
  profiler::Profile prof({profiler::ProfilerActivity::CPU});
  {
    profiler::RecordFunction range("forward");
    seq(input);
  }
  prof.stop();
  EXPECT_NE(prof.key_averages().table().find("forward"), std::string::npos);
  const std::string path = temp_path("trace.json");
  prof.export_chrome_trace(path);
  std::remove(path.c_str());
}

// A map-style dataset, as a class with __getitem__ and __len__.
struct Squares : data::Dataset {
  int64_t size() const override { return 4; }
  data::Example get(int64_t i) const override { return {full({1}, static_cast<double>(i * i))}; }
};

// An iterable dataset, as a class with __iter__.
struct Countdown : data::IterableDataset {
  data::SampleGenerator iter() const override {
    return [i = 3]() mutable -> std::optional<data::Example> {
      if (i == 0) return std::nullopt;
      return data::Example{full({1}, static_cast<double>(i--))};
    };
  }
};

TEST(PytorchNames, UtilsData) {
  EXPECT_EQ(Squares().get(3)[0].item<float>(), 9.0f);
  auto dataset = std::make_shared<data::TensorDataset>(arange(8).view({4, 2}), arange(4));
  EXPECT_EQ(data::Subset(dataset, {0, 2}).size(), 2);
  EXPECT_EQ(data::ConcatDataset({dataset, dataset}).size(), 2 * dataset->size());
  data::DataLoader persistent(dataset, data::DataLoaderOptions().num_workers(1).persistent_workers(true));
  EXPECT_EQ(std::distance(persistent.begin(), persistent.end()), 4);
  int64_t streamed = 0;
  for (auto& batch : data::DataLoader(Countdown(), data::DataLoaderOptions().batch_size(2)))
    streamed += batch[0].size(0);
  EXPECT_EQ(streamed, 3);
  EXPECT_EQ(data::random_split(dataset, {3, 1}).size(), 2u);
  data::DataLoader loader(dataset, data::DataLoaderOptions()
                                       .batch_size(3)
                                       .shuffle(true)
                                       .drop_last(true)
                                       .num_workers(1)
                                       .prefetch_factor(2)
                                       .pin_memory(false)
                                       .collate_fn(data::default_collate)
                                       .worker_init_fn([](int64_t id) { EXPECT_EQ(id, 0); }));
  int64_t batches = 0;
  for (data::Example& batch : loader) {
    EXPECT_EQ(shape(batch[0]), (Sizes{3, 2}));
    ++batches;
  }
  EXPECT_EQ(batches, 1);
  EXPECT_FALSE(data::get_worker_info().has_value());
  data::DataLoader by_sampler(std::make_shared<Squares>(), data::DataLoaderOptions().batch_size(2),
                              std::make_shared<data::SequentialSampler>(4));
  EXPECT_EQ(by_sampler.size(), 2);
  EXPECT_EQ(data::SequentialSampler(3).indices(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(data::RandomSampler(5, 0).indices().size(), 5u);
  data::BatchSampler batch_sampler(std::make_shared<data::SequentialSampler>(5), 2, false);
  EXPECT_EQ(batch_sampler.batches().size(), 3u);
  data::DistributedSampler sampler(10, 2, 1);
  sampler.set_epoch(1);
  EXPECT_EQ(sampler.indices().size(), 5u);
  EXPECT_EQ(data::WeightedRandomSampler({0.1, 0.9}, 8).indices().size(), 8u);
}

TEST(PytorchNames, Distributed) {
  namespace d = distributed;
  EXPECT_FALSE(d::is_initialized());
  d::is_nccl_available();  // the answer depends on the build
  if (!d::is_gloo_available()) GTEST_SKIP() << "ember built without Gloo";
  d::InitOptions o;
  o.rank = 0;
  o.world_size = 1;
  o.store =
      std::make_shared<d::TCPStore>("127.0.0.1", 0, std::nullopt, true, std::chrono::milliseconds(5000));
  d::init_process_group("gloo", o);
  EXPECT_TRUE(d::is_initialized());
  EXPECT_EQ(d::get_rank(), 0);
  EXPECT_EQ(d::get_world_size(), 1);
  EXPECT_EQ(d::get_node_local_rank(0), 0);
  EXPECT_EQ(d::get_backend(), "gloo");
  EXPECT_NE(d::new_group({0}), nullptr);
  d::barrier();
  Tensor t = ones({4});
  d::all_reduce(t, d::ReduceOp::AVG);
  d::broadcast(t, 0);
  d::reduce(t, 0);
  std::vector<Tensor> gathered = {zeros({4})};
  d::all_gather(gathered, t);
  Tensor out = zeros({4});
  d::all_gather_into_tensor(out, t);
  d::reduce_scatter_tensor(out, t);
  d::all_to_all_single(out, t);
  EXPECT_CLOSE(out, t);
  std::vector<std::string> objects;
  d::all_gather_object(objects, "rank 0");
  d::broadcast_object_list(objects, 0);
  EXPECT_EQ(objects, std::vector<std::string>{"rank 0"});
  // A group of one has no peer: the calls are there, and refuse to talk to themselves.
  EXPECT_EMBER_ERROR(d::send(t, 0), "cannot send to itself");
  EXPECT_EMBER_ERROR(d::recv(t, 0), "cannot receive from itself");
  EXPECT_EMBER_ERROR(d::isend(t, 0), "cannot send to itself");
  EXPECT_EMBER_ERROR(d::irecv(t, 0), "cannot receive from itself");
  auto work = d::all_reduce(t, d::ReduceOp::SUM, nullptr, true);
  work->wait();

  nn::Linear model(2, 2);
  d::DistributedDataParallel ddp(model);
  ddp->register_comm_hook(d::default_hooks::allreduce_hook);
  {
    auto no_sync = ddp->no_sync();
    ddp(ones({3, 2})).sum().backward();
  }
  ddp(ones({3, 2})).sum().backward();
  EXPECT_TRUE(model->weight.grad().defined());
  nn::SyncBatchNorm sync_bn(nn::BatchNormOptions(3));
  EXPECT_EQ(shape(sync_bn(randn({2, 3, 4}))), (Sizes{2, 3, 4}));
  nn::Sequential with_bn(nn::Linear(2, 3), nn::BatchNorm1d(3));
  EXPECT_EQ(nn::convert_sync_batchnorm(*with_bn), 1);
  d::ZeroRedundancyOptimizer zero(model->parameters(),
                                  d::optimizer_factory<optim::AdamW>(optim::AdamWOptions(1e-3)));
  zero.step();
  d::DeviceMesh mesh = d::init_device_mesh("cpu", {1}, {"dp"});
  EXPECT_NE(mesh.get_group("dp"), nullptr);
  d::ColumnParallelLinear column(d::ColumnParallelLinearOptions(2, 4));
  d::RowParallelLinear row(d::RowParallelLinearOptions(4, 2));
  EXPECT_EQ(shape(row(column(ones({3, 2})))), (Sizes{3, 2}));
  d::PipelineStage stage([&](const Tensor& x) { return row(column(x)); });
  auto mse = [](const Tensor& out, const Tensor& y) { return mse_loss(out, y); };
  d::ScheduleGPipe gpipe(stage, 2, mse);
  d::Schedule1F1B one_f_one_b(stage, 2, mse);
  EXPECT_EQ(shape(one_f_one_b.step(ones({4, 2}), zeros({4, 2}))), (Sizes{4, 2}));
  d::destroy_process_group();
}

TEST(PytorchNames, Cuda) {
  EXPECT_EQ(cuda::is_available(), cuda::device_count() > 0);
  on_gpu([] { cuda::set_device(cuda::current_device()); });
  on_gpu([] { cuda::DeviceGuard guard(0); });
  on_gpu([] { EXPECT_FALSE(cuda::get_device_name().empty()); });
  on_gpu([] { EXPECT_GT(cuda::get_device_properties().total_memory, 0u); });
  on_gpu([] { EXPECT_GT(cuda::get_device_capability().first, 0); });
  EXPECT_EQ(cuda::is_bf16_supported(), cuda::is_available() && cuda::get_device_capability().first >= 8);
  EXPECT_EQ(cuda::get_arch_list().empty(), !cuda::runtime_version().available());
  on_gpu([] { cuda::synchronize(); });
  on_gpu([] { EXPECT_GT(cuda::mem_get_info().second, 0u); });
  on_gpu([] { EXPECT_LE(cuda::memory_allocated(), cuda::max_memory_allocated()); });
  on_gpu([] { EXPECT_LE(cuda::memory_reserved(), cuda::max_memory_reserved()); });
  on_gpu([] { EXPECT_FALSE(cuda::memory_stats().empty()); });
  on_gpu([] { EXPECT_FALSE(cuda::memory_summary().empty()); });
  on_gpu([] { cuda::reset_peak_memory_stats(); });
  cuda::empty_cache();
  on_gpu([] { cuda::set_per_process_memory_fraction(1); });
  cuda::set_allocator_settings("");  // no device needed: the settings are checked, then given to each one
  cuda::record_memory_history(false);
  on_gpu([] { EXPECT_FALSE(cuda::memory_snapshot().empty()); });
  manual_seed_then_restore(2);
  // PyTorch's defaults: TF32 for cuDNN's float32 convolutions, not for float32 matmuls.
  EXPECT_FALSE(cuda::matmul::allow_tf32());
  EXPECT_TRUE(cuda::cudnn::allow_tf32());
  cuda::matmul::set_allow_tf32(cuda::matmul::allow_tf32());
  EXPECT_FALSE(cuda::tunable::is_enabled());
  cuda::tunable::enable(false);
  set_float32_matmul_precision("high");
  EXPECT_TRUE(cuda::matmul::allow_tf32());
  EXPECT_EQ(get_float32_matmul_precision(), "high");
  set_float32_matmul_precision("highest");
  EXPECT_FALSE(cuda::matmul::allow_tf32());
  EXPECT_EMBER_ERROR(set_float32_matmul_precision("fast"), "set_float32_matmul_precision", "fast");
  cuda::cudnn::set_allow_tf32(cuda::cudnn::allow_tf32());
  cuda::cudnn::set_benchmark(cuda::cudnn::benchmark());
  cuda::cudnn::set_deterministic(cuda::cudnn::deterministic());
  cuda::enable_flash_sdp(cuda::flash_sdp_enabled());
  cuda::enable_cudnn_sdp(cuda::cudnn_sdp_enabled());
  cuda::nvtx::range_push("step");
  cuda::nvtx::range_pop();
  {
    cuda::nvtx::EmitNvtx emit;
    EXPECT_TRUE(cuda::nvtx::emit_nvtx_enabled());
  }
  const cuda::SyncDebugMode mode = cuda::get_sync_debug_mode();
  cuda::set_sync_debug_mode(cuda::SyncDebugMode::Warn);
  cuda::set_sync_debug_mode(mode);
  EXPECT_FALSE(cuda::runtime_version().str().empty());
  EXPECT_FALSE(cuda::cudnn_version().str().empty());
  EXPECT_FALSE(cuda::is_current_stream_capturing());
  on_gpu([] {
    Tensor x = ones({4}, TensorOptions(kCUDA)), y;
    cuda::CUDAGraph g;
    {
      cuda::graph capture(g, cuda::graph_pool_handle());
      y = x * 2;
    }
    g.replay();
    EXPECT_TRUE(y.cpu().equal(full({4}, 2.0f)));
  });
  on_gpu([] {
    Tensor w = ones({4}, TensorOptions(kCUDA)).requires_grad_();
    cuda::TensorFn f = cuda::make_graphed_callables(
        [w](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * w}; },
        {ones({4}, TensorOptions(kCUDA))}, {w}, /*warmup=*/1);
    f({full({4}, 3.0f, TensorOptions(kCUDA))})[0].sum().backward();
    EXPECT_TRUE(w.grad().cpu().equal(full({4}, 3.0f)));
  });
#ifdef EMBER_WITH_CUDA
  on_gpu([] {
    cuda::Stream side = cuda::get_stream_from_pool();
    cuda::Event done(/*enable_timing=*/true);
    Tensor t = ones({4}, TensorOptions(kCUDA));
    {
      cuda::StreamGuard guard(side);
      EXPECT_EQ(cuda::current_stream(), side);
      t.add_(1);
      cuda::record_stream(t, side);
      done.record();
    }
    done.synchronize();
  });
#endif
}

// The table's present rows: those starting "| `" whose second cell is not "missing".
int64_t present_rows(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const size_t begin = line.find('|', 1) + 1;
    std::string cell = line.substr(begin, line.find('|', begin) - begin);
    cell.erase(0, cell.find_first_not_of(' '));
    cell.erase(cell.find_last_not_of(' ') + 1);
    n += cell != "missing";
  }
  return n;
}

TEST(PytorchNames, TableMatchesThisFile) {
  EXPECT_EQ(present_rows(std::string(EMBER_SOURCE_DIR) + "/docs/pytorch_names.md"), kPresentRows)
      << "docs/pytorch_names.md and tests/core/test_pytorch_names.cpp disagree: add or remove the call";
}

}  // namespace
}  // namespace ember::testing
