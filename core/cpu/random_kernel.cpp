#include <cmath>

#include "ember/core/cpu/elementwise_loop.h"
#include "ember/core/philox.h"
#include "ember/core/random.h"

namespace ember::cpu {
namespace {

// Element i of a float draw uses word i%4 of Philox block i/4; a double draw uses two words,
// so block i/2. Normals come from Box-Muller over word pairs (cos for the first of the pair,
// sin for the second). The CUDA kernel computes the same functions of i.
template <class T>
T uniform_at(PhiloxState s, int64_t i) {
  if constexpr (std::is_same_v<T, double>) {
    Philox4x32 r = philox_block(s.seed, s.offset, static_cast<uint64_t>(i) / 2);
    int l = static_cast<int>(i % 2) * 2;
    return uniform_double(r.v[l], r.v[l + 1]);
  } else {
    return uniform_float(philox_block(s.seed, s.offset, static_cast<uint64_t>(i) / 4).v[i % 4]);
  }
}

template <class T>
T normal_at(PhiloxState s, int64_t i) {
  T u1, u2;
  bool second;
  if constexpr (std::is_same_v<T, double>) {
    Philox4x32 r = philox_block(s.seed, s.offset, static_cast<uint64_t>(i) / 2);
    u1 = uniform_double(r.v[0], r.v[1]);
    u2 = uniform_double(r.v[2], r.v[3]);
    second = i % 2;
  } else {
    Philox4x32 r = philox_block(s.seed, s.offset, static_cast<uint64_t>(i) / 4);
    int pair = static_cast<int>(i % 4) / 2 * 2;
    u1 = uniform_float(r.v[pair]);
    u2 = uniform_float(r.v[pair + 1]);
    second = i % 2;
  }
  T radius = std::sqrt(T(-2) * std::log(T(1) - u1));  // 1 - u1 is in (0, 1]
  T theta = T(2 * M_PI) * u2;
  return radius * (second ? std::sin(theta) : std::cos(theta));
}

uint64_t bits64_at(PhiloxState s, int64_t i) {
  Philox4x32 r = philox_block(s.seed, s.offset, static_cast<uint64_t>(i) / 2);
  int l = static_cast<int>(i % 2) * 2;
  return static_cast<uint64_t>(r.v[l]) << 32 | r.v[l + 1];
}

void random_kernel(const Tensor& out, RandomKind kind, PhiloxState s, double a, double b) {
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
    T* p = static_cast<T*>(out.data_ptr());
    parallel_for(0, out.numel(), 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        switch (kind) {
          case RandomKind::Uniform:
            p[i] = static_cast<T>(static_cast<C>(a + (b - a) * uniform_at<C>(s, i)));
            break;
          case RandomKind::Normal:
            p[i] = static_cast<T>(static_cast<C>(a + b * normal_at<C>(s, i)));
            break;
          case RandomKind::Bernoulli:
            p[i] = static_cast<T>(uniform_at<double>(s, i) < a);
            break;
          case RandomKind::Integer: {
            auto range = static_cast<uint64_t>(b - a);
            p[i] = static_cast<T>(static_cast<int64_t>(a) + static_cast<int64_t>(bits64_at(s, i) % range));
            break;
          }
        }
      }
    });
  });
}

KernelRegistrar<RandomFn> reg(random_stub, kCPU, &random_kernel);

}  // namespace
}  // namespace ember::cpu
