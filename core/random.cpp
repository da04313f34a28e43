#include "ember/core/random.h"

#include <limits>

#include "ember/core/autograd_meta.h"
#include "ember/core/copy.h"
#include "ember/core/factories.h"
#include "ember/core/op_range.h"
#include "ember/core/shape.h"

namespace ember {

constinit DispatchStub<RandomFn> random_stub("random");

namespace {

const Tensor& fill_random(const char* op, const Tensor& t, RandomKind kind, double a, double b,
                          Generator* gen) {
  check_no_internal_overlap(op, t);
  check_inplace(op, {t});
  if (kind != RandomKind::Integer && kind != RandomKind::Bernoulli)
    EMBER_CHECK(t.is_floating_point(), op, ": expects a floating point tensor, got ", t.dtype());
  Generator& g = gen ? *gen : default_generator(t.device().type);
  PhiloxState s = g.next();
  if (t.numel() == 0) return t;
  if (t.is_contiguous()) {
    random_stub(t.device())(t, kind, s, a, b);
  } else {
    Tensor c = empty(t.sizes(), t.options());
    random_stub(t.device())(c, kind, s, a, b);
    t.copy_(c);
  }
  t.bump_version();
  return t;
}

// A tensor for the random factory `op` to fill, its shape checked in op's name.
Tensor new_tensor(const char* op, IntArrayRef sizes, TensorOptions options) {
  checked_nbytes(op, sizes, static_cast<int64_t>(element_size(options.dtype())));
  return empty(sizes, options);
}

// A floating tensor for `op` to fill with uniform or normal draws.
Tensor new_floating_tensor(const char* op, IntArrayRef sizes, TensorOptions options) {
  EMBER_CHECK(is_floating_point(options.dtype()), op, ": expects a floating point dtype, got ",
              options.dtype());
  return new_tensor(op, sizes, options);
}

void check_probability(const char* op, double p) {
  EMBER_CHECK(p >= 0 && p <= 1, op, ": expects 0 <= p <= 1, got p=", p);
}

}  // namespace

const Tensor& uniform_(const Tensor& t, double from, double to, Generator* gen) {
  detail::OpRange op_range("uniform_", t);
  EMBER_CHECK(from <= to, "uniform_: expects from <= to, got from=", from, " to=", to);
  EMBER_CHECK(to - from <= std::numeric_limits<double>::max(),
              "uniform_: expects to - from to be finite, got from=", from, " to=", to);
  return fill_random("uniform_", t, RandomKind::Uniform, from, to, gen);
}

const Tensor& normal_(const Tensor& t, double mean, double std, Generator* gen) {
  detail::OpRange op_range("normal_", t);
  EMBER_CHECK(std >= 0, "normal_: expects std >= 0.0, got std=", std);
  return fill_random("normal_", t, RandomKind::Normal, mean, std, gen);
}

const Tensor& bernoulli_(const Tensor& t, double p, Generator* gen) {
  detail::OpRange op_range("bernoulli_", t);
  check_probability("bernoulli_", p);
  return fill_random("bernoulli_", t, RandomKind::Bernoulli, p, 0, gen);
}

Tensor rand(IntArrayRef sizes, TensorOptions options, Generator* gen) {
  detail::OpRange op_range("rand");
  Tensor t = new_floating_tensor("rand", sizes, options);
  uniform_(t, 0, 1, gen);
  return t;
}

Tensor randn(IntArrayRef sizes, TensorOptions options, Generator* gen) {
  detail::OpRange op_range("randn");
  Tensor t = new_floating_tensor("randn", sizes, options);
  normal_(t, 0, 1, gen);
  return t;
}

Tensor randint(int64_t low, int64_t high, IntArrayRef sizes, TensorOptions options, Generator* gen) {
  detail::OpRange op_range("randint");
  EMBER_CHECK(low < high, "randint: expects low < high, got low=", low, " high=", high);
  EMBER_CHECK(options.dtype() != kBool, "randint: bool is not a supported dtype");
  Tensor t = new_tensor("randint", sizes, options);
  return fill_random("randint", t, RandomKind::Integer, static_cast<double>(low), static_cast<double>(high),
                     gen);
}

Tensor rand_like(const Tensor& t, Generator* gen) {
  detail::OpRange op_range("rand_like", t);
  return rand(t.sizes(), t.options(), gen);
}
Tensor randn_like(const Tensor& t, Generator* gen) {
  detail::OpRange op_range("randn_like", t);
  return randn(t.sizes(), t.options(), gen);
}

Tensor randperm(int64_t n, TensorOptions options, Generator* gen) {
  detail::OpRange op_range("randperm");
  EMBER_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  // Fisher-Yates driven by one Philox draw of n 64-bit integers.
  Tensor keys = new_tensor("randperm", {n}, kInt64);
  fill_random("randperm", keys, RandomKind::Integer, 0, 9007199254740992.0, gen);
  const int64_t* k = keys.data_ptr<int64_t>();
  Tensor perm = arange(n, kInt64);
  int64_t* p = perm.data_ptr<int64_t>();
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[k[i] % (i + 1)]);
  return perm.to(options);
}

Tensor bernoulli(const Tensor& like, double p, Generator* gen) {
  detail::OpRange op_range("bernoulli", like);
  check_probability("bernoulli", p);
  Tensor t = empty_like(like);
  bernoulli_(t, p, gen);
  return t;
}

Tensor bernoulli(const Tensor& p, Generator* gen) {
  detail::OpRange op_range("bernoulli", p);
  EMBER_CHECK(p.is_floating_point(), "bernoulli: expects a floating point tensor of probabilities, got ",
              p.dtype());
  // On the CPU, as PyTorch; on CUDA the check would wait for the GPU (PyTorch asserts on the device).
  if (p.is_cpu() && p.numel() > 0)
    EMBER_CHECK(p.ge(0).logical_and(p.le(1)).all().item<bool>(), "bernoulli: expects p to be in [0, 1], got ",
                "a tensor with values from ", p.min().item<double>(), " to ", p.max().item<double>());
  Tensor u = rand(p.sizes(), p.options(), gen);
  return u.lt(p).to(p.dtype());
}

Tensor get_rng_state(Generator* gen) {
  detail::OpRange op_range("get_rng_state");
  PhiloxState s = (gen ? *gen : default_generator(kCPU)).get_state();
  EMBER_CHECK(!s.seed_ptr,
              "get_rng_state: the generator is capturing a CUDA graph, whose numbers are drawn "
              "at replay; read the state before capture_begin or after capture_end");
  Tensor state = empty({16}, kUInt8);
  uint8_t* p = state.data_ptr<uint8_t>();
  for (int i = 0; i < 8; ++i) {
    p[i] = static_cast<uint8_t>(s.seed >> (8 * i));
    p[8 + i] = static_cast<uint8_t>(s.offset >> (8 * i));
  }
  return state;
}

void set_rng_state(const Tensor& state, Generator* gen) {
  EMBER_CHECK(state.dtype() == kUInt8 && state.dim() == 1 && state.numel() == 16,
              "set_rng_state: expected a uint8 tensor of 16 bytes (seed, offset), got ", state.dtype(), " ",
              state.sizes());
  Tensor bytes = state.cpu().contiguous();
  const uint8_t* p = bytes.data_ptr<uint8_t>();
  PhiloxState s{0, 0};
  for (int i = 0; i < 8; ++i) {
    s.seed |= static_cast<uint64_t>(p[i]) << (8 * i);
    s.offset |= static_cast<uint64_t>(p[8 + i]) << (8 * i);
  }
  (gen ? *gen : default_generator(kCPU)).set_state(s);
}

}  // namespace ember
