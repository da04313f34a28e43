// Issue 25, item 7, the GPU half of the bad-input table (tests/core/test_bad_input_table.cpp has the
// CPU one): tensors of one call on different devices, and CUDA-only misuse. Every case must throw
// ember::Error labelled with one of its names ("op: ..."; `|` separates names a message may use:
// the frontend's, or the kernel's when the dispatcher's device check catches it). A case that
// crashed would take the process with it, or leave the CUDA context unusable: the last check is
// that the GPU still computes. Cases where PyTorch mixes devices on purpose (a 0-dim CPU tensor as a
// scalar, a copy between devices) are not errors and are checked to work. Running out of memory has
// its own tests (test_allocator.cpp): its message is PyTorch's, with no op label.
#include <ember/cuda/caching_allocator.h>
#include <ember/cuda/stream.h>

#include <functional>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "ember/ember.h"

namespace ember::testing {
namespace {

using namespace nn;
namespace F = nn::functional;

Tensor g(IntArrayRef sizes, ScalarType dt = kFloat32) {
  return zeros(sizes, TensorOptions(dt).device(kCUDA));
}
Tensor c(IntArrayRef sizes, ScalarType dt = kFloat32) { return zeros(sizes, dt); }
Tensor gi(IntArrayRef sizes) { return g(sizes, kInt64); }
Tensor ci(IntArrayRef sizes) { return c(sizes, kInt64); }

struct BadInput {
  const char* ops;  // "op" or "op|kernel": the message must contain one of them followed by ':'
  std::function<void()> call;
};

const std::vector<BadInput>& bad_inputs() {
  static const std::vector<BadInput> cases = {
      // --- Elementwise: a CPU tensor that is not 0-dim ---
      {"add",
       [] {
         add(g({2, 3}), c({2, 3}));
       }},
      {"add",
       [] {
         add(c({2, 3}), g({2, 3}));
       }},
      {"sub",
       [] {
         sub(g({2, 3}), c({3}));
       }},
      {"mul",
       [] {
         mul(g({2, 3}), c({2, 3}));
       }},
      {"div",
       [] {
         div(g({2, 3}), c({2, 3}));
       }},
      {"pow",
       [] {
         pow(g({2, 3}), c({2, 3}));
       }},
      {"maximum",
       [] {
         maximum(g({2, 3}), c({2, 3}));
       }},
      {"minimum",
       [] {
         minimum(c({2, 3}), g({2, 3}));
       }},
      {"eq",
       [] {
         eq(g({2, 3}), c({2, 3}));
       }},
      {"lt",
       [] {
         lt(g({2, 3}), c({2, 3}));
       }},
      {"add_",
       [] {
         g({2, 3}).add_(c({2, 3}));
       }},
      {"mul_",
       [] {
         g({2, 3}).mul_(c({3}));
       }},
      {"add_",
       [] {
         c({2, 3}).add_(g({2, 3}));
       }},
      {"where",
       [] {
         where(c({2, 3}, kBool), g({2, 3}), g({2, 3}));
       }},
      {"where",
       [] {
         where(g({2, 3}, kBool), c({2, 3}), g({2, 3}));
       }},
      {"where",
       [] {
         where(g({2, 3}, kBool), g({2, 3}), c({2, 3}));
       }},
      {"masked_fill",
       [] {
         g({2, 3}).masked_fill(c({2, 3}, kBool), 1.0);
       }},
      {"lerp|sub|binary",
       [] {
         lerp(g({2, 3}), c({2, 3}), 0.5);
       }},
      {"addcmul|mul|binary",
       [] {
         addcmul(g({2, 3}), c({2, 3}), g({2, 3}));
       }},
      {"addcdiv|div|binary",
       [] {
         addcdiv(g({2, 3}), g({2, 3}), c({2, 3}));
       }},

      // --- Matrix products ---
      {"matmul|mm",
       [] {
         matmul(g({2, 3}), c({3, 4}));
       }},
      {"matmul|mm",
       [] {
         matmul(c({2, 3}), g({3, 4}));
       }},
      {"matmul|bmm",
       [] {
         matmul(g({5, 2, 3}), c({5, 3, 4}));
       }},
      {"mm",
       [] {
         mm(g({2, 3}), c({3, 4}));
       }},
      {"bmm",
       [] {
         bmm(g({5, 2, 3}), c({5, 3, 4}));
       }},
      {"addmm",
       [] {
         addmm(c({4}), g({2, 3}), g({3, 4}));
       }},
      {"linear",
       [] {
         F::linear(g({2, 3}), c({4, 3}));
       }},
      {"linear",
       [] {
         F::linear(g({2, 3}), g({4, 3}), c({4}));
       }},
      {"linear",
       [] {
         F::linear(c({2, 3}), g({4, 3}), g({4}));
       }},
      {"einsum|bmm|mm",
       [] {
         einsum("ij,jk->ik", {g({2, 3}), c({3, 4})});
       }},
      {"outer|mul", [] { outer(g({3}), c({4})); }},

      // --- Shape ops with several inputs ---
      {"cat",
       [] {
         cat({g({2, 3}), c({2, 3})});
       }},
      {"cat",
       [] {
         cat({c({2, 3}), g({2, 3})}, 1);
       }},
      {"stack|cat",
       [] {
         stack({g({2, 3}), c({2, 3})});
       }},

      // --- Indexing: index and source on another device ---
      {"index_select",
       [] {
         index_select(g({4, 3}), 0, ci({2}));
       }},
      {"index_select",
       [] {
         index_select(c({4, 3}), 0, gi({2}));
       }},
      {"gather",
       [] {
         gather(g({4, 3}), 1, ci({4, 1}));
       }},
      {"gather",
       [] {
         gather(c({4, 3}), 1, gi({4, 1}));
       }},
      {"scatter",
       [] {
         scatter(g({4, 3}), 1, ci({4, 1}), g({4, 1}));
       }},
      {"scatter",
       [] {
         scatter(g({4, 3}), 1, gi({4, 1}), c({4, 1}));
       }},
      {"scatter",
       [] {
         scatter(g({4, 3}), 1, ci({4, 1}), 2.0);
       }},
      {"scatter_add",
       [] {
         scatter_add(g({4, 3}), 0, gi({1, 3}), c({1, 3}));
       }},
      {"scatter_add",
       [] {
         scatter_add(g({4, 3}), 0, ci({1, 3}), g({1, 3}));
       }},
      {"index_add",
       [] {
         index_add(g({4, 3}), 0, ci({1}), g({1, 3}));
       }},
      {"index_add",
       [] {
         index_add(g({4, 3}), 0, gi({1}), c({1, 3}));
       }},
      {"take_along_dim|gather",
       [] {
         take_along_dim(g({4, 3}), ci({4, 1}), 1);
       }},
      {"embedding",
       [] {
         embedding(g({10, 4}), ci({3}));
       }},
      {"embedding",
       [] {
         embedding(c({10, 4}), gi({3}));
       }},

      // --- Normalization ---
      {"layer_norm",
       [] {
         layer_norm(g({2, 4}), {4}, c({4}), g({4}));
       }},
      {"layer_norm",
       [] {
         layer_norm(g({2, 4}), {4}, g({4}), c({4}));
       }},
      {"layer_norm",
       [] {
         layer_norm(c({2, 4}), {4}, g({4}), g({4}));
       }},
      {"batch_norm",
       [] {
         batch_norm(g({2, 3, 4}), c({3}), c({3}), {}, {}, true);
       }},
      {"batch_norm",
       [] {
         batch_norm(g({2, 3, 4}), g({3}), g({3}), c({3}), g({3}), false);
       }},
      {"batch_norm",
       [] {
         batch_norm(c({2, 3, 4}), g({3}), g({3}), {}, {}, false);
       }},
      {"group_norm|batch_norm|layer_norm",
       [] {
         F::group_norm(g({2, 4, 3}), 2, c({4}), g({4}));
       }},
      {"dropout_add_layer_norm",
       [] {
         dropout_add_layer_norm(g({2, 4}), c({2, 4}), g({4}), g({4}), 0.1);
       }},
      {"dropout_add_layer_norm",
       [] {
         dropout_add_layer_norm(g({2, 4}), g({2, 4}), c({4}), g({4}), 0.1);
       }},

      // --- Losses: targets and weights on the CPU ---
      {"cross_entropy",
       [] {
         cross_entropy(g({4, 5}), ci({4}));
       }},
      {"cross_entropy",
       [] {
         cross_entropy(g({4, 5}), gi({4}), c({5}));
       }},
      {"cross_entropy",
       [] {
         cross_entropy(g({4, 5}), c({4, 5}));
       }},
      {"cross_entropy",
       [] {
         cross_entropy(c({4, 5}), gi({4}));
       }},
      {"nll_loss",
       [] {
         nll_loss(g({4, 5}), ci({4}));
       }},
      {"nll_loss",
       [] {
         nll_loss(g({4, 5}), gi({4}), c({5}));
       }},
      {"mse_loss|sub", [] { mse_loss(g({4}), c({4})); }},
      {"l1_loss|sub", [] { F::l1_loss(g({4}), c({4})); }},
      {"smooth_l1_loss|sub", [] { F::smooth_l1_loss(g({4}), c({4})); }},
      {"binary_cross_entropy_with_logits", [] { binary_cross_entropy_with_logits(g({4}), c({4})); }},
      {"binary_cross_entropy_with_logits", [] { binary_cross_entropy_with_logits(g({4}), g({4}), c({4})); }},
      {"binary_cross_entropy|log|mul", [] { F::binary_cross_entropy(g({4}), c({4})); }},
      {"kl_div|sub|mul", [] { F::kl_div(g({4}), c({4})); }},

      // --- Convolution and attention ---
      {"conv2d|convolution",
       [] {
         conv2d(g({1, 3, 5, 5}), c({4, 3, 3, 3}));
       }},
      {"conv2d|convolution",
       [] {
         conv2d(g({1, 3, 5, 5}), g({4, 3, 3, 3}), c({4}));
       }},
      {"conv2d|convolution",
       [] {
         conv2d(c({1, 3, 5, 5}), g({4, 3, 3, 3}));
       }},
      {"conv1d|convolution",
       [] {
         conv1d(g({1, 3, 5}), c({4, 3, 3}));
       }},
      {"conv_transpose2d|convolution",
       [] {
         conv_transpose2d(g({1, 3, 5, 5}), c({3, 4, 3, 3}));
       }},
      {"scaled_dot_product_attention",
       [] {
         scaled_dot_product_attention(g({1, 2, 4, 8}), c({1, 2, 4, 8}), g({1, 2, 4, 8}));
       }},
      {"scaled_dot_product_attention",
       [] {
         scaled_dot_product_attention(g({1, 2, 4, 8}), g({1, 2, 4, 8}), c({1, 2, 4, 8}));
       }},
      {"scaled_dot_product_attention",
       [] {
         scaled_dot_product_attention(g({1, 2, 4, 8}), g({1, 2, 4, 8}), g({1, 2, 4, 8}), c({4, 4}, kBool));
       }},

      // --- Modules on the GPU given CPU input, and the other way ---
      {"Linear",
       [] {
         Linear m(3, 4);
         m->to(kCUDA);
         m(c({2, 3}));
       }},
      {"Linear",
       [] {
         Linear m(3, 4);
         m(g({2, 3}));
       }},
      {"Conv2d",
       [] {
         Conv2d m(3, 4, 3);
         m->to(kCUDA);
         m(c({1, 3, 5, 5}));
       }},
      {"BatchNorm2d",
       [] {
         BatchNorm2d m(3);
         m->to(kCUDA);
         m(c({2, 3, 4, 4}));
       }},
      {"LayerNorm",
       [] {
         LayerNorm m(LayerNormOptions({4}));
         m->to(kCUDA);
         m(c({2, 4}));
       }},
      {"Embedding",
       [] {
         Embedding m(10, 4);
         m->to(kCUDA);
         m(ci({3}));
       }},

      // --- Optimizer steps: a gradient on another device than its parameter ---
      {"fused_adam_",
       [] {
         Tensor p = g({4});
         fused_adam_({p}, {c({4})}, {g({4})}, {g({4})}, {}, {g({1})}, FusedAdamArgs{});
       }},
      {"fused_adam_",
       [] {
         Tensor p = g({4});
         fused_adam_({p}, {g({4})}, {g({4})}, {g({4})}, {}, {g({1})}, FusedAdamArgs{}, {}, {},
                     c({}, kFloat64));
       }},
      {"fused_sgd_",
       [] {
         Tensor p = g({4});
         fused_sgd_({p}, {c({4})}, {}, FusedSgdArgs{});
       }},
      {"_foreach_copy_|copy_",
       [] {
         _foreach_copy_({g({4}), g({2})}, {c({4}), g({3})});
       }},

      // --- CUDA misuse ---
      {"record_stream", [] { cuda::record_stream(c({4}), cuda::current_stream()); }},
      {"set_per_process_memory_fraction", [] { cuda::set_per_process_memory_fraction(-0.5); }},
  };
  return cases;
}

class BadInputCuda : public CudaTest {};

TEST_F(BadInputCuda, EveryCaseIsAnEmberErrorNamingItsOp) {
  int passed = 0;
  for (size_t i = 0; i < bad_inputs().size(); ++i) {
    std::string what =
        unlabelled_error(bad_inputs()[i].call, bad_inputs()[i].ops, [] { cuda::synchronize(); });
    if (what.empty())
      ++passed;
    else
      ADD_FAILURE() << "case " << i << " (" << bad_inputs()[i].ops << "): " << what;
  }
  std::cout << "[ BadInput ] " << passed << " of " << bad_inputs().size()
            << " CUDA cases throw ember::Error naming the op\n";
  // The context is still usable: no case left a sticky error behind.
  Tensor x = arange(6, TensorOptions(kFloat32).device(kCUDA));
  EXPECT_EQ((x * 2).sum().item<float>(), 30.0f);
}

// What PyTorch mixes on purpose still works: a 0-dim CPU tensor is a scalar to CUDA kernels, and
// copies go between devices.
TEST_F(BadInputCuda, ZeroDimCpuTensorsAndCopiesMixDevices) {
  Tensor x = arange(6, TensorOptions(kFloat32).device(kCUDA)).view({2, 3});
  Tensor two = full({}, 2.0);
  EXPECT_TRUE((x * two).cpu().equal(x.cpu() * 2));
  EXPECT_TRUE(where(x > 2, x, two).cpu().equal(where(x.cpu() > 2, x.cpu(), two)));
  Tensor y = empty({2, 3});
  y.copy_(x);
  EXPECT_TRUE(y.equal(x.cpu()));
  Tensor z = empty({2, 3}, TensorOptions().device(kCUDA));
  z.copy_(y);
  EXPECT_TRUE(z.cpu().equal(y));
}

}  // namespace
}  // namespace ember::testing
