// Frontends of the matrix products: PyTorch's rank and broadcasting rules, shape and dtype
// checks, then bmm_stub, the one batched GEMM every product goes through.
#include "ember/core/ops/linalg.h"

#include "ember/core/aligned_rows.h"
#include "ember/core/autocast_mode.h"
#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/shape.h"

namespace ember {

constinit DispatchStub<BmmFn> bmm_stub("bmm");
constinit DispatchStub<AddmmBiasFn> addmm_bias_stub("addmm_bias");
constinit DispatchStub<MmRowSumsFn> mm_row_sums_stub("mm_row_sums");

namespace {

constexpr auto LOWER = AutocastPolicy::LowerPrecision;

const OpRegistrar registrar({
    {"matmul", LOWER, true},
    {"mm", LOWER, true},
    {"bmm", LOWER, true},
    {"addmm", LOWER, true},
    {"baddbmm", LOWER, true},
    {"outer", AutocastPolicy::None, true},   // a mul, which promotes its inputs
    {"dot", AutocastPolicy::Promote, true},  // as PyTorch
});

// The checks every product makes of its two operands.
void check_operands(const char* op, const Tensor& a, const Tensor& b) {
  EMBER_CHECK(a.device() == b.device(), op, ": expected all tensors to be on the same device, but found ",
              a.device(), " and ", b.device());
  EMBER_CHECK(a.dtype() == b.dtype(), op, ": expected m1 and m2 to have the same dtype, but got: ", a.dtype(),
              " != ", b.dtype());
  EMBER_CHECK(a.dtype() != kBool, op, ": not supported for bool tensors");
}

void check_dims(const char* op, const Tensor& a, const Tensor& b, int64_t dims) {
  EMBER_CHECK(a.dim() == dims && b.dim() == dims, op, ": expected ", dims, "D tensors, but got ", a.dim(),
              "D and ", b.dim(), "D");
}

void check_inner(const char* op, const Tensor& a, const Tensor& b, int64_t ka, int64_t kb) {
  EMBER_CHECK(ka == kb, op, ": size mismatch, mat1 is ", a.sizes(), ", mat2 is ", b.sizes());
}

// The checks of addmm/baddbmm's input and scale factors.
void check_input(const char* op, const Tensor& input, const Tensor& a, const Scalar& beta,
                 const Scalar& alpha) {
  EMBER_CHECK(input.device() == a.device(), op, ": expected all tensors to be on the same device, but found ",
              input.device(), " and ", a.device());
  EMBER_CHECK(input.dtype() == a.dtype(), op, ": expected input and mat1 to have the same dtype, ",
              "but got: ", input.dtype(), " != ", a.dtype());
  EMBER_CHECK(is_floating_point(a.dtype()) || (!beta.is_floating_point() && !alpha.is_floating_point()), op,
              ": for integral input tensors, arguments beta and alpha must not be floating point numbers");
}

// out = beta * out + alpha * a @ b with out [B, M, N] freshly allocated, a [B, M, K], b [B, K, N].
Tensor run_bmm(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha = 1,
               const Scalar& beta = 0) {
  if (out.numel() > 0) bmm_stub(out.device())(out, a, b, alpha, beta);
  return out;
}

Tensor new_product(IntArrayRef sizes, const Tensor& like) { return empty(sizes, like.options()); }

Tensor bmm_unchecked(const Tensor& a, const Tensor& b);

// Whether b ([B,] K, N) is stored column-major in its last two dims, as a linear's weight.t() is.
bool column_major(const Tensor& b) {
  return b.size(-1) > 1 && b.stride(-2) == 1 && b.stride(-1) >= b.size(-2);
}

// The gradient of b in a @ b, [B, K, N], laid out as b (PyTorch's mm_mat2_backward): for a
// transposed weight it is computed transposed, so the weight's own gradient comes out contiguous
// and its accumulation takes it without a copy.
Tensor mat2_grad(const Tensor& a, const Tensor& grad, bool b_column_major) {
  return b_column_major ? bmm_unchecked(grad.transpose(1, 2), a).transpose(1, 2)
                        : bmm_unchecked(a.transpose(1, 2), grad);
}

// [B, M, K] @ [B, K, N]: the one differentiable product every other one is made of.
Tensor bmm_unchecked(const Tensor& a, const Tensor& b) {
  Tensor out = run_bmm(new_product({a.size(0), a.size(1), b.size(2)}, a), a, b);
  if (needs_grad({a, b})) {
    SavedTensor sa(a, false), sb(b, false);
    const bool b_cm = column_major(b);
    record("bmm", {a, b}, {out}, [sa, sb, b_cm](const GradContext& g) -> std::vector<Tensor> {
      return {g.needs(0) ? bmm_unchecked(g.grad(), g(sb).transpose(1, 2)) : Tensor(),
              g.needs(1) ? mat2_grad(g(sa), g.grad(), b_cm) : Tensor()};
    });
  }
  return out;
}

// [M, K] @ [K, N] -> [M, N] through the batched product (a batch of one).
Tensor mm_unchecked(const Tensor& a, const Tensor& b) {
  return bmm_unchecked(a.unsqueeze(0), b.unsqueeze(0)).squeeze(0);
}

// a's gradient in bias + a @ b, grad [M, N] @ bt [N, K] in a's shape: added by the product
// (beta = 1) into the gradient a has already received where the engine offers it (a residual
// stream's other branch: no separate add).
Tensor product_grad_a(const GradContext& g, const Tensor& grad, const Tensor& bt, IntArrayRef a_sizes) {
  const Tensor& acc = g.accumulated(1);
  if (acc.defined() && acc.is_contiguous() && acc.sizes().equals(a_sizes) && acc.dtype() == grad.dtype() &&
      bt.dtype() == grad.dtype() && acc.device() == grad.device()) {
    Tensor sum = g.take_accumulated(1);
    run_bmm(sum.view({1, grad.size(0), bt.size(1)}), grad.unsqueeze(0), bt.unsqueeze(0), 1, 1);
    return sum;
  }
  return mm_unchecked(grad, bt).view(a_sizes);
}

// bias + a @ b for a bias row [N] or [1, N] and a [..., K] (contiguous beyond 2 dims: a linear's
// input, recorded as it is, so that its gradient meets the other branches' in the input's own
// node), through the device's fused kernel, computed on bias_c and b_c (the same tensors, or their
// casts to a's dtype) and differentiable in bias and b. A wide odd N (a 30522-word head) gets
// padded rows: cuBLASLt ran such a product 2.8x slower into unaligned rows (H200), and
// cross_entropy reads the padded logits as they are.
Tensor addmm_bias(const Tensor& bias, const Tensor& a, const Tensor& b, const Tensor& bias_c,
                  const Tensor& b_c) {
  const int64_t K = a.size(-1);
  int64_t M = 1;
  for (int64_t d = 0; d + 1 < a.dim(); ++d) M *= a.size(d);
  DimVector out_sizes(a.sizes());
  out_sizes.back() = b.size(1);
  Tensor out = detail::empty_aligned_rows(M, b.size(1), a.options());
  {
    NoGradGuard no_grad;  // recorded below as one op, on a and out as they are
    if (a.dim() != 2) out = out.view(out_sizes);
    if (out.numel() > 0)
      addmm_bias_stub(a.device())(out.view({M, b.size(1)}), a.view({M, K}), b_c,
                                  bias_c.reshape({b.size(1)}).contiguous());
  }
  if (needs_grad({bias, a, b})) {
    SavedTensor sa(b.requires_grad() ? a : Tensor(), false), sb(a.requires_grad() ? b_c : Tensor(), false);
    DimVector bias_sizes(bias.sizes()), a_sizes(a.sizes());
    const bool b_cm = column_major(b);
    const ScalarType bias_dt = bias.dtype(), b_dt = b.dtype();
    record(
        "addmm", {bias, a, b}, {out},
        [sa, sb, bias_sizes, a_sizes, M, K, b_cm, bias_dt,
         b_dt](const GradContext& g) -> std::vector<Tensor> {
          const Tensor grad = g.grad().reshape({M, g.grad().size(-1)});
          // a's gradient last: the next backward reads it, still in L2 (an H100's DALN backward
          // took 9% longer after the weight's product than after the input's).
          auto grad_a = [&] { return g.needs(1) ? product_grad_a(g, grad, g(sb).t(), a_sizes) : Tensor(); };
          // The bias gradient, where the gradient's producer summed it (BackwardExtras).
          const Tensor sums = GradMode::is_enabled() ? Tensor() : g.grad_row_sums(0);
          if (g.needs(0) && g.needs(2) && b_cm && bias_dt == b_dt && !GradMode::is_enabled()) {
            // A linear's weight.t(): its gradient is (grad^T a)^T, and the bias's the row sums
            // of grad^T, from the same product, written in the parameters' dtype.
            const Tensor grad_t = grad.t(), x = g(sa).view({M, K});
            if (grad_t.numel() > 0 && x.size(1) > 0) {
              Tensor gw = empty({grad_t.size(0), x.size(1)}, x.options().dtype(b_dt));
              Tensor gbias = sums.defined() ? Tensor() : empty({grad_t.size(0)}, x.options().dtype(bias_dt));
              mm_row_sums_stub(x.device())(gw, gbias, grad_t, x);
              return {sums.defined() ? sums.to(bias_dt).view(bias_sizes) : gbias.view(bias_sizes), grad_a(),
                      gw.t()};
            }
          }
          Tensor gbias, gw;
          if (g.needs(0))
            gbias = sums.defined() ? sums.to(bias_dt).view(bias_sizes) : sum_to(grad, bias_sizes).to(bias_dt);
          if (g.needs(2))
            gw = mat2_grad(g(sa).reshape({1, M, K}), grad.unsqueeze(0), b_cm).squeeze(0).to(b_dt);
          return {gbias, grad_a(), gw};
        });
    if (bias.requires_grad()) out.grad_fn()->want_grad_row_sums(0);
  }
  return out;
}

// beta * input + alpha * a @ b, of shape `sizes`; a and b are 3D when `batched`, else 2D.
Tensor add_product(const char* op, const Tensor& input, IntArrayRef sizes, const Tensor& a, const Tensor& b,
                   const Scalar& beta, const Scalar& alpha, bool batched) {
  IntArrayRef from = input.sizes();
  bool expands = from.size() <= sizes.size();
  for (size_t i = 1; expands && i <= from.size(); ++i)
    expands = from[from.size() - i] == 1 || from[from.size() - i] == sizes[sizes.size() - i];
  EMBER_CHECK(expands, op, ": input of shape ", from, " cannot be broadcast to the product's shape ", sizes);
  const bool bias_row = from.size() >= 1 && from.size() <= 2 && from.back() == sizes.back() &&
                        (from.size() == 1 || from[0] == 1);
  if (!batched && bias_row && beta.to_double() == 1 && alpha.to_double() == 1 &&
      is_floating_point(a.dtype()) && addmm_bias_stub.has(a.device().type))
    return addmm_bias(input, a, b, input, b);
  if (needs_grad({input, a, b})) {  // differentiable through its parts
    Tensor p = batched ? bmm_unchecked(a, b) : mm_unchecked(a, b);
    if (alpha.to_double() != 1) p = p * alpha;
    return beta.to_double() == 0 ? p : p + input * beta;
  }
  Tensor out = new_product(sizes, a);
  bool use_input = beta.to_double() != 0;
  if (use_input) out.copy_(input);
  Tensor out3 = batched ? out : out.unsqueeze(0);
  run_bmm(out3, batched ? a : a.unsqueeze(0), batched ? b : b.unsqueeze(0), alpha,
          use_input ? beta : Scalar(0));
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  detail::OpRange op_range("matmul", a, b);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "matmul", [&](const auto&... t) { return matmul(t...); }, a, b);
  const char* op = "matmul";
  check_operands(op, a, b);
  EMBER_CHECK(a.dim() >= 1 && b.dim() >= 1, op, ": both arguments need to be at least 1D, but they are ",
              a.dim(), "D and ", b.dim(), "D");
  const int64_t k = a.size(-1);
  check_inner(op, a, b, k, b.size(b.dim() == 1 ? 0 : -2));
  // A 1D operand becomes a row (a) or a column (b) matrix; that dim leaves the result's shape.
  Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  const int64_t m = a2.size(-2), n = b2.size(-1);
  // [..., M, K] @ [K, N] is one [rows, K] @ [K, N] product when a's leading dims fold in place.
  if (b2.dim() == 2) {
    const int64_t rows = numel_of(IntArrayRef(a2.sizes().data(), a2.dim() - 1));
    if (std::optional<DimVector> st = view_strides(a2.sizes(), a2.strides(), {rows, k})) {
      DimVector shape(a.sizes());
      shape.pop_back();
      if (b.dim() == 2) shape.push_back(n);
      return mm_unchecked(a2.reshape({rows, k}), b2).view(shape);
    }
  }
  // Otherwise a batch of products over the broadcast batch dims (stride 0 where broadcast).
  IntArrayRef batch_a(a2.sizes().data(), a2.dim() - 2), batch_b(b2.sizes().data(), b2.dim() - 2);
  DimVector batch = broadcast_shapes(op, batch_a, batch_b);
  const int64_t nbatch = numel_of(batch);
  DimVector ea(batch), eb(batch), shape(batch);
  ea.push_back(m), ea.push_back(k);
  eb.push_back(k), eb.push_back(n);
  if (a.dim() > 1) shape.push_back(m);
  if (b.dim() > 1) shape.push_back(n);
  return bmm_unchecked(a2.expand(ea).reshape({nbatch, m, k}), b2.expand(eb).reshape({nbatch, k, n}))
      .view(shape);
}

Tensor mm(const Tensor& a, const Tensor& b) {
  detail::OpRange op_range("mm", a, b);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "mm", [&](const auto&... t) { return mm(t...); }, a, b);
  check_operands("mm", a, b);
  check_dims("mm", a, b, 2);
  check_inner("mm", a, b, a.size(1), b.size(0));
  return mm_unchecked(a, b);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  detail::OpRange op_range("bmm", a, b);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "bmm", [&](const auto&... t) { return bmm(t...); }, a, b);
  check_operands("bmm", a, b);
  check_dims("bmm", a, b, 3);
  EMBER_CHECK(a.size(0) == b.size(0), "bmm: batch sizes differ, batch1 is ", a.sizes(), ", batch2 is ",
              b.sizes());
  check_inner("bmm", a, b, a.size(2), b.size(1));
  return bmm_unchecked(a, b);
}

Tensor addmm(const Tensor& input, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  detail::OpRange op_range("addmm", input, a, b);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "addmm", [&](const auto&... t) { return addmm(t...); }, input, a, b, beta, alpha);
  check_operands("addmm", a, b);
  check_dims("addmm", a, b, 2);
  check_inner("addmm", a, b, a.size(1), b.size(0));
  check_input("addmm", input, a, beta, alpha);
  return add_product("addmm", input, {a.size(0), b.size(1)}, a, b, beta, alpha, false);
}

Tensor detail::addmm_bias_of_casts(const Tensor& bias, const Tensor& a, const Tensor& b,
                                   const Tensor& bias_cast, const Tensor& b_cast) {
  return addmm_bias(bias, a, b, bias_cast, b_cast);
}

Tensor baddbmm(const Tensor& input, const Tensor& a, const Tensor& b, const Scalar& beta,
               const Scalar& alpha) {
  detail::OpRange op_range("baddbmm", input, a, b);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "baddbmm", [&](const auto&... t) { return baddbmm(t...); }, input, a, b, beta, alpha);
  check_operands("baddbmm", a, b);
  check_dims("baddbmm", a, b, 3);
  EMBER_CHECK(a.size(0) == b.size(0), "baddbmm: batch sizes differ, batch1 is ", a.sizes(), ", batch2 is ",
              b.sizes());
  check_inner("baddbmm", a, b, a.size(2), b.size(1));
  check_input("baddbmm", input, a, beta, alpha);
  return add_product("baddbmm", input, {a.size(0), a.size(1), b.size(2)}, a, b, beta, alpha, true);
}

Tensor outer(const Tensor& a, const Tensor& b) {
  detail::OpRange op_range("outer", a, b);
  EMBER_CHECK(a.dim() == 1 && b.dim() == 1, "outer: expected 1D tensors, but got ", a.dim(), "D and ",
              b.dim(), "D");
  return mul(a.unsqueeze(1), b);
}

Tensor dot(const Tensor& a, const Tensor& b) {
  detail::OpRange op_range("dot", a, b);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "dot", [&](const auto&... t) { return dot(t...); }, a, b);
  EMBER_CHECK(a.dim() == 1 && b.dim() == 1, "dot: expected 1D tensors, but got ", a.dim(), "D and ", b.dim(),
              "D");
  check_operands("dot", a, b);
  EMBER_CHECK(a.numel() == b.numel(), "dot: inconsistent tensor size, expected tensor ", a.sizes(),
              " and src ", b.sizes(), " to have the same number of elements");
  return mm_unchecked(a.unsqueeze(0), b.unsqueeze(1)).view({});
}

Tensor Tensor::matmul(const Tensor& other) const { return ember::matmul(*this, other); }
Tensor Tensor::mm(const Tensor& other) const { return ember::mm(*this, other); }
Tensor Tensor::bmm(const Tensor& other) const { return ember::bmm(*this, other); }

}  // namespace ember
