// einsum as a chain of batched matrix products: operands are contracted left to right, each pair
// through bmm; the labels that no later term needs are summed out first (a product with a ones
// vector), and a label repeated within one operand takes its diagonal (a strided view). All are
// differentiable ops, so einsum is too.
#include <algorithm>
#include <string>

#include "ember/core/autocast_mode.h"
#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/linalg.h"

namespace ember {
namespace {

const OpRegistrar registrar({{"einsum", AutocastPolicy::LowerPrecision, true}});

// Labels: 'A'-'Z' are 0-25 and 'a'-'z' 26-51 (ASCII order, the implicit output's order); the dims
// an ellipsis covers are kLetters + their position, right-aligned across the operands.
constexpr int kLetters = 52;
constexpr int kEllipsis = -1;  // in a parsed term, before ellipses are expanded
using Labels = std::vector<int>;

int letter_label(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  return -1;
}

std::string label_name(int l) {
  if (l >= kLetters) return "...";
  return std::string(1, static_cast<char>(l < 26 ? 'A' + l : 'a' + l - 26));
}

bool has(const Labels& l, int x) { return std::find(l.begin(), l.end(), x) != l.end(); }

Labels join(Labels a, const Labels& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// "ij,jk->ik" as {{i, j}, {j, k}} and {i, k}; the output is absent when there is no "->".
struct Equation {
  std::vector<Labels> inputs;
  std::optional<Labels> output;
};

Equation parse(std::string_view eq) {
  Equation e;
  e.inputs.emplace_back();
  auto term = [&]() -> Labels& { return e.output ? *e.output : e.inputs.back(); };
  for (size_t i = 0; i < eq.size(); ++i) {
    const char c = eq[i];
    if (c == ' ') continue;
    if (c == ',' && !e.output) {
      e.inputs.emplace_back();
    } else if (c == '-' && !e.output && eq.substr(i, 2) == "->") {
      e.output.emplace();
      ++i;
    } else if (c == '.') {
      EMBER_CHECK(eq.substr(i, 3) == "...", "einsum: found '.' at index ", i,
                  " of the equation that is not part of an ellipsis");
      EMBER_CHECK(!has(term(), kEllipsis), "einsum: found more than one ellipsis in a term");
      term().push_back(kEllipsis);
      i += 2;
    } else {
      EMBER_CHECK(letter_label(c) >= 0, "einsum: invalid subscript '", c, "' at index ", i,
                  " of the equation, subscripts must be in [a-zA-Z]");
      term().push_back(letter_label(c));
    }
  }
  return e;
}

// A tensor with one label per dim.
struct Term {
  Tensor t;
  Labels labels;
};

// Dim d of a tensor is dim group[d] of its diagonal: the view whose dims take the strides of the
// dims grouped into them, summed.
using Groups = std::vector<int64_t>;

Tensor diagonal_view(const Tensor& t, const Groups& group, int64_t dims) {
  DimVector sizes(dims), strides(dims, 0);
  for (int64_t d = 0; d < t.dim(); ++d) sizes[group[d]] = t.size(d), strides[group[d]] += t.stride(d);
  return t.as_strided(sizes, strides);
}

Tensor embed_diagonal(const Tensor& g, IntArrayRef sizes, const Groups& group);

// The diagonal as an op of its own (as_strided has no backward): a view whose gradient is embedded
// into zeros, and the embedding's gradient is the diagonal again (so it can be differentiated
// twice).
Tensor take_diagonal(const Tensor& t, const Groups& group, int64_t dims) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = diagonal_view(t, group, dims);
  }
  if (needs_grad({t}))
    record("einsum", {t}, {out}, [sizes = DimVector(t.sizes()), group](const GradContext& g) {
      return std::vector<Tensor>{embed_diagonal(g.grad(), sizes, group)};
    });
  return out;
}

Tensor embed_diagonal(const Tensor& g, IntArrayRef sizes, const Groups& group) {
  Tensor out = zeros(sizes, g.options());
  {
    NoGradGuard no_grad;
    diagonal_view(out, group, g.dim()).copy_(g);
  }
  if (needs_grad({g}))
    record("einsum", {g}, {out}, [group, dims = g.dim()](const GradContext& c) {
      return std::vector<Tensor>{take_diagonal(c.grad(), group, dims)};
    });
  return out;
}

// A label repeated within one operand walks its diagonal.
Term diagonal(size_t index, const Tensor& t, const Labels& labels) {
  Term r{t, {}};
  Groups group;
  for (int64_t d = 0; d < t.dim(); ++d) {
    auto it = std::find(r.labels.begin(), r.labels.end(), labels[d]);
    group.push_back(it - r.labels.begin());
    if (it == r.labels.end()) {
      r.labels.push_back(labels[d]);
      continue;
    }
    const int64_t first = std::find(labels.begin(), labels.end(), labels[d]) - labels.begin();
    EMBER_CHECK(t.size(first) == t.size(d), "einsum: subscript ", label_name(labels[d]),
                " is repeated for operand ", index, " but the sizes don't match, ", t.size(first),
                " != ", t.size(d));
  }
  if (r.labels.size() < labels.size()) r.t = take_diagonal(t, group, static_cast<int64_t>(r.labels.size()));
  return r;
}

// Sums out the labels of x that are not in keep: a product with a vector of ones.
Term sum_out(const Term& x, const Labels& keep) {
  Term r{Tensor(), {}};
  DimVector perm, shape;
  int64_t n = 1;
  for (size_t d = 0; d < x.labels.size(); ++d)
    if (has(keep, x.labels[d]))
      r.labels.push_back(x.labels[d]), perm.push_back(d), shape.push_back(x.t.size(d));
  if (r.labels.size() == x.labels.size()) return x;
  for (size_t d = 0; d < x.labels.size(); ++d)
    if (!has(keep, x.labels[d])) perm.push_back(d), n *= x.t.size(d);
  shape.push_back(n);
  r.t = matmul(x.t.permute(perm).reshape(shape), ones({n}, x.t.options()));
  return r;
}

// x's dims permuted into the order of `groups`, broadcast to `size`, and each group flattened.
Tensor arrange(const Term& x, std::initializer_list<const Labels*> groups, const DimVector& size) {
  DimVector perm, full, shape;
  for (const Labels* g : groups) {
    int64_t n = 1;
    for (int l : *g) {
      perm.push_back(std::find(x.labels.begin(), x.labels.end(), l) - x.labels.begin());
      full.push_back(size[l]);
      n *= size[l];
    }
    shape.push_back(n);
  }
  return x.t.permute(perm).expand(full).reshape(shape);
}

// a x b keeping the labels in `after` (those of the output and of later operands).
Term contract(Term a, Term b, const Labels& after, size_t num_labels) {
  a = sum_out(a, join(after, b.labels));
  b = sum_out(b, join(after, a.labels));
  Labels batch, inner, rows, cols;
  DimVector size(num_labels, 1);
  for (size_t d = 0; d < a.labels.size(); ++d) {
    const int l = a.labels[d];
    (has(b.labels, l) ? (has(after, l) ? batch : inner) : rows).push_back(l);
    size[l] = a.t.size(d);
  }
  for (size_t d = 0; d < b.labels.size(); ++d) {
    const int l = b.labels[d];
    if (!has(a.labels, l)) cols.push_back(l);
    if (!has(a.labels, l) || size[l] == 1) size[l] = b.t.size(d);  // broadcast a size of 1
  }
  Tensor prod = bmm(arrange(a, {&batch, &rows, &inner}, size), arrange(b, {&batch, &inner, &cols}, size));
  Term r{Tensor(), join(join(batch, rows), cols)};
  DimVector shape;
  for (int l : r.labels) shape.push_back(size[l]);
  r.t = prod.view(shape);
  return r;
}

}  // namespace

Tensor einsum(std::string_view equation, ArrayRef<Tensor> operands) {
  detail::OpRange op_range("einsum", operands);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "einsum", [&](const auto&... t) { return einsum(t...); }, equation, operands);
  EMBER_CHECK(!operands.empty(), "einsum: must provide at least one operand");
  Equation eq = parse(equation);
  EMBER_CHECK(eq.inputs.size() == operands.size(), "einsum: the equation has ", eq.inputs.size(),
              " input terms, but ", operands.size(), " operands were given");
  for (const Tensor& t : operands) {
    EMBER_CHECK(t.dtype() == operands[0].dtype() && t.device() == operands[0].device(),
                "einsum: expected all operands to have one dtype and device, but got ", operands[0].dtype(),
                " on ", operands[0].device(), " and ", t.dtype(), " on ", t.device());
  }
  EMBER_CHECK(operands[0].dtype() != kBool, "einsum: not supported for bool tensors");

  // Expand each ellipsis into labels for its dims, right-aligned across operands.
  int64_t ellipsis_dims = 0;
  for (size_t i = 0; i < operands.size(); ++i) {
    const Labels& in = eq.inputs[i];
    const int64_t letters = static_cast<int64_t>(in.size()) - (has(in, kEllipsis) ? 1 : 0);
    const int64_t ndim = operands[i].dim();
    EMBER_CHECK(has(in, kEllipsis) ? ndim >= letters : ndim == letters, "einsum: operand ", i, " has ", ndim,
                " dims, but its term in the equation has ", letters, " subscripts",
                has(in, kEllipsis) ? " and an ellipsis" : " and no ellipsis");
    if (has(in, kEllipsis)) ellipsis_dims = std::max(ellipsis_dims, ndim - letters);
  }
  const size_t num_labels = kLetters + ellipsis_dims;
  std::vector<Term> terms;
  for (size_t i = 0; i < operands.size(); ++i) {
    Labels labels;
    const int64_t covered = operands[i].dim() - static_cast<int64_t>(eq.inputs[i].size()) + 1;
    for (int l : eq.inputs[i]) {
      if (l != kEllipsis) labels.push_back(l);
      for (int64_t j = 0; l == kEllipsis && j < covered; ++j)
        labels.push_back(static_cast<int>(kLetters + ellipsis_dims - covered + j));
    }
    terms.push_back(diagonal(i, operands[i], labels));
  }

  // Each label's size: equal in every operand, or 1 (broadcast).
  DimVector size(num_labels, -1);
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t d = 0; d < terms[i].labels.size(); ++d) {
      int64_t& s = size[terms[i].labels[d]];
      const int64_t here = terms[i].t.size(d);
      EMBER_CHECK(s < 0 || s == here || s == 1 || here == 1, "einsum: subscript ",
                  label_name(terms[i].labels[d]), " has size ", here, " for operand ", i,
                  " which does not broadcast with previously seen size ", s);
      if (s < 0 || s == 1) s = here;
    }

  // The output: as written, or the ellipsis dims then the labels seen once, in ASCII order.
  Labels out;
  Labels ellipsis;
  for (int64_t j = 0; j < ellipsis_dims; ++j) ellipsis.push_back(static_cast<int>(kLetters + j));
  if (eq.output) {
    for (int l : *eq.output) {
      if (l == kEllipsis) {
        out = join(out, ellipsis);
        continue;
      }
      EMBER_CHECK(size[l] >= 0, "einsum: output subscript ", label_name(l),
                  " does not appear in the equation for any input operand");
      EMBER_CHECK(!has(out, l), "einsum: output subscript ", label_name(l),
                  " appears more than once in the output");
      out.push_back(l);
    }
  } else {
    out = ellipsis;
    for (int l = 0; l < kLetters; ++l) {
      int64_t count = 0;
      for (const Labels& in : eq.inputs) count += std::count(in.begin(), in.end(), l);
      if (count == 1) out.push_back(l);
    }
  }

  // Contract left to right, keeping what the output and the later operands need.
  auto needed_after = [&](size_t i) {
    Labels l = out;
    for (size_t j = i + 1; j < terms.size(); ++j) l = join(l, terms[j].labels);
    return l;
  };
  Term acc = sum_out(terms[0], needed_after(0));
  for (size_t i = 1; i < terms.size(); ++i) acc = contract(acc, terms[i], needed_after(i), num_labels);
  DimVector perm;
  for (int l : out) perm.push_back(std::find(acc.labels.begin(), acc.labels.end(), l) - acc.labels.begin());
  return acc.t.permute(perm);
}

}  // namespace ember
