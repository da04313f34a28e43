// cuBLASLt batched GEMM and the CUDA kernel of bmm_stub.
//
// cuBLASLt is column-major and ember's matrices are mostly row-major: a row-major [M, N] output
// is the column-major [N, M] matrix out^T = b^T a^T, so the product runs with the operands
// swapped, each passed transposed or not as its strides say. Transposed, strided and
// broadcast-batch (stride 0) views go in without copies. The heuristic's pick is cached per
// problem (shapes, strides, dtypes, alignments, epilogue).
#include "ember/cuda/matmul_cublaslt.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string_view>

#include "ember/core/deterministic.h"
#include "ember/core/factories.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/ops/linalg.h"
#include "ember/cuda/blas_handle.h"
#include "ember/cuda/event.h"
#include "ember/cuda/graph.h"
#include "ember/cuda/handle_pool.h"
#include "ember/cuda/plan_cache.h"

namespace ember::cuda {

namespace matmul {
namespace {
std::atomic<bool> g_allow_tf32{false};
}  // namespace
void set_allow_tf32(bool allow) { g_allow_tf32.store(allow, std::memory_order_relaxed); }
bool allow_tf32() { return g_allow_tf32.load(std::memory_order_relaxed); }
}  // namespace matmul

namespace tunable {
namespace {
std::atomic<bool> g_enabled{[] {
  const char* env = std::getenv("EMBER_TUNABLEOP_ENABLED");
  return env != nullptr && std::string_view(env) == "1";
}()};
std::atomic<int64_t> g_tuned{0};
}  // namespace
void enable(bool enabled) { g_enabled.store(enabled, std::memory_order_relaxed); }
bool is_enabled() { return g_enabled.load(std::memory_order_relaxed); }
int64_t tuned_problems() { return g_tuned.load(std::memory_order_relaxed); }
}  // namespace tunable

namespace {

cudaDataType_t cuda_type(ScalarType t) {
  switch (t) {
    case kFloat16:
      return CUDA_R_16F;
    case kBFloat16:
      return CUDA_R_16BF;
    case kFloat64:
      return CUDA_R_64F;
    default:
      return CUDA_R_32F;
  }
}

// PyTorch's name of a dtype in its "not implemented for 'Long'" errors.
const char* torch_name(ScalarType t) {
  constexpr const char* kNames[] = {"Bool", "Byte", "Int", "Long", "Half", "BFloat16", "Float", "Double"};
  return kNames[static_cast<int>(t)];
}

// A batch of matrices as cuBLASLt takes them: column-major rows x cols with leading dimension
// ld (elements), used as is (N) or transposed (T).
struct Operand {
  const char* ptr;
  cublasOperation_t op;
  int64_t rows, cols, ld, batch_stride;
};

// The logical p x q matrices at ptr, element (i, j) at i * rs + j * cs, batch stride bs, as a
// cuBLASLt operand: column-major (op N) or row-major (the transposed column-major q x p, op T).
// A dim of size 1 takes any stride. None when neither layout fits (e.g. a stride-0 expanded dim).
std::optional<Operand> as_operand(const void* ptr, int64_t p, int64_t q, int64_t rs, int64_t cs, int64_t bs) {
  const auto* c = static_cast<const char*>(ptr);
  if ((rs == 1 || p == 1) && (q == 1 || cs >= std::max<int64_t>(p, 1)))
    return Operand{c, CUBLAS_OP_N, p, q, q == 1 ? std::max<int64_t>(p, 1) : cs, bs};
  if ((cs == 1 || q == 1) && (p == 1 || rs >= std::max<int64_t>(q, 1)))
    return Operand{c, CUBLAS_OP_T, q, p, p == 1 ? std::max<int64_t>(q, 1) : rs, bs};
  return std::nullopt;
}

// The largest power of two up to 256 that the address, the leading dimension and (for several
// matrices) the batch stride are all multiples of, in bytes: what the heuristic may assume.
uint32_t alignment(const void* p, int64_t ld, int64_t batch_stride, int64_t batch, size_t es) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | static_cast<uint64_t>(ld) * es |
                  (batch > 1 ? static_cast<uint64_t>(batch_stride) * es : 0);
  uint32_t a = 256;
  while (a > 1 && (bits & (a - 1))) a >>= 1;
  return a;
}

// t [B, r, c] with its matrices row-major contiguous; a broadcast batch (stride 0) stays one
// matrix.
Tensor packed(const Tensor& t) {
  if (t.size(0) > 1 && t.stride(0) == 0) return t.select(0, 0).contiguous().unsqueeze(0).expand(t.sizes());
  return t.contiguous();
}

// Heuristic picks by everything they depend on (run_problem's key).
using MatmulPlans = detail::PlanCache<22, cublasLtMatmulHeuristicResult_t>;

MatmulPlans& plan_cache() {
  static auto* cache = new MatmulPlans;  // leaked: used until the process ends
  return *cache;
}

template <class T>
void set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const T& v) {
  EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, a, &v, sizeof v));
}
template <class T>
void set_attr(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a, const T& v) {
  EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, a, &v, sizeof v));
}
template <class T>
void set_attr(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t a, const T& v) {
  EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, a, &v, sizeof v));
}

// One cuBLASLt call's problem: D (m x n, column-major, ld ldd) = op(A) op(B) over `batch`
// matrices, all pointers already offset to the first.
struct Problem {
  Operand a, b;
  char* d;
  int64_t m, n, k, ldd, batch_stride_d, batch;
  ScalarType in_type, out_type;
  Epilogue epilogue;
  const void* bias;
};

constexpr int kTunableCandidates = 8;

// One cuBLASLt call of the problem with the plan's algorithm.
cublasStatus_t launch(const cublasLtMatmulHeuristicResult_t& plan, const Problem& p, double alpha,
                      double beta, cublasLtMatmulDesc_t op_desc, cublasLtMatrixLayout_t la,
                      cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t ld, const Workspace& ws,
                      const Stream& stream) {
  const bool f64 = p.in_type == kFloat64;
  const float alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
  const void* alpha_p = f64 ? static_cast<const void*>(&alpha) : &alpha_f;
  const void* beta_p = f64 ? static_cast<const void*>(&beta) : &beta_f;
  return cublasLtMatmul(cublaslt_handle(), op_desc, alpha_p, p.a.ptr, la, p.b.ptr, lb, beta_p, p.d, ld, p.d,
                        ld, &plan.algo, ws.ptr, plan.workspaceSize, stream.stream());
}

// Milliseconds per run of `run(plan)` (a warm-up, then the mean of three) on the current stream,
// waiting for them; none when a run fails.
template <class Run>
std::optional<float> time_algo(const cublasLtMatmulHeuristicResult_t& plan, const Run& run) {
  constexpr int kRuns = 3;
  if (run(plan) != CUBLAS_STATUS_SUCCESS) return std::nullopt;
  Event start(true), end(true);
  start.record();
  for (int i = 0; i < kRuns; ++i)
    if (run(plan) != CUBLAS_STATUS_SUCCESS) return std::nullopt;
  end.record();
  return start.elapsed_time(end) / kRuns;
}

// Runs the problem; false when cuBLASLt has no algorithm for it.
bool run_problem(const Problem& p, double alpha, double beta) {
  const bool f64 = p.in_type == kFloat64;
  const bool reduced = is_reduced_float(p.in_type);
  const cublasComputeType_t compute =
      f64 ? CUBLAS_COMPUTE_64F
          : (p.in_type == kFloat32 && matmul::allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                           : CUBLAS_COMPUTE_32F);
  const cudaDataType_t scale = f64 ? CUDA_R_64F : CUDA_R_32F;
  const cudaDataType_t in_t = cuda_type(p.in_type), out_t = cuda_type(p.out_type);
  const size_t in_es = element_size(p.in_type), out_es = element_size(p.out_type);

  cublasLtMatmulDescOpaque_t op_desc;
  EMBER_CUBLAS_CHECK(cublasLtMatmulDescInit(&op_desc, compute, scale));
  set_attr(&op_desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(p.a.op));
  set_attr(&op_desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(p.b.op));
  if (p.epilogue != Epilogue::None) {
    // RowSumsOfA: the swapped product's B is a^T, reduced over K (BGRADB).
    const cublasLtEpilogue_t ep = p.epilogue == Epilogue::Bias       ? CUBLASLT_EPILOGUE_BIAS
                                  : p.epilogue == Epilogue::GeluBias ? CUBLASLT_EPILOGUE_GELU_BIAS
                                                                     : CUBLASLT_EPILOGUE_BGRADB;
    set_attr(&op_desc, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(ep));
    set_attr(&op_desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias);
  }
  cublasLtMatrixLayoutOpaque_t la, lb, ld;
  EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&la, in_t, p.a.rows, p.a.cols, p.a.ld));
  EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&lb, in_t, p.b.rows, p.b.cols, p.b.ld));
  EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&ld, out_t, p.m, p.n, p.ldd));
  if (p.batch > 1) {
    const auto count = static_cast<int32_t>(p.batch);
    set_attr(&la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count);
    set_attr(&la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, p.a.batch_stride);
    set_attr(&lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count);
    set_attr(&lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, p.b.batch_stride);
    set_attr(&ld, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count);
    set_attr(&ld, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, p.batch_stride_d);
  }

  const Stream stream = current_stream();
  const Workspace ws = cublaslt_workspace(stream);
  const uint32_t align_a = alignment(p.a.ptr, p.a.ld, p.a.batch_stride, p.batch, in_es);
  const uint32_t align_b = alignment(p.b.ptr, p.b.ld, p.b.batch_stride, p.batch, in_es);
  const uint32_t align_d = alignment(p.d, p.ldd, p.batch_stride_d, p.batch, out_es);
  const uint32_t align_bias = p.bias ? alignment(p.bias, 0, 0, 1, out_es) : 0;
  const MatmulPlans::Key key{{stream.device_index(),
                              compute,
                              in_t,
                              out_t,
                              p.a.op,
                              p.b.op,
                              p.m,
                              p.n,
                              p.k,
                              p.a.ld,
                              p.b.ld,
                              p.ldd,
                              p.batch,
                              p.a.batch_stride,
                              p.b.batch_stride,
                              p.batch_stride_d,
                              align_a,
                              align_b,
                              align_d,
                              static_cast<int64_t>(p.epilogue),
                              align_bias,
                              static_cast<int64_t>(ws.bytes)}};
  std::optional<cublasLtMatmulHeuristicResult_t> plan = plan_cache().find(key);
  if (!plan) {
    cublasLtMatmulPreferenceOpaque_t pref;
    EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceInit(&pref));
    set_attr(&pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(ws.bytes));
    set_attr(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a);
    set_attr(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b);
    set_attr(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d);
    set_attr(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d);
    // f16/bf16 round once: no split-K partial sums kept in the 16-bit output type.
    if (reduced)
      set_attr(
          &pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
          static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE | CUBLASLT_REDUCTION_SCHEME_NONE));
    // Tuning runs the candidates into d (and the bias sums), which the chosen one then overwrites.
    const bool capturing = is_current_stream_capturing();
    const bool tune =
        tunable::is_enabled() && beta == 0 && !capturing && !are_deterministic_algorithms_enabled();
    cublasLtMatmulHeuristicResult_t results[kTunableCandidates] = {};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(cublaslt_handle(), &op_desc, &la, &lb, &ld, &ld, &pref,
                                                       tune ? kTunableCandidates : 1, results, &found);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found == 0)) return false;
    EMBER_CUBLAS_CHECK(st);
    plan = results[0];
    if (tune) {
      auto run = [&](const cublasLtMatmulHeuristicResult_t& r) {
        return launch(r, p, alpha, beta, &op_desc, &la, &lb, &ld, ws, stream);
      };
      float best = std::numeric_limits<float>::infinity();
      for (int i = 0; i < found; ++i) {
        const std::optional<float> ms = time_algo(results[i], run);
        if (ms && *ms < best) {
          best = *ms;
          plan = results[i];
        }
      }
      tunable::g_tuned.fetch_add(1, std::memory_order_relaxed);
    }
    // A capture's pick is not kept while tuning is on: an eager call times the candidates later.
    if (!(capturing && tunable::is_enabled())) plan_cache().insert(key, *plan);
  }
  EMBER_CUBLAS_CHECK(launch(*plan, p, alpha, beta, &op_desc, &la, &lb, &ld, ws, stream));
  return true;
}

// The epilogue with ember ops, for what cuBLASLt does not fuse.
void apply_epilogue(const Tensor& out, const Tensor& a, Epilogue epilogue, const Tensor& bias) {
  if (epilogue == Epilogue::None) return;
  if (epilogue == Epilogue::RowSumsOfA) {
    bias.copy_(a.select(0, 0).sum({1}, false, bias.dtype()));  // float32 sums of bf16 rows stay float32
    return;
  }
  out.add_(bias);
  if (epilogue == Epilogue::GeluBias) out.copy_(gelu(out, "tanh"));
}

// out = epilogue(alpha * a @ b + beta * out) for an empty sum (K = 0).
void empty_product(const Tensor& out, const Tensor& a, double beta, Epilogue epilogue, const Tensor& bias) {
  if (beta == 0)
    out.zero_();
  else
    out.mul_(beta);
  apply_epilogue(out, a, epilogue, bias);
}

// gemm() once the operands are checked; false when cuBLASLt has no algorithm for their layout.
bool try_gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta,
              Epilogue epilogue, const Tensor& bias) {
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  // The output as cuBLASLt's D: row-major (computed as out^T = b^T a^T) or column-major. The
  // bias runs along D's rows, so it needs the row-major form. Else a contiguous stand-in.
  std::optional<Operand> d = as_operand(out.data_ptr(), n, m, out.stride(2), out.stride(1), out.stride(0));
  const bool swap = d && d->op == CUBLAS_OP_N;
  if (!swap) {
    d = epilogue == Epilogue::None
            ? as_operand(out.data_ptr(), m, n, out.stride(1), out.stride(2), out.stride(0))
            : std::nullopt;
    if (d && d->op != CUBLAS_OP_N) d.reset();
  }
  if (!d || (batch > 1 && out.stride(0) == 0)) {
    Tensor tmp = empty({batch, m, n}, out.options());
    if (beta != 0) tmp.copy_(out);
    if (!try_gemm(tmp, a, b, alpha, beta, epilogue, bias)) return false;
    out.copy_(tmp);
    return true;
  }
  // cuBLASLt's A and B: b^T and a^T when swapped, else a and b.
  std::optional<Operand> oa, ob;
  if (swap) {
    oa = as_operand(b.data_ptr(), n, k, b.stride(2), b.stride(1), b.stride(0));
    ob = as_operand(a.data_ptr(), k, m, a.stride(2), a.stride(1), a.stride(0));
  } else {
    oa = as_operand(a.data_ptr(), m, k, a.stride(1), a.stride(2), a.stride(0));
    ob = as_operand(b.data_ptr(), k, n, b.stride(1), b.stride(2), b.stride(0));
  }
  if (!oa || !ob) {
    // An operand with an expanded (stride 0) or otherwise unusable matrix dim: copy it.
    const bool pack_a = swap ? !ob : !oa, pack_b = swap ? !oa : !ob;
    return try_gemm(out, pack_a ? packed(a) : a, pack_b ? packed(b) : b, alpha, beta, epilogue, bias);
  }
  if (batch == 1) oa->batch_stride = ob->batch_stride = d->batch_stride = 0;  // fewer cache keys
  Problem p{*oa,
            *ob,
            static_cast<char*>(out.data_ptr()),
            swap ? n : m,
            swap ? m : n,
            k,
            d->ld,
            d->batch_stride,
            0,
            a.dtype(),
            out.dtype(),
            epilogue,
            bias.defined() ? bias.data_ptr() : nullptr};
  // cuBLASLt counts a batch in int32.
  const int64_t chunk = INT32_MAX;
  const size_t in_es = a.element_size(), out_es = out.element_size();
  for (int64_t b0 = 0; b0 < batch; b0 += chunk) {
    Problem c = p;
    c.batch = std::min(chunk, batch - b0);
    c.a.ptr += b0 * c.a.batch_stride * static_cast<int64_t>(in_es);
    c.b.ptr += b0 * c.b.batch_stride * static_cast<int64_t>(in_es);
    c.d += b0 * c.batch_stride_d * static_cast<int64_t>(out_es);
    if (!run_problem(c, alpha, beta)) return false;
  }
  return true;
}

}  // namespace

void gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta, Epilogue epilogue,
          const Tensor& bias) {
  EMBER_CHECK(out.dim() == 3 && a.dim() == 3 && b.dim() == 3 && a.size(0) == out.size(0) &&
                  b.size(0) == out.size(0) && a.size(1) == out.size(1) && b.size(2) == out.size(2) &&
                  a.size(2) == b.size(1),
              "gemm: expected out [B, M, N], a [B, M, K] and b [B, K, N], got ", out.sizes(), ", ", a.sizes(),
              " and ", b.sizes());
  EMBER_CHECK(out.is_cuda() && a.is_cuda() && b.is_cuda(), "gemm: expected CUDA tensors, got ", out.device(),
              ", ", a.device(), " and ", b.device());
  detail::check_on_current_device("gemm", out.device());
  const ScalarType dt = a.dtype();
  EMBER_CHECK(is_floating_point(dt), "gemm: \"gemm_cuda\" not implemented for '", torch_name(dt), "'");
  EMBER_CHECK(b.dtype() == dt && (out.dtype() == dt || (is_reduced_float(dt) && out.dtype() == kFloat32)),
              "gemm: expected a and b of one dtype and out of that dtype (or float32 for f16/bf16), got ",
              a.dtype(), ", ", b.dtype(), " and out ", out.dtype());
  Tensor bias_c;
  if (epilogue == Epilogue::RowSumsOfA) {
    EMBER_CHECK(bias.defined() && bias.dim() == 1 && bias.size(0) == out.size(1) && bias.is_contiguous() &&
                    bias.dtype() == out.dtype() && bias.device() == out.device() && out.size(0) == 1 &&
                    alpha == 1 && beta == 0,
                "gemm: expected a contiguous [", out.size(1), "] of dtype ", out.dtype(), " on ",
                out.device(), " for the row sums of a, one product, alpha 1 and beta 0");
    bias_c = bias;
  } else if (epilogue != Epilogue::None) {
    EMBER_CHECK(bias.defined() && bias.dim() == 1 && bias.size(0) == out.size(2) &&
                    bias.dtype() == out.dtype() && bias.device() == out.device(),
                "gemm: expected a bias [", out.size(2), "] of dtype ", out.dtype(), " on ", out.device(),
                " for the epilogue");
    bias_c = bias.contiguous();
  }
  constexpr int64_t kIntMax = INT32_MAX;
  EMBER_CHECK(out.size(1) <= kIntMax && out.size(2) <= kIntMax && a.size(2) <= kIntMax,
              "gemm: matrix sizes must fit in int32, got out ", out.sizes(), " and K = ", a.size(2));
  if (out.numel() == 0) {
    if (epilogue == Epilogue::RowSumsOfA) apply_epilogue(out, a, epilogue, bias_c);
    return;
  }
  if (a.size(2) == 0) return empty_product(out, a, beta, epilogue, bias_c);
  // A K or an M that is not a multiple of 16 bytes' worth of elements (a 30522-word head's
  // gradients) slows cuBLASLt's kernels about 3x (H200), whatever the rows' alignment: the bulk
  // runs as an aligned product, the last few terms (or rows) as a second one.
  const int64_t per_vector = 16 / static_cast<int64_t>(a.element_size()), k = a.size(2), m = out.size(1);
  constexpr int64_t kMinSplit = 1024;  // the remainder's second launch is then a small share
  if (k >= kMinSplit && k % per_vector != 0 && (epilogue == Epilogue::None || epilogue == Epilogue::Bias)) {
    const int64_t k1 = k / per_vector * per_vector;
    gemm(out, a.narrow(2, 0, k1), b.narrow(1, 0, k1), alpha, beta, epilogue, bias_c);
    gemm(out, a.narrow(2, k1, k - k1), b.narrow(1, k1, k - k1), alpha, 1);
    return;
  }
  if (m >= kMinSplit && m % per_vector != 0) {
    const int64_t m1 = m / per_vector * per_vector;
    const bool sums = epilogue == Epilogue::RowSumsOfA;  // the bias runs along N, the sums along M
    gemm(out.narrow(1, 0, m1), a.narrow(1, 0, m1), b, alpha, beta, epilogue,
         sums ? bias_c.narrow(0, 0, m1) : bias_c);
    gemm(out.narrow(1, m1, m - m1), a.narrow(1, m1, m - m1), b, alpha, beta, epilogue,
         sums ? bias_c.narrow(0, m1, m - m1) : bias_c);
    return;
  }
  // Likewise an N that is not, into rows padded to 16 bytes (a 30522-word head's logits: 0.80 ms
  // unsplit against 0.28 for 30528 columns): the bulk of the columns, then the last few.
  const int64_t n = out.size(2);
  const bool rows_aligned = (out.stride(1) * static_cast<int64_t>(out.element_size())) % 16 == 0;
  if (n >= kMinSplit && n % per_vector != 0 && rows_aligned && out.stride(2) == 1 &&
      epilogue != Epilogue::RowSumsOfA) {
    const int64_t n1 = n / per_vector * per_vector;
    const bool has_bias = epilogue != Epilogue::None;
    gemm(out.narrow(2, 0, n1), a, b.narrow(2, 0, n1), alpha, beta, epilogue,
         has_bias ? bias_c.narrow(0, 0, n1) : bias_c);
    gemm(out.narrow(2, n1, n - n1), a, b.narrow(2, n1, n - n1), alpha, beta, epilogue,
         has_bias ? bias_c.narrow(0, n1, n - n1) : bias_c);
    return;
  }
  // BGRADB on rows that are not 16-byte aligned (a 30522-word head's gradient) ran 6x slower on
  // the H200 than the product and a separate reduction, which such shapes get instead.
  auto aligned = [](const Tensor& t) {
    return (std::max(t.stride(1), t.stride(2)) * static_cast<int64_t>(t.element_size())) % 16 == 0;
  };
  const bool fuse = epilogue != Epilogue::RowSumsOfA || (aligned(a) && aligned(b));
  if (fuse && try_gemm(out, a, b, alpha, beta, epilogue, bias_c)) return;
  if (epilogue != Epilogue::None) {  // not fused: the product, then the epilogue
    gemm(out, a, b, alpha, beta);
    return apply_epilogue(out, a, epilogue, bias_c);
  }
  // Unusual strides or alignment can leave the heuristic without a kernel: retry dense.
  Tensor tmp = empty(out.sizes(), out.options());
  if (beta != 0) tmp.copy_(out);
  EMBER_CHECK(try_gemm(tmp, a.contiguous(), b.contiguous(), alpha, beta, epilogue, bias_c),
              "gemm: cuBLASLt found no algorithm for out ", out.sizes(), " (", out.dtype(), ") = a ",
              a.sizes(), " @ b ", b.sizes(), " (", a.dtype(), ")");
  out.copy_(tmp);
}

namespace {

void bmm_cuda(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha, const Scalar& beta) {
  EMBER_CHECK(is_floating_point(out.dtype()), "bmm: \"bmm_cuda\" not implemented for '",
              torch_name(out.dtype()), "'");
  gemm(out, a, b, alpha.to_double(), beta.to_double());
}

// addmm with a bias row (nn.Linear): the bias added in cuBLASLt's epilogue.
void addmm_bias_cuda(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias) {
  gemm(out.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), 1, 0, Epilogue::Bias, bias);
}

void mm_row_sums_cuda(const Tensor& out, const Tensor& sums, const Tensor& a, const Tensor& b) {
  gemm(out.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), 1, 0,
       sums.defined() ? Epilogue::RowSumsOfA : Epilogue::None, sums);
}

KernelRegistrar<BmmFn> reg_bmm(bmm_stub, kCUDA, &bmm_cuda);
KernelRegistrar<MmRowSumsFn> reg_mm_row_sums(mm_row_sums_stub, kCUDA, &mm_row_sums_cuda);
KernelRegistrar<AddmmBiasFn> reg_addmm_bias(addmm_bias_stub, kCUDA, &addmm_bias_cuda);

}  // namespace
}  // namespace ember::cuda
