// CPU kernel of bmm_stub, and gemm() with the widest ISA level that the CPU supports.
#include <cstdlib>
#include <string_view>
#include <type_traits>
#include <vector>

#include "ember/core/cpu/gemm_eigen.h"
#include "ember/core/ops/linalg.h"
#include "ember/core/parallel.h"

namespace ember::cpu {
namespace {

// EMBER_CPU_CAPABILITY=default|avx2 caps the level, to exercise the narrower kernels.
GemmKernels pick_kernels() {
  GemmKernels k{&eigen_gemm<float>, &eigen_gemm<double>};
#if defined(__x86_64__) || defined(__i386__)
  const char* env = std::getenv("EMBER_CPU_CAPABILITY");
  std::string_view cap = env ? env : "avx512";
  __builtin_cpu_init();
  if (cap != "default" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    if (GemmKernels v = gemm_kernels_avx2(); v.f32) k = v;
  if (cap == "avx512" && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw"))
    if (GemmKernels v = gemm_kernels_avx512(); v.f32) k = v;
#endif
  return k;
}

const GemmKernels& kernels() {
  static const GemmKernels k = pick_kernels();
  return k;
}

// The type a product of T runs in: float for f16/bf16, int64 for integers.
template <class T>
using Compute = std::conditional_t<std::is_same_v<T, double>, double,
                                   std::conditional_t<std::is_integral_v<T>, int64_t, float>>;

// Hands gemm an operand in place when it can, else a row-major copy in the compute type; the
// copy is kept for the next batch when the source is the same (a broadcast operand).
template <class C>
class Packer {
 public:
  template <class T>
  MatrixRef<const C> get(const T* p, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    if constexpr (std::is_same_v<T, C>) {
      MatrixRef<const C> m{p, rows, cols, rs, cs};
      if (unit_stride(m)) return m;
    }
    if (p != src_) {
      buf_.resize(static_cast<size_t>(rows * cols));
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) buf_[i * cols + j] = static_cast<C>(p[i * rs + j * cs]);
      src_ = p;
    }
    return {buf_.data(), rows, cols, cols, 1};
  }

 private:
  std::vector<C> buf_;
  const void* src_ = nullptr;
};

template <class T>
void bmm_typed(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha_s,
               const Scalar& beta_s) {
  using C = Compute<T>;
  const C alpha = alpha_s.to<C>(), beta = beta_s.to<C>();
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  const T* pa = a.data_ptr<T>();
  const T* pb = b.data_ptr<T>();
  T* po = out.data_ptr<T>();
  auto run = [&](int64_t begin, int64_t end) {
    Packer<C> pack_a, pack_b;
    std::vector<C> acc;  // the float32 result of an f16/bf16 product, rounded once at the end
    for (int64_t i = begin; i < end; ++i) {
      MatrixRef<const C> am = pack_a.get(pa + i * a.stride(0), m, k, a.stride(1), a.stride(2));
      MatrixRef<const C> bm = pack_b.get(pb + i * b.stride(0), k, n, b.stride(1), b.stride(2));
      T* o = po + i * m * n;
      if constexpr (std::is_same_v<T, C>) {
        gemm<C>(am, bm, {o, m, n, n, 1}, alpha, beta);
      } else {
        acc.resize(static_cast<size_t>(m * n));
        if (beta != C(0))
          for (int64_t j = 0; j < m * n; ++j) acc[j] = static_cast<C>(o[j]);
        gemm<C>(am, bm, {acc.data(), m, n, n, 1}, alpha, beta);
        for (int64_t j = 0; j < m * n; ++j) o[j] = static_cast<T>(acc[j]);
      }
    }
  };
  if (parallel_over_batch(batch,
                          2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k)))
    parallel_for(0, batch, 1, run);
  else
    run(0, batch);
}

void bmm_kernel(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha,
                const Scalar& beta) {
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>)
      EMBER_CHECK(false, "bmm: no CPU kernel for bool");
    else
      bmm_typed<T>(out, a, b, alpha, beta);
  });
}

// The product, then the sums: the CPU has no epilogue to fold them into.
void mm_row_sums_kernel(const Tensor& out, const Tensor& sums, const Tensor& a, const Tensor& b) {
  bmm_kernel(out.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), 1, 0);
  if (sums.defined()) sums.copy_(a.sum({1}));
}

KernelRegistrar<BmmFn> reg_bmm(bmm_stub, kCPU, &bmm_kernel);
KernelRegistrar<MmRowSumsFn> reg_mm_row_sums(mm_row_sums_stub, kCPU, &mm_row_sums_kernel);

}  // namespace

// Many or small products: one per thread. A few large ones (fewer than the threads, or a count
// that would leave threads idle at the end): one at a time on all threads.
bool parallel_over_batch(int64_t batch, double flops) {
  const int64_t threads = get_num_threads();
  return batch > 1 && (batch % threads == 0 || batch >= 4 * threads || flops < 4e6);
}

template <class T>
void gemm(MatrixRef<const T> a, MatrixRef<const T> b, MatrixRef<T> c, T alpha, T beta) {
  if (c.rows == 0 || c.cols == 0) return;
  if (a.cols == 0) {  // an empty sum: c = beta * c
    for (int64_t i = 0; i < c.rows; ++i)
      for (int64_t j = 0; j < c.cols; ++j) {
        T& v = c.data[i * c.row_stride + j];
        v = beta == T(0) ? T(0) : beta * v;
      }
    return;
  }
  if constexpr (std::is_same_v<T, float>)
    kernels().f32(a, b, c, alpha, beta);
  else if constexpr (std::is_same_v<T, double>)
    kernels().f64(a, b, c, alpha, beta);
  else
    eigen_gemm<T>(a, b, c, alpha, beta);
}

template void gemm<float>(MatrixRef<const float>, MatrixRef<const float>, MatrixRef<float>, float, float);
template void gemm<double>(MatrixRef<const double>, MatrixRef<const double>, MatrixRef<double>, double,
                           double);
template void gemm<int64_t>(MatrixRef<const int64_t>, MatrixRef<const int64_t>, MatrixRef<int64_t>, int64_t,
                            int64_t);

}  // namespace ember::cpu
