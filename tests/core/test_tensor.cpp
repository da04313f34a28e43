#include <sstream>

#include "test_util.h"

namespace ember::testing {

TEST(Tensor, FactoriesAndMetadata) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.dim(), 2);
  EXPECT_EQ(z.numel(), 6);
  EXPECT_EQ(z.dtype(), kFloat32);
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_EQ(z.strides().vec(), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(full({2}, 7).dtype(), kInt64);
  EXPECT_EQ(full({2}, 7.5).dtype(), kFloat32);
  EXPECT_EQ(ones({3}, kInt32)[2].item<int>(), 1);
  EXPECT_EQ(arange(5).dtype(), kInt64);
  EXPECT_EQ(arange(0, 1, 0.25).numel(), 4);
  EXPECT_CLOSE(arange(1, 10, 3), tensor({1, 4, 7}));
  EXPECT_CLOSE(arange(5, 0, -2), tensor({5, 3, 1}));
  EXPECT_CLOSE(linspace(0, 1, 5), tensor({0.0, 0.25, 0.5, 0.75, 1.0}, kFloat32));
  EXPECT_CLOSE(linspace(2, 5, 1), tensor({2.0}, kFloat32));  // one step is the start, as PyTorch
  EXPECT_EQ(linspace(2, 5, 0).numel(), 0);
  EXPECT_CLOSE(eye(2, 3), tensor({{1.f, 0.f, 0.f}, {0.f, 1.f, 0.f}}));
  EXPECT_EQ(tensor({true, false}).dtype(), kBool);
  EXPECT_EQ(tensor({1, 2}).dtype(), kInt64);
  EXPECT_EQ(tensor({1, 2.5}).dtype(), kFloat32);
  EXPECT_EQ(tensor(3.5).dim(), 0);
  EXPECT_EQ(zeros_like(ones({2, 2}, kFloat16)).dtype(), kFloat16);
  EXPECT_EQ(empty({0, 4}).numel(), 0);
}

TEST(Tensor, FromBlobSharesMemoryAndRunsTheDeleter) {
  static float data[6] = {1, 2, 3, 4, 5, 6};
  bool deleted = false;
  {
    Tensor t = from_blob(data, {2, 3}, kFloat32, [&](void*) { deleted = true; });
    EXPECT_EQ(t[1][2].item<float>(), 6.0f);
    t[0][0].fill_(10);
    EXPECT_EQ(data[0], 10.0f);
  }
  EXPECT_TRUE(deleted);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor x = arange(12).view({3, 4});
  Tensor t = x.t();
  EXPECT_EQ(t.sizes().vec(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(t.strides().vec(), (std::vector<int64_t>{1, 4}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t[3][1].item<int64_t>(), 7);
  x[1][3].fill_(100);
  EXPECT_EQ(t[3][1].item<int64_t>(), 100);
  EXPECT_EQ(x.select(1, 2)[2].item<int64_t>(), 10);
  EXPECT_EQ(x.narrow(1, 1, 2).sizes().vec(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(x.slice(1, 0, std::nullopt, 2).strides().vec(), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(x.unsqueeze(0).sizes().vec(), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(x.unsqueeze(-1).sizes().vec(), (std::vector<int64_t>{3, 4, 1}));
  EXPECT_EQ(x.unsqueeze(1).squeeze().sizes().vec(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(x.permute({1, 0}).strides().vec(), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(x.flatten().sizes().vec(), (std::vector<int64_t>{12}));
  EXPECT_EQ(x.unflatten(1, {2, -1}).sizes().vec(), (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(x.expand({2, 3, 4}).strides().vec(), (std::vector<int64_t>{0, 4, 1}));
  EXPECT_EQ(x.view({-1}).data_ptr(), x.data_ptr());
  EXPECT_EQ(x.reshape({4, 3}).data_ptr(), x.data_ptr());
  EXPECT_NE(t.reshape({12}).data_ptr(), x.data_ptr());  // needs a copy
  EXPECT_EQ(t.contiguous().strides().vec(), (std::vector<int64_t>{3, 1}));
  auto chunks = arange(10).chunk(3);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[2].numel(), 2);
  auto parts = arange(10).split({3, 7});
  EXPECT_EQ(parts[1][0].item<int64_t>(), 3);
  EXPECT_EQ(x.unbind(1).size(), 4u);
}

TEST(Tensor, IndexWithSlicesNoneAndEllipsis) {
  Tensor x = arange(24).view({2, 3, 4});
  EXPECT_EQ(x.index({1, Slice(1, None), -1}).sizes().vec(), (std::vector<int64_t>{2}));
  EXPECT_EQ(x.index({1, Slice(1, None), -1})[1].item<int64_t>(), 23);
  EXPECT_EQ(x.index({Ellipsis, 0}).sizes().vec(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(x.index({None, Ellipsis}).sizes().vec(), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(x.index({Slice(None, None, 2), Slice(0, 3, 2)}).sizes().vec(), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(x.index({Slice(-2, None)}).sizes()[0], 2);
}

TEST(Tensor, CopyCastsAndBroadcasts) {
  Tensor dst = zeros({2, 3}, kFloat64);
  dst.copy_(tensor({1, 2, 3}));
  EXPECT_CLOSE(dst, tensor({{1, 2, 3}, {1, 2, 3}}, kFloat64));
  Tensor h = tensor({0.1, 1000.7}).to(kFloat16);
  EXPECT_EQ(h.dtype(), kFloat16);
  EXPECT_NEAR(h[1].item<double>(), 1000.5, 1e-9);                // nearest half to 1000.7
  EXPECT_EQ(tensor({1.7, -1.7}).to(kInt32)[1].item<int>(), -1);  // truncation, as C++ and PyTorch
  EXPECT_EQ(tensor({0.0, 0.5}).to(kBool)[1].item<bool>(), true);
  Tensor c = dst.clone();
  c.fill_(9);
  EXPECT_EQ(dst[0][0].item<double>(), 1.0);
  Tensor same = dst.to(kFloat64);
  EXPECT_TRUE(same.is_same(dst));
  EXPECT_FALSE(dst.to(kFloat64, /*non_blocking=*/false, /*copy=*/true).is_same(dst));
}

TEST(Tensor, PrintsLikePyTorch) {
  auto str = [](const Tensor& t) { return t.toString(); };
  EXPECT_EQ(str(tensor({1.0, 2.0, 3.0}, kFloat32)), "tensor([1., 2., 3.])");
  EXPECT_EQ(str(tensor({1.5, -2.25}, kFloat32)), "tensor([ 1.5000, -2.2500])");
  EXPECT_EQ(str(tensor({{1, 2}, {3, 4}})), "tensor([[1, 2],\n        [3, 4]])");
  EXPECT_EQ(str(tensor({true, false})), "tensor([ True, False])");
  EXPECT_EQ(str(tensor({1.0, 2.0}, kFloat64)), "tensor([1., 2.], dtype=float64)");
  EXPECT_EQ(str(tensor(2.5)), "tensor(2.5000)");
  EXPECT_EQ(str(zeros({0, 3})), "tensor([], size=(0, 3))");
  EXPECT_EQ(str(tensor({1e-5, 1.0}, kFloat32)), "tensor([1.0000e-05, 1.0000e+00])");
  std::string big = str(arange(2000));
  EXPECT_NE(big.find("[   0,    1,    2,  ..., 1997, 1998, 1999]"), std::string::npos) << big;
}

TEST(Tensor, ViewErrorsNameTheOpAndShapes) {
  Tensor x = zeros({3, 4});
  EXPECT_EMBER_ERROR(x.view({5, 3}), "view", "[5, 3]", "12");
  EXPECT_EMBER_ERROR(x.t().view({12}), "view", "reshape");
  EXPECT_EMBER_ERROR(x.view({-1, -1}), "view", "only one dimension");
  EXPECT_EMBER_ERROR(x.transpose(0, 2), "transpose", "dimension out of range");
  EXPECT_EMBER_ERROR(x.permute({0, 0}), "permute", "repeated");
  EXPECT_EMBER_ERROR(x.permute({0}), "permute", "don't match");
  EXPECT_EMBER_ERROR(x.select(1, 4), "select", "index 4 out of range");
  EXPECT_EMBER_ERROR(x.narrow(0, 2, 2), "narrow", "exceeds");
  EXPECT_EMBER_ERROR(x.expand({2, 4}), "expand", "must match the existing size (3)");
  EXPECT_EMBER_ERROR(x.slice(0, 0, 2, 0), "slice", "step must be positive");
  EXPECT_EMBER_ERROR(x.as_strided({4, 4}, {4, 1}), "as_strided", "outside a storage");
  EXPECT_EMBER_ERROR(x.chunk(0), "chunk", "positive");
  EXPECT_EMBER_ERROR(x.split({1, 1}), "split", "sum to the size 3");
  EXPECT_EMBER_ERROR(x.index({0, 0, 0}), "index", "too many indices");
  EXPECT_EMBER_ERROR(x.item(), "item", "12 elements");
  EXPECT_EMBER_ERROR(x.data_ptr<double>(), "data_ptr", "float32", "float64");
  EXPECT_EMBER_ERROR(Tensor().dim(), "undefined");
  EXPECT_EMBER_ERROR(zeros({-1}), "negative dimension");
  if (!cuda::is_available()) EXPECT_EMBER_ERROR(zeros({2}).to(Device(kCUDA)), "CUDA");
  EXPECT_EMBER_ERROR(Device("tpu"), "Device", "tpu");
  EXPECT_EMBER_ERROR(tensor({NestedList{1, 2}, NestedList{3}}), "tensor", "ragged");
  EXPECT_EMBER_ERROR(zeros({2, 3}).copy_(zeros({4})), "copy_", "[4]", "[2, 3]");
  EXPECT_EMBER_ERROR(arange(0, 5, 0), "arange", "step");
}

}  // namespace ember::testing
