#pragma once

// The math of every elementwise op, written once as small functors that both the CPU loop
// (core/cpu) and the CUDA launcher (cuda/) apply. T is the compute type: float (also for f16
// and bf16 storage), double, or int64_t / bool for the ops that take integers.

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ember/core/macros.h"

namespace ember::ops {

enum class UnaryOp : uint8_t {
  // Any numeric dtype, result in the input's dtype.
  Neg,
  Abs,
  Sign,
  Relu,
  Square,
  Clamp,
  Floor,
  Ceil,
  Round,  // half to even, as torch.round
  Trunc,
  // Floating point: integer inputs give float32 results.
  Exp,
  Log,
  Log1p,
  Expm1,
  Sqrt,
  Rsqrt,
  Sin,
  Cos,
  Tanh,
  Sigmoid,
  Gelu,
  GeluTanh,
  Silu,
  Softplus,
  LeakyRelu,
  Reciprocal,
  Erf,
};

enum class BinaryOp : uint8_t {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Maximum,
  Minimum,  // result in the promoted dtype
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,  // bool result
  LogicalAnd,
  LogicalOr,
  LogicalXor,         // bool in, bool out
  GeluBackward,       // floating only: grad * d/dx gelu(x), the erf form
  ThresholdBackward,  // floating only: (self, grad) -> self <= threshold ? 0 : grad (relu's backward)
};

constexpr bool is_float_only(UnaryOp op) { return op >= UnaryOp::Exp; }
constexpr bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq && op <= BinaryOp::Ge; }
constexpr bool is_logical(BinaryOp op) { return op >= BinaryOp::LogicalAnd && op <= BinaryOp::LogicalXor; }

// Scalar arguments of the parameterized ops (alpha of add, slope of leaky_relu, clamp bounds,
// softplus beta and threshold). An absent clamp bound is NaN.
struct ElementwiseParams {
  double a = 0, b = 0;
};

// A clamp bound as T; NaN (absent) becomes the type's extreme on that side.
template <class T>
inline T clamp_bound(double v, bool upper) {
  if (v == v) return static_cast<T>(v);
  if constexpr (std::numeric_limits<T>::has_infinity)
    return upper ? std::numeric_limits<T>::infinity() : -std::numeric_limits<T>::infinity();
  else
    return upper ? std::numeric_limits<T>::max() : std::numeric_limits<T>::lowest();
}

template <class T>
EMBER_HOST_DEVICE inline bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>)
    return x != x;
  else
    return false;
}

template <class T>
struct Neg {
  EMBER_HOST_DEVICE T operator()(T x) const { return -x; }
};
template <class T>
struct Abs {
  EMBER_HOST_DEVICE T operator()(T x) const { return x < T(0) ? -x : x; }
};
template <class T>
struct Sign {
  EMBER_HOST_DEVICE T operator()(T x) const { return static_cast<T>((T(0) < x) - (x < T(0))); }
};
template <class T>
struct Relu {
  EMBER_HOST_DEVICE T operator()(T x) const { return is_nan(x) ? x : (x > T(0) ? x : T(0)); }
};
template <class T>
struct Square {
  EMBER_HOST_DEVICE T operator()(T x) const { return x * x; }
};
template <class T>
struct Clamp {
  T lo, hi;
  EMBER_HOST_DEVICE T operator()(T x) const {
    T y = x < lo ? lo : x;  // min(max(x, lo), hi): hi wins when lo > hi, NaN passes
    return y > hi ? hi : y;
  }
};
// Rounding to a whole number (kOp: Floor, Ceil, Round, Trunc): integers are whole already.
template <class T, UnaryOp kOp>
struct Rounding {
  EMBER_HOST_DEVICE T operator()(T x) const {
    if constexpr (!std::is_floating_point_v<T>)
      return x;
    else if constexpr (kOp == UnaryOp::Floor)
      return std::floor(x);
    else if constexpr (kOp == UnaryOp::Ceil)
      return std::ceil(x);
    else if constexpr (kOp == UnaryOp::Round)
      return std::nearbyint(x);  // the default rounding mode: halves to even
    else
      return std::trunc(x);
  }
};
template <class T>
struct Exp {
  EMBER_HOST_DEVICE T operator()(T x) const { return std::exp(x); }
};
template <class T>
struct Log {
  EMBER_HOST_DEVICE T operator()(T x) const { return std::log(x); }
};
template <class T>
struct Log1p {
  EMBER_HOST_DEVICE T operator()(T x) const { return std::log1p(x); }
};
template <class T>
struct Expm1 {
  EMBER_HOST_DEVICE T operator()(T x) const { return std::expm1(x); }
};
template <class T>
struct Sqrt {
  EMBER_HOST_DEVICE T operator()(T x) const { return std::sqrt(x); }
};
template <class T>
struct Rsqrt {
  EMBER_HOST_DEVICE T operator()(T x) const { return T(1) / std::sqrt(x); }
};
template <class T>
struct Sin {
  EMBER_HOST_DEVICE T operator()(T x) const { return std::sin(x); }
};
template <class T>
struct Cos {
  EMBER_HOST_DEVICE T operator()(T x) const { return std::cos(x); }
};
template <class T>
struct Tanh {
  EMBER_HOST_DEVICE T operator()(T x) const { return std::tanh(x); }
};
template <class T>
struct Sigmoid {
  EMBER_HOST_DEVICE T operator()(T x) const { return T(1) / (T(1) + std::exp(-x)); }
};
template <class T>
struct Gelu {  // x * Phi(x), the exact (erf) form
  EMBER_HOST_DEVICE T operator()(T x) const {
    return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
  }
};
template <class T>
struct GeluTanh {  // the tanh approximation (approximate='tanh')
  EMBER_HOST_DEVICE T operator()(T x) const {
    constexpr T kBeta = T(0.79788456080286535588);  // sqrt(2 / pi)
    return T(0.5) * x * (T(1) + std::tanh(kBeta * (x + T(0.044715) * x * x * x)));
  }
};
template <class T>
struct Silu {
  EMBER_HOST_DEVICE T operator()(T x) const { return x / (T(1) + std::exp(-x)); }
};
template <class T>
struct Softplus {
  T beta, threshold;  // linear above threshold, as PyTorch, to avoid overflow
  EMBER_HOST_DEVICE T operator()(T x) const {
    return x * beta > threshold ? x : std::log1p(std::exp(x * beta)) / beta;
  }
};
template <class T>
struct LeakyRelu {
  T slope;
  EMBER_HOST_DEVICE T operator()(T x) const { return x > T(0) ? x : x * slope; }
};
template <class T>
struct Reciprocal {
  EMBER_HOST_DEVICE T operator()(T x) const { return T(1) / x; }
};
template <class T>
struct Erf {
  EMBER_HOST_DEVICE T operator()(T x) const { return std::erf(x); }
};

template <class T>
struct Add {
  T alpha;
  EMBER_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>)
      return a || (alpha && b);
    else
      return a + alpha * b;
  }
};
template <class T>
struct Sub {
  T alpha;
  EMBER_HOST_DEVICE T operator()(T a, T b) const { return a - alpha * b; }
};
template <class T>
struct Mul {
  EMBER_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>)
      return a && b;
    else
      return a * b;
  }
};
template <class T>
struct Div {
  EMBER_HOST_DEVICE T operator()(T a, T b) const { return a / b; }
};
template <class T>
struct Pow {
  EMBER_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::pow(a, b);
    } else {  // integer power by squaring; the frontend rejects negative exponents
      T r = 1;
      for (; b > 0; b >>= 1, a *= a)
        if (b & 1) r *= a;
      return r;
    }
  }
};
template <class T>
struct GeluBackward {  // g * (Phi(x) + x phi(x)), as PyTorch's gelu_backward
  EMBER_HOST_DEVICE T operator()(T g, T x) const {
    constexpr T kInvSqrt2Pi = T(0.39894228040143267794);  // 1 / sqrt(2 pi)
    const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
    return g * (cdf + x * kInvSqrt2Pi * std::exp(T(-0.5) * x * x));
  }
};
template <class T>
struct ThresholdBackward {  // a NaN self passes the gradient, as PyTorch's threshold_backward
  T threshold;
  EMBER_HOST_DEVICE T operator()(T x, T g) const { return x <= threshold ? T(0) : g; }
};
template <class T>
struct Maximum {  // propagates NaN, as torch.maximum
  EMBER_HOST_DEVICE T operator()(T a, T b) const { return is_nan(a) ? a : (is_nan(b) ? b : (a > b ? a : b)); }
};
template <class T>
struct Minimum {
  EMBER_HOST_DEVICE T operator()(T a, T b) const { return is_nan(a) ? a : (is_nan(b) ? b : (a < b ? a : b)); }
};
template <class T>
struct Eq {
  EMBER_HOST_DEVICE bool operator()(T a, T b) const { return a == b; }
};
template <class T>
struct Ne {
  EMBER_HOST_DEVICE bool operator()(T a, T b) const { return a != b; }
};
template <class T>
struct Lt {
  EMBER_HOST_DEVICE bool operator()(T a, T b) const { return a < b; }
};
template <class T>
struct Le {
  EMBER_HOST_DEVICE bool operator()(T a, T b) const { return a <= b; }
};
template <class T>
struct Gt {
  EMBER_HOST_DEVICE bool operator()(T a, T b) const { return a > b; }
};
template <class T>
struct Ge {
  EMBER_HOST_DEVICE bool operator()(T a, T b) const { return a >= b; }
};
template <class T>
struct LogicalAnd {
  EMBER_HOST_DEVICE bool operator()(T a, T b) const { return a && b; }
};
template <class T>
struct LogicalOr {
  EMBER_HOST_DEVICE bool operator()(T a, T b) const { return a || b; }
};
template <class T>
struct LogicalXor {
  EMBER_HOST_DEVICE bool operator()(T a, T b) const { return bool(a) != bool(b); }
};
template <class T>
struct Where {
  EMBER_HOST_DEVICE T operator()(T c, T a, T b) const { return c ? a : b; }
};

// Calls f(functor) for `op` with compute type T. Both device backends go through these two
// visitors, so an op's math and its parameters are bound in one place.
template <class T, class F>
void visit_unary(UnaryOp op, const ElementwiseParams& p, F&& f) {
  switch (op) {
    case UnaryOp::Neg:
      return f(Neg<T>{});
    case UnaryOp::Abs:
      return f(Abs<T>{});
    case UnaryOp::Sign:
      return f(Sign<T>{});
    case UnaryOp::Relu:
      return f(Relu<T>{});
    case UnaryOp::Square:
      return f(Square<T>{});
    case UnaryOp::Clamp:
      return f(Clamp<T>{clamp_bound<T>(p.a, false), clamp_bound<T>(p.b, true)});
    case UnaryOp::Floor:
      return f(Rounding<T, UnaryOp::Floor>{});
    case UnaryOp::Ceil:
      return f(Rounding<T, UnaryOp::Ceil>{});
    case UnaryOp::Round:
      return f(Rounding<T, UnaryOp::Round>{});
    case UnaryOp::Trunc:
      return f(Rounding<T, UnaryOp::Trunc>{});
    default:
      break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case UnaryOp::Exp:
        return f(Exp<T>{});
      case UnaryOp::Log:
        return f(Log<T>{});
      case UnaryOp::Log1p:
        return f(Log1p<T>{});
      case UnaryOp::Expm1:
        return f(Expm1<T>{});
      case UnaryOp::Sqrt:
        return f(Sqrt<T>{});
      case UnaryOp::Rsqrt:
        return f(Rsqrt<T>{});
      case UnaryOp::Sin:
        return f(Sin<T>{});
      case UnaryOp::Cos:
        return f(Cos<T>{});
      case UnaryOp::Tanh:
        return f(Tanh<T>{});
      case UnaryOp::Sigmoid:
        return f(Sigmoid<T>{});
      case UnaryOp::Gelu:
        return f(Gelu<T>{});
      case UnaryOp::GeluTanh:
        return f(GeluTanh<T>{});
      case UnaryOp::Silu:
        return f(Silu<T>{});
      case UnaryOp::Softplus:
        return f(Softplus<T>{static_cast<T>(p.a), static_cast<T>(p.b)});
      case UnaryOp::LeakyRelu:
        return f(LeakyRelu<T>{static_cast<T>(p.a)});
      case UnaryOp::Reciprocal:
        return f(Reciprocal<T>{});
      case UnaryOp::Erf:
        return f(Erf<T>{});
      default:
        break;
    }
  }
}

// Comparisons and logical ops return bool; visit_binary hands f the functor either way.
template <class T, class F>
void visit_binary(BinaryOp op, const ElementwiseParams& p, F&& f) {
  switch (op) {
    case BinaryOp::Add:
      return f(Add<T>{static_cast<T>(p.a)});
    case BinaryOp::Mul:
      return f(Mul<T>{});
    case BinaryOp::Maximum:
      return f(Maximum<T>{});
    case BinaryOp::Minimum:
      return f(Minimum<T>{});
    case BinaryOp::Eq:
      return f(Eq<T>{});
    case BinaryOp::Ne:
      return f(Ne<T>{});
    case BinaryOp::Lt:
      return f(Lt<T>{});
    case BinaryOp::Le:
      return f(Le<T>{});
    case BinaryOp::Gt:
      return f(Gt<T>{});
    case BinaryOp::Ge:
      return f(Ge<T>{});
    case BinaryOp::LogicalAnd:
      return f(LogicalAnd<T>{});
    case BinaryOp::LogicalOr:
      return f(LogicalOr<T>{});
    case BinaryOp::LogicalXor:
      return f(LogicalXor<T>{});
    default:
      break;
  }
  if constexpr (!std::is_same_v<T, bool>) {
    switch (op) {
      case BinaryOp::Sub:
        return f(Sub<T>{static_cast<T>(p.a)});
      case BinaryOp::Div:
        return f(Div<T>{});
      case BinaryOp::Pow:
        return f(Pow<T>{});
      default:
        break;
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (op == BinaryOp::GeluBackward) return f(GeluBackward<T>{});
    if (op == BinaryOp::ThresholdBackward) return f(ThresholdBackward<T>{static_cast<T>(p.a)});
  }
}

}  // namespace ember::ops
