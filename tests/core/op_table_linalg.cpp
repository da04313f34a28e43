// Op-table entries for the matrix products (core/ops/linalg.h). Shapes cover every rank rule of
// matmul, broadcast batches, transposed and expanded operands (each storage-order pair of the
// GEMM kernel), the sizes where Eigen switches from its small-product path to GEMM, a batch
// large enough to run one product per thread, and zero-size M, N, K and batch.
#include <sstream>

#include "ember/core/ops/linalg.h"
#include "test_util.h"

namespace ember::testing {
namespace {

// A random tensor of `shape`; `t` stores its last two dims transposed (a column-major matrix).
Tensor operand(IntArrayRef shape, ScalarType dt, bool t = false) {
  if (!t) return random_tensor(shape, dt, -1, 1);
  DimVector s(shape);
  std::swap(s[s.size() - 1], s[s.size() - 2]);
  return random_tensor(s, dt, -1, 1).mT();
}

// Samples of two operands: each listed shape pair in all four storage-order combinations of the
// last two dims (when both are matrices), plus non-contiguous copies of the first pair.
std::vector<Sample> pairs(ScalarType dt, std::vector<std::vector<DimVector>> shapes) {
  std::vector<Sample> out = samples_from_shapes(dt, shapes, -1, 1);
  for (const auto& s : shapes) {
    if (s[0].size() < 2 || s[1].size() < 2) continue;
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        if (ta || tb) {
          std::ostringstream desc;
          desc << IntArrayRef(s[0]) << (ta ? " (transposed) " : " ") << IntArrayRef(s[1])
               << (tb ? " (transposed)" : "");
          out.push_back({{operand(s[0], dt, ta), operand(s[1], dt, tb)}, desc.str()});
        }
  }
  return out;
}

// Samples of (input, mat1, mat2): input shapes broadcast against the product's.
std::vector<Sample> triples(ScalarType dt, std::vector<std::vector<DimVector>> shapes) {
  std::vector<Sample> out = samples_from_shapes(dt, shapes, -1, 1);
  for (const auto& s : shapes)
    out.push_back(
        {{operand(s[0], dt), operand(s[1], dt, true), operand(s[2], dt, true)}, "transposed mats"});
  return out;
}

// einsum samples: the equation is kEquations[i] for a last input holding i (the harness passes
// integer inputs through unchanged).
const char* const kEquations[] = {"ij,jk->ik",      "bij,bjk->bik",    "i,i->",      "ii->i",
                                  "ij->ji",         "...ij,...jk",     "i,j->ij",    "ij->",
                                  "ijk,ikl,lm->jm", "bhqd,bhkd->bhqk", "iJ,Jk,k->i", "aab,cb"};

std::vector<Sample> einsum_samples(ScalarType dt) {
  std::vector<std::vector<DimVector>> shapes = {{{4, 3}, {3, 5}},
                                                {{2, 4, 3}, {2, 3, 5}},
                                                {{6}, {6}},
                                                {{5, 5}},
                                                {{3, 4}},
                                                {{2, 1, 4, 3}, {3, 3, 5}},
                                                {{3}, {4}},
                                                {{3, 0}},
                                                {{2, 3, 4}, {2, 4, 5}, {5, 3}},
                                                {{2, 2, 5, 8}, {2, 2, 6, 8}},
                                                {{3, 4}, {4, 5}, {5}},
                                                {{3, 3, 4}, {2, 4}}};
  std::vector<Sample> out;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Sample s{{}, kEquations[i]};
    for (const DimVector& shape : shapes[i]) s.inputs.push_back(random_tensor(shape, dt, -1, 1));
    s.inputs.push_back(tensor({static_cast<int64_t>(i)}));
    out.push_back(s);
  }
  Sample nc = out[1];
  for (size_t i = 0; i + 1 < nc.inputs.size(); ++i) nc.inputs[i] = non_contiguous(nc.inputs[i]);
  nc.desc += " (non-contiguous)";
  out.push_back(nc);
  return out;
}

Tensor run_einsum(const std::vector<Tensor>& in) {
  std::vector<Tensor> operands(in.begin(), in.end() - 1);
  return einsum(kEquations[in.back().item<int64_t>()], operands);
}

OpEntry product(const std::string& name, std::function<std::vector<Sample>(ScalarType)> samples,
                std::function<Tensor(const std::vector<Tensor>&)> fn) {
  // Sums of up to 40 products accumulate in float32; f16/bf16 round once at the end.
  return {name, std::move(samples), std::move(fn), {kFloat32, kFloat64, kFloat16, kBFloat16}, 4};
}

const OpTableRegistrar registrar({
    product(
        "matmul",
        [](ScalarType dt) {
          std::vector<Sample> s = pairs(dt, {{{4, 3}, {3, 5}},
                                             {{3}, {3}},
                                             {{4, 3}, {3}},
                                             {{3}, {3, 5}},
                                             {{2, 4, 3}, {3, 5}},
                                             {{2, 4, 3}, {3}},
                                             {{3}, {2, 3, 5}},
                                             {{2, 1, 4, 3}, {3, 3, 5}},
                                             {{4, 3}, {2, 3, 5}},
                                             {{33, 40}, {40, 35}},
                                             {{3, 20, 30}, {1, 30, 25}},
                                             {{8, 17, 9}, {8, 9, 13}},
                                             {{2, 4, 0}, {0, 5}},
                                             {{0, 4, 3}, {3, 5}},
                                             {{2, 0, 3}, {2, 3, 5}},
                                             {{0}, {0}}});
          // A batched operand that does not fold into rows: the broadcast batched path.
          s.push_back({{operand({3, 6, 4}, dt, true), operand({4, 5}, dt)}, "transposed batch"});
          s.push_back({{operand({1, 4}, dt).expand({6, 4}), operand({4, 5}, dt)}, "expanded rows"});
          return s;
        },
        [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }),
    product(
        "mm",
        [](ScalarType dt) {
          std::vector<Sample> s = pairs(dt, {{{4, 3}, {3, 5}},
                                             {{30, 21}, {21, 26}},
                                             {{1, 1}, {1, 1}},
                                             {{4, 0}, {0, 5}},
                                             {{0, 3}, {3, 2}}});
          s.push_back(
              {{operand({1, 24}, dt).expand({30, 24}), operand({24, 1}, dt).expand({24, 7})},
               "expanded"});
          return s;
        },
        [](const std::vector<Tensor>& in) { return mm(in[0], in[1]); }),
    product(
        "bmm",
        [](ScalarType dt) {
          std::vector<Sample> s = pairs(dt, {{{2, 4, 3}, {2, 3, 5}},
                                             {{3, 25, 20}, {3, 20, 22}},
                                             {{9, 5, 7}, {9, 7, 6}},
                                             {{0, 4, 3}, {0, 3, 5}},
                                             {{3, 4, 0}, {3, 0, 2}}});
          s.push_back({{operand({1, 20, 24}, dt).expand({5, 20, 24}), operand({5, 24, 3}, dt)},
                       "broadcast batch"});
          return s;
        },
        [](const std::vector<Tensor>& in) { return bmm(in[0], in[1]); }),
    product(
        "addmm",
        [](ScalarType dt) {
          return triples(dt, {{{4, 5}, {4, 3}, {3, 5}},
                              {{5}, {4, 3}, {3, 5}},
                              {{23, 1}, {23, 30}, {30, 19}},
                              {{1, 1}, {4, 0}, {0, 5}}});
        },
        [](const std::vector<Tensor>& in) { return addmm(in[0], in[1], in[2], 0.5, 2); }),
    product(
        "baddbmm",
        [](ScalarType dt) {
          return triples(dt, {{{2, 4, 5}, {2, 4, 3}, {2, 3, 5}},
                              {{4, 5}, {2, 4, 3}, {2, 3, 5}},
                              {{1, 22, 1}, {3, 22, 21}, {3, 21, 20}},
                              {{2, 4, 5}, {2, 4, 0}, {2, 0, 5}}});
        },
        [](const std::vector<Tensor>& in) { return baddbmm(in[0], in[1], in[2], -1, 0.5); }),
    product(
        "outer",
        [](ScalarType dt) {
          return samples_from_shapes(dt, {{{3}, {4}}, {{1}, {5}}, {{0}, {4}}});
        },
        [](const std::vector<Tensor>& in) { return outer(in[0], in[1]); }),
    product(
        "dot",
        [](ScalarType dt) {
          return samples_from_shapes(dt, {{{5}, {5}}, {{40}, {40}}, {{0}, {0}}}, -1, 1);
        },
        [](const std::vector<Tensor>& in) { return dot(in[0], in[1]); }),
    product("einsum", einsum_samples, run_einsum),
});

}  // namespace
}  // namespace ember::testing
