// Lab (STYLE.md #9): how far cuBLASLt's first heuristic pick is from its best candidate on the
// BERT-base step's GEMMs (b32 s128: M = 4096 tokens), in the three forms ember calls: the forward
// with a bias epilogue (bf16 out), the input gradient (bf16 out) and the weight gradient with the
// bias gradient fused (BGRADB, float32 out). For each, every candidate the heuristic returns (up to
// 16) is timed, median of 20 runs; the table says whether picking by measurement would pay.
//   gemm_algo_lab [--tokens 4096]
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

#define CHECK_CUDA(x)                                                                 \
  do {                                                                                \
    cudaError_t e = (x);                                                              \
    if (e != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)
#define CHECK_LT(x)                                                                    \
  do {                                                                                 \
    cublasStatus_t s = (x);                                                            \
    if (s != CUBLAS_STATUS_SUCCESS) {                                                  \
      std::fprintf(stderr, "%s:%d: cublasLt status %d\n", __FILE__, __LINE__, int(s)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

// WeightGradPlain: the weight gradient without the bias-gradient epilogue, which lets cuBLASLt
// split K (4096 tokens) over more blocks when the output is a few tiles (768 x 768: 36).
enum class Form { Forward, InputGrad, WeightGrad, WeightGradPlain };

struct Case {
  const char* name;
  Form form;
  int64_t n, k;  // the linear's out_features and in_features
};

// Column-major view of the row-major tensors: out[M, N] = x[M, K] W[N, K]^T + b is
// out^T[N, M] = W^T... op(A)[N, K] * x^T[K, M], A = W stored [K, N] col-major, transposed.
void run_case(cublasLtHandle_t lt, const Case& c, int64_t m, void* ws, size_t ws_size, cudaStream_t stream) {
  const int64_t n = c.n, k = c.k;
  // rows, cols (col-major) of A, B, D and the GEMM's (M', N', K').
  cublasOperation_t opa = CUBLAS_OP_N, opb = CUBLAS_OP_N;
  int64_t ar, ac, br, bc, dr, dc;
  cudaDataType_t dtype = CUDA_R_16BF;
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  switch (c.form) {
    case Form::Forward:  // D[N, M] = W^T(op T on [K, N]) * x^T [K, M], bias along N
      opa = CUBLAS_OP_T, ar = k, ac = n, br = k, bc = m, dr = n, dc = m, epi = CUBLASLT_EPILOGUE_BIAS;
      break;
    case Form::InputGrad:  // dx^T[K, M] = W^T... A = W as [K, N] col-major, B = dy^T [N, M]
      ar = k, ac = n, br = n, bc = m, dr = k, dc = m;
      break;
    case Form::WeightGrad:  // dW^T[K, N] = x^T [K, M] * dy [M, N] (op T on dy^T [N, M]), sums of dy
    case Form::WeightGradPlain:
      opb = CUBLAS_OP_T, ar = k, ac = m, br = n, bc = m, dr = k, dc = n, dtype = CUDA_R_32F;
      if (c.form == Form::WeightGrad) epi = CUBLASLT_EPILOGUE_BGRADB;
      break;
  }
  void *a, *b, *d, *bias;
  CHECK_CUDA(cudaMalloc(&a, ar * ac * 2));
  CHECK_CUDA(cudaMalloc(&b, br * bc * 2));
  CHECK_CUDA(cudaMalloc(&d, dr * dc * 4));
  CHECK_CUDA(cudaMalloc(&bias, std::max(n, k) * 4));
  CHECK_CUDA(cudaMemset(a, 0, ar * ac * 2));
  CHECK_CUDA(cudaMemset(b, 0, br * bc * 2));
  CHECK_CUDA(cudaMemset(bias, 0, std::max(n, k) * 4));

  cublasLtMatmulDesc_t desc;
  CHECK_LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
  CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
  CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  cudaDataType_t bias_type = c.form == Form::WeightGrad ? CUDA_R_32F : CUDA_R_16BF;
  CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                          sizeof(bias_type)));
  cublasLtMatrixLayout_t la, lb, ld;
  CHECK_LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, ar, ac, ar));
  CHECK_LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, br, bc, br));
  CHECK_LT(cublasLtMatrixLayoutCreate(&ld, dtype, dr, dc, dr));
  cublasLtMatmulPreference_t pref;
  CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
  CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_size,
                                                sizeof(ws_size)));
  cublasLtMatmulHeuristicResult_t results[16];
  int found = 0;
  CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 16, results, &found));
  if (found == 0) {
    std::printf("%-28s no candidate\n", c.name);
    return;
  }
  const float alpha = 1, beta = 0;
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<float> medians;
  for (int i = 0; i < found; ++i) {
    std::vector<float> ms;
    bool ok = true;
    for (int r = 0; r < 23 && ok; ++r) {
      CHECK_CUDA(cudaEventRecord(start, stream));
      ok = cublasLtMatmul(lt, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &results[i].algo, ws, ws_size,
                          stream) == CUBLAS_STATUS_SUCCESS;
      CHECK_CUDA(cudaEventRecord(stop, stream));
      CHECK_CUDA(cudaEventSynchronize(stop));
      float t = 0;
      CHECK_CUDA(cudaEventElapsedTime(&t, start, stop));
      if (r >= 3) ms.push_back(t);
    }
    if (!ok) {
      medians.push_back(1e9f);
      continue;
    }
    std::sort(ms.begin(), ms.end());
    medians.push_back(ms[ms.size() / 2]);
  }
  const auto best = std::min_element(medians.begin(), medians.end());
  const double flop = 2.0 * m * n * k;
  std::printf(
      "%-28s %2d candidates  first %7.1f us (%4.0f TFLOP/s)  best #%-2d %7.1f us (%4.0f TFLOP/s)  %.2fx\n",
      c.name, found, medians[0] * 1e3, flop / medians[0] / 1e9, int(best - medians.begin()), *best * 1e3,
      flop / *best / 1e9, medians[0] / *best);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(desc);
  cudaFree(a);
  cudaFree(b);
  cudaFree(d);
  cudaFree(bias);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t tokens = 4096;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--tokens") tokens = std::atoll(argv[i + 1]);
  cublasLtHandle_t lt;
  CHECK_LT(cublasLtCreate(&lt));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  const size_t ws_size = 32 << 20;
  void* ws;
  CHECK_CUDA(cudaMalloc(&ws, ws_size));
  const Case cases[] = {
      {"qkv forward", Form::Forward, 2304, 768},          {"qkv input grad", Form::InputGrad, 2304, 768},
      {"qkv weight grad", Form::WeightGrad, 2304, 768},   {"out forward", Form::Forward, 768, 768},
      {"out input grad", Form::InputGrad, 768, 768},      {"out weight grad", Form::WeightGrad, 768, 768},
      {"ffn1 forward", Form::Forward, 3072, 768},         {"ffn1 input grad", Form::InputGrad, 3072, 768},
      {"ffn1 weight grad", Form::WeightGrad, 3072, 768},  {"ffn2 forward", Form::Forward, 768, 3072},
      {"ffn2 input grad", Form::InputGrad, 768, 3072},    {"ffn2 weight grad", Form::WeightGrad, 768, 3072},
      {"qkv weight grad, no bgrad", Form::WeightGradPlain, 2304, 768},
      {"out weight grad, no bgrad", Form::WeightGradPlain, 768, 768},
      {"ffn1 weight grad, no bgrad", Form::WeightGradPlain, 3072, 768},
      {"ffn2 weight grad, no bgrad", Form::WeightGradPlain, 768, 3072},
      {"head forward", Form::Forward, 30522, 768},        {"head input grad", Form::InputGrad, 30522, 768},
      {"head weight grad", Form::WeightGrad, 30522, 768},
  };
  std::printf("cuBLASLt candidates on M = %lld tokens (bf16 in, f32 compute)\n",
              static_cast<long long>(tokens));
  for (const Case& c : cases) run_case(lt, c, tokens, ws, ws_size, stream);
  return 0;
}
