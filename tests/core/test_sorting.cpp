// sort, argsort, topk and cumsum against hand-computed values; NaN order and stability follow
// PyTorch's documented behaviour (NaN sorts as the largest value; stable keeps input order).
#include <cmath>

#include "ember/core/ops/indexing.h"
#include "ember/core/ops/scan.h"
#include "ember/core/ops/sorting.h"
#include "test_util.h"

namespace ember::testing {
namespace {

TEST(Sort, ValuesAndIndices) {
  auto [v, i] = sort(tensor({3.f, 1.f, 2.f}));
  EXPECT_CLOSE(v, tensor({1.f, 2.f, 3.f}));
  EXPECT_CLOSE(i, tensor({1, 2, 0}));
  auto [vd, id] = sort(tensor({{3, 9}, {5, 1}}), 0, true);
  EXPECT_CLOSE(vd, tensor({{5, 9}, {3, 1}}));
  EXPECT_CLOSE(id, tensor({{1, 0}, {0, 1}}));
  EXPECT_CLOSE(std::get<0>(sort(tensor({true, false, true}))), tensor({false, true, true}));
  EXPECT_CLOSE(std::get<0>(sort(tensor({0.5f, -2.f, 1.f}).to(kBFloat16))),
               tensor({-2.f, 0.5f, 1.f}).to(kBFloat16));
  EXPECT_CLOSE(argsort(tensor({{2, 7, 1}}).t(), 0, true), tensor({{1}, {0}, {2}}));
  auto [v0, i0] = sort(tensor(4.f));
  EXPECT_CLOSE(v0, tensor(4.f));
  EXPECT_CLOSE(i0, tensor(0));
}

TEST(Sort, NaNIsLargest) {
  Tensor x = tensor({NAN, 1.f, -INFINITY, 3.f});
  auto [v, i] = sort(x);
  EXPECT_CLOSE(v, tensor({-INFINITY, 1.f, 3.f, NAN}));
  EXPECT_CLOSE(i, tensor({2, 1, 3, 0}));
  EXPECT_CLOSE(argsort(x, 0, true), tensor({0, 3, 1, 2}));
  EXPECT_CLOSE(std::get<1>(topk(x, 1)), tensor({0}));
  EXPECT_CLOSE(std::get<1>(topk(x.to(kFloat16), 2, 0, false)), tensor({2, 1}));
}

TEST(Sort, StableForBothDirections) {
  Tensor x = tensor({2, 1, 2, 1, 2});
  EXPECT_CLOSE(argsort(x, 0, false, true), tensor({1, 3, 0, 2, 4}));
  EXPECT_CLOSE(argsort(x, 0, true, true), tensor({0, 2, 4, 1, 3}));
  EXPECT_CLOSE(argsort(tensor({0.f, -0.f, 0.f})), tensor({0, 1, 2}));  // -0 == 0
}

TEST(Topk, LargestSmallestAndTies) {
  auto [v, i] = topk(tensor({1, 3, 3, 2}), 2);
  EXPECT_CLOSE(v, tensor({3, 3}));
  EXPECT_CLOSE(i, tensor({1, 2}));  // ties go to the lower index
  auto [vs, is] = topk(tensor({4.f, 1.f, 1.f, 5.f}), 3, 0, false);
  EXPECT_CLOSE(vs, tensor({1.f, 1.f, 4.f}));
  EXPECT_CLOSE(is, tensor({1, 2, 0}));
  Tensor m = tensor({{5, 1, 4}, {2, 6, 3}});
  EXPECT_CLOSE(std::get<0>(topk(m, 1, 0)), tensor({{5, 6, 4}}));
  EXPECT_CLOSE(std::get<1>(topk(m, 2, 1)), tensor({{0, 2}, {1, 2}}));
  auto [vu, iu] = topk(tensor({1.f, 9.f, 3.f, 7.f, 5.f}), 3, -1, true, false);
  EXPECT_CLOSE(std::get<0>(sort(vu)), tensor({5.f, 7.f, 9.f}));  // unsorted: the right set
  EXPECT_CLOSE(std::get<0>(sort(iu)), tensor({1, 3, 4}));
  EXPECT_EQ(std::get<0>(topk(m, 0)).sizes().vec(), (std::vector<int64_t>{2, 0}));
}

TEST(Sort, LargeRowsAgainstStdSort) {
  Tensor x = randn({3000, 40}).t();  // 40 lines of 3000 along dim 1, non-contiguous
  auto [v, i] = sort(x, 1);
  Tensor row = x[17].contiguous();
  std::vector<float> ref(row.data_ptr<float>(), row.data_ptr<float>() + 3000);
  std::sort(ref.begin(), ref.end());
  EXPECT_CLOSE(v[17], from_blob(ref.data(), {3000}, kFloat32));
  EXPECT_CLOSE(gather(x, 1, i), v);
  EXPECT_CLOSE(std::get<0>(topk(x, 5, 1, false)), v.narrow(1, 0, 5));
}

TEST(Cumsum, Values) {
  EXPECT_CLOSE(cumsum(tensor({1.f, 2.f, 3.f, 4.f}), 0), tensor({1.f, 3.f, 6.f, 10.f}));
  Tensor m = tensor({{1, 2, 3}, {4, 5, 6}});
  EXPECT_CLOSE(m.cumsum(0), tensor({{1, 2, 3}, {5, 7, 9}}));
  EXPECT_CLOSE(m.cumsum(-1), tensor({{1, 3, 6}, {4, 9, 15}}));
  EXPECT_CLOSE(m.t().cumsum(1), tensor({{1, 5}, {2, 7}, {3, 9}}));
  EXPECT_CLOSE(cumsum(tensor({1, 2}, kInt32), 0), tensor({1, 3}));                  // int -> int64
  EXPECT_CLOSE(cumsum(tensor({true, false, true}), 0), tensor({1, 1, 2}));          // bool -> int64
  EXPECT_CLOSE(cumsum(tensor({250, 10}, kUInt8), 0), tensor({250, 260}));           // no uint8 wrap
  EXPECT_CLOSE(cumsum(tensor({1, 2}), 0, kFloat64), tensor({1.0, 3.0}, kFloat64));  // dtype casts first
  EXPECT_CLOSE(cumsum(tensor(2.5f), 0), tensor(2.5f));
  // Accumulated in double: 1e8 + 1 survives until the 1e8 cancels (a float sum would give 0).
  EXPECT_CLOSE(cumsum(tensor({1e8f, 1.f, -1e8f}), 0), tensor({1e8f, 1e8f, 1.f}));
}

TEST(Cumsum, LargeAgainstLoop) {
  Tensor x = randn({500, 300}, kFloat64);
  Tensor out = cumsum(x, 0);
  Tensor c = x.contiguous();
  std::vector<double> ref(500 * 300);
  const double* p = c.data_ptr<double>();
  for (int64_t j = 0; j < 300; ++j) {
    double acc = 0;
    for (int64_t i = 0; i < 500; ++i) ref[i * 300 + j] = acc += p[i * 300 + j];
  }
  EXPECT_CLOSE(out, from_blob(ref.data(), {500, 300}, kFloat64));
  EXPECT_CLOSE(cumsum(x.t(), 1), out.t());
}

TEST(SortAndScan, Errors) {
  Tensor x = tensor({1.f, 2.f, 3.f});
  EXPECT_EMBER_ERROR(topk(x, 4), "topk: k (4) is out of range for dimension 0 of size 3");
  EXPECT_EMBER_ERROR(topk(x, -1), "topk: k (-1) is out of range");
  EXPECT_EMBER_ERROR(sort(x, 1), "sort: dimension out of range");
  EXPECT_EMBER_ERROR(argsort(x, -2), "argsort: dimension out of range");
  EXPECT_EMBER_ERROR(cumsum(x, 1), "cumsum: dimension out of range");
  EXPECT_EMBER_ERROR(cumsum(x, 0, kBool), "cumsum: bool is not a supported output dtype");
}

}  // namespace
}  // namespace ember::testing
