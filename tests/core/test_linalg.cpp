// Matrix products: values by hand or against a by-definition double loop, PyTorch's rank rules,
// precision of f16 accumulation, and every error the frontends throw.
#include <cmath>
#include <limits>

#include "ember/core/ops/linalg.h"
#include "test_util.h"

namespace ember::testing {
namespace {

// [M, K] @ [K, N] in double by the definition: a reference independent of the GEMM.
Tensor naive_mm(const Tensor& a, const Tensor& b) {
  Tensor x = a.to(kFloat64).contiguous(), y = b.to(kFloat64).contiguous();
  const int64_t m = x.size(0), k = x.size(1), n = y.size(1);
  Tensor out = zeros({m, n}, kFloat64);
  const double *px = x.data_ptr<double>(), *py = y.data_ptr<double>();
  double* po = out.data_ptr<double>();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t l = 0; l < k; ++l) po[i * n + j] += px[i * k + l] * py[l * n + j];
  return out;
}

TEST(Linalg, MmByHand) {
  Tensor a = tensor({{1., 2.}, {3., 4.}}), b = tensor({{5., 6.}, {7., 8.}});
  EXPECT_CLOSE(mm(a, b), tensor({{19., 22.}, {43., 50.}}));
  EXPECT_CLOSE(a.mm(b), tensor({{19., 22.}, {43., 50.}}));
  EXPECT_CLOSE(a.matmul(b.t()), tensor({{17., 23.}, {39., 53.}}));
  // [2, 3] @ [3, 1]
  EXPECT_CLOSE(mm(tensor({{1., 0., -1.}, {2., 1., 0.}}), tensor({{3.}, {4.}, {5.}})), tensor({{-2.}, {10.}}));
}

// A linear's weight gradient with its bias gradient: the product and a's row sums.
TEST(Linalg, MmRowSumsStub) {
  for (ScalarType dt : {kFloat64, kFloat32, kBFloat16}) {
    SCOPED_TRACE(std::string(to_string(dt)));
    Tensor g = tensor({{1, 2, 3}, {4, 5, 6}}, dt), x = tensor({{1, 0}, {0, 1}, {2, 2}}, dt);
    Tensor out = empty({3, 2}, dt), sums = empty({3}, dt);
    mm_row_sums_stub(kCPU)(out, sums, g.t(), x.narrow(0, 0, 2));
    EXPECT_CLOSE(out, tensor({{1, 4}, {2, 5}, {3, 6}}, dt));
    EXPECT_CLOSE(sums, tensor({5, 7, 9}, dt));
  }
}

TEST(Linalg, MatmulRankRules) {
  Tensor v = tensor({1., 2., 3.}), w = tensor({4., 5., 6.});
  Tensor d = matmul(v, w);  // 1D . 1D: a 0-dim dot product
  EXPECT_EQ(d.dim(), 0);
  EXPECT_EQ(d.item<double>(), 32.);
  Tensor m = tensor({{1., 0., 0.}, {1., 1., 1.}});
  EXPECT_CLOSE(matmul(m, v), tensor({1., 6.}));      // [2, 3] @ [3] -> [2]
  EXPECT_CLOSE(matmul(v, m.t()), tensor({1., 6.}));  // [3] @ [3, 2] -> [2]
  EXPECT_EQ(matmul(rand({2, 4, 3}), v).sizes().vec(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(matmul(v, rand({2, 3, 5})).sizes().vec(), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(matmul(rand({2, 1, 4, 3}), rand({3, 3, 5})).sizes().vec(), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(matmul(rand({4, 3}), rand({7, 3, 5})).sizes().vec(), (std::vector<int64_t>{7, 4, 5}));
  EXPECT_EQ(matmul(rand({0, 4, 3}), rand({3, 5})).sizes().vec(), (std::vector<int64_t>{0, 4, 5}));
}

TEST(Linalg, BatchedMatchesEachSlice) {
  Tensor a = randn({2, 3, 6, 5}, kFloat64), b = randn({3, 5, 4}, kFloat64);
  Tensor c = matmul(a, b);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) EXPECT_CLOSE(c[i][j], naive_mm(a[i][j], b[j]));
  // The same product with a transposed (not foldable) left operand.
  Tensor at = a.mT().contiguous().mT();
  EXPECT_CLOSE(matmul(at, b), c);
}

TEST(Linalg, LargeProductsMatchNaive) {
  // Past Eigen's small-product path, with odd sizes for the kernels' edges; all four storage
  // orders; many small products (one per thread) and a few large ones (threaded GEMM).
  Tensor a = randn({130, 257}), b = randn({257, 129});
  Tensor ref = naive_mm(a, b).to(kFloat32);
  Tolerance tol{1e-5, 1e-4};
  EXPECT_CLOSE(mm(a, b), ref, tol);
  EXPECT_CLOSE(mm(a.t().contiguous().t(), b), ref, tol);
  EXPECT_CLOSE(mm(a, b.t().contiguous().t()), ref, tol);
  EXPECT_CLOSE(mm(a.t().contiguous().t(), b.t().contiguous().t()), ref, tol);
  EXPECT_CLOSE(mm(a.to(kFloat64), b.to(kFloat64)), naive_mm(a, b));
  Tensor x = randn({16, 7, 9}), y = randn({16, 9, 5});
  Tensor many = bmm(x, y);
  for (int64_t i = 0; i < 16; ++i) EXPECT_CLOSE(many[i], naive_mm(x[i], y[i]).to(kFloat32), tol);
  Tensor p = randn({3, 100, 90}), q = randn({3, 90, 110});
  Tensor few = bmm(p, q);
  for (int64_t i = 0; i < 3; ++i) EXPECT_CLOSE(few[i], naive_mm(p[i], q[i]).to(kFloat32), tol);
}

TEST(Linalg, StridedOperands) {
  Tensor a = randn({6, 8}, kFloat64), b = randn({8, 5}, kFloat64);
  // Neither stride of a column slice with step 2 is 1: the kernel packs it.
  Tensor as = a.slice(1, 0, std::nullopt, 2), bs = b.slice(0, 0, std::nullopt, 2).t().t();
  EXPECT_CLOSE(mm(as, bs), naive_mm(as, bs));
  Tensor odd = a.slice(1, 1, std::nullopt, 2);
  EXPECT_CLOSE(mm(as.t(), odd), naive_mm(as.t(), odd));
  Tensor e = randn({1, 4}, kFloat64).expand({3, 4});  // a row stride of 0
  EXPECT_CLOSE(mm(e, b.slice(0, 0, 4)), naive_mm(e, b.slice(0, 0, 4)));
}

TEST(Linalg, IntegerProducts) {
  Tensor a = tensor({{1, 2}, {3, 4}}), b = tensor({{5, 6}, {7, 8}});
  Tensor c = mm(a, b);
  EXPECT_EQ(c.dtype(), kInt64);
  EXPECT_CLOSE(c, tensor({{19, 22}, {43, 50}}));
  EXPECT_CLOSE(matmul(a.to(kInt32), b.to(kInt32)), tensor({{19, 22}, {43, 50}}, kInt32));
  EXPECT_CLOSE(addmm(tensor({1, 1}), a, b, 2, 3), tensor({{59, 68}, {131, 152}}));
  // Exact beyond 2^53, where a float64 product would round.
  Tensor big = tensor({(int64_t{1} << 53) + 1});
  EXPECT_EQ(dot(big, tensor({int64_t{1}})).item<int64_t>(), (int64_t{1} << 53) + 1);
}

TEST(Linalg, HalfAccumulatesInFloat) {
  // In f16, 2048 + 1 rounds back to 2048, so an f16 running sum gives 2048; a float32 one gives
  // 2050, which f16 represents exactly.
  for (ScalarType dt : {kFloat16, kBFloat16}) {
    Tensor a = tensor({2048., 1., 1.}, dt), b = ones({3}, dt);
    double expect = dt == kFloat16 ? 2050 : 2048;  // bf16 rounds 2050 to 2048 (8-bit mantissa)
    EXPECT_EQ(dot(a, b).item<double>(), expect) << dt;
    EXPECT_EQ(dot(a, b).dtype(), dt);
  }
  Tensor a = tensor({{2048., 1., 1.}}, kFloat16);
  EXPECT_EQ(mm(a, ones({3, 1}, kFloat16)).item<double>(), 2050.);
}

TEST(Linalg, AddmmAndBaddbmm) {
  Tensor in = tensor({{1., 2.}, {3., 4.}});
  Tensor a = tensor({{1., 2.}, {3., 4.}}), b = tensor({{5., 6.}, {7., 8.}});
  // 2 * in + 3 * [[19, 22], [43, 50]]
  EXPECT_CLOSE(addmm(in, a, b, 2, 3), tensor({{59., 70.}, {135., 158.}}));
  EXPECT_CLOSE(addmm(tensor({10., 20.}), a, b), tensor({{29., 42.}, {53., 70.}}));  // broadcast row
  // beta = 0 ignores the input, NaN included.
  Tensor nan = full({2, 2}, std::numeric_limits<double>::quiet_NaN());
  EXPECT_CLOSE(addmm(nan, a, b, 0, 1), tensor({{19., 22.}, {43., 50.}}));
  // K = 0: an empty sum, so only beta * input remains.
  EXPECT_CLOSE(addmm(in, zeros({2, 0}, kFloat32), zeros({0, 2}, kFloat32), 3), in * 3);
  EXPECT_CLOSE(mm(zeros({2, 0}, kFloat32), zeros({0, 3}, kFloat32)), zeros({2, 3}, kFloat32));
  Tensor x = randn({3, 4, 5}, kFloat64), y = randn({3, 5, 2}, kFloat64), c = randn({4, 2}, kFloat64);
  Tensor r = baddbmm(c, x, y, 0.5, -2);
  for (int64_t i = 0; i < 3; ++i) EXPECT_CLOSE(r[i], c * 0.5 + naive_mm(x[i], y[i]) * -2);
  EXPECT_CLOSE(x.bmm(y)[1], naive_mm(x[1], y[1]));
}

TEST(Linalg, OuterAndDot) {
  EXPECT_CLOSE(outer(tensor({1., 2.}), tensor({3., 4., 5.})), tensor({{3., 4., 5.}, {6., 8., 10.}}));
  Tensor o = outer(tensor({1, 2}), tensor({0.5}));  // promotes like `*`
  EXPECT_EQ(o.dtype(), kFloat32);
  EXPECT_CLOSE(o, tensor({{0.5}, {1.}}));
  EXPECT_EQ(dot(tensor({1., 2., 3.}), tensor({4., -5., 6.})).item<double>(), 12.);
  EXPECT_EQ(dot(zeros({0}, kFloat32), zeros({0}, kFloat32)).item<double>(), 0.);
  Tensor s = randn({10}, kFloat64);
  EXPECT_CLOSE(
      dot(s.slice(0, 0, std::nullopt, 2), s.slice(0, 1, std::nullopt, 2)),
      naive_mm(s.slice(0, 0, std::nullopt, 2).unsqueeze(0), s.slice(0, 1, std::nullopt, 2).unsqueeze(1))
          .view({}));
}

TEST(Linalg, EinsumByHand) {
  Tensor m = tensor({{1., 2.}, {3., 4.}});
  EXPECT_EQ(einsum("ii", {m}).item<double>(), 5.);  // trace
  EXPECT_CLOSE(einsum("ii->i", {m}), tensor({1., 4.}));
  EXPECT_CLOSE(einsum("ij->j", {m}), tensor({4., 6.}));  // column sums
  EXPECT_CLOSE(einsum("ij", {m}), m);
  EXPECT_CLOSE(einsum("ji", {m}), m.t());  // implicit output: labels in ASCII order
  EXPECT_CLOSE(einsum("ij,ij->ij", {m, m}), tensor({{1., 4.}, {9., 16.}}));
  EXPECT_EQ(einsum("ij,ij", {m, m}).item<double>(), 30.);
  EXPECT_CLOSE(einsum("ij,jk", {m, m}), tensor({{7., 10.}, {15., 22.}}));
  EXPECT_CLOSE(einsum(" i , j -> j i ", {tensor({1., 2.}), tensor({3., 4., 5.})}),
               tensor({{3., 6.}, {4., 8.}, {5., 10.}}));
  EXPECT_CLOSE(einsum("i,i->i", {tensor({2.}), tensor({1., 2., 3.})}), tensor({2., 4., 6.}));
  EXPECT_CLOSE(einsum("Ab,b->A", {m, tensor({1., -1.})}), tensor({-1., -1.}));
}

TEST(Linalg, EinsumMatchesMatmul) {
  Tensor a = randn({2, 3, 4, 5}, kFloat64), b = randn({3, 5, 6}, kFloat64);
  EXPECT_CLOSE(einsum("...ij,...jk->...ik", {a, b}), matmul(a, b));
  EXPECT_CLOSE(einsum("abij,bjk->abik", {a, b}), matmul(a, b));
  EXPECT_CLOSE(einsum("bij,bjk->bki", {a[0], b}), matmul(a[0], b).transpose(1, 2));
  // Three operands, contracted left to right: (A B) c.
  Tensor c = randn({6}, kFloat64);
  EXPECT_CLOSE(einsum("bij,bjk,k->bi", {a[1], b, c}), matmul(matmul(a[1], b), c));
  Tensor ints = tensor({{1, 2}, {3, 4}});
  EXPECT_CLOSE(einsum("ij,jk->ik", {ints, ints}), tensor({{7, 10}, {15, 22}}));
}

TEST(Linalg, Errors) {
  EXPECT_EMBER_ERROR(matmul(rand({4, 3}), rand({5, 2})),
                     "matmul: size mismatch, mat1 is [4, 3], mat2 is [5, 2]");
  EXPECT_EMBER_ERROR(matmul(rand({3}), rand({4})), "matmul: size mismatch", "[3]", "[4]");
  EXPECT_EMBER_ERROR(matmul(rand({2, 4, 3}), rand({3, 3, 5})), "matmul", "[2]", "[3]");
  EXPECT_EMBER_ERROR(matmul(rand({}), rand({3})), "matmul: both arguments need to be at least 1D",
                     "0D and 1D");
  EXPECT_EMBER_ERROR(matmul(rand({2, 3}), rand({3, 2}, kFloat64)),
                     "matmul: expected m1 and m2 to have the same dtype, but got: float32 != float64");
  EXPECT_EMBER_ERROR(matmul(ones({2, 2}, kBool), ones({2, 2}, kBool)), "matmul", "bool");
  EXPECT_EMBER_ERROR(mm(rand({2, 2, 3}), rand({3, 2})), "mm: expected 2D tensors", "3D and 2D");
  EXPECT_EMBER_ERROR(mm(rand({4, 3}), rand({5, 2})), "mm: size mismatch, mat1 is [4, 3], mat2 is [5, 2]");
  EXPECT_EMBER_ERROR(bmm(rand({2, 3}), rand({3, 2})), "bmm: expected 3D tensors");
  EXPECT_EMBER_ERROR(bmm(rand({2, 4, 3}), rand({3, 3, 2})), "bmm: batch sizes differ", "[2, 4, 3]",
                     "[3, 3, 2]");
  EXPECT_EMBER_ERROR(bmm(rand({2, 4, 3}), rand({2, 4, 2})), "bmm: size mismatch");
  EXPECT_EMBER_ERROR(addmm(rand({3, 3}), rand({2, 3}), rand({3, 4})), "addmm: input of shape [3, 3]",
                     "[2, 4]");
  EXPECT_EMBER_ERROR(addmm(rand({2, 4}, kFloat64), rand({2, 3}), rand({3, 4})),
                     "addmm: expected input and mat1 to have the same dtype");
  EXPECT_EMBER_ERROR(addmm(ones({2, 2}, kInt64), ones({2, 2}, kInt64), ones({2, 2}, kInt64), 0.5),
                     "addmm: for integral input tensors");
  EXPECT_EMBER_ERROR(addmm(rand({2, 4}), rand({2, 3}), rand({4, 4})), "addmm: size mismatch");
  EXPECT_EMBER_ERROR(baddbmm(rand({2, 4}), rand({2, 2, 3}), rand({3, 3, 4})), "baddbmm: batch sizes differ");
  EXPECT_EMBER_ERROR(baddbmm(rand({3, 2, 4}), rand({2, 2, 3}), rand({2, 3, 4})),
                     "baddbmm: input of shape [3, 2, 4]");
  EXPECT_EMBER_ERROR(dot(rand({2, 2}), rand({2})), "dot: expected 1D tensors, but got 2D and 1D");
  EXPECT_EMBER_ERROR(dot(rand({3}), rand({4})), "dot: inconsistent tensor size", "[3]", "[4]");
  EXPECT_EMBER_ERROR(dot(rand({3}), rand({3}, kFloat64)), "dot: expected m1 and m2 to have the same dtype");
  EXPECT_EMBER_ERROR(outer(rand({3, 1}), rand({3})), "outer: expected 1D tensors, but got 2D and 1D");
  Tensor m = rand({2, 3});
  EXPECT_EMBER_ERROR(einsum("ij", {}), "einsum: must provide at least one operand");
  EXPECT_EMBER_ERROR(einsum("ij,jk", {m}), "einsum: the equation has 2 input terms, but 1 operands");
  EXPECT_EMBER_ERROR(einsum("ijk", {m}), "einsum: operand 0 has 2 dims", "3 subscripts and no ellipsis");
  EXPECT_EMBER_ERROR(einsum("...ijk", {m}), "einsum: operand 0 has 2 dims", "and an ellipsis");
  EXPECT_EMBER_ERROR(einsum("i1", {m}), "einsum: invalid subscript '1' at index 1");
  EXPECT_EMBER_ERROR(einsum("i.j", {m}), "einsum: found '.' at index 1");
  EXPECT_EMBER_ERROR(einsum("......", {m}), "einsum: found more than one ellipsis");
  EXPECT_EMBER_ERROR(einsum("ij->k", {m}), "einsum: output subscript k does not appear");
  EXPECT_EMBER_ERROR(einsum("ij->ii", {m}), "einsum: output subscript i appears more than once");
  EXPECT_EMBER_ERROR(einsum("ii", {m}), "einsum: subscript i is repeated for operand 0", "2 != 3");
  EXPECT_EMBER_ERROR(einsum("ij,jk", {m, rand({2, 2})}), "einsum: subscript j has size 2 for operand 1",
                     "previously seen size 3");
  EXPECT_EMBER_ERROR(einsum("ij,jk", {m, rand({3, 2}, kFloat64)}),
                     "einsum: expected all operands to have one dtype");
  EXPECT_EMBER_ERROR(einsum("ij", {ones({2, 2}, kBool)}), "einsum: not supported for bool");
}

}  // namespace
}  // namespace ember::testing
