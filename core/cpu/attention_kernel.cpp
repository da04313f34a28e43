// CPU scaled dot-product attention: for each (batch, block of queries), scores = scale * Q K^T
// through Eigen's GEMM, mask, stable row softmax, optional dropout, then scores * V. Parallel
// over batch x query blocks; f16/bf16 operands are converted to float per block.
#include <cmath>
#include <limits>

#include "ember/core/cpu/nn_kernel_util.h"
#include "ember/core/ops/attention.h"
#include "ember/core/philox.h"

namespace ember::cpu {
namespace {

constexpr int64_t kQueryBlock = 64;

template <class C>
using Mat = Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class C>
using StridedMap = Eigen::Map<const Mat<C>, 0, Eigen::OuterStride<>>;

// Element offset of batch entry `bi` (flat over the leading nb dims) in t.
int64_t batch_offset(const Tensor& t, int64_t bi, int64_t nb) {
  int64_t off = 0;
  for (int64_t d = nb - 1; d >= 0; --d) {
    off += bi % t.size(d) * t.stride(d);
    bi /= t.size(d);
  }
  return off;
}

// Rows [r0, r0 + rows) of the matrix at element offset `off` of t (row stride t.stride(-2), unit
// column stride) as C: mapped in place when t is C, else converted into buf.
template <class C>
StridedMap<C> rows_of(const Tensor& t, int64_t off, int64_t r0, int64_t rows, Mat<C>& buf) {
  int64_t cols = t.size(-1), rs = t.stride(-2);
  const char* base = static_cast<const char*>(t.data_ptr());
  auto es = static_cast<int64_t>(t.element_size());
  if (t.dtype() == dtype_of<C>)
    return StridedMap<C>(reinterpret_cast<const C*>(base) + off + r0 * rs, rows, cols,
                         Eigen::OuterStride<>(rs));
  buf.resize(rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    load_as<C>(base + (off + (r0 + r) * rs) * es, es, t.dtype(), cols, buf.data() + r * cols);
  return StridedMap<C>(buf.data(), rows, cols, Eigen::OuterStride<>(cols));
}

struct MaskView {
  const char* base = nullptr;
  ScalarType dtype = kBool;
  int64_t row_stride = 0, col_stride = 0;  // in elements
};

// Adds the mask (bool: -inf where false; float: added) and the causal limit to scores rows
// [r0, r0 + rows) of one batch entry, then applies a stable softmax and dropout to each row.
template <class C>
void mask_softmax_dropout(Mat<C>& scores, int64_t r0, const MaskView& m, bool is_causal, double p,
                          PhiloxState rng, int64_t first_index) {
  constexpr C kNegInf = -std::numeric_limits<C>::infinity();
  int64_t rows = scores.rows(), S = scores.cols();
  C keep_scale = p < 1 ? static_cast<C>(1 / (1 - p)) : C(0);
  for (int64_t i = 0; i < rows; ++i) {
    C* row = scores.data() + i * S;
    int64_t q = r0 + i;
    if (m.base) {
      for (int64_t j = 0; j < S; ++j) {
        const char* mp = m.base + (q * m.row_stride + j * m.col_stride) * element_size(m.dtype);
        if (m.dtype == kBool)
          row[j] = *reinterpret_cast<const bool*>(mp) ? row[j] : kNegInf;
        else
          row[j] += *reinterpret_cast<const C*>(mp);
      }
    }
    if (is_causal)
      for (int64_t j = q + 1; j < S; ++j) row[j] = kNegInf;
    if (S == 0) continue;
    ArrayMap<C> r(row, S);
    r = exp_ftz(r - r.maxCoeff());
    r /= r.sum();
    if (p > 0) {
      // Element (q, j) of this batch entry uses word idx % 4 of Philox block idx / 4.
      for (int64_t j = 0; j < S; ++j) {
        auto idx = static_cast<uint64_t>(first_index + q * S + j);
        float u = uniform_float(philox_block(rng.seed, rng.offset, idx / 4).v[idx % 4]);
        row[j] = u >= p ? row[j] * keep_scale : C(0);
      }
    }
  }
}

void sdpa_kernel(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                 const Tensor& mask, bool is_causal, double scale, double dropout_p,
                 PhiloxState rng) {
  int64_t nb = q.dim() - 2, L = q.size(-2), S = k.size(-2), Ev = v.size(-1);
  int64_t batches = out.numel() / (L * Ev);
  int64_t blocks = (L + kQueryBlock - 1) / kQueryBlock;
  ScalarType dt = out.dtype();
  visit_float_compute(dt, [&](auto tag) {
    using C = decltype(tag);
    parallel_for(0, batches * blocks, 1, [&](int64_t b, int64_t e) {
      Mat<C> qbuf, kbuf, vbuf, scores, obuf;
      for (int64_t task = b; task < e; ++task) {
        int64_t bi = task / blocks, r0 = task % blocks * kQueryBlock;
        int64_t rows = std::min(kQueryBlock, L - r0);
        StridedMap<C> Q = rows_of<C>(q, batch_offset(q, bi, nb), r0, rows, qbuf);
        StridedMap<C> K = rows_of<C>(k, batch_offset(k, bi, nb), 0, S, kbuf);
        StridedMap<C> V = rows_of<C>(v, batch_offset(v, bi, nb), 0, S, vbuf);
        scores.noalias() = Q * K.transpose();
        scores *= static_cast<C>(scale);
        MaskView m;
        if (mask.defined()) {
          m = {static_cast<const char*>(mask.data_ptr()) +
                   batch_offset(mask, bi, nb) * static_cast<int64_t>(mask.element_size()),
               mask.dtype(), mask.stride(-2), mask.stride(-1)};
        }
        mask_softmax_dropout<C>(scores, r0, m, is_causal, dropout_p, rng, bi * L * S);
        char* dst = byte_ptr(out, (bi * L + r0) * Ev);
        if (dt == dtype_of<C>) {
          Eigen::Map<Mat<C>>(reinterpret_cast<C*>(dst), rows, Ev).noalias() = scores * V;
        } else {
          obuf.noalias() = scores * V;
          store_compute<C>(obuf.data(), dst, dt, rows * Ev);
        }
      }
    });
  });
}

KernelRegistrar<SdpaFn> reg(sdpa_stub, kCPU, &sdpa_kernel);

}  // namespace
}  // namespace ember::cpu
