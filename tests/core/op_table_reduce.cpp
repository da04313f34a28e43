// Op-table entries for the reduction family (core/ops/reduce.h). Each sample carries its dims
// (an int64 tensor) and keepdim (a bool tensor) as extra inputs, which the float64 reference
// run leaves as they are.
#include <sstream>

#include "ember/core/ops/reduce.h"
#include "test_util.h"

namespace ember::testing {
namespace {

struct Case {
  DimVector shape;
  std::vector<int64_t> dims;
  bool keepdim = false;
  enum Layout { kContiguous, kStrided, kTransposed } layout = kContiguous;
};

// Rows (reduced dims innermost), columns (a kept dim innermost), several dims, all dims, 0-dim,
// non-contiguous and transposed inputs, and shapes big enough to split the reduced range.
std::vector<Case> multi_dim_cases() {
  return {{{4, 5}, {1}},
          {{4, 5}, {1}, true},
          {{3, 4, 5}, {0, 2}},
          {{3, 4, 5}, {0, 2}, true},
          {{3, 4, 5}, {-1, 0, 1}},
          {{4, 5}, {}},
          {{}, {}},
          {{64, 33}, {0}},
          {{4, 5}, {0}, false, Case::kStrided},
          {{6, 7}, {1}, false, Case::kTransposed},
          {{2, 3, 4}, {2}, true, Case::kTransposed},
          {{0, 5}, {1}},
          {{3, 100000}, {1}},
          {{70000, 3}, {0}},
          {{300000}, {}}};
}

// Single-dim ops; an empty dims list picks the full-reduction overload.
std::vector<Case> one_dim_cases() {
  return {{{4, 5}, {1}},
          {{4, 5}, {1}, true},
          {{3, 4, 5}, {0}},
          {{3, 4, 5}, {-2}, true},
          {{4, 5}, {}},
          {{}, {}},
          {{}, {0}},
          {{64, 33}, {0}},
          {{4, 5}, {0}, false, Case::kStrided},
          {{6, 7}, {1}, false, Case::kTransposed},
          {{0, 5}, {1}},
          {{3, 100000}, {1}},
          {{70000, 3}, {0}}};
}

// Reductions over an empty dim: only ops with an identity.
std::vector<Case> empty_cases() { return {{{3, 0}, {1}}, {{3, 0}, {1}, true}, {{0}, {}}}; }

// The flat index over a non-contiguous input counts in the logical (row-major) order.
std::vector<Case> flat_index_cases() {
  return {{{3, 4}, {}, true},
          {{5, 6}, {}, false, Case::kTransposed},
          {{2, 3, 4}, {}, true, Case::kStrided}};
}

std::vector<Case> operator+(std::vector<Case> a, const std::vector<Case>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<Sample> make_samples(ScalarType dt, const std::vector<Case>& cases, double low,
                                 double high) {
  std::vector<Sample> out;
  for (const Case& c : cases) {
    Tensor x;
    if (c.layout == Case::kTransposed) {
      DimVector rev, perm;  // the reversed shape, permuted back: strides ascend
      for (int64_t d = static_cast<int64_t>(c.shape.size()) - 1; d >= 0; --d) {
        rev.push_back(c.shape[d]);
        perm.push_back(d);
      }
      x = random_tensor(rev, dt, low, high).permute(perm);
    } else {
      x = random_tensor(c.shape, dt, low, high);
      if (c.layout == Case::kStrided) x = non_contiguous(x);
    }
    std::ostringstream desc;
    desc << x.sizes() << (x.is_contiguous() ? "" : " (non-contiguous)") << " dims "
         << IntArrayRef(c.dims) << (c.keepdim ? " keepdim" : "");
    out.push_back({{x, tensor(c.dims, kInt64), full({}, c.keepdim, kBool)}, desc.str()});
  }
  return out;
}

std::vector<int64_t> dims_of(const std::vector<Tensor>& in) {
  Tensor c = in[1].cpu();  // the CUDA suite moves every input to the GPU
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}
bool keepdim_of(const std::vector<Tensor>& in) { return in[2].item<bool>(); }

using OptDim = std::optional<int64_t>;
using MultiFn = std::function<Tensor(const Tensor&, IntArrayRef, bool)>;
using OneFn = std::function<Tensor(const Tensor&, OptDim, bool)>;

OpEntry multi(const std::string& name, MultiFn f, std::vector<Case> cases, double tol_scale = 1) {
  return {name, [=](ScalarType dt) { return make_samples(dt, cases, -2, 2); },
          [f](const std::vector<Tensor>& in) { return f(in[0], dims_of(in), keepdim_of(in)); },
          {kFloat32, kFloat64, kFloat16, kBFloat16}, tol_scale};
}

OpEntry one(const std::string& name, OneFn f, std::vector<Case> cases, double low = -2,
            double high = 2) {
  return {name, [=](ScalarType dt) { return make_samples(dt, cases, low, high); },
          [f](const std::vector<Tensor>& in) {
            std::vector<int64_t> dims = dims_of(in);
            return f(in[0], dims.empty() ? std::nullopt : OptDim(dims[0]), keepdim_of(in));
          }};
}

// Products of more than a few dozen numbers under- or overflow: no long ranges.
std::vector<Case> prod_cases() {
  return {{{4, 5}, {1}},
          {{4, 5}, {1}, true},
          {{3, 4, 5}, {0}},
          {{4, 5}, {}},
          {{}, {}},
          {{64, 33}, {0}},
          {{4, 5}, {0}, false, Case::kStrided},
          {{6, 7}, {1}, false, Case::kTransposed},
          {{0, 5}, {1}}};
}

// Every norm order at once; inf and -inf (no identity) only on nonempty inputs.
Tensor norms(const Tensor& x, IntArrayRef dims, bool keepdim) {
  Tensor r = norm(x, 2, dims, keepdim) + norm(x, 3, dims, keepdim);
  if (x.numel() > 0) r = r + norm(x, INFINITY, dims, keepdim) + norm(x, -INFINITY, dims, keepdim);
  // Orders <= 1 of 1e5 elements overflow float16.
  if (x.numel() < 1000)
    r = r + norm(x, 1, dims, keepdim) + norm(x, 0, dims, keepdim) + norm(x, 0.5, dims, keepdim);
  return r;
}

// max and min: the values (their indices are argmax's and argmin's).
Tensor max_values(const Tensor& x, OptDim d, bool k) { return d ? std::get<0>(max(x, *d, k)) : max(x); }
Tensor min_values(const Tensor& x, OptDim d, bool k) { return d ? std::get<0>(min(x, *d, k)) : min(x); }
// relu leaves exact zeros, so both outcomes occur.
Tensor all_of(const Tensor& x, OptDim d, bool k) { return d ? all(relu(x), *d, k) : all(relu(x)); }
Tensor any_of(const Tensor& x, OptDim d, bool k) { return d ? any(relu(x), *d, k) : any(relu(x)); }

const OpTableRegistrar registrar({
    multi("sum", [](const Tensor& x, IntArrayRef d, bool k) { return sum(x, d, k); },
          multi_dim_cases() + empty_cases()),
    multi("mean", [](const Tensor& x, IntArrayRef d, bool k) { return mean(x, d, k); },
          multi_dim_cases() + empty_cases()),
    one("prod", [](const Tensor& x, OptDim d, bool k) { return d ? prod(x, *d, k) : prod(x); },
        prod_cases() + empty_cases(), 0.5, 1.5),
    one("max", max_values, one_dim_cases()),
    one("min", min_values, one_dim_cases()),
    multi("amax", [](const Tensor& x, IntArrayRef d, bool k) { return amax(x, d, k); }, multi_dim_cases()),
    multi("amin", [](const Tensor& x, IntArrayRef d, bool k) { return amin(x, d, k); }, multi_dim_cases()),
    one("argmax", [](const Tensor& x, OptDim d, bool k) { return argmax(x, d, k); },
        one_dim_cases() + flat_index_cases()),
    one("argmin", [](const Tensor& x, OptDim d, bool k) { return argmin(x, d, k); },
        one_dim_cases() + flat_index_cases()),
    multi("var", [](const Tensor& x, IntArrayRef d, bool k) { return var(x, d, 1, k); },
          multi_dim_cases() + empty_cases()),
    multi("std", [](const Tensor& x, IntArrayRef d, bool k) { return std(x, d, 0, k); },
          multi_dim_cases() + empty_cases()),
    // Five rounded norms are added in the sample's dtype.
    multi("norm", norms, multi_dim_cases() + empty_cases(), 4),
    multi("logsumexp", [](const Tensor& x, IntArrayRef d, bool k) { return logsumexp(x, d, k); },
          multi_dim_cases() + empty_cases()),
    one("all", all_of, one_dim_cases() + empty_cases(), -0.1, 4),
    one("any", any_of, one_dim_cases() + empty_cases(), -4, 0.1),
});

}  // namespace
}  // namespace ember::testing
