// Reductions against independently known values: hand sums, closed forms (sums and variances
// of arange), math identities, and PyTorch's documented rules (dtypes, ties, NaN, empty inputs).
#include <cmath>
#include <limits>

#include "ember/core/ops/reduce.h"
#include "test_util.h"

namespace ember::testing {
namespace {

// Restores the thread count a test changes.
struct ThreadCountGuard {
  int saved = get_num_threads();
  ~ThreadCountGuard() { set_num_threads(saved); }
};

TEST(ReduceSum, Arange) {
  Tensor s = arange(10).sum();  // 0 + 1 + ... + 9
  EXPECT_EQ(s.dtype(), kInt64);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<int64_t>(), 45);
  EXPECT_CLOSE(arange(10, kFloat32).sum(), tensor(45.0, kFloat32));
}

TEST(ReduceSum, DimsAndKeepdim) {
  // x[i][j][k] = 12i + 4j + k: the sum over i and k is 8 * 4j + (0 + 12) * 4 + (0+1+2+3) * 2.
  Tensor x = arange(24, kFloat32).reshape({2, 3, 4});
  EXPECT_CLOSE(x.sum({0, 2}), tensor({60.0, 92.0, 124.0}, kFloat32));
  Tensor k = x.sum({0, 2}, true);
  EXPECT_TRUE(k.sizes().equals({1, 3, 1}));
  EXPECT_CLOSE(k.view({3}), tensor({60.0, 92.0, 124.0}, kFloat32));
  EXPECT_TRUE(x.sum({1}).sizes().equals({2, 4}));
  EXPECT_TRUE(x.sum({-2}, true).sizes().equals({2, 1, 4}));
  EXPECT_CLOSE(x.sum(IntArrayRef{}), tensor(276.0, kFloat32));  // empty list: all dims, 23 * 24 / 2
  EXPECT_CLOSE(sum(x, {0, 1, 2}), tensor(276.0, kFloat32));
}

TEST(ReduceSum, Dtypes) {
  Tensor i32 = tensor({1, 2, 3}, kInt32);
  EXPECT_EQ(i32.sum().dtype(), kInt64);
  EXPECT_EQ(i32.sum({0}).dtype(), kInt64);
  EXPECT_EQ(tensor({true, false, true}).sum().item<int64_t>(), 2);
  EXPECT_EQ(tensor({200, 100}, kUInt8).sum().item<int64_t>(), 300);  // no uint8 wraparound
  Tensor f64 = i32.sum(kFloat64);
  EXPECT_EQ(f64.dtype(), kFloat64);
  EXPECT_EQ(f64.item<double>(), 6.0);
  EXPECT_EQ(sum(tensor({1.5, 2.5}, kFloat32), {0}, false, kFloat64).dtype(), kFloat64);
  EXPECT_EQ(tensor({1.5}, kFloat16).sum().dtype(), kFloat16);
  EXPECT_EQ(tensor({1.5}, kBFloat16).sum({0}).dtype(), kBFloat16);
  // int64 wraps around like PyTorch's: INT64_MAX + 1.
  Tensor big = tensor({std::numeric_limits<int64_t>::max(), int64_t{1}}, kInt64);
  EXPECT_EQ(big.sum().item<int64_t>(), std::numeric_limits<int64_t>::min());
}

TEST(ReduceSum, EmptyAndScalar) {
  EXPECT_EQ(zeros({0}, kFloat32).sum().item<double>(), 0.0);
  EXPECT_CLOSE(zeros({3, 0}, kFloat32).sum({1}), zeros({3}, kFloat32));
  EXPECT_TRUE(zeros({0, 4}, kFloat32).sum({0}, true).sizes().equals({1, 4}));
  EXPECT_TRUE(zeros({0, 4}, kFloat32).sum({1}).sizes().equals({0}));
  Tensor s = full({}, 2.5);
  EXPECT_EQ(s.sum().item<double>(), 2.5);
  EXPECT_EQ(s.sum({0}).item<double>(), 2.5);
  EXPECT_EQ(s.sum({-1}, true).dim(), 0);
}

TEST(ReduceSum, LayoutsAndLargeShapes) {
  // Transposed (a kept dim innermost): row sums of x.t() are column sums of x.
  Tensor x = arange(12, kFloat32).reshape({3, 4});
  EXPECT_CLOSE(x.t().sum({1}), tensor({12.0, 15.0, 18.0, 21.0}, kFloat32));
  EXPECT_CLOSE(x.sum({0}), tensor({12.0, 15.0, 18.0, 21.0}, kFloat32));
  EXPECT_CLOSE(non_contiguous(x).sum({1}), tensor({6.0, 22.0, 38.0}, kFloat32));
  EXPECT_CLOSE(full({}, 2.0).expand({5, 3}).sum({0}), full({3}, 10.0));  // stride 0
  // Reduced ranges long enough to be split across threads: closed forms n(n-1)/2.
  EXPECT_CLOSE(ones({3, 100000}, kFloat32).sum({1}), full({3}, 100000.0));
  EXPECT_EQ(arange(300000, kFloat64).sum().item<double>(), 44999850000.0);
  // y[i][j] = 3i + j over i < 70000: 3 * n(n-1)/2 + j * n.
  Tensor y = arange(210000, kFloat64).reshape({70000, 3});
  EXPECT_CLOSE(y.sum({0}), tensor({7349895000.0, 7349965000.0, 7350035000.0}, kFloat64));
  EXPECT_CLOSE(y.t().sum({1}), tensor({7349895000.0, 7349965000.0, 7350035000.0}, kFloat64));
}

TEST(ReduceSum, LayoutDoesNotChangeResults) {
  // Seven dims (more than the inline six), permuted and sliced, against a contiguous copy.
  manual_seed(11);
  Tensor x = randn({3, 2, 4, 2, 3, 2, 5}, kFloat64).permute({6, 2, 0, 5, 1, 4, 3}).slice(0, 1, 5);
  Tensor c = x.contiguous();
  using Dims = std::vector<int64_t>;
  for (const Dims& dims : {Dims{1, 3, 5}, Dims{0, 6}, Dims{2}, Dims{0, 1, 2, 3, 4, 5, 6}, Dims{4, 5}}) {
    SCOPED_TRACE(::testing::PrintToString(dims));
    EXPECT_CLOSE(x.sum(dims), c.sum(dims));
    EXPECT_CLOSE(x.var(dims, 1, true), c.var(dims, 1, true));
    EXPECT_CLOSE(x.logsumexp(dims), c.logsumexp(dims));
    EXPECT_CLOSE(x.amin(dims), c.amin(dims));
  }
  for (int64_t d = 0; d < 7; ++d) EXPECT_CLOSE(std::get<1>(x.max(d)), std::get<1>(c.max(d)));
  EXPECT_EQ(x.argmin().item<int64_t>(), c.argmin().item<int64_t>());
}

TEST(ReduceSum, AccumulatesLowPrecisionInDouble) {
  // 0.1f is 13421773 * 2^-27, so 2^22 copies sum to exactly 419430.40625, a float. A float
  // accumulator would drift far from it.
  EXPECT_EQ(full({1 << 22}, 0.1f, kFloat32).sum().item<float>(), 419430.40625f);
  // float16 0.1 is 0.0999755859375; 4096 of them are 409.5. A float16 accumulator stalls at 256.
  EXPECT_EQ(full({4096}, 0.1, kFloat16).sum().item<float>(), 409.5f);
  EXPECT_EQ(full({64, 4096}, 0.1, kFloat16).sum({1})[7].item<float>(), 409.5f);
  EXPECT_EQ(full({4096, 64}, 0.1, kFloat16).sum({0})[7].item<float>(), 409.5f);
}

TEST(ReduceSum, IndependentOfThreadCount) {
  ThreadCountGuard guard;
  manual_seed(7);
  Tensor x = randn({1 << 20});
  Tensor cols = randn({20000, 40});
  set_num_threads(1);
  Tensor a = x.sum(), b = cols.sum({0}), c = x.var(), d = cols.logsumexp({0});
  for (int n : {2, 3, 8}) {
    set_num_threads(n);
    EXPECT_EQ(x.sum().item<float>(), a.item<float>());
    EXPECT_CLOSE(cols.sum({0}), b, Tolerance{0, 0});
    EXPECT_EQ(x.var().item<float>(), c.item<float>());
    EXPECT_CLOSE(cols.logsumexp({0}), d, Tolerance{0, 0});
  }
}

TEST(ReduceMean, Values) {
  EXPECT_CLOSE(tensor({1.0, 2.0, 3.0, 4.0}).mean(), tensor(2.5));
  Tensor x = arange(6, kFloat64).reshape({2, 3});
  EXPECT_CLOSE(x.mean({1}), tensor({1.0, 4.0}, kFloat64));
  EXPECT_CLOSE(x.mean({0}, true), tensor({{1.5, 2.5, 3.5}}, kFloat64));
  EXPECT_CLOSE(mean(tensor({1, 2, 3, 4}), kFloat32), tensor(2.5));  // integers with a dtype
  EXPECT_TRUE(std::isnan(zeros({0}, kFloat32).mean().item<double>()));  // 0 / 0, as PyTorch
  EXPECT_CLOSE(full({3, 70000}, 0.25, kBFloat16).mean({1}), full({3}, 0.25, kBFloat16));
}

TEST(ReduceProd, Values) {
  EXPECT_CLOSE(tensor({1.0, 2.0, 3.0, 4.0}).prod(), tensor(24.0));
  Tensor p = tensor({1, 2, 3, 4}, kInt32).prod();
  EXPECT_EQ(p.dtype(), kInt64);
  EXPECT_EQ(p.item<int64_t>(), 24);
  EXPECT_CLOSE(tensor({{1.0, 2.0}, {3.0, 4.0}}).prod(1), tensor({2.0, 12.0}));
  EXPECT_CLOSE(tensor({{1.0, 2.0}, {3.0, 4.0}}).prod(0, true), tensor({{3.0, 8.0}}));
  EXPECT_EQ(zeros({0}, kFloat32).prod().item<double>(), 1.0);
  EXPECT_CLOSE(zeros({2, 0}, kFloat32).prod(1), ones({2}, kFloat32));
  EXPECT_EQ(prod(tensor({2, 3}), kFloat64).dtype(), kFloat64);
}

TEST(ReduceMaxMin, ValuesAndIndices) {
  Tensor x = tensor({{1.0, 5.0, 3.0}, {4.0, 2.0, 6.0}});
  EXPECT_EQ(x.max().item<double>(), 6.0);
  EXPECT_EQ(x.min().item<double>(), 1.0);
  EXPECT_EQ(x.max().dim(), 0);
  auto [v, i] = x.max(1);
  EXPECT_CLOSE(v, tensor({5.0, 6.0}));
  EXPECT_CLOSE(i, tensor({1, 2}));
  EXPECT_EQ(i.dtype(), kInt64);
  auto [v0, i0] = x.min(0);
  EXPECT_CLOSE(v0, tensor({1.0, 2.0, 3.0}));
  EXPECT_CLOSE(i0, tensor({0, 1, 0}));
  auto [vk, ik] = x.max(-1, true);
  EXPECT_TRUE(vk.sizes().equals({2, 1}));
  EXPECT_TRUE(ik.sizes().equals({2, 1}));
  Tensor i32 = tensor({3, -7, 5}, kInt32);
  EXPECT_EQ(i32.max().dtype(), kInt32);
  EXPECT_EQ(i32.max().item<int64_t>(), 5);
  EXPECT_EQ(i32.min().item<int64_t>(), -7);
  EXPECT_EQ(tensor({false, true}).max().item<bool>(), true);
  auto [s, si] = full({}, 3.0).max(0);  // a 0-dim tensor along dim 0: itself, index 0
  EXPECT_EQ(s.item<double>(), 3.0);
  EXPECT_EQ(si.item<int64_t>(), 0);
}

TEST(ReduceMaxMin, TiesPickTheFirstIndex) {
  EXPECT_EQ(tensor({1.0, 3.0, 3.0, 2.0}).argmax().item<int64_t>(), 1);
  EXPECT_EQ(tensor({2.0, 1.0, 1.0}).argmin().item<int64_t>(), 1);
  EXPECT_CLOSE(std::get<1>(tensor({{3.0, 3.0}, {1.0, 1.0}}).max(1)), tensor({0, 0}));
  EXPECT_CLOSE(std::get<1>(zeros({64, 8}, kFloat32).max(0)), zeros({8}, kInt64));
  EXPECT_CLOSE(std::get<1>(zeros({70000, 3}, kFloat32).min(0)), zeros({3}, kInt64));
  // Across the slices of a split range: the first of two equal maxima.
  Tensor z = zeros({300000}, kFloat32);
  z[250000].fill_(1);
  z[200000].fill_(1);
  EXPECT_EQ(z.argmax().item<int64_t>(), 200000);
  EXPECT_EQ(std::get<1>(z.max(0)).item<int64_t>(), 200000);
  EXPECT_EQ(zeros({300000}, kFloat32).argmin().item<int64_t>(), 0);
}

TEST(ReduceMaxMin, NaNPropagates) {
  Tensor x = tensor({1.0, NAN, 3.0, NAN});
  EXPECT_TRUE(std::isnan(x.max().item<double>()));
  EXPECT_TRUE(std::isnan(x.min().item<double>()));
  EXPECT_TRUE(std::isnan(x.amax().item<double>()));
  EXPECT_EQ(x.argmax().item<int64_t>(), 1);  // the first NaN
  EXPECT_EQ(x.argmin().item<int64_t>(), 1);
  auto [v, i] = tensor({{2.0, NAN}, {NAN, 1.0}}).min(1);
  EXPECT_TRUE(std::isnan(v[0].item<double>()) && std::isnan(v[1].item<double>()));
  EXPECT_CLOSE(i, tensor({1, 0}));
  Tensor big = zeros({100000}, kFloat32);
  big[77777].fill_(NAN);
  EXPECT_EQ(big.argmax().item<int64_t>(), 77777);
  EXPECT_TRUE(std::isnan(big.reshape({1000, 100}).amax({0})[77].item<double>()));
}

TEST(ReduceMaxMin, ArgmaxFlatAndKeepdim) {
  // x.t() is [[1, 7], [9, 3]]: 9 sits at flat (row-major) index 2.
  Tensor x = tensor({{1.0, 9.0}, {7.0, 3.0}});
  EXPECT_EQ(x.t().argmax().item<int64_t>(), 2);
  EXPECT_EQ(x.argmax().item<int64_t>(), 1);
  Tensor k = x.argmax(std::nullopt, true);
  EXPECT_TRUE(k.sizes().equals({1, 1}));
  EXPECT_EQ(k.view({1}).item<int64_t>(), 1);
  EXPECT_CLOSE(x.argmin(0), tensor({0, 1}));
  EXPECT_TRUE(x.argmin(0, true).sizes().equals({1, 2}));
  EXPECT_EQ(full({}, 5.0).argmax().item<int64_t>(), 0);
}

TEST(ReduceMaxMin, AmaxAmin) {
  Tensor x = arange(24, kFloat32).reshape({2, 3, 4});
  EXPECT_CLOSE(x.amax({0, 2}), tensor({15.0, 19.0, 23.0}, kFloat32));
  EXPECT_CLOSE(x.amin({0, 2}, true).view({3}), tensor({0.0, 4.0, 8.0}, kFloat32));
  EXPECT_TRUE(x.amin({0, 2}, true).sizes().equals({1, 3, 1}));
  EXPECT_EQ(x.amax().item<float>(), 23.0f);
  EXPECT_CLOSE(amax(tensor({-INFINITY, -INFINITY})), tensor(-INFINITY));
}

TEST(ReduceVar, Values) {
  // [1, 2, 3, 4]: mean 2.5, squared deviations 5; 5 / 3 unbiased, 5 / 4 with correction 0.
  Tensor x = tensor({1.0, 2.0, 3.0, 4.0}, kFloat64);
  EXPECT_CLOSE(x.var(), tensor(5.0 / 3.0, kFloat64));
  EXPECT_CLOSE(x.std({}, 0), tensor(std::sqrt(1.25), kFloat64));
  EXPECT_CLOSE(x.var({0}, 2), tensor(2.5, kFloat64));
  EXPECT_TRUE(std::isinf(x.var({0}, 4).item<double>()));  // 5 / max(0, 4 - 4)
  EXPECT_TRUE(std::isnan(tensor({3.0}).var().item<double>()));  // 0 / 0
  EXPECT_TRUE(std::isnan(zeros({0}, kFloat32).var().item<double>()));
  Tensor m = tensor({{1.0, 2.0}, {3.0, 5.0}});
  EXPECT_CLOSE(m.var({1}), tensor({0.5, 2.0}));
  EXPECT_CLOSE(m.var({0}, 1, true), tensor({{2.0, 4.5}}));
}

TEST(ReduceVar, NumericallySound) {
  EXPECT_EQ(tensor({1e8 + 1, 1e8 + 2, 1e8 + 3}, kFloat64).var().item<double>(), 1.0);
  // Variance of 0..n-1 is n(n+1)/12 (unbiased): here over split ranges and in columns.
  EXPECT_CLOSE(arange(300000, kFloat64).var(), tensor(7500025000.0, kFloat64), Tolerance{1e-12, 0});
  Tensor y = arange(210000, kFloat64).reshape({70000, 3}) + 1e9;  // column j: 3i + j + 1e9
  EXPECT_CLOSE(y.var({0}), full({3}, 9 * 4900070000.0 / 12, kFloat64), Tolerance{1e-12, 0});
  // An offset of 1e9 leaves the variance of unit-variance data alone; E[x^2] - E[x]^2 would lose
  // every digit to cancellation.
  manual_seed(3);
  Tensor r = randn({100000}, kFloat64);
  EXPECT_CLOSE((r + 1e9).var(), r.var(), Tolerance{1e-5, 0});
}

TEST(ReduceNorm, Orders) {
  Tensor x = tensor({3.0, -4.0});
  EXPECT_CLOSE(x.norm(), tensor(5.0));
  EXPECT_CLOSE(x.norm(1), tensor(7.0));
  EXPECT_CLOSE(x.norm(INFINITY), tensor(4.0));
  EXPECT_CLOSE(x.norm(-INFINITY), tensor(3.0));
  EXPECT_CLOSE(x.norm(3), tensor(std::cbrt(91.0)));  // (27 + 64)^(1/3)
  EXPECT_CLOSE(x.norm(-1), tensor(1.0 / (1.0 / 3 + 1.0 / 4)));
  EXPECT_CLOSE(tensor({0.0, 3.0, 0.0, -4.0}).norm(0), tensor(2.0));
  EXPECT_CLOSE(tensor({{3.0, 4.0}, {6.0, 8.0}}).norm(2, {1}), tensor({5.0, 10.0}));
  EXPECT_CLOSE(tensor({{3.0, 4.0}, {6.0, 8.0}}).norm(2, {0}, true),
               tensor({{std::sqrt(45.0), std::sqrt(80.0)}}));
  EXPECT_EQ(zeros({0}, kFloat32).norm().item<double>(), 0.0);
  EXPECT_EQ(zeros({0}, kFloat32).norm(1).item<double>(), 0.0);
  EXPECT_TRUE(std::isnan(tensor({1.0, NAN}).norm(INFINITY).item<double>()));
  EXPECT_EQ(tensor({3.0, 4.0}, kFloat16).norm().dtype(), kFloat16);
}

TEST(ReduceLogSumExp, Values) {
  EXPECT_CLOSE(tensor({0.0, std::log(3.0)}).logsumexp({0}), tensor(std::log(4.0)));
  // exp(1000) overflows; logsumexp is 1000 + log 2.
  EXPECT_CLOSE(tensor({1000.0, 1000.0}).logsumexp({0}), tensor(1000.0 + std::log(2.0)));
  Tensor rows = tensor({{-INFINITY, -INFINITY}, {INFINITY, 1.0}, {NAN, 1.0}, {0.0, 0.0}});
  Tensor r = rows.logsumexp({1});
  EXPECT_EQ(r[0].item<double>(), -INFINITY);
  EXPECT_EQ(r[1].item<double>(), INFINITY);
  EXPECT_TRUE(std::isnan(r[2].item<double>()));
  EXPECT_CLOSE(r[3], tensor(std::log(2.0)));
  // The same rows reduced as columns (a kept dim innermost).
  Tensor c = rows.t().contiguous().logsumexp({0});
  EXPECT_EQ(c[0].item<double>(), -INFINITY);
  EXPECT_EQ(c[1].item<double>(), INFINITY);
  EXPECT_TRUE(std::isnan(c[2].item<double>()));
  Tensor i = tensor({0, 0}).logsumexp({0});
  EXPECT_EQ(i.dtype(), kFloat32);
  EXPECT_CLOSE(i, tensor(std::log(2.0), kFloat32));
  EXPECT_EQ(zeros({0}, kFloat32).logsumexp({0}).item<double>(), -INFINITY);
  EXPECT_TRUE(zeros({2, 3}, kFloat32).logsumexp({1}, true).sizes().equals({2, 1}));
}

TEST(ReduceLogical, AllAny) {
  Tensor b = tensor({{true, false}, {true, true}});
  EXPECT_FALSE(b.all().item<bool>());
  EXPECT_TRUE(b.any().item<bool>());
  EXPECT_CLOSE(b.all(1), tensor({false, true}));
  EXPECT_CLOSE(b.any(0, true), tensor({{true, true}}));
  EXPECT_EQ(tensor({1.0, 2.0}).all().dtype(), kBool);
  EXPECT_TRUE(tensor({NAN, 1.0}).all().item<bool>());  // NaN is nonzero
  EXPECT_FALSE(tensor({0.0, -0.0}).any().item<bool>());
  EXPECT_EQ(tensor({1, 2}, kUInt8).all().dtype(), kUInt8);
  EXPECT_TRUE(zeros({0}, kFloat32).all().item<bool>());
  EXPECT_FALSE(zeros({0}, kFloat32).any().item<bool>());
  EXPECT_CLOSE(zeros({2, 0}, kFloat32).all(1), tensor({true, true}));
}

TEST(ReduceErrors, Dims) {
  Tensor x = zeros({2, 3}, kFloat32);
  EXPECT_EMBER_ERROR(x.sum({2}), "sum", "out of range", "[-2, 1]", "got 2");
  EXPECT_EMBER_ERROR(x.sum({1, -1}), "sum", "dim 1 appears multiple times");
  EXPECT_EMBER_ERROR(x.mean({0, 0}), "mean", "appears multiple times");
  EXPECT_EMBER_ERROR(x.amax({-3}), "amax", "out of range");
  EXPECT_EMBER_ERROR(x.max(2), "max", "out of range");
  EXPECT_EMBER_ERROR(x.argmin(5), "argmin", "out of range");
  EXPECT_EMBER_ERROR(x.prod(-3), "prod", "out of range");
  EXPECT_EMBER_ERROR(x.var({3}), "var", "out of range");
  EXPECT_EMBER_ERROR(x.norm(2, {0, 0}), "norm", "appears multiple times");
  EXPECT_EMBER_ERROR(x.logsumexp({2}), "logsumexp", "out of range");
  EXPECT_EMBER_ERROR(x.all(2), "all", "out of range");
  EXPECT_EMBER_ERROR(x.any(-3), "any", "out of range");
}

TEST(ReduceErrors, Dtypes) {
  Tensor i = tensor({1, 2, 3});
  EXPECT_EMBER_ERROR(i.mean(), "mean", "could not infer output dtype", "int64");
  EXPECT_EMBER_ERROR(i.mean({0}), "mean", "could not infer output dtype");
  EXPECT_EMBER_ERROR(mean(tensor({1.0}), kInt32), "mean", "dtype must be a floating point dtype", "int32");
  EXPECT_EMBER_ERROR(i.var(), "var", "floating point", "int64");
  EXPECT_EMBER_ERROR(i.std(), "std", "floating point");
  EXPECT_EMBER_ERROR(i.norm(), "norm", "floating point", "int64");
  EXPECT_EMBER_ERROR(tensor({1.0}).norm(NAN), "norm", "NaN");
}

TEST(ReduceErrors, EmptyWithoutIdentity) {
  Tensor e = zeros({2, 0}, kFloat32);
  EXPECT_EMBER_ERROR(e.max(1), "max", "reduction dim 1", "non-zero size", "[2, 0]");
  EXPECT_EMBER_ERROR(e.min(-1), "min", "non-zero size");
  EXPECT_EMBER_ERROR(e.amax({1}), "amax", "non-zero size");
  EXPECT_EMBER_ERROR(e.amin(), "amin", "numel() == 0");
  EXPECT_EMBER_ERROR(e.max(), "max", "numel() == 0", "[2, 0]");
  EXPECT_EMBER_ERROR(e.min(), "min", "numel() == 0");
  EXPECT_EMBER_ERROR(e.argmax(), "argmax", "numel() == 0");
  EXPECT_EMBER_ERROR(e.argmin(1), "argmin", "non-zero size");
  EXPECT_EMBER_ERROR(e.norm(INFINITY, {1}), "norm", "inf norm", "no identity");
  EXPECT_EMBER_ERROR(e.norm(-1), "norm", "-1 norm", "no identity");
  // Reducing a nonempty dim of an empty tensor is fine.
  EXPECT_TRUE(std::get<0>(e.max(0)).sizes().equals({0}));
  EXPECT_TRUE(e.norm(INFINITY, {0}).sizes().equals({0}));
}

}  // namespace
}  // namespace ember::testing
