// Op-table entry of _foreach_copy_. A sample is pairs (self, src) and a trailing 0-dim int64 of
// layout bits; fn copies into fresh tensors of each self's values laid out as the bits say (the
// CUDA suite moves inputs contiguously, so layouts are made here), checks each against copy_ and
// returns them flattened. Cases: one pair, several, zero-size, 0-dim, more tensors than one
// multi-tensor launch holds (48), a tensor over one chunk (65536 elements), unaligned and
// strided sides, and int32 sources (converted one by one).
#include "ember/core/ops/foreach.h"
#include "test_util.h"

namespace ember::testing {
namespace {

enum LayoutBits : int64_t { kStridedSelf = 1, kStridedSrc = 2, kUnaligned = 4 };

// `t`'s values in a fresh tensor: strided, or contiguous one element into its buffer (so 16-byte
// vector loads do not apply), or plain contiguous.
Tensor laid_out(const Tensor& t, bool strided, bool unaligned) {
  if (strided) return non_contiguous(t);
  if (!unaligned) return t.clone();
  Tensor buf = zeros({t.numel() + 1}, t.options());
  Tensor view = buf.narrow(0, 1, t.numel()).view(t.sizes());
  view.copy_(t);
  return view;
}

std::vector<Sample> samples(ScalarType dt) {
  const std::vector<std::pair<std::vector<DimVector>, int64_t>> cases = {
      {{{4, 5}}, 0},
      {{{3}, {2, 3}, {7}}, 0},
      {{{0, 4}, {6}}, 0},
      {{DimVector{}}, 0},
      {{{3, 4}, {5}}, kStridedSelf},
      {{{3, 4}, {5}}, kStridedSrc | kUnaligned},
      {{{70001}, {9}}, kUnaligned},
      {{{70001}, {3, 3}}, 0},
  };
  std::vector<Sample> out;
  for (const auto& [shapes, bits] : cases) {
    Sample s;
    for (const DimVector& shape : shapes) {
      s.inputs.push_back(random_tensor(shape, dt));
      s.inputs.push_back(random_tensor(shape, dt));
    }
    s.inputs.push_back(full({}, bits, kInt64));
    s.desc = std::to_string(shapes.size()) + " pairs, layout " + std::to_string(bits);
    out.push_back(s);
  }
  Sample many;
  for (int64_t i = 0; i < 60; ++i) {
    many.inputs.push_back(random_tensor({i % 7 + 1, 3}, dt));
    many.inputs.push_back(random_tensor({i % 7 + 1, 3}, dt));
  }
  many.inputs.push_back(full({}, int64_t{0}, kInt64));
  many.desc = "60 pairs";
  out.push_back(many);
  out.push_back({{random_tensor({2, 3}, dt), random_tensor({2, 3}, kInt32, -50, 50), random_tensor({4}, dt),
                  random_tensor({4}, dt), full({}, int64_t{0}, kInt64)},
                 "int32 source"});
  return out;
}

Tensor copy_fn(const std::vector<Tensor>& in) {
  const int64_t bits = in.back().item<int64_t>();
  std::vector<Tensor> self, src, flat;
  for (size_t i = 0; i + 1 < in.size(); i += 2) {
    self.push_back(laid_out(in[i], bits & kStridedSelf, bits & kUnaligned));
    src.push_back(laid_out(in[i + 1], bits & kStridedSrc, bits & kUnaligned));
  }
  _foreach_copy_(self, src);
  // The reference run is this op too: check against copy_ (through to) here.
  for (size_t i = 0; i < self.size(); ++i)
    EMBER_CHECK(!self[i].ne(src[i].to(self[i].dtype())).any().item<bool>(), "_foreach_copy_: self[", i,
                "] differs from src[", i, "]");
  for (const Tensor& t : self) flat.push_back(t.reshape({-1}));
  return cat(flat);
}

const OpTableRegistrar registrar({
    {"_foreach_copy_", samples, copy_fn, {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kBool}},
});

}  // namespace
}  // namespace ember::testing
