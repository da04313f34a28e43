// The CUDA kernel of sdpa_stub. The fused kernel (attention_flash.cu) takes what it can; the
// rest runs the math path: scores = scale * Q K^T through cuBLASLt (kept in the float32 or
// float64 accumulator), one kernel per row for the mask, causal limit, softmax and dropout (the
// CPU kernel's Philox stream, so both devices drop the same weights), then P V through
// cuBLASLt, with P rounded to the inputs' dtype as in PyTorch's math backend. Batches run in
// chunks whose scores fit a fixed budget.
#include <cmath>
#include <limits>

#include "ember/core/factories.h"
#include "ember/core/half.h"
#include "ember/core/ops/attention.h"
#include "ember/core/philox.h"
#include "ember/cuda/attention_flash.h"
#include "ember/cuda/handle_pool.h"
#include "ember/cuda/launch.cuh"
#include "ember/cuda/matmul_cublaslt.h"

namespace ember::cuda {
namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
constexpr int kMaxBatchDims = 8;
constexpr int64_t kScoresBudget = int64_t{512} << 20;  // bytes of scores per chunk
constexpr int kSoftmaxThreads = 128;

// The mask as the row kernel reads it: batch dims (sizes, strides), then row and column strides,
// all in elements. Bool (true = attend) or the compute dtype (added).
struct MaskArgs {
  const char* ptr = nullptr;  // null: no mask
  bool is_bool = false;
  int nb = 0;
  int64_t sizes[kMaxBatchDims] = {}, strides[kMaxBatchDims] = {};
  int64_t row_stride = 0, col_stride = 0;
};

MaskArgs mask_args(const Tensor& mask, int64_t nb) {
  MaskArgs m;
  if (!mask.defined()) return m;
  Tensor t = mask;
  if (nb > kMaxBatchDims) {  // fold the batch dims into one
    t = mask.contiguous();
    t = t.view({t.numel() / (mask.size(-2) * mask.size(-1)), mask.size(-2), mask.size(-1)});
    nb = 1;
  }
  m.ptr = static_cast<const char*>(t.data_ptr());
  m.is_bool = t.dtype() == kBool;
  m.nb = static_cast<int>(nb);
  for (int64_t d = 0; d < nb; ++d) m.sizes[d] = t.size(d), m.strides[d] = t.stride(d);
  m.row_stride = t.stride(-2);
  m.col_stride = t.stride(-1);
  return m;
}

template <class C>
__device__ C mask_value(const MaskArgs& m, int64_t base, int64_t j, C s) {
  const int64_t at = base + j * m.col_stride;
  if (m.is_bool) return reinterpret_cast<const bool*>(m.ptr)[at] ? s : -std::numeric_limits<C>::infinity();
  return s + reinterpret_cast<const C*>(m.ptr)[at];
}

// One block per row of scores [rows, S] (rows = batch entries x L, batch entry `first_batch` at
// row 0): mask, causal limit (key j <= query i), softmax and dropout, the result to probs (which
// may be scores itself). A row whose keys are all masked gets NaN, as on the CPU.
template <class C, class P>
__global__ void softmax_rows_kernel(C* scores, P* probs, int64_t rows, int64_t L, int64_t S,
                                    int64_t first_batch, MaskArgs mask, bool causal, double dropout_p,
                                    C keep_scale, PhiloxState state) {
  __shared__ C red[kWarpSize];
  const PhiloxState rng = dropout_p > 0 ? state.resolved() : state;
  constexpr C kNegInf = -std::numeric_limits<C>::infinity();
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t bi = first_batch + row / L, q = row % L;
    C* s = scores + row * S;
    P* pr = probs + row * S;
    int64_t mbase = 0;
    if (mask.ptr) {
      int64_t rest = bi;
      for (int d = mask.nb - 1; d >= 0; --d) {
        mbase += rest % mask.sizes[d] * mask.strides[d];
        rest /= mask.sizes[d];
      }
      mbase += q * mask.row_stride;
    }
    C mx = kNegInf;
    for (int64_t j = threadIdx.x; j < S; j += blockDim.x) {
      C x = s[j];
      if (mask.ptr) x = mask_value<C>(mask, mbase, j, x);
      if (causal && j > q) x = kNegInf;
      s[j] = x;
      mx = x > mx ? x : mx;
    }
    mx = block_reduce(mx, MaxOp(), kNegInf, red);
    C sum = 0;
    for (int64_t j = threadIdx.x; j < S; j += blockDim.x) sum += exp(s[j] - mx);
    sum = block_reduce(sum, SumOp(), C(0), red);
    for (int64_t j = threadIdx.x; j < S; j += blockDim.x) {
      C p = exp(s[j] - mx) / sum;
      if (dropout_p > 0) {
        // Element (q, j) of batch entry bi: word idx % 4 of Philox block idx / 4, as on the CPU.
        const auto idx = static_cast<uint64_t>(bi * L * S + q * S + j);
        const float u = uniform_float(philox_block(rng.seed, rng.offset, idx / 4).v[idx % 4]);
        p = u >= dropout_p ? p * keep_scale : C(0);
      }
      pr[j] = static_cast<P>(p);
    }
  }
}

template <class C, class P>
void launch_softmax(const Tensor& scores, const Tensor& probs, int64_t rows, int64_t L, int64_t S,
                    int64_t first_batch, const MaskArgs& mask, bool causal, double dropout_p,
                    PhiloxState rng) {
  const C keep_scale = dropout_p < 1 ? static_cast<C>(1 / (1 - dropout_p)) : C(0);
  softmax_rows_kernel<C, P><<<grid_for(rows, 1), kSoftmaxThreads, 0, current_stream().stream()>>>(
      static_cast<C*>(scores.data_ptr()), static_cast<P*>(probs.data_ptr()), rows, L, S, first_batch, mask,
      causal, dropout_p, keep_scale, rng);
  EMBER_CUDA_LAUNCH_CHECK();
}

// Whether batch dims [from, nb) of t fold into one stride, written to *stride (0 when they are
// all of size 1).
bool folds(const Tensor& t, int64_t from, int64_t nb, int64_t* stride) {
  int64_t inner = -1, span = 1;
  for (int64_t d = nb - 1; d >= from; --d) {
    if (t.size(d) == 1) continue;
    if (inner < 0) {
      inner = t.stride(d);
    } else if (t.stride(d) != inner * span) {
      return false;
    }
    span *= t.size(d);
  }
  *stride = inner < 0 ? 0 : inner;
  return true;
}

// Element offset of outer batch index o (flat over dims [0, dims)) in t.
int64_t outer_offset(const Tensor& t, int64_t o, int64_t dims) {
  int64_t off = 0;
  for (int64_t d = dims - 1; d >= 0; --d) {
    off += o % t.size(d) * t.stride(d);
    o /= t.size(d);
  }
  return off;
}

void sdpa_math(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
               bool is_causal, double scale, double dropout_p, PhiloxState rng) {
  const int64_t nb = q.dim() - 2, L = q.size(-2), E = q.size(-1), S = k.size(-2), Ev = v.size(-1);
  const ScalarType dt = q.dtype(), cd = dt == kFloat64 ? kFloat64 : kFloat32;
  // Batch dims [0, split) are looped over; [split, nb) fold into one stride per operand and run
  // as one batched product.
  int64_t split = nb, sq = 0, sk = 0, sv = 0;
  for (int64_t j = 0; j <= nb; ++j)
    if (folds(q, j, nb, &sq) && folds(k, j, nb, &sk) && folds(v, j, nb, &sv)) {
      split = j;
      break;
    }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < nb; ++d) (d < split ? outer : inner) *= q.size(d);
  const int64_t per_entry = std::max<int64_t>(1, L * S * static_cast<int64_t>(element_size(cd)));
  const int64_t chunk = std::max<int64_t>(1, std::min(inner, kScoresBudget / per_entry));
  const TensorOptions copt = TensorOptions(cd).device(out.device());
  Tensor scores = empty({chunk, L, S}, copt);
  Tensor probs = dt == cd ? scores : empty({chunk, L, S}, copt.dtype(dt));
  const MaskArgs margs = mask_args(mask, nb);
  for (int64_t o = 0; o < outer; ++o) {
    const int64_t oq = q.storage_offset() + outer_offset(q, o, split);
    const int64_t ok = k.storage_offset() + outer_offset(k, o, split);
    const int64_t ov = v.storage_offset() + outer_offset(v, o, split);
    for (int64_t i0 = 0; i0 < inner; i0 += chunk) {
      const int64_t len = std::min(chunk, inner - i0), first = o * inner + i0;
      Tensor qc = q.as_strided({len, L, E}, {sq, q.stride(-2), 1}, oq + i0 * sq);
      Tensor kc = k.as_strided({len, S, E}, {sk, k.stride(-2), 1}, ok + i0 * sk);
      Tensor vc = v.as_strided({len, S, Ev}, {sv, v.stride(-2), 1}, ov + i0 * sv);
      Tensor oc = out.as_strided({len, L, Ev}, {L * Ev, Ev, 1}, out.storage_offset() + first * L * Ev);
      Tensor sc = scores.narrow(0, 0, len), pc = probs.narrow(0, 0, len);
      if (S > 0) {
        gemm(sc, qc, kc.transpose(1, 2), scale, 0);
        if (cd == kFloat64)
          launch_softmax<double, double>(sc, pc, len * L, L, S, first, margs, is_causal, dropout_p, rng);
        else if (dt == kFloat32)
          launch_softmax<float, float>(sc, pc, len * L, L, S, first, margs, is_causal, dropout_p, rng);
        else if (dt == kFloat16)
          launch_softmax<float, Half>(sc, pc, len * L, L, S, first, margs, is_causal, dropout_p, rng);
        else
          launch_softmax<float, BFloat16>(sc, pc, len * L, L, S, first, margs, is_causal, dropout_p, rng);
      }
      gemm(oc, pc, vc);  // no keys (S = 0): zeros
    }
  }
}

void sdpa_cuda(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
               bool is_causal, double scale, double dropout_p, PhiloxState rng) {
  detail::check_on_current_device(kOp, out.device());
  const ScalarType cd = q.dtype() == kFloat64 ? kFloat64 : kFloat32;
  EMBER_CHECK(!mask.defined() || mask.dtype() == kBool || mask.dtype() == cd, kOp,
              ": expected a bool mask or one of dtype ", cd, ", got ", mask.dtype());
  if (!mask.defined() && dropout_p == 0 && flash_attention_forward(out, q, k, v, is_causal, scale)) return;
  sdpa_math(out, q, k, v, mask, is_causal, scale, dropout_p, rng);
}

KernelRegistrar<SdpaFn> reg(sdpa_stub, kCUDA, &sdpa_cuda);

}  // namespace
}  // namespace ember::cuda
