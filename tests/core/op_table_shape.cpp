// Op-table entries for the shape, indexing, sorting and scan families. Integer arguments of a
// sample (dims, shifts, pads, k) ride along as trailing int64 tensors, which the harness passes
// unchanged to the float64 reference run; index tensors are drawn in range inside each sample.
#include "ember/core/ops/advanced_indexing.h"
#include "ember/core/ops/indexing.h"
#include "ember/core/ops/nonzero.h"
#include "ember/core/ops/scan.h"
#include "ember/core/ops/shape_ops.h"
#include "ember/core/ops/sorting.h"
#include "ember/core/shape.h"
#include "test_util.h"

namespace ember::testing {
namespace {

Tensor params(std::vector<int64_t> v) {
  Tensor t = empty({static_cast<int64_t>(v.size())}, kInt64);
  std::copy(v.begin(), v.end(), t.data_ptr<int64_t>());
  return t;
}

std::vector<int64_t> ints(const Tensor& t) {
  Tensor c = t.cpu().contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

int64_t int_at(const Tensor& t, int64_t i) { return ints(t)[i]; }

Sample sample(std::vector<Tensor> inputs, std::string desc) { return {std::move(inputs), std::move(desc)}; }

// Distinct values, exact in every float dtype (k/4 - 2 for k < 256), so sorts have no ties.
Tensor distinct(IntArrayRef sizes, ScalarType dt) {
  return (randperm(numel_of(sizes)).to(kFloat64) * 0.25 - 2).view(sizes).to(dt);
}

Tensor indices_below(int64_t high, IntArrayRef sizes) { return randint(0, high, sizes); }

OpEntry with_tol_scale(OpEntry e, double scale) {
  e.tol_scale = scale;
  return e;
}

// The tensors before the trailing `n_params` integer arguments.
std::vector<Tensor> head(const std::vector<Tensor>& in, size_t n_params) {
  return {in.begin(), in.end() - static_cast<std::ptrdiff_t>(n_params)};
}

std::vector<Sample> tri_samples(ScalarType dt) {
  return {sample({random_tensor({4, 5}, dt), params({0})}, "[4, 5] diagonal 0"),
          sample({random_tensor({5, 4}, dt), params({-1})}, "[5, 4] diagonal -1"),
          sample({non_contiguous(random_tensor({2, 3, 4}, dt)), params({2})}, "[2, 3, 4] nc diagonal 2"),
          sample({random_tensor({2, 1, 3, 3}, dt), params({-5})}, "[2, 1, 3, 3] diagonal -5"),
          sample({random_tensor({0, 3}, dt), params({0})}, "[0, 3]")};
}

std::vector<Sample> sort_samples(ScalarType dt) {  // params: dim, descending
  return {sample({distinct({4, 6}, dt), params({-1, 0})}, "[4, 6] dim -1"),
          sample({distinct({5, 3}, dt), params({0, 1})}, "[5, 3] dim 0 descending"),
          sample({non_contiguous(distinct({3, 5}, dt)), params({1, 1})}, "[3, 5] nc dim 1 descending"),
          sample({distinct({2, 3, 4}, dt), params({1, 0})}, "[2, 3, 4] dim 1"),
          sample({distinct({}, dt), params({0, 0})}, "[]"),
          sample({random_tensor({0, 3}, dt), params({1, 0})}, "[0, 3]")};
}

// Positive values for the accumulating ops: no cancellation to magnify 16-bit rounding.
Tensor positive(IntArrayRef sizes, ScalarType dt) { return random_tensor(sizes, dt, 0.5, 2); }

std::vector<Sample> scatter_samples(ScalarType dt) {  // x, index, src, dim
  return {sample({positive({4, 5}, dt), indices_below(4, {3, 5}), positive({3, 5}, dt), params({0})},
                 "[4, 5] dim 0, index [3, 5]"),
          sample({positive({4, 5}, dt), indices_below(5, {4, 2}), positive({4, 3}, dt), params({1})},
                 "[4, 5] dim 1, index [4, 2], src [4, 3]"),
          sample({non_contiguous(positive({3, 4}, dt)), non_contiguous(indices_below(4, {2, 6})),
                  non_contiguous(positive({3, 6}, dt)), params({-1})},
                 "[3, 4] nc dim -1, index [2, 6] (longer than self along dim)"),
          sample({positive({2, 3, 4}, dt), indices_below(3, {2, 5, 3}), positive({2, 5, 4}, dt), params({1})},
                 "[2, 3, 4] dim 1"),
          sample({positive({4, 5}, dt), indices_below(4, {0, 5}), positive({0, 5}, dt), params({0})},
                 "empty index")};
}

const OpTableRegistrar registrar({
    {"cat",
     [](ScalarType dt) {
       return std::vector<Sample>{
           sample({random_tensor({2, 3}, dt), random_tensor({4, 3}, dt), params({0})}, "[2, 3] [4, 3] dim 0"),
           sample({non_contiguous(random_tensor({2, 3}, dt)), random_tensor({2, 0}, dt),
                   random_tensor({2, 5}, dt), params({-1})},
                  "[2, 3] nc, [2, 0], [2, 5] dim -1"),
           sample({random_tensor({0}, dt), random_tensor({3, 2}, dt), random_tensor({3, 1}, dt), params({1})},
                  "[0] (skipped), [3, 2], [3, 1] dim 1"),
           sample({random_tensor({2, 3, 4}, dt), non_contiguous(random_tensor({2, 1, 4}, dt)), params({1})},
                  "[2, 3, 4] [2, 1, 4] nc dim 1"),
           sample({random_tensor({3}, dt), randint(-5, 5, {2}), params({0})}, "[3] with int64 [2]")};
     },
     [](const std::vector<Tensor>& in) { return cat(head(in, 1), int_at(in.back(), 0)); }},
    {"stack",
     [](ScalarType dt) {
       return std::vector<Sample>{
           sample(
               {random_tensor({2, 3}, dt), random_tensor({2, 3}, dt), random_tensor({2, 3}, dt), params({1})},
               "3 x [2, 3] dim 1"),
           sample({non_contiguous(random_tensor({2, 3}, dt)), random_tensor({2, 3}, dt), params({-1})},
                  "2 x [2, 3] nc dim -1"),
           sample({random_tensor({}, dt), random_tensor({}, dt), params({0})}, "2 x [] dim 0"),
           sample({random_tensor({0, 3}, dt), random_tensor({0, 3}, dt), params({0})}, "2 x [0, 3]")};
     },
     [](const std::vector<Tensor>& in) { return stack(head(in, 1), int_at(in.back(), 0)); }},
    {"flip",
     [](ScalarType dt) {
       return std::vector<Sample>{
           sample({random_tensor({3, 4, 5}, dt), params({0, 2})}, "[3, 4, 5] dims 0, 2"),
           sample({non_contiguous(random_tensor({4, 5}, dt)), params({-1})}, "[4, 5] nc dim -1"),
           sample({random_tensor({2, 3}, dt), params({})}, "[2, 3] no dims"),
           sample({random_tensor({}, dt), params({0})}, "[] dim 0"),
           sample({random_tensor({0, 3}, dt), params({0})}, "[0, 3]")};
     },
     [](const std::vector<Tensor>& in) { return flip(in[0], ints(in[1])); }},
    {"roll",
     [](ScalarType dt) {  // x, shifts, dims
       return std::vector<Sample>{
           sample({random_tensor({3, 4}, dt), params({1, -2}), params({0, 1})}, "[3, 4] shifts (1, -2)"),
           sample({random_tensor({3, 4}, dt), params({5}), params({})}, "[3, 4] flattened shift 5"),
           sample({non_contiguous(random_tensor({4, 5}, dt)), params({7, -3}), params({1, 1})},
                  "[4, 5] nc dim 1 twice"),
           sample({random_tensor({2, 3, 2}, dt), params({-4}), params({-2})}, "[2, 3, 2] shift -4 dim -2"),
           sample({random_tensor({0, 2}, dt), params({1}), params({0})}, "[0, 2]")};
     },
     [](const std::vector<Tensor>& in) { return roll(in[0], ints(in[1]), ints(in[2])); }},
    {"pad",
     [](ScalarType dt) {  // x, pad, mode (0 constant, 1 reflect, 2 replicate)
       return std::vector<Sample>{
           sample({random_tensor({1, 2, 5}, dt), params({2, 1}), params({1})}, "[1, 2, 5] reflect (2, 1)"),
           sample({random_tensor({4, 5}, dt), params({3, 3, 1, 2}), params({1})},
                  "[4, 5] reflect (3, 3, 1, 2)"),
           sample({non_contiguous(random_tensor({2, 5}, dt)), params({2, 2}), params({1})},
                  "[2, 5] nc reflect"),
           sample({random_tensor({2, 3, 4}, dt), params({1, 2, 0, 1}), params({2})}, "[2, 3, 4] replicate"),
           sample({non_contiguous(random_tensor({3, 4}, dt)), params({1, -1, 2, 0}), params({0})},
                  "[3, 4] nc constant with a crop"),
           sample({random_tensor({0, 3}, dt), params({1, 1, 2, 0}), params({0})}, "[0, 3] constant")};
     },
     [](const std::vector<Tensor>& in) {
       int64_t mode = int_at(in[2], 0);
       if (mode == 0) return pad(in[0], ints(in[1]), "constant", 1.5);
       return pad(in[0], ints(in[1]), mode == 1 ? "reflect" : "replicate");
     }},
    {"repeat",
     [](ScalarType dt) {
       return std::vector<Sample>{
           sample({random_tensor({2, 3}, dt), params({2, 1, 3})}, "[2, 3] (2, 1, 3)"),
           sample({random_tensor({3}, dt), params({2, 2})}, "[3] (2, 2)"),
           sample({non_contiguous(random_tensor({2, 3}, dt)), params({1, 3})}, "[2, 3] nc"),
           sample({random_tensor({}, dt), params({3})}, "[] (3)"),
           sample({random_tensor({0, 2}, dt), params({2, 2})}, "[0, 2]")};
     },
     [](const std::vector<Tensor>& in) { return repeat(in[0], ints(in[1])); }},
    {"tril", tri_samples, [](const std::vector<Tensor>& in) { return tril(in[0], int_at(in[1], 0)); }},
    {"triu", tri_samples, [](const std::vector<Tensor>& in) { return triu(in[0], int_at(in[1], 0)); }},
    {"index_select",
     [](ScalarType dt) {  // x, index, dim
       return std::vector<Sample>{
           sample({random_tensor({5, 4}, dt), indices_below(5, {7}), params({0})}, "[5, 4] dim 0, 7 indices"),
           sample({random_tensor({3, 6}, dt), indices_below(6, {4}), params({1})}, "[3, 6] dim 1"),
           sample({non_contiguous(random_tensor({5, 4}, dt)), non_contiguous(indices_below(4, {3})),
                   params({-1})},
                  "[5, 4] nc dim -1, nc index"),
           sample({random_tensor({5, 4}, dt), indices_below(5, {0}), params({0})}, "no indices"),
           sample({random_tensor({0, 3}, dt), indices_below(3, {2}), params({1})}, "[0, 3] dim 1")};
     },
     [](const std::vector<Tensor>& in) { return index_select(in[0], int_at(in[2], 0), in[1]); }},
    // The mask rides along as int64 0/1 (unchanged in the reference run).
    {"masked_select",
     [](ScalarType dt) {  // x, mask
       return std::vector<Sample>{
           sample({random_tensor({4, 5}, dt), randint(0, 2, {4, 5})}, "[4, 5]"),
           sample({non_contiguous(random_tensor({5, 4}, dt)), randint(0, 2, {4})}, "[5, 4] nc, mask [4]"),
           sample({random_tensor({5}, dt), randint(0, 2, {3, 5})}, "[5], mask [3, 5]"),
           sample({random_tensor({3, 2}, dt), zeros({3, 2}, kInt64)}, "nothing selected")};
     },
     [](const std::vector<Tensor>& in) { return masked_select(in[0], in[1] != 0); }},
    {"nonzero",
     [](ScalarType dt) {  // x (unused but for its device), values
       return std::vector<Sample>{sample({random_tensor({1}, dt), randint(-1, 2, {3, 4, 5})}, "[3, 4, 5]"),
                                  sample({random_tensor({1}, dt), randint(0, 2, {7})}, "[7]"),
                                  sample({random_tensor({1}, dt), full({}, 3, kInt64)}, "[]"),
                                  sample({random_tensor({1}, dt), zeros({0, 2}, kInt64)}, "[0, 2]")};
     },
     [](const std::vector<Tensor>& in) { return nonzero(in[1]); }},
    {"gather",
     [](ScalarType dt) {  // x, index, dim
       return std::vector<Sample>{
           sample({random_tensor({4, 5}, dt), indices_below(5, {4, 3}), params({1})},
                  "[4, 5] dim 1, index [4, 3]"),
           sample({random_tensor({4, 5}, dt), indices_below(4, {2, 5}), params({0})},
                  "[4, 5] dim 0, index [2, 5]"),
           sample({non_contiguous(random_tensor({3, 4, 5}, dt)), non_contiguous(indices_below(4, {2, 6, 5})),
                   params({1})},
                  "[3, 4, 5] nc dim 1, index [2, 6, 5]"),
           sample({random_tensor({4, 5}, dt), indices_below(5, {0, 2}), params({1})}, "empty index")};
     },
     [](const std::vector<Tensor>& in) { return gather(in[0], int_at(in[2], 0), in[1]); }},
    {"scatter", scatter_samples,
     [](const std::vector<Tensor>& in) { return scatter(in[0], int_at(in[3], 0), in[1], in[2]); }},
    with_tol_scale({"scatter_add", scatter_samples,
                    [](const std::vector<Tensor>& in) {
                      return scatter_add(in[0], int_at(in[3], 0), in[1], in[2]);
                    }},
                   4),
    with_tol_scale(
        {"index_add",
         [](ScalarType dt) {  // x, index, source, dim
           return std::vector<Sample>{
               sample({positive({5, 3}, dt), indices_below(5, {6}), positive({6, 3}, dt), params({0})},
                      "[5, 3] dim 0"),
               sample({positive({3, 4}, dt), indices_below(4, {5}), positive({3, 5}, dt), params({1})},
                      "[3, 4] dim 1"),
               sample({non_contiguous(positive({5, 3}, dt)), non_contiguous(indices_below(5, {4})),
                       non_contiguous(positive({4, 3}, dt)), params({0})},
                      "[5, 3] nc"),
               sample({positive({5, 3}, dt), indices_below(5, {0}), positive({0, 3}, dt), params({0})},
                      "no indices")};
         },
         [](const std::vector<Tensor>& in) { return index_add(in[0], int_at(in[3], 0), in[1], in[2], 2); }},
        4),
    // The last input picks the form; masks ride along as int64 0/1.
    {"index",
     [](ScalarType dt) {  // x, index tensors or mask, form
       return std::vector<Sample>{
           sample({random_tensor({5, 4}, dt), indices_below(5, {3, 2}), params({0})}, "x[idx], idx [3, 2]"),
           sample({non_contiguous(random_tensor({3, 6}, dt)), indices_below(6, {4}) - 6, params({1})},
                  "x[:, idx] nc, negative idx"),
           sample(
               {random_tensor({3, 4, 5}, dt), indices_below(3, {2, 1}), indices_below(5, {3}), params({2})},
               "x[i, :, j], broadcast to [2, 3]"),
           sample({random_tensor({3, 4, 5}, dt), randint(0, 2, {3, 4}), params({3})}, "x[mask [3, 4]]"),
           sample({random_tensor({4, 5}, dt), indices_below(4, {0}), params({0})}, "no picks")};
     },
     [](const std::vector<Tensor>& in) {
       const Tensor& x = in[0];
       switch (int_at(in.back(), 0)) {
         case 0:
           return x.index({in[1]});
         case 1:
           return x.index({Slice(), in[1]});
         case 2:
           return x.index({in[1], Slice(), in[2]});
         default:
           return x.index({in[1] != 0});
       }
     }},
    // Assignments pick each element once: which of repeated picks lands is unspecified.
    with_tol_scale({"index_put",
                    [](ScalarType dt) {  // x, values, index tensors or mask, form
                      return std::vector<Sample>{
                          sample({positive({5, 3}, dt), positive({6, 3}, dt), indices_below(5, {6}),
                                  params({0})},
                                 "x[idx] += v, repeated idx"),
                          sample({random_tensor({4, 5}, dt), random_tensor({4, 3}, dt),
                                  randperm(5).slice(0, 0, 3) - 5, params({1})},
                                 "x[:, idx] = v, negative idx"),
                          sample({non_contiguous(positive({2, 3, 4}, dt)), positive({2, 5}, dt),
                                  indices_below(3, {5}), indices_below(4, {5}), params({2})},
                                 "x[:, i, j] += v nc"),
                          sample({random_tensor({3, 4}, dt), random_tensor({}, dt), randint(0, 2, {3, 4}),
                                  params({3})},
                                 "x[mask] = scalar")};
                    },
                    [](const std::vector<Tensor>& in) {
                      const Tensor &x = in[0], &v = in[1];
                      switch (int_at(in.back(), 0)) {
                        case 0:
                          return index_put(x, {in[2]}, v, true);
                        case 1:
                          return x.index_put({Tensor(), in[2]}, v);
                        case 2:
                          return index_put(x, {Tensor(), in[2], in[3]}, v, true);
                        default:
                          return index_put(x, {in[2] != 0}, v);
                      }
                    }},
                   4),
    {"take_along_dim",
     [](ScalarType dt) {  // x, indices, dim (none when empty)
       return std::vector<Sample>{
           sample({random_tensor({4, 5}, dt), indices_below(5, {4, 2}), params({1})}, "[4, 5] dim 1"),
           sample({random_tensor({4, 5}, dt), indices_below(5, {1, 3}), params({1})},
                  "[4, 5] dim 1, broadcast indices [1, 3]"),
           sample({random_tensor({4, 1}, dt), indices_below(4, {2, 3}), params({0})},
                  "[4, 1] dim 0, broadcast x"),
           sample({non_contiguous(random_tensor({3, 4}, dt)), indices_below(3, {2, 4}), params({0})},
                  "[3, 4] nc dim 0"),
           sample({random_tensor({4, 5}, dt), indices_below(20, {6}), params({})}, "flattened")};
     },
     [](const std::vector<Tensor>& in) {
       std::vector<int64_t> dim = ints(in[2]);
       return take_along_dim(in[0], in[1], dim.empty() ? std::nullopt : std::optional<int64_t>(dim[0]));
     }},
    {"one_hot",
     [](ScalarType) {  // indices, num_classes
       return std::vector<Sample>{
           sample({indices_below(5, {6}), params({5})}, "[6] 5 classes"),
           sample({indices_below(4, {2, 3}), params({-1})}, "[2, 3] inferred classes"),
           sample({non_contiguous(indices_below(6, {2, 3})), params({7})}, "[2, 3] nc 7 classes"),
           sample({indices_below(3, {0}), params({3})}, "[0]")};
     },
     [](const std::vector<Tensor>& in) { return one_hot(in[0], int_at(in[1], 0)); },
     {kInt64}},
    {"sort", sort_samples,
     [](const std::vector<Tensor>& in) {
       auto [values, indices] = sort(in[0], int_at(in[1], 0), int_at(in[1], 1) != 0);
       return cat({atleast_1d(values).flatten(), atleast_1d(indices).flatten()});
     }},
    {"argsort", sort_samples,
     [](const std::vector<Tensor>& in) { return argsort(in[0], int_at(in[1], 0), int_at(in[1], 1) != 0); }},
    {"topk",
     [](ScalarType dt) {  // x, (k, dim, largest, sorted)
       return std::vector<Sample>{
           sample({distinct({4, 6}, dt), params({3, -1, 1, 1})}, "[4, 6] k 3 largest"),
           sample({distinct({5, 3}, dt), params({2, 0, 0, 1})}, "[5, 3] k 2 dim 0 smallest"),
           sample({non_contiguous(distinct({3, 5}, dt)), params({5, 1, 1, 0})}, "[3, 5] nc k 5 unsorted"),
           sample({distinct({3, 7}, dt), params({4, 1, 0, 0})}, "[3, 7] k 4 smallest unsorted"),
           sample({distinct({3, 4}, dt), params({0, 1, 1, 1})}, "[3, 4] k 0"),
           sample({random_tensor({0, 3}, dt), params({0, 0, 1, 1})}, "[0, 3]")};
     },
     [](const std::vector<Tensor>& in) {
       std::vector<int64_t> p = ints(in[1]);
       auto [values, indices] = topk(in[0], p[0], p[1], p[2] != 0, p[3] != 0);
       if (!p[3] && values.numel() > 0) {  // unsorted: any order, so compare in sorted order
         Tensor order = argsort(values, p[1]);
         values = values.gather(p[1], order), indices = indices.gather(p[1], order);
       }
       return cat({atleast_1d(values).flatten(), atleast_1d(indices).flatten()});
     }},
    {"cumsum",
     [](ScalarType dt) {
       return std::vector<Sample>{
           sample({random_tensor({4, 5}, dt), params({0})}, "[4, 5] dim 0"),
           sample({random_tensor({4, 5}, dt), params({1})}, "[4, 5] dim 1"),
           sample({non_contiguous(random_tensor({3, 6}, dt)), params({-1})}, "[3, 6] nc dim -1"),
           sample({random_tensor({2, 3, 4}, dt), params({1})}, "[2, 3, 4] dim 1"),
           sample({random_tensor({}, dt), params({0})}, "[]"),
           sample({random_tensor({0, 3}, dt), params({1})}, "[0, 3]")};
     },
     [](const std::vector<Tensor>& in) { return cumsum(in[0], int_at(in[1], 0)); }},
});

}  // namespace
}  // namespace ember::testing
