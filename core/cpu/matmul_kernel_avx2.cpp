// gemm() built for AVX2 + FMA; CMakeLists.txt adds the flags on x86-64.
#define Eigen ember_eigen_avx2
#include "ember/core/cpu/gemm_eigen.h"

namespace ember::cpu {

GemmKernels gemm_kernels_avx2() {
#if defined(__AVX2__) && defined(__FMA__)
  return {&eigen_gemm<float>, &eigen_gemm<double>};
#else
  return {};
#endif
}

}  // namespace ember::cpu
