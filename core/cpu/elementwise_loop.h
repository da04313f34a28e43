#pragma once

// The CPU elementwise machinery: an iterator over an output and inputs broadcast to its shape,
// and cpu_kernel(), which applies a functor to every element, casting each operand from its
// dtype to the compute type C in L1-sized chunks (a direct loop when no cast or stride is needed).

#include <array>
#include <utility>

#include "ember/core/loop_dims.h"
#include "ember/core/parallel.h"
#include "ember/core/tensor.h"

namespace ember::cpu {

class ElementwiseIter {
 public:
  static constexpr int kMaxOperands = kMaxLoopOperands;

  // operands[0] is the output; inputs must broadcast to its shape.
  explicit ElementwiseIter(std::initializer_list<Tensor> operands);

  int ntensors() const { return n_; }
  ScalarType dtype(int k) const { return dtypes_[k]; }
  int64_t numel() const { return numel_; }

  // fn(char** ptrs, const int64_t* byte_strides, int64_t n) over runs along the innermost dim.
  template <class F>
  void for_each(const F& fn, int64_t grain = 32768) const {
    parallel_for(0, numel_, grain, [&](int64_t b, int64_t e) { run_range(b, e, fn); });
  }
  template <class F>
  void for_each_serial(const F& fn) const {
    run_range(0, numel_, fn);
  }

 private:
  template <class F>
  void run_range(int64_t begin, int64_t end, const F& fn) const {
    const int nd = static_cast<int>(shape_.size());
    DimVector idx(nd);
    int64_t r = begin;
    for (int d = nd - 1; d >= 0; --d) {
      idx[d] = r % shape_[d];
      r /= shape_[d];
    }
    std::array<char*, kMaxOperands> ptrs{};
    std::array<int64_t, kMaxOperands> inner{};
    for (int k = 0; k < n_; ++k) {
      ptrs[k] = data_[k];
      for (int d = 0; d < nd; ++d) ptrs[k] += idx[d] * strides_[k][d];
      inner[k] = strides_[k][nd - 1];
    }
    for (int64_t cur = begin; cur < end;) {
      int64_t n = std::min(shape_[nd - 1] - idx[nd - 1], end - cur);
      fn(ptrs.data(), inner.data(), n);
      cur += n;
      idx[nd - 1] += n;
      for (int k = 0; k < n_; ++k) ptrs[k] += n * inner[k];
      for (int d = nd - 1; d > 0 && idx[d] == shape_[d]; --d) {
        idx[d] = 0;
        ++idx[d - 1];
        for (int k = 0; k < n_; ++k) ptrs[k] += strides_[k][d - 1] - shape_[d] * strides_[k][d];
      }
    }
  }

  int n_ = 0;
  int64_t numel_ = 0;
  DimVector shape_;                              // coalesced, at least one dim
  std::array<DimVector, kMaxOperands> strides_;  // in bytes
  std::array<char*, kMaxOperands> data_{};
  std::array<ScalarType, kMaxOperands> dtypes_{};
};

// Reads n elements of dtype `src` at byte stride `stride` into buf as C.
template <class C>
inline void load_as(const char* p, int64_t stride, ScalarType src, int64_t n, C* buf) {
  visit_dtype(src, [&](auto tag) {
    using S = decltype(tag);
    for (int64_t i = 0; i < n; ++i) buf[i] = static_cast<C>(*reinterpret_cast<const S*>(p + i * stride));
  });
}

template <class C>
inline void store_as(const C* buf, char* p, int64_t stride, ScalarType dst, int64_t n) {
  visit_dtype(dst, [&](auto tag) {
    using D = decltype(tag);
    for (int64_t i = 0; i < n; ++i) *reinterpret_cast<D*>(p + i * stride) = static_cast<D>(buf[i]);
  });
}

// out = f(in...) elementwise, inputs read as C, f's result stored from Out into the output dtype.
template <class Out, class C, int N, class F>
void cpu_kernel(const ElementwiseIter& it, const F& f) {
  constexpr int64_t kChunk = 256;
  bool direct = it.dtype(0) == dtype_of<Out>;
  for (int k = 1; k <= N; ++k) direct = direct && it.dtype(k) == dtype_of<C>;
  it.for_each([&](char** ptrs, const int64_t* strides, int64_t n) {
    bool contiguous = strides[0] == sizeof(Out);
    for (int k = 1; k <= N; ++k) contiguous = contiguous && strides[k] == sizeof(C);
    if (direct && contiguous) {
      Out* out = reinterpret_cast<Out*>(ptrs[0]);
      [&]<size_t... I>(std::index_sequence<I...>) {
        for (int64_t i = 0; i < n; ++i) out[i] = f(reinterpret_cast<const C*>(ptrs[I + 1])[i]...);
      }
      (std::make_index_sequence<N>{});
      return;
    }
    C in[N > 0 ? N : 1][kChunk];
    Out out[kChunk];
    for (int64_t off = 0; off < n; off += kChunk) {
      int64_t m = std::min(kChunk, n - off);
      for (int k = 0; k < N; ++k) {
        // A broadcast input (stride 0) is loaded once and repeated.
        if (strides[k + 1] == 0) {
          load_as<C>(ptrs[k + 1], 0, it.dtype(k + 1), 1, in[k]);
          std::fill(in[k] + 1, in[k] + m, in[k][0]);
        } else {
          load_as<C>(ptrs[k + 1] + off * strides[k + 1], strides[k + 1], it.dtype(k + 1), m, in[k]);
        }
      }
      [&]<size_t... I>(std::index_sequence<I...>) {
        for (int64_t i = 0; i < m; ++i) out[i] = f(in[I][i]...);
      }
      (std::make_index_sequence<N>{});
      store_as<Out>(out, ptrs[0] + off * strides[0], strides[0], it.dtype(0), m);
    }
  });
}

// The compute type for a result dtype: float for f32/f16/bf16, double, int64 for integers, bool.
template <class F>
decltype(auto) visit_compute_type(ScalarType t, F&& f) {
  switch (t) {
    case kFloat64:
      return f(double{});
    case kFloat32:
    case kFloat16:
    case kBFloat16:
      return f(float{});
    case kBool:
      return f(bool{});
    default:
      return f(int64_t{});
  }
}

}  // namespace ember::cpu
