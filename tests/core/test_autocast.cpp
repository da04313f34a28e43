// Autocast: the output dtype of every op with a policy, driven by the op registry (an op with a
// policy and no sample here fails AutocastPolicies.EveryOpHasASample), nesting, the weight-cast
// cache, gradients through casts, and the errors.
#include <functional>
#include <map>
#include <string>

#include "ember/autograd/engine.h"
#include "ember/core/autocast_mode.h"
#include "ember/core/factories.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/attention.h"
#include "ember/core/ops/convolution.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/ops/indexing.h"
#include "ember/core/ops/linalg.h"
#include "ember/core/ops/loss.h"
#include "ember/core/ops/normalization.h"
#include "ember/core/ops/reduce.h"
#include "ember/core/ops/scan.h"
#include "ember/core/ops/shape_ops.h"
#include "ember/core/ops/softmax.h"
#include "ember/core/profiler.h"
#include "test_util.h"

namespace ember::testing {
namespace {

// A call of the op whose floating inputs are `first` (the first tensor) and `rest` (the others).
using PolicySample = std::function<Tensor(ScalarType first, ScalarType rest)>;

Tensor r(IntArrayRef sizes, ScalarType dt) { return random_tensor(sizes, dt, 0.5, 1.5); }

const std::map<std::string, PolicySample>& samples() {
  static const std::map<std::string, PolicySample> m = {
      // LowerPrecision
      {"matmul",
       [](auto a, auto b) {
         return matmul(r({2, 3}, a), r({3, 4}, b));
       }},
      {"mm",
       [](auto a, auto b) {
         return mm(r({2, 3}, a), r({3, 4}, b));
       }},
      {"bmm",
       [](auto a, auto b) {
         return bmm(r({2, 2, 3}, a), r({2, 3, 4}, b));
       }},
      {"addmm",
       [](auto a, auto b) {
         return addmm(r({4}, a), r({2, 3}, b), r({3, 4}, b));
       }},
      {"baddbmm",
       [](auto a, auto b) {
         return baddbmm(r({2, 2, 4}, a), r({2, 2, 3}, b), r({2, 3, 4}, b));
       }},
      {"conv1d",
       [](auto a, auto b) {
         return conv1d(r({1, 2, 5}, a), r({3, 2, 2}, b), r({3}, b));
       }},
      {"conv2d",
       [](auto a, auto b) {
         return conv2d(r({1, 2, 4, 4}, a), r({3, 2, 2, 2}, b), r({3}, b));
       }},
      {"conv3d",
       [](auto a, auto b) {
         return conv3d(r({1, 2, 3, 4, 4}, a), r({3, 2, 2, 2, 2}, b), r({3}, b));
       }},
      {"conv_transpose2d",
       [](auto a, auto b) {
         return conv_transpose2d(r({1, 2, 3, 3}, a), r({2, 3, 2, 2}, b), r({3}, b));
       }},
      {"scaled_dot_product_attention",
       [](auto a, auto b) {
         return scaled_dot_product_attention(r({1, 2, 3, 4}, a), r({1, 2, 3, 4}, b), r({1, 2, 3, 4}, b));
       }},
      {"einsum",
       [](auto a, auto b) {
         return einsum("ij,jk->ik", {r({2, 3}, a), r({3, 4}, b)});
       }},
      // Float32
      {"pow", [](auto a, auto b) { return pow(r({3}, a), r({3}, b)); }},
      {"exp", [](auto a, auto) { return exp(r({3}, a)); }},
      {"log", [](auto a, auto) { return log(r({3}, a)); }},
      {"log1p", [](auto a, auto) { return log1p(r({3}, a)); }},
      {"expm1", [](auto a, auto) { return expm1(r({3}, a)); }},
      {"rsqrt", [](auto a, auto) { return rsqrt(r({3}, a)); }},
      {"softplus", [](auto a, auto) { return softplus(r({3}, a)); }},
      {"reciprocal", [](auto a, auto) { return reciprocal(r({3}, a)); }},
      {"sum",
       [](auto a, auto) {
         return sum(r({2, 3}, a));
       }},
      {"mean",
       [](auto a, auto) {
         return mean(r({2, 3}, a));
       }},
      {"prod",
       [](auto a, auto) {
         return prod(r({2, 3}, a));
       }},
      {"var",
       [](auto a, auto) {
         return var(r({2, 3}, a));
       }},
      {"std",
       [](auto a, auto) {
         return ember::std(r({2, 3}, a));
       }},
      {"norm",
       [](auto a, auto) {
         return norm(r({2, 3}, a));
       }},
      {"logsumexp",
       [](auto a, auto) {
         return logsumexp(r({2, 3}, a), {1});
       }},
      {"cumsum",
       [](auto a, auto) {
         return cumsum(r({2, 3}, a), 1);
       }},
      {"softmax",
       [](auto a, auto) {
         return softmax(r({2, 3}, a), 1);
       }},
      {"log_softmax",
       [](auto a, auto) {
         return log_softmax(r({2, 3}, a), 1);
       }},
      {"layer_norm",
       [](auto a, auto b) {
         return layer_norm(r({2, 3}, a), {3}, r({3}, b), r({3}, b));
       }},
      {"group_norm",
       [](auto a, auto b) {
         return group_norm(r({2, 4, 3}, a), 2, r({4}, b), r({4}, b));
       }},
      {"cross_entropy",
       [](auto a, auto) {
         return cross_entropy(r({2, 3}, a), tensor({0, 2}, kInt64));
       }},
      {"nll_loss",
       [](auto a, auto) {
         return nll_loss(r({2, 3}, a), tensor({0, 2}, kInt64));
       }},
      {"mse_loss",
       [](auto a, auto b) {
         return mse_loss(r({2, 3}, a), r({2, 3}, b));
       }},
      {"binary_cross_entropy_with_logits",
       [](auto a, auto b) {
         return binary_cross_entropy_with_logits(r({2, 3}, a), r({2, 3}, b));
       }},
      // Promote
      {"dot", [](auto a, auto b) { return dot(r({3}, a), r({3}, b)); }},
      {"cat",
       [](auto a, auto b) {
         return cat({r({2}, a), r({3}, b)}, 0);
       }},
      {"stack",
       [](auto a, auto b) {
         return stack({r({2}, a), r({2}, b)}, 0);
       }},
      {"scatter_add",
       [](auto a, auto b) {
         return scatter_add(r({3}, a), 0, tensor({0, 2}, kInt64), r({2}, b));
       }},
      {"index_add",
       [](auto a, auto b) {
         return index_add(r({3}, a), 0, tensor({0, 2}, kInt64), r({2}, b));
       }},
      {"addcmul", [](auto a, auto b) { return addcmul(r({3}, a), r({3}, b), r({3}, b)); }},
      {"addcdiv", [](auto a, auto b) { return addcdiv(r({3}, a), r({3}, b), r({3}, a) + 3); }},
  };
  return m;
}

TEST(AutocastPolicies, EveryOpHasASample) {
  for (const OpSchema& op : registered_ops())
    if (op.autocast != AutocastPolicy::None) {
      EXPECT_TRUE(samples().count(std::string(op.name)))
          << op.name << " has an autocast policy but no sample";
    }
  for (const auto& [name, sample] : samples()) {
    const OpSchema* op = find_op(name);
    ASSERT_NE(op, nullptr) << name;
    EXPECT_NE(op->autocast, AutocastPolicy::None) << name;
  }
}

// Each category's output dtype inside a CPU region of `lower`, and the op's native dtype outside.
void check_policies(ScalarType lower) {
  for (const auto& [name, sample] : samples()) {
    SCOPED_TRACE(name);
    const OpSchema* op = find_op(name);
    ASSERT_NE(op, nullptr);
    // Lower: float32 inputs run in `lower`. Float32: `lower` inputs run in float32.
    // Promote: mixed `lower`/float32 inputs run in float32, all-`lower` inputs stay.
    switch (op->autocast) {
      case AutocastPolicy::LowerPrecision: {
        EXPECT_EQ(sample(kFloat32, kFloat32).dtype(), kFloat32);
        amp::AutocastGuard guard(kCPU, lower);
        EXPECT_EQ(sample(kFloat32, kFloat32).dtype(), lower);
        EXPECT_EQ(sample(kFloat64, kFloat64).dtype(), kFloat64);  // float64 is never cast
        break;
      }
      case AutocastPolicy::Float32: {
        EXPECT_EQ(sample(lower, lower).dtype(), lower);
        amp::AutocastGuard guard(kCPU, lower);
        EXPECT_EQ(sample(lower, lower).dtype(), kFloat32);
        break;
      }
      case AutocastPolicy::Promote: {
        amp::AutocastGuard guard(kCPU, lower);
        EXPECT_EQ(sample(lower, kFloat32).dtype(), kFloat32);
        EXPECT_EQ(sample(kFloat32, lower).dtype(), kFloat32);
        EXPECT_EQ(sample(lower, lower).dtype(), lower);
        break;
      }
      case AutocastPolicy::None:
        ADD_FAILURE() << "sample of an op without a policy";
    }
  }
}

TEST(Autocast, PoliciesBFloat16) { check_policies(kBFloat16); }
TEST(Autocast, PoliciesFloat16) { check_policies(kFloat16); }

TEST(Autocast, ValuesMatchTheCastInputs) {
  Tensor a = r({2, 3}, kFloat32), b = r({3, 4}, kFloat32);
  Tensor expected = mm(a.to(kBFloat16), b.to(kBFloat16));
  amp::AutocastGuard guard(kCPU);
  EXPECT_CLOSE(mm(a, b), expected, Tolerance{0, 0});
}

TEST(Autocast, MixedBinaryOpsPromoteByTypePromotion) {
  amp::AutocastGuard guard(kCPU, kBFloat16);
  Tensor h = r({3}, kBFloat16), f = r({3}, kFloat32);
  EXPECT_EQ((h + f).dtype(), kFloat32);
  EXPECT_EQ((h * f).dtype(), kFloat32);
  EXPECT_EQ(where(h > 1, h, f).dtype(), kFloat32);
  EXPECT_EQ((h * full({}, 2.0, kFloat32)).dtype(), kBFloat16);  // a 0-dim operand does not widen
  EXPECT_EQ(relu(f).dtype(), kFloat32);                         // no policy: untouched
}

// Class-target cross_entropy reads reduced-precision logits itself (its kernels compute in
// float32): the float32 loss and the bf16 gradient of PyTorch's cast-then-compute, with no
// copy of the logits or of their gradient.
TEST(Autocast, CrossEntropyReadsReducedLogitsWithoutACopy) {
  Tensor logits = (r({6, 5}, kFloat32) * 4).to(kBFloat16).requires_grad_();
  Tensor target = tensor({0, 4, 2, 2, 1, 3}, kInt64), weight = tensor({1.0f, 2.0f, 0.5f, 1.0f, 3.0f});
  Tensor reference = logits.detach().to(kFloat32).requires_grad_();
  for (double smoothing : {0.0, 0.1}) {
    SCOPED_TRACE(smoothing);
    logits.set_grad(Tensor());
    reference.set_grad(Tensor());
    Tensor loss;
    profiler::Profile prof(std::vector{profiler::ProfilerActivity::CPU});
    {
      amp::AutocastGuard guard(kCPU, kBFloat16);
      loss = cross_entropy(logits, target, weight, -100, "mean", smoothing);
    }
    loss.backward();
    prof.stop();
    EXPECT_EQ(prof.key_averages().find("copy_"), nullptr) << prof.key_averages().table("count");
    EXPECT_EQ(loss.dtype(), kFloat32);
    cross_entropy(reference, target, weight, -100, "mean", smoothing).backward();
    EXPECT_CLOSE(loss, cross_entropy(reference, target, weight, -100, "mean", smoothing),
                 Tolerance{1e-6, 1e-6});
    ASSERT_EQ(logits.grad().dtype(), kBFloat16);
    EXPECT_CLOSE(logits.grad().to(kFloat32), reference.grad().to(kBFloat16).to(kFloat32),
                 Tolerance{1e-2, 1e-3});
  }
}

TEST(Autocast, StateAndDefaults) {
  EXPECT_FALSE(amp::is_autocast_enabled(kCPU));
  EXPECT_FALSE(amp::is_autocast_enabled(kCUDA));
  EXPECT_EQ(amp::get_autocast_dtype(kCPU), kBFloat16);  // PyTorch's defaults
  EXPECT_EQ(amp::get_autocast_dtype(kCUDA), kFloat16);
  {
    amp::AutocastGuard guard(kCUDA);
    EXPECT_TRUE(amp::is_autocast_enabled(kCUDA));
    EXPECT_FALSE(amp::is_autocast_enabled(kCPU));
    EXPECT_EQ(amp::get_autocast_dtype(kCUDA), kFloat16);
    // CUDA autocast leaves CPU tensors alone.
    EXPECT_EQ(mm(r({2, 2}, kFloat32), r({2, 2}, kFloat32)).dtype(), kFloat32);
  }
  EXPECT_FALSE(amp::is_autocast_enabled(kCUDA));
}

TEST(Autocast, NestingAndDisabling) {
  Tensor a = r({2, 2}, kFloat32);
  {
    amp::AutocastGuard outer(kCPU, kBFloat16);
    EXPECT_EQ(mm(a, a).dtype(), kBFloat16);
    {
      amp::AutocastGuard inner(kCPU, kFloat16);
      EXPECT_EQ(mm(a, a).dtype(), kFloat16);
      {
        amp::AutocastGuard off(kCPU, std::nullopt, /*enabled=*/false);
        EXPECT_FALSE(amp::is_autocast_enabled(kCPU));
        EXPECT_EQ(mm(a, a).dtype(), kFloat32);
        EXPECT_EQ(amp::get_autocast_dtype(kCPU), kFloat16);
      }
      EXPECT_EQ(mm(a, a).dtype(), kFloat16);
    }
    EXPECT_EQ(amp::get_autocast_dtype(kCPU), kBFloat16);
    EXPECT_EQ(mm(a, a).dtype(), kBFloat16);
  }
  EXPECT_FALSE(amp::is_autocast_enabled(kCPU));
  EXPECT_EQ(mm(a, a).dtype(), kFloat32);
}

TEST(Autocast, StateRestoredWhenAnOpThrows) {
  amp::AutocastGuard guard(kCPU);
  EXPECT_EMBER_ERROR(mm(r({2, 3}, kFloat32), r({2, 3}, kFloat32)), "mm", "size mismatch");
  EXPECT_EQ(mm(r({2, 2}, kFloat32), r({2, 2}, kFloat32)).dtype(), kBFloat16);  // still casting
}

TEST(Autocast, InternalOpsKeepTheChosenDtype) {
  // sdpa runs softmax (a Float32 op) inside: with autocast off inside the op, it stays bfloat16.
  amp::AutocastGuard guard(kCPU);
  Tensor q = r({1, 3, 4}, kFloat32);
  EXPECT_EQ(scaled_dot_product_attention(q, q, q).dtype(), kBFloat16);
}

TEST(Autocast, CachesCastsOfParametersInsideTheOutermostRegion) {
  Tensor w = r({2, 2}, kFloat32).requires_grad_();
  Tensor x = r({2, 2}, kFloat32);  // not a parameter: not cached
  {
    amp::AutocastGuard outer(kCPU);
    Tensor c1 = amp::detail::cast(w, kCPU, kBFloat16);
    {
      amp::AutocastGuard inner(kCPU);
      Tensor c2 = amp::detail::cast(w, kCPU, kBFloat16);
      EXPECT_EQ(c1.unsafe_impl(), c2.unsafe_impl());  // the same cast object
    }
    EXPECT_EQ(amp::autocast_cache_size(), 1u);  // an inner exit keeps it
    EXPECT_NE(amp::detail::cast(x, kCPU, kBFloat16).unsafe_impl(),
              amp::detail::cast(x, kCPU, kBFloat16).unsafe_impl());
    EXPECT_EQ(amp::detail::cast(w, kCPU, kFloat32).unsafe_impl(), w.unsafe_impl());  // no cast needed
    EXPECT_EQ(amp::autocast_cache_size(), 1u);
    mm(w, w);
    mm(w, x);
    EXPECT_EQ(amp::autocast_cache_size(), 1u);
  }
  EXPECT_EQ(amp::autocast_cache_size(), 0u);
  {
    amp::AutocastGuard no_cache(kCPU, std::nullopt, true, /*cache_enabled=*/false);
    mm(w, w);
    EXPECT_EQ(amp::autocast_cache_size(), 0u);
  }
}

TEST(Autocast, GradientsReachFloat32ParametersInFloat32) {
  Tensor w = r({3, 2}, kFloat32).requires_grad_();
  Tensor x = r({4, 3}, kFloat32);
  Tensor loss;
  {
    amp::AutocastGuard guard(kCPU);
    Tensor y = mm(x, w);  // bfloat16
    EXPECT_EQ(y.dtype(), kBFloat16);
    loss = sum(y * y);  // float32 (sum's policy)
    EXPECT_EQ(loss.dtype(), kFloat32);
    loss.backward();  // inside the region: formulas still run in the forward's dtypes
  }
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  // d/dw sum((x w)^2) = 2 x^T (x w), computed here in float64 from the bfloat16-rounded operands.
  Tensor xb = x.to(kBFloat16).to(kFloat64), wb = w.detach().to(kBFloat16).to(kFloat64);
  Tensor expected = mm(xb.t(), mm(xb, wb)) * 2;
  EXPECT_CLOSE(w.grad().to(kFloat64), expected, Tolerance{5e-2, 5e-2});
}

TEST(Autocast, BatchNormRunsInItsInputDtype) {
  // batch_norm is on neither of PyTorch's autocast lists: a bfloat16 activation (a convolution's
  // output) stays bfloat16 next to float32 parameters and running statistics, which it updates in
  // place; a float32 input stays float32. Gradients come back in each input's dtype.
  Tensor x = r({4, 3, 5}, kBFloat16).requires_grad_();
  Tensor w = r({3}, kFloat32).requires_grad_(), b = r({3}, kFloat32).requires_grad_();
  Tensor running_mean = zeros({3}), running_var = ones({3});
  Tensor y;
  {
    amp::AutocastGuard guard(kCPU);
    y = batch_norm(x, running_mean, running_var, w, b, true, 0.5);
    EXPECT_EQ(batch_norm(x.detach().to(kFloat32), zeros({3}), ones({3}), w, b, true).dtype(), kFloat32);
  }
  EXPECT_EQ(y.dtype(), kBFloat16);
  EXPECT_EQ(running_mean.dtype(), kFloat32);
  Tensor xd = x.detach().to(kFloat64);
  // The running mean moved halfway to the batch mean over (N, L).
  EXPECT_CLOSE(running_mean.to(kFloat64), mean(xd, {0, 2}) * 0.5, Tolerance{1e-5, 1e-5});
  EXPECT_CLOSE(y.to(kFloat64), batch_norm(xd, {}, {}, w.detach().to(kFloat64), b.detach().to(kFloat64), true),
               Tolerance{1e-2, 1e-2});
  sum(y.to(kFloat32) * y.to(kFloat32)).backward();
  EXPECT_EQ(x.grad().dtype(), kBFloat16);
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_EQ(b.grad().dtype(), kFloat32);
}

TEST(Autocast, TwoUsesOfACachedCastAccumulate) {
  Tensor w = r({2, 2}, kFloat32).requires_grad_();
  Tensor x = r({2, 2}, kFloat32);
  {
    amp::AutocastGuard guard(kCPU);
    sum(mm(x, w) + mm(x, w)).backward();
  }
  Tensor expected = mm(x.t(), ones({2, 2})) * 2;
  EXPECT_CLOSE(w.grad(), expected, Tolerance{2e-2, 2e-2});
}

TEST(Autocast, Errors) {
  EXPECT_EMBER_ERROR(amp::AutocastGuard(kCPU, kFloat32), "autocast", "float16 or bfloat16", "float32");
  EXPECT_EMBER_ERROR(amp::set_autocast_dtype(kCUDA, kInt64), "autocast", "cuda", "int64");
  EXPECT_FALSE(amp::is_autocast_enabled(kCPU));  // a refused guard changes nothing
  EXPECT_EQ(amp::get_autocast_dtype(kCPU), kBFloat16);
  EXPECT_EMBER_ERROR(amp::detail::policy_of("no_such_op"), "autocast", "no_such_op", "op registry");
}

}  // namespace
}  // namespace ember::testing
