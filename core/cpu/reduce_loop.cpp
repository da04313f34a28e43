#include "ember/core/cpu/reduce_loop.h"

namespace ember::cpu {
namespace {

struct Dim {
  int64_t size, in, out;
};
using DimList = SmallVector<Dim, 6>;

// Sorts outermost-first by input stride (stable: equal strides keep the tensor's order), then
// merges neighbours that walk memory as one dim in both tensors.
DimList sort_and_coalesce(DimList dims, bool sort = true) {
  auto outer_first = [](const Dim& a, const Dim& b) { return a.in > b.in; };
  if (sort) std::stable_sort(dims.begin(), dims.end(), outer_first);
  DimList out;
  for (const Dim& d : dims) {
    if (!out.empty() && out.back().in == d.in * d.size && out.back().out == d.out * d.size) {
      out.back() = {out.back().size * d.size, d.in, d.out};
    } else {
      out.push_back(d);
    }
  }
  return out;
}

}  // namespace

ReduceGeometry::ReduceGeometry(const Tensor& out, const Tensor& in, uint64_t mask,
                               bool keep_reduced_order) {
  DimList kept, red;
  bool empty = false;
  for (int64_t d = 0; d < in.dim(); ++d) {
    int64_t size = in.size(d);
    if (mask >> d & 1) {
      empty = empty || size == 0;
      if (size != 1) red.push_back({size, in.stride(d), 0});
    } else if (size != 1) {
      kept.push_back({size, in.stride(d), out.stride(d)});
    }
  }
  kept = sort_and_coalesce(kept);
  red = empty ? DimList{{0, 0, 0}} : sort_and_coalesce(red, !keep_reduced_order);
  if (kept.empty()) kept.push_back({1, 0, 0});
  if (red.empty()) red.push_back({1, 0, 0});
  for (const Dim& d : kept) {
    kept_sizes.push_back(d.size);
    kept_in.push_back(d.in);
    kept_out.push_back(d.out);
    n_out *= d.size;
  }
  for (const Dim& d : red) {
    red_sizes.push_back(d.size);
    red_in.push_back(d.in);
    n_red *= d.size;
  }
}

void ReduceGeometry::kept_row_offsets(int64_t k, int64_t& in_off, int64_t& out_off) const {
  in_off = out_off = 0;
  for (int d = static_cast<int>(kept_sizes.size()) - 2; d >= 0; --d) {
    int64_t i = k % kept_sizes[d];
    k /= kept_sizes[d];
    in_off += i * kept_in[d];
    out_off += i * kept_out[d];
  }
}

}  // namespace ember::cpu
