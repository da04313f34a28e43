// gemm() built for AVX-512 (F, DQ, VL, BW) + FMA; CMakeLists.txt adds the flags on x86-64.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns about the _mm512_undefined_* values inside its own AVX-512 headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define Eigen ember_eigen_avx512
#include "ember/core/cpu/gemm_eigen.h"

namespace ember::cpu {

GemmKernels gemm_kernels_avx512() {
#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512VL__) && defined(__AVX512BW__)
  return {&eigen_gemm<float>, &eigen_gemm<double>};
#else
  return {};
#endif
}

}  // namespace ember::cpu
