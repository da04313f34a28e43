#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <type_traits>

#include "ember/core/array_ref.h"

namespace ember {

// A vector of trivially copyable T that keeps up to N elements inline (sizes and strides:
// no heap allocation for tensors of up to N dims).
template <class T, size_t N>
class SmallVector {
 public:
  SmallVector() = default;
  explicit SmallVector(size_t n, T value = T()) { resize(n, value); }
  SmallVector(std::initializer_list<T> l) { assign(l.begin(), l.end()); }
  SmallVector(ArrayRef<T> a) { assign(a.begin(), a.end()); }
  template <class It, std::enable_if_t<!std::is_integral_v<It>, int> = 0>
  SmallVector(It first, It last) {
    assign(first, last);
  }
  SmallVector(const SmallVector& o) { assign(o.begin(), o.end()); }
  SmallVector(SmallVector&& o) noexcept { *this = std::move(o); }
  SmallVector& operator=(const SmallVector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& o) noexcept {
    if (this == &o) return *this;
    if (o.heap_) {
      heap_ = std::move(o.heap_);
      data_ = heap_.get();
      cap_ = o.cap_;
      size_ = o.size_;
      o.data_ = o.inline_;
      o.cap_ = N;
      o.size_ = 0;
    } else {
      assign(o.begin(), o.end());
    }
    return *this;
  }

  template <class It>
  void assign(It first, It last) {
    size_t n = static_cast<size_t>(std::distance(first, last));
    size_ = 0;
    reserve(n);
    std::copy(first, last, data_);
    size_ = n;
  }
  void reserve(size_t n) {
    if (n > cap_) grow(n);
  }
  void resize(size_t n, T value = T()) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data_[i] = value;
    size_ = n;
  }
  void push_back(T v) {
    reserve(size_ + 1);
    data_[size_++] = v;
  }
  void pop_back() { --size_; }
  void insert(size_t pos, T v) {
    reserve(size_ + 1);
    std::copy_backward(data_ + pos, data_ + size_, data_ + size_ + 1);
    data_[pos] = v;
    ++size_;
  }
  void erase(size_t pos) {
    std::copy(data_ + pos + 1, data_ + size_, data_ + pos);
    --size_;
  }
  void clear() { size_ = 0; }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }
  operator ArrayRef<T>() const { return ArrayRef<T>(data_, size_); }
  bool operator==(const SmallVector& o) const { return ArrayRef<T>(*this).equals(o); }

 private:
  // Out of line: keeps the rare heap path out of every push_back (and GCC 13's -Warray-bounds
  // from reasoning about it against the inline buffer).
  [[gnu::noinline]] void grow(size_t n) {
    size_t cap = std::max(n, cap_ * 2);
    std::unique_ptr<T[]> heap(new T[cap]);
    std::copy(data_, data_ + size_, heap.get());
    heap_ = std::move(heap);
    data_ = heap_.get();
    cap_ = cap;
  }

  T inline_[N] = {};
  std::unique_ptr<T[]> heap_;
  T* data_ = inline_;
  size_t cap_ = N;
  size_t size_ = 0;
};

using DimVector = SmallVector<int64_t, 6>;

}  // namespace ember
