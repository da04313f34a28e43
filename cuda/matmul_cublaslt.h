#pragma once

// Matrix products on CUDA through cuBLASLt: the kernel of bmm_stub (every matmul, mm, bmm,
// addmm, baddbmm, einsum) and the batched GEMM that other CUDA kernels (attention) build on.

#include <cstdint>
#include <string>
#include <string_view>

#include "ember/core/tensor.h"

namespace ember::cuda {

namespace matmul {
// Whether float32 products may run on TF32 tensor cores (10-bit mantissa inputs, float32
// accumulation), as torch.backends.cuda.matmul.allow_tf32. Off by default, as in PyTorch.
void set_allow_tf32(bool allow);
bool allow_tf32();
}  // namespace matmul

// torch.cuda.tunable for matrix products: enabled, the first product of each problem (shapes,
// strides, dtypes, alignments, epilogue) times cuBLASLt's first few heuristic algorithms on the
// GPU and keeps the fastest for that problem; off (the default, as in PyTorch), the heuristic's
// first pick runs. The timing waits for the GPU, once per problem; it is skipped (the first pick
// runs) while a CUDA graph captures, under deterministic algorithms (the pick could change from
// run to run), and where beta is not 0. The environment variable EMBER_TUNABLEOP_ENABLED=1
// enables it at startup, as PYTORCH_TUNABLEOP_ENABLED.
namespace tunable {
void enable(bool enabled = true);
bool is_enabled();
// How many problems this process has timed so far (torch.cuda.tunable.get_results() lists them).
int64_t tuned_problems();
}  // namespace tunable

}  // namespace ember::cuda

namespace ember {

// torch.set_float32_matmul_precision: "highest" keeps float32 products in float32; "high" and
// "medium" let them run on TF32 (ember has no bfloat16 decomposition for "medium"). The same
// switch as cuda::matmul::set_allow_tf32.
inline void set_float32_matmul_precision(std::string_view precision) {
  EMBER_CHECK(precision == "highest" || precision == "high" || precision == "medium",
              "set_float32_matmul_precision: expected \"highest\", \"high\" or \"medium\", got \"", precision,
              "\"");
  cuda::matmul::set_allow_tf32(precision != "highest");
}
inline std::string get_float32_matmul_precision() { return cuda::matmul::allow_tf32() ? "high" : "highest"; }

}  // namespace ember

namespace ember::cuda {

// What cuBLASLt does with each product besides storing it: nothing, + bias, or + bias then GELU
// (tanh approximation, F.gelu(approximate="tanh")); or, RowSumsOfA, writing a summed over K into
// `bias` (cuBLASLt's BGRADB: a linear's bias gradient next to its weight gradient).
enum class Epilogue : int8_t { None, Bias, GeluBias, RowSumsOfA };

// out[i] = epilogue(alpha * a[i] @ b[i] + beta * out[i]) for out [B, M, N], a [B, M, K] and
// b [B, K, N], on the current stream. Operands may have any strides (batch stride 0 broadcasts);
// one whose matrices are neither row- nor column-major is copied first. a and b share a floating
// dtype; out has it too, or float32 when a and b are f16/bf16 (the float32 accumulator kept).
// f16/bf16 accumulate in float32 and round once. beta == 0 does not read out. bias is [N] in
// out's dtype, added to every row, for the Bias and GeluBias epilogues; for RowSumsOfA it is
// written, [M] contiguous in out's dtype, with B = 1, alpha = 1 and beta = 0 (fused only where a's
// and b's rows are 16-byte aligned, else a separate reduction). Integer dtypes throw.
void gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha = 1, double beta = 0,
          Epilogue epilogue = Epilogue::None, const Tensor& bias = {});

}  // namespace ember::cuda
