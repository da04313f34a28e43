#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "ember/core/error.h"
#include "ember/core/scalar.h"
#include "ember/core/tensor_impl.h"
#include "ember/core/tensor_options.h"

namespace ember {

class Tensor;
class Node;
struct TensorIndex;

// A handle to a TensorImpl; copies share the data (as in PyTorch). A default-constructed
// Tensor is "undefined" (an absent gradient, an optional argument); anything else is complete.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(IntrusivePtr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return static_cast<bool>(impl_); }
  TensorImpl* unsafe_impl() const { return impl_.get(); }
  TensorImpl& impl() const {
    EMBER_CHECK(impl_, "tensor is undefined (default-constructed)");
    return *impl_;
  }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  uint32_t use_count() const { return impl_.use_count(); }

  // --- Metadata ---
  int64_t dim() const { return impl().dim(); }
  int64_t ndimension() const { return dim(); }
  IntArrayRef sizes() const { return impl().sizes(); }
  IntArrayRef strides() const { return impl().strides(); }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const { return impl().numel(); }
  ScalarType dtype() const { return impl().dtype(); }
  ScalarType scalar_type() const { return dtype(); }
  Device device() const { return impl().device(); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_floating_point() const { return ember::is_floating_point(dtype()); }
  int64_t storage_offset() const { return impl().storage_offset(); }
  bool is_contiguous() const { return impl().is_contiguous(); }
  // Dense in `memory_format`'s order of dims (Contiguous or ChannelsLast; core/memory_format.cpp).
  bool is_contiguous(MemoryFormat memory_format) const;
  bool is_non_overlapping_and_dense() const;
  // ChannelsLast when the strides order the dims as NHWC does (PyTorch's rule), else Contiguous.
  MemoryFormat suggest_memory_format() const;
  size_t element_size() const { return ember::element_size(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  TensorOptions options() const { return TensorOptions(dtype()).device(device()); }
  uint32_t _version() const { return impl().storage()->version(); }
  void bump_version() const { impl().storage()->bump_version(); }

  void* data_ptr() const { return impl().data(); }
  template <class T>
  T* data_ptr() const {
    EMBER_CHECK(dtype_of<T> == dtype(), "data_ptr: tensor has dtype ", dtype(), ", asked for ", dtype_of<T>);
    return static_cast<T*>(impl().data());
  }
  template <class T>
  T item() const {
    return item().to<T>();
  }
  Scalar item() const;

  std::string toString() const;  // "CPUFloatType{2,3}"-free: PyTorch's repr, as operator<< prints

  // --- Autograd (core/autograd_meta.cpp; backward() in autograd/engine.cpp) ---
  bool requires_grad() const;
  const Tensor& requires_grad_(bool on = true) const;
  Tensor grad() const;  // undefined until a backward reaches this leaf
  void set_grad(const Tensor& grad) const;
  std::shared_ptr<Node> grad_fn() const;  // null for leaves
  bool is_leaf() const;
  void retain_grad() const;  // keep .grad() of a non-leaf
  bool retains_grad() const;
  Tensor detach() const;  // same data, no history
  const Tensor& detach_() const;
  // Points this tensor at new_data's storage, dtype and geometry, keeping its identity and
  // autograd state (PyTorch's `x.data = new_data`): Module::to converts parameters this way,
  // so an optimizer built earlier still holds them.
  void set_data(const Tensor& new_data) const;
  // Called with the gradient when backward reaches this tensor; may return a replacement.
  void register_hook(std::function<Tensor(const Tensor&)> hook) const;
  // Called on a leaf after its .grad() has been updated (DDP starts its all-reduce here).
  void register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const;
  void backward(const Tensor& gradient = {}, bool retain_graph = false, bool create_graph = false) const;

  // --- Views (share storage) ---
  Tensor view(IntArrayRef sizes) const;
  Tensor reshape(IntArrayRef sizes) const;
  Tensor view_as(const Tensor& other) const { return view(other.sizes()); }
  Tensor reshape_as(const Tensor& other) const { return reshape(other.sizes()); }
  Tensor as_strided(IntArrayRef sizes, IntArrayRef strides,
                    std::optional<int64_t> offset = std::nullopt) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor permute(IntArrayRef dims) const;
  Tensor t() const;
  Tensor mT() const { return transpose(-2, -1); }
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start = std::nullopt,
               std::optional<int64_t> end = std::nullopt, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor index(ArrayRef<TensorIndex> indices) const;
  // x[indices] = values (core/ops/advanced_indexing.h); accumulate adds them (x[indices] += values,
  // repeated indices included).
  const Tensor& index_put_(ArrayRef<TensorIndex> indices, const Tensor& values, bool accumulate = false) const;
  const Tensor& index_put_(ArrayRef<TensorIndex> indices, const Scalar& value) const;
  Tensor index_put(ArrayRef<Tensor> indices, const Tensor& values, bool accumulate = false) const;
  Tensor expand(IntArrayRef sizes) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, IntArrayRef sizes) const;
  // This tensor when already dense in `memory_format`, else a copy that is.
  Tensor contiguous(MemoryFormat memory_format = MemoryFormat::Contiguous) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(IntArrayRef split_sizes, int64_t dim = 0) const;
  std::vector<Tensor> unbind(int64_t dim = 0) const;

  // --- Copies and conversions ---
  // Preserve: the copy keeps this tensor's strides when it is dense, else its order of dims.
  Tensor clone(MemoryFormat memory_format = MemoryFormat::Preserve) const;
  // non_blocking, as PyTorch's: a copy between pinned host memory and a GPU is queued on the
  // current stream and not waited for (the pinned block is reused only after it completes); any
  // other copy ignores it.
  Tensor& copy_(const Tensor& src, bool non_blocking = false);
  const Tensor& copy_(const Tensor& src, bool non_blocking = false) const;
  Tensor to(ScalarType dtype, bool non_blocking = false, bool copy = false) const;
  Tensor to(Device device, bool non_blocking = false, bool copy = false) const;
  Tensor to(Device device, ScalarType dtype, bool non_blocking = false, bool copy = false) const;
  // options.memory_format (unset: Preserve) lays out the copy; `to(x.options().memory_format(
  // MemoryFormat::ChannelsLast))` converts an NCHW tensor to NHWC memory.
  Tensor to(const TensorOptions& options, bool non_blocking = false, bool copy = false) const;
  Tensor cpu() const { return to(Device(kCPU)); }
  Tensor cuda() const { return to(Device(kCUDA)); }
  // A copy in page-locked host memory (this tensor itself when already pinned), for
  // asynchronous host-device copies; needs the CUDA layer.
  Tensor pin_memory() const;
  bool is_pinned() const;
  Tensor to_float() const { return to(kFloat32); }
  const Tensor& fill_(const Scalar& value) const;
  const Tensor& zero_() const { return fill_(0); }

  // --- Elementwise (core/ops/elementwise.h has the free functions and their docs) ---
  Tensor add(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor add(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor sub(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor sub(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(const Scalar& other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(const Scalar& other) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(const Scalar& exponent) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  const Tensor& add_(const Tensor& other, const Scalar& alpha = 1) const;
  const Tensor& add_(const Scalar& other, const Scalar& alpha = 1) const;
  const Tensor& sub_(const Tensor& other, const Scalar& alpha = 1) const;
  const Tensor& sub_(const Scalar& other, const Scalar& alpha = 1) const;
  const Tensor& mul_(const Tensor& other) const;
  const Tensor& mul_(const Scalar& other) const;
  const Tensor& div_(const Tensor& other) const;
  const Tensor& div_(const Scalar& other) const;
  const Tensor& pow_(const Scalar& exponent) const;
  const Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  const Tensor& masked_fill_(const Tensor& mask, const Scalar& value) const;
  // core/ops/ternary.h
  Tensor addcmul(const Tensor& tensor1, const Tensor& tensor2, const Scalar& value = 1) const;
  Tensor addcdiv(const Tensor& tensor1, const Tensor& tensor2, const Scalar& value = 1) const;
  Tensor lerp(const Tensor& end, const Scalar& weight) const;
  Tensor lerp(const Tensor& end, const Tensor& weight) const;
  const Tensor& addcmul_(const Tensor& tensor1, const Tensor& tensor2, const Scalar& value = 1) const;
  const Tensor& addcdiv_(const Tensor& tensor1, const Tensor& tensor2, const Scalar& value = 1) const;
  const Tensor& lerp_(const Tensor& end, const Scalar& weight) const;
  const Tensor& lerp_(const Tensor& end, const Tensor& weight) const;

  Tensor neg() const;
  Tensor abs() const;
  Tensor sign() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;
  Tensor trunc() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor log1p() const;
  Tensor expm1() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor square() const;
  Tensor reciprocal() const;
  const Tensor& neg_() const;
  const Tensor& exp_() const;
  const Tensor& sqrt_() const;
  const Tensor& relu_() const;
  const Tensor& tanh_() const;
  const Tensor& sigmoid_() const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;

  Tensor eq(const Tensor& o) const;
  Tensor ne(const Tensor& o) const;
  Tensor lt(const Tensor& o) const;
  Tensor le(const Tensor& o) const;
  Tensor gt(const Tensor& o) const;
  Tensor ge(const Tensor& o) const;
  Tensor eq(const Scalar& o) const;
  Tensor ne(const Scalar& o) const;
  Tensor lt(const Scalar& o) const;
  Tensor le(const Scalar& o) const;
  Tensor gt(const Scalar& o) const;
  Tensor ge(const Scalar& o) const;
  Tensor logical_not() const;
  Tensor logical_and(const Tensor& o) const;
  Tensor logical_or(const Tensor& o) const;
  Tensor logical_xor(const Tensor& o) const;

  // --- Reductions (core/ops/reduce.h) ---
  Tensor sum(std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor sum(IntArrayRef dims, bool keepdim = false, std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor mean() const;
  Tensor mean(IntArrayRef dims, bool keepdim = false) const;
  Tensor prod() const;
  Tensor prod(int64_t dim, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor amax(IntArrayRef dims = {}, bool keepdim = false) const;
  Tensor amin(IntArrayRef dims = {}, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor var(IntArrayRef dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor std(IntArrayRef dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor norm(const Scalar& p = 2, IntArrayRef dims = {}, bool keepdim = false) const;
  Tensor logsumexp(IntArrayRef dims, bool keepdim = false) const;
  Tensor all() const;
  Tensor any() const;
  Tensor all(int64_t dim, bool keepdim = false) const;
  Tensor any(int64_t dim, bool keepdim = false) const;
  // torch.equal, torch.isclose, torch.allclose (ops/tensor_compare.h).
  bool equal(const Tensor& other) const;
  Tensor isclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false) const;
  bool allclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false) const;
  Tensor isnan() const;
  Tensor isinf() const;
  Tensor isfinite() const;

  // --- Linear algebra (core/ops/linalg.h) ---
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;

  // --- Shape and index (core/ops/shape_ops.h, indexing.h, sorting.h) ---
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor nonzero() const;
  Tensor argwhere() const;
  Tensor masked_select(const Tensor& mask) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor flip(IntArrayRef dims) const;
  Tensor repeat(IntArrayRef repeats) const;
  Tensor cumsum(int64_t dim) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;

 private:
  IntrusivePtr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Operators, as in PyTorch.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Scalar& b);
Tensor operator!=(const Tensor& a, const Scalar& b);
Tensor operator<(const Tensor& a, const Scalar& b);
Tensor operator<=(const Tensor& a, const Scalar& b);
Tensor operator>(const Tensor& a, const Scalar& b);
Tensor operator>=(const Tensor& a, const Scalar& b);
Tensor operator&&(const Tensor& a, const Tensor& b);
Tensor operator||(const Tensor& a, const Tensor& b);
Tensor operator!(const Tensor& a);
const Tensor& operator+=(const Tensor& a, const Tensor& b);
const Tensor& operator-=(const Tensor& a, const Tensor& b);
const Tensor& operator*=(const Tensor& a, const Tensor& b);
const Tensor& operator/=(const Tensor& a, const Tensor& b);
const Tensor& operator+=(const Tensor& a, const Scalar& b);
const Tensor& operator-=(const Tensor& a, const Scalar& b);
const Tensor& operator*=(const Tensor& a, const Scalar& b);
const Tensor& operator/=(const Tensor& a, const Scalar& b);

}  // namespace ember
