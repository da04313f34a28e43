#include <cstring>
#include <map>
#include <set>

#include "test_util.h"

namespace ember::testing {

namespace tf = data::transforms;
using data::DataLoader;
using data::DataLoaderOptions;
using data::TransformDataset;
using tf::SampleRandom;

namespace {

template <class T>
Tensor make_image(std::vector<int64_t> shape, const std::vector<T>& values) {
  Tensor t = empty(shape, dtype_of<T>);
  EXPECT_EQ(t.numel(), static_cast<int64_t>(values.size()));
  std::copy(values.begin(), values.end(), t.data_ptr<T>());
  return t;
}

// A uint8 image whose pixels are first, first + 1, ... (distinct, so a crop's window is unique).
Tensor iota_u8(std::vector<int64_t> shape, int first = 1) {
  Tensor t = empty(shape, kUInt8);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_ptr<uint8_t>()[i] = static_cast<uint8_t>(first + i);
  return t;
}

template <class T>
std::vector<T> values(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::vector<T>(c.data_ptr<T>(), c.data_ptr<T>() + c.numel());
}

std::vector<uint8_t> bytes(const Tensor& t) {
  Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return std::vector<uint8_t>(p, p + c.nbytes());
}

// The size x size window at (top, left) of `image` [C, H, W] with `pad` zeros on every side, one
// pixel at a time.
std::vector<uint8_t> padded_window(const Tensor& image, int64_t pad, int64_t top, int64_t left,
                                   int64_t size) {
  const int64_t c = image.size(0), h = image.size(1), w = image.size(2);
  const uint8_t* in = image.data_ptr<uint8_t>();
  std::vector<uint8_t> out;
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t y = 0; y < size; ++y)
      for (int64_t x = 0; x < size; ++x) {
        const int64_t sy = top + y - pad, sx = left + x - pad;
        out.push_back(sy >= 0 && sy < h && sx >= 0 && sx < w ? in[(ch * h + sy) * w + sx] : 0);
      }
  return out;
}

// The (top, left) of the window of the padded image that `crop` is; fails unless exactly one is.
std::pair<int64_t, int64_t> find_window(const Tensor& image, int64_t pad, const Tensor& crop) {
  const int64_t size = crop.size(1);
  std::vector<std::pair<int64_t, int64_t>> found;
  for (int64_t top = 0; top + size <= image.size(1) + 2 * pad; ++top)
    for (int64_t left = 0; left + size <= image.size(2) + 2 * pad; ++left)
      if (padded_window(image, pad, top, left, size) == values<uint8_t>(crop)) found.emplace_back(top, left);
  EXPECT_EQ(found.size(), 1u) << "the crop is not exactly one window of the padded image";
  return found.empty() ? std::pair<int64_t, int64_t>{-1, -1} : found[0];
}

std::vector<uint8_t> mirrored(const Tensor& image) {
  const int64_t rows = image.size(0) * image.size(1), w = image.size(2);
  std::vector<uint8_t> v = values<uint8_t>(image), out;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t x = w - 1; x >= 0; --x) out.push_back(v[static_cast<size_t>(r * w + x)]);
  return out;
}

Tensor call(const tf::Transform& t, const Tensor& image, uint64_t seed = 0, int64_t epoch = 0,
            int64_t index = 0) {
  SampleRandom random(seed, epoch, index);
  return t(image, random);
}

}  // namespace

// --- SampleRandom ---

// Golden values from an independent Python Philox4x32-10 (checked against Random123's known
// answer): a change of the stream would silently change the augmentation of resumed runs.
TEST(TransformSampleRandom, MatchesReferenceStream) {
  SampleRandom a(0, 0, 0);
  for (uint32_t want : {0x17cfda9eu, 0x425765bau, 0x56d181dfu, 0x793ea8fcu, 0xf68e393fu, 0xda6382f4u})
    EXPECT_EQ(a.next_u32(), want);
  SampleRandom b(12345, 7, 100000);
  for (uint32_t want : {0x6c0501c7u, 0x069fd3fcu, 0x019bd499u, 0xc59bd490u, 0x2b7890f9u})
    EXPECT_EQ(b.next_u32(), want);
  EXPECT_EQ(SampleRandom(0, 1, 0).next_u32(), 0xf12eee74u);
  EXPECT_EQ(SampleRandom(0, 0, 1).next_u32(), 0xa909a87bu);
}

TEST(TransformSampleRandom, RandintAndUniformRanges) {
  std::vector<int64_t> counts(5, 0);
  for (int64_t i = 0; i < 2000; ++i) {
    SampleRandom r(3, 1, i);
    int64_t v = r.randint(5);
    ASSERT_GE(v, 0);
    ASSERT_LT(v, 5);
    ++counts[static_cast<size_t>(v)];
    float u = r.uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    EXPECT_EQ(r.randint(1), 0);
  }
  for (int64_t c : counts) EXPECT_NEAR(c, 400, 80);  // ~5 sigma
  EXPECT_EMBER_ERROR(SampleRandom(0, 0, 0).randint(0), "SampleRandom", "randint");
}

// --- Crops ---

TEST(TransformCenterCrop, OffsetsRoundHalfToEven) {
  Tensor img = iota_u8({1, 5, 5}, 0);  // pixel (y, x) = 5y + x
  EXPECT_EQ(values<uint8_t>(call(tf::CenterCrop(3), img)),
            (std::vector<uint8_t>{6, 7, 8, 11, 12, 13, 16, 17, 18}));
  // (5 - 2) / 2 = 1.5 rounds to 2, as Python's round.
  EXPECT_EQ(values<uint8_t>(call(tf::CenterCrop(2), img)), (std::vector<uint8_t>{12, 13, 17, 18}));
  // (7 - 2) / 2 = 2.5 rounds to 2.
  Tensor img7 = iota_u8({1, 7, 7}, 0);
  EXPECT_EQ(values<uint8_t>(call(tf::CenterCrop(2), img7)), (std::vector<uint8_t>{16, 17, 23, 24}));
  // Non-square, two channels: top (4 - 2) / 2 = 1, left (6 - 2) / 2 = 2.
  Tensor img46 = iota_u8({2, 4, 6}, 0);
  EXPECT_EQ(values<uint8_t>(call(tf::CenterCrop(2), img46)),
            (std::vector<uint8_t>{8, 9, 14, 15, 32, 33, 38, 39}));
}

TEST(TransformCenterCrop, PadsWhenLarger) {
  Tensor img = make_image<uint8_t>({1, 2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(values<uint8_t>(call(tf::CenterCrop(4), img)),
            (std::vector<uint8_t>{0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 0}));
  // An odd difference puts the extra zero after the image, as torchvision.
  EXPECT_EQ(values<uint8_t>(call(tf::CenterCrop(3), img)), (std::vector<uint8_t>{1, 2, 0, 3, 4, 0, 0, 0, 0}));
  // Taller than the image, narrower: pad the rows, center the columns.
  Tensor wide = make_image<float>({1, 1, 4}, {1, 2, 3, 4});
  Tensor out = call(tf::CenterCrop(2), wide);
  EXPECT_EQ(out.dtype(), kFloat32);
  EXPECT_EQ(values<float>(out), (std::vector<float>{2, 3, 0, 0}));
}

TEST(TransformCenterCrop, SameSizeIsTheImageItself) {
  Tensor img = iota_u8({3, 4, 4});
  EXPECT_EQ(call(tf::CenterCrop(4), img).data_ptr(), img.data_ptr());
}

TEST(TransformRandomCrop, DrawsTopThenLeft) {
  Tensor img = iota_u8({2, 4, 5});
  for (int64_t index = 0; index < 50; ++index) {
    Tensor out = call(tf::RandomCrop(3, 2), img, 9, 4, index);
    ASSERT_EQ(out.sizes().vec(), (std::vector<int64_t>{2, 3, 3}));
    SampleRandom r(9, 4, index);
    const int64_t top = r.randint(4 + 4 - 3 + 1), left = r.randint(5 + 4 - 3 + 1);
    EXPECT_EQ(values<uint8_t>(out), padded_window(img, 2, top, left, 3)) << "index " << index;
  }
}

TEST(TransformRandomCrop, CoversEveryWindowAndFollowsSeedEpochIndex) {
  Tensor img = iota_u8({2, 4, 4});
  const tf::RandomCrop crop(4, 1);
  std::set<std::pair<int64_t, int64_t>> seen;
  std::vector<std::pair<int64_t, int64_t>> epoch0, epoch1, seed1;
  for (int64_t i = 0; i < 200; ++i) {
    Tensor out = call(crop, img, 0, 0, i);
    epoch0.push_back(find_window(img, 1, out));
    seen.insert(epoch0.back());
    EXPECT_EQ(bytes(call(crop, img, 0, 0, i)), bytes(out)) << "the same (seed, epoch, index) differs";
    epoch1.push_back(find_window(img, 1, call(crop, img, 0, 1, i)));
    seed1.push_back(find_window(img, 1, call(crop, img, 1, 0, i)));
  }
  EXPECT_EQ(seen.size(), 9u);  // every offset in [0, 2]^2
  EXPECT_NE(epoch0, epoch1);
  EXPECT_NE(epoch0, seed1);
  std::set<std::pair<int64_t, int64_t>> first10(epoch0.begin(), epoch0.begin() + 10);
  EXPECT_GT(first10.size(), 1u) << "neighbouring indices should get different windows";
}

TEST(TransformRandomCrop, AnyDtypeAndLayout) {
  Tensor img = make_image<float>({1, 2, 2}, {1.5f, -2, 3, 4});
  EXPECT_EQ(values<float>(call(tf::RandomCrop(4, 1), img)),
            (std::vector<float>{0, 0, 0, 0, 0, 1.5f, -2, 0, 0, 3, 4, 0, 0, 0, 0, 0}));
  Tensor u8 = iota_u8({3, 6, 6});
  EXPECT_EQ(bytes(call(tf::RandomCrop(5, 3), non_contiguous(u8), 2, 0, 7)),
            bytes(call(tf::RandomCrop(5, 3), u8, 2, 0, 7)));
  // The whole image without padding: the image itself.
  EXPECT_EQ(call(tf::RandomCrop(6), u8).data_ptr(), u8.data_ptr());
}

// --- Flip ---

TEST(TransformRandomHorizontalFlip, MirrorsWidth) {
  Tensor img = iota_u8({2, 2, 3});
  EXPECT_EQ(values<uint8_t>(call(tf::RandomHorizontalFlip(1.0), img)),
            (std::vector<uint8_t>{3, 2, 1, 6, 5, 4, 9, 8, 7, 12, 11, 10}));
  EXPECT_EQ(call(tf::RandomHorizontalFlip(0.0), img).data_ptr(), img.data_ptr());
  Tensor f = make_image<float>({1, 1, 3}, {0.5f, -1, 2});
  EXPECT_EQ(values<float>(call(tf::RandomHorizontalFlip(1.0), f)), (std::vector<float>{2, -1, 0.5f}));
  Tensor d = make_image<double>({1, 1, 2}, {1, 2});
  EXPECT_EQ(values<double>(call(tf::RandomHorizontalFlip(1.0), d)), (std::vector<double>{2, 1}));
}

TEST(TransformRandomHorizontalFlip, FlipsWhenTheDrawIsBelowP) {
  Tensor img = iota_u8({1, 3, 4});
  int64_t flips = 0;
  for (int64_t i = 0; i < 200; ++i) {
    Tensor out = call(tf::RandomHorizontalFlip(0.3), img, 5, 2, i);
    const bool want = SampleRandom(5, 2, i).uniform() < 0.3;
    EXPECT_EQ(values<uint8_t>(out), want ? mirrored(img) : values<uint8_t>(img)) << "index " << i;
    flips += want;
  }
  EXPECT_NEAR(flips, 60, 30);
}

// --- Dtype and normalization ---

TEST(TransformToDtype, ScalesUint8) {
  Tensor img = make_image<uint8_t>({1, 1, 4}, {0, 255, 51, 128});
  Tensor out = call(tf::ToDtype(kFloat32, true), img);
  EXPECT_EQ(out.dtype(), kFloat32);
  std::vector<float> v = values<float>(out);
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_EQ(v[1], 1.0f);
  EXPECT_FLOAT_EQ(v[2], 0.2f);
  EXPECT_FLOAT_EQ(v[3], 128.0f / 255.0f);
  // torchvision's bits: a float32 multiply by 1 / 255 (x / 255 differs for about half the values).
  Tensor all = arange(256, kFloat32).to(kUInt8).view({1, 16, 16});
  EXPECT_EQ(bytes(call(tf::ToDtype(kFloat32, true), all)), bytes(all.to(kFloat32) * (1.0 / 255)));
  EXPECT_EQ(values<float>(call(tf::ToDtype(kFloat32), img)), (std::vector<float>{0, 255, 51, 128}));
  Tensor f = make_image<float>({1, 1, 1}, {3});
  EXPECT_EQ(call(tf::ToDtype(kFloat32, true), f).data_ptr(), f.data_ptr());
}

TEST(TransformNormalize, PerChannel) {
  Tensor img = make_image<float>({2, 1, 2}, {0, 0.5f, 1, 0.25f});
  EXPECT_EQ(values<float>(call(tf::Normalize({0.5, 0.25}, {0.5, 2}), img)),
            (std::vector<float>{-1, 0, 0.375f, 0}));
  Tensor u8 = make_image<uint8_t>({1, 1, 3}, {0, 255, 51});
  std::vector<float> v = values<float>(call(tf::Normalize({0.5}, {0.5}), u8));
  EXPECT_EQ(v[0], -1.0f);
  EXPECT_EQ(v[1], 1.0f);
  EXPECT_FLOAT_EQ(v[2], -0.6f);
}

TEST(TransformNormalize, Uint8IsBitIdenticalToToDtypeThenNormalize) {
  Tensor img = random_tensor({3, 9, 7}, kUInt8, 0, 256);
  tf::Normalize norm({0.4914, 0.4822, 0.4465}, {0.2470, 0.2435, 0.2616});
  Tensor fused = call(norm, img);
  Tensor two_step = call(tf::Compose({tf::ToDtype(kFloat32, true), norm}), img);
  EXPECT_EQ(bytes(fused), bytes(two_step));
  // And the same as ember's own ops in torchvision's order: * (1 / 255), - mean, / std.
  Tensor mean = tensor({0.4914f, 0.4822f, 0.4465f}, kFloat32).view({3, 1, 1});
  Tensor std = tensor({0.2470f, 0.2435f, 0.2616f}, kFloat32).view({3, 1, 1});
  EXPECT_EQ(bytes(fused), bytes((img.to(kFloat32) * (1.0 / 255) - mean) / std));
}

// --- Resize ---

TEST(TransformResize, Grows2x2To4x4Bilinear) {
  // Columns [p0, .75 p0 + .25 p1, .25 p0 + .75 p1, p1], then rows the same (align_corners=False).
  const std::vector<float> want = {0, 10, 30, 40, 20, 30, 50, 60, 60, 70, 90, 100, 80, 90, 110, 120};
  Tensor f = make_image<float>({1, 2, 2}, {0, 40, 80, 120});
  EXPECT_EQ(values<float>(call(tf::Resize(4), f)), want);
  Tensor u8 = make_image<uint8_t>({1, 2, 2}, {0, 40, 80, 120});
  Tensor out = call(tf::Resize(4), u8);
  EXPECT_EQ(out.dtype(), kUInt8);
  EXPECT_EQ(values<uint8_t>(out), std::vector<uint8_t>(want.begin(), want.end()));
  // uint8 rounds to nearest: 0.25 -> 0, 0.75 -> 1 (then rows: .25 * 0 + .75 * 1 etc.).
  Tensor step = make_image<uint8_t>({1, 2, 2}, {0, 1, 0, 1});
  EXPECT_EQ(values<uint8_t>(call(tf::Resize(4), step)),
            (std::vector<uint8_t>{0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1}));
}

TEST(TransformResize, Shrinks4x4To2x2Antialiased) {
  // Scale 2 widens the triangle filter to half-width 2: output 0 weighs inputs 0, 1, 2 by
  // .75, .75, .25 (normalized 3/7, 3/7, 1/7), output 1 inputs 1, 2, 3 by 1/7, 3/7, 3/7. With pixel
  // (y, x) = 4y + x: out = 4 Y + X, Y and X in {5/7, 16/7}.
  Tensor f = iota_u8({1, 4, 4}, 0).to(kFloat32);
  EXPECT_CLOSE(call(tf::Resize(2), f),
               tensor({25.0 / 7, 36.0 / 7, 69.0 / 7, 80.0 / 7}, kFloat32).view({1, 2, 2}),
               Tolerance{0, 1e-5});
  Tensor u8 = (iota_u8({1, 4, 4}, 0).to(kFloat32) * 10).to(kUInt8);  // 35.71, 51.43, 98.57, 114.29
  EXPECT_EQ(values<uint8_t>(call(tf::Resize(2), u8)), (std::vector<uint8_t>{36, 51, 99, 114}));
}

TEST(TransformResize, NonIntegerScaleAndEdges) {
  // [1, 3, 6] -> [1, 2, 4], scale 1.5 both ways (filter half-width 1.5, x scaled by 2/3). Rows:
  // out 0 reads rows 0, 1 by 5/6, 1/2 -> 5/8, 3/8 (row -1 falls outside); out 1 reads 1, 2 by
  // 3/8, 5/8. Columns: 0 <- (0, 1) 5/8, 3/8; 1 <- (1, 2, 3) 1/3, 5/9, 1/9; 2 <- (2, 3, 4) 1/9, 5/9,
  // 1/3; 3 <- (4, 5) 3/8, 5/8. With pixel (y, x) = 10y + x the output is 10 Y + X.
  Tensor img = empty({1, 3, 6}, kFloat32);
  for (int64_t y = 0; y < 3; ++y)
    for (int64_t x = 0; x < 6; ++x) img.data_ptr<float>()[y * 6 + x] = static_cast<float>(10 * y + x);
  const double ys[] = {3.0 / 8, 3.0 / 8 + 2 * 5.0 / 8};
  const double xs[] = {3.0 / 8, 1.0 / 3 + 2 * 5.0 / 9 + 3.0 / 9, 2.0 / 9 + 3 * 5.0 / 9 + 4.0 / 3,
                       4 * 3.0 / 8 + 5 * 5.0 / 8};
  std::vector<double> want;
  for (double y : ys)
    for (double x : xs) want.push_back(10 * y + x);
  EXPECT_CLOSE(call(tf::Resize(2), img), tensor(NestedList(want), kFloat32).view({1, 2, 4}),
               Tolerance{0, 1e-5});
}

TEST(TransformResize, ShorterSideKeepsAspect) {
  EXPECT_EQ(call(tf::Resize(2), iota_u8({3, 4, 8})).sizes().vec(), (std::vector<int64_t>{3, 2, 4}));
  EXPECT_EQ(call(tf::Resize(2), iota_u8({1, 8, 4})).sizes().vec(), (std::vector<int64_t>{1, 4, 2}));
  EXPECT_EQ(call(tf::Resize(2), iota_u8({1, 3, 5})).sizes().vec(),
            (std::vector<int64_t>{1, 2, 3}));  // int(3.33)
  EXPECT_EQ(call(tf::Resize(6), iota_u8({1, 3, 5})).sizes().vec(), (std::vector<int64_t>{1, 6, 10}));
  Tensor img = iota_u8({1, 4, 6});
  EXPECT_EQ(call(tf::Resize(4), img).data_ptr(), img.data_ptr());
}

// --- Compose and TransformDataset ---

TEST(TransformCompose, AppliesInOrderSharingTheDraws) {
  Tensor img = iota_u8({3, 6, 6});
  tf::Compose pipeline(
      {tf::RandomCrop(6, 2), tf::RandomHorizontalFlip(), tf::Normalize({0.5, 0.5, 0.5}, {0.2, 0.2, 0.2})});
  for (int64_t i = 0; i < 20; ++i) {
    SampleRandom r(1, 0, i);
    Tensor x = tf::RandomCrop(6, 2)(img, r);
    x = tf::RandomHorizontalFlip()(x, r);
    x = tf::Normalize({0.5, 0.5, 0.5}, {0.2, 0.2, 0.2})(x, r);
    EXPECT_EQ(bytes(call(pipeline, img, 1, 0, i)), bytes(x));
  }
  EXPECT_EQ(call(tf::Compose(), img).data_ptr(), img.data_ptr());
}

TEST(TransformDatasetTest, AppliesTheSampleTransformToField0) {
  Tensor images = random_tensor({10, 1, 5, 5}, kUInt8, 0, 256);
  Tensor labels = arange(10, kInt64);
  auto base = std::make_shared<data::TensorDataset>(images, labels);
  tf::Compose pipeline({tf::RandomCrop(5, 2), tf::RandomHorizontalFlip(), tf::Normalize({0.1307}, {0.3081})});
  TransformDataset ds(base, pipeline, 17);
  EXPECT_EQ(ds.size(), 10);
  for (int64_t e : {0, 3}) {
    ds.set_epoch(e);
    EXPECT_EQ(ds.epoch(), e);
    for (int64_t i = 0; i < 10; ++i) {
      data::Example s = ds.get(i);
      ASSERT_EQ(s.size(), 2u);
      EXPECT_EQ(bytes(s[0]), bytes(call(pipeline, images.select(0, i), 17, e, i)));
      EXPECT_EQ(s[1].item<int64_t>(), i);
    }
  }
  EXPECT_EQ(bytes(ds.get(-1)[0]), bytes(ds.get(9)[0]));
  TransformDataset copy(ds);
  EXPECT_EQ(copy.epoch(), 3);
  EXPECT_EQ(bytes(copy.get(4)[0]), bytes(ds.get(4)[0]));
  // A Subset passes set_epoch on.
  auto inner = std::make_shared<TransformDataset>(base, pipeline, 17);
  data::Subset sub(inner, {4, 2});
  sub.set_epoch(5);
  EXPECT_EQ(inner->epoch(), 5);
  EXPECT_EQ(bytes(sub.get(0)[0]), bytes(call(pipeline, images.select(0, 4), 17, 5, 4)));
}

namespace {

// Every batch of `epochs` epochs as raw bytes (images, then labels).
std::vector<std::vector<uint8_t>> run_epochs(DataLoader& loader, int epochs) {
  std::vector<std::vector<uint8_t>> out;
  for (int e = 0; e < epochs; ++e)
    for (auto& batch : loader) {
      out.push_back(bytes(batch[0]));
      out.push_back(bytes(batch[1]));
    }
  return out;
}

std::shared_ptr<TransformDataset> cifar_like(int64_t n) {
  Tensor images = random_tensor({n, 3, 8, 8}, kUInt8, 0, 256);
  auto base = std::make_shared<data::TensorDataset>(images, arange(n, kInt64));
  return std::make_shared<TransformDataset>(
      base,
      tf::Compose({tf::RandomCrop(8, 2), tf::RandomHorizontalFlip(),
                   tf::Normalize({0.4914, 0.4822, 0.4465}, {0.2470, 0.2435, 0.2616})}),
      42);
}

}  // namespace

TEST(TransformDataLoader, BatchesDoNotDependOnWorkers) {
  auto ds = cifar_like(37);
  auto opts = [](int64_t workers) {
    return DataLoaderOptions().batch_size(5).shuffle(true).seed(3).num_workers(workers);
  };
  DataLoader serial(ds, opts(0));
  const auto want = run_epochs(serial, 2);
  ASSERT_EQ(want.size(), 2u * 2 * 8);
  for (int64_t workers : {1, 4}) {
    DataLoader loader(ds, opts(workers));
    EXPECT_TRUE(run_epochs(loader, 2) == want) << workers << " workers";
  }
}

TEST(TransformDataLoader, EpochReachesTheDatasetAndResumes) {
  auto ds = cifar_like(12);
  DataLoader loader(ds, DataLoaderOptions().batch_size(4).num_workers(2));
  std::vector<std::vector<uint8_t>> epochs[3];
  for (auto& e : epochs) {
    for (auto& batch : loader) e.push_back(bytes(batch[0]));
    EXPECT_EQ(ds->epoch(), &e - epochs);
  }
  EXPECT_NE(epochs[0], epochs[1]);  // same order (no shuffle), new augmentation
  EXPECT_NE(epochs[1], epochs[2]);
  // A resumed run: a new loader set to epoch 2 sees what the first saw.
  ds->set_epoch(0);
  DataLoader resumed(ds, DataLoaderOptions().batch_size(4).num_workers(3));
  resumed.set_epoch(2);
  std::vector<std::vector<uint8_t>> again;
  for (auto& batch : resumed) again.push_back(bytes(batch[0]));
  EXPECT_EQ(again, epochs[2]);
}

TEST(TransformDataLoader, ErrorsNameTheTransform) {
  Tensor images = random_tensor({4, 3, 4, 4}, kUInt8, 0, 256);
  auto base = std::make_shared<data::TensorDataset>(images, arange(4, kInt64));
  auto ds = std::make_shared<TransformDataset>(base, tf::Normalize({0.5}, {0.5}));
  DataLoader loader(ds, DataLoaderOptions().batch_size(2).num_workers(2));
  EXPECT_EMBER_ERROR(for (auto& b : loader)(void) b, "dataset index 0", "Normalize", "[3, 4, 4]", "1 values");
}

// --- Errors ---

TEST(TransformErrors, Construction) {
  EXPECT_EMBER_ERROR(tf::RandomCrop(0), "RandomCrop", "size must be positive");
  EXPECT_EMBER_ERROR(tf::RandomCrop(3, -1), "RandomCrop", "padding", "-1");
  EXPECT_EMBER_ERROR(tf::RandomHorizontalFlip(1.5), "RandomHorizontalFlip", "1.5");
  EXPECT_EMBER_ERROR(tf::RandomHorizontalFlip(-0.1), "RandomHorizontalFlip", "[0, 1]");
  EXPECT_EMBER_ERROR(tf::Resize(0), "Resize", "positive");
  EXPECT_EMBER_ERROR(tf::CenterCrop(-2), "CenterCrop", "-2");
  EXPECT_EMBER_ERROR(tf::ToDtype(kFloat64, true), "ToDtype", "float64");
  EXPECT_EMBER_ERROR(tf::Normalize({0.5, 0.5}, {0.5}), "Normalize", "2 and 1");
  EXPECT_EMBER_ERROR(tf::Normalize({}, {}), "Normalize", "0 and 0");
  EXPECT_EMBER_ERROR(tf::Normalize({0.5, 0.5}, {0.5, 0.0}), "Normalize", "std[1]", "0");
  EXPECT_EMBER_ERROR(tf::Normalize({0.5}, {1e-50}), "Normalize", "std[0]", "float32");
  EXPECT_EMBER_ERROR(tf::Compose({tf::Transform()}), "Compose", "transform 0 is empty");
  auto base = std::make_shared<data::TensorDataset>(zeros({2, 1, 2, 2}, kUInt8));
  EXPECT_EMBER_ERROR(TransformDataset(nullptr, tf::Compose()), "TransformDataset", "null");
  EXPECT_EMBER_ERROR(TransformDataset(base, tf::Transform()), "TransformDataset", "empty");
  EXPECT_EMBER_ERROR(TransformDataset(base, tf::Compose()).get(2), "TransformDataset", "index 2", "size 2");
}

TEST(TransformErrors, Images) {
  const Tensor flat = zeros({4, 4}, kUInt8);
  const Tensor batch = zeros({2, 1, 4, 4}, kUInt8);
  const tf::Transform all[] = {tf::RandomCrop(2), tf::RandomHorizontalFlip(),  tf::Resize(2),
                               tf::CenterCrop(2), tf::ToDtype(kFloat32, true), tf::Normalize({0.5}, {0.5})};
  const char* names[] = {"RandomCrop", "RandomHorizontalFlip", "Resize", "CenterCrop", "ToDtype",
                         "Normalize"};
  for (size_t i = 0; i < std::size(all); ++i) {
    EXPECT_EMBER_ERROR(call(all[i], flat), names[i], "[C, H, W]", "[4, 4]");
    EXPECT_EMBER_ERROR(call(all[i], batch), names[i], "[2, 1, 4, 4]");
    EXPECT_EMBER_ERROR(call(all[i], Tensor()), names[i], "undefined");
  }
  const Tensor i64 = zeros({1, 4, 4}, kInt64);
  EXPECT_EMBER_ERROR(call(tf::Resize(2), i64), "Resize", "uint8 or float32", "int64");
  EXPECT_EMBER_ERROR(call(tf::ToDtype(kFloat32, true), i64), "ToDtype", "int64");
  EXPECT_EMBER_ERROR(call(tf::Normalize({0.5}, {0.5}), i64), "Normalize", "int64");
  EXPECT_EMBER_ERROR(call(tf::Normalize({0.5, 0.5, 0.5}, {1, 1, 1}), zeros({1, 4, 4}, kFloat32)), "Normalize",
                     "3 values", "[1, 4, 4]", "1 channels");
  EXPECT_EMBER_ERROR(call(tf::RandomCrop(9, 2), zeros({3, 4, 6}, kUInt8)), "RandomCrop", "crop size 9",
                     "padded image [8, 10]", "[3, 4, 6]", "padding 2");
  EXPECT_EMBER_ERROR(call(tf::Resize(2), zeros({1, 0, 4}, kUInt8)), "Resize", "empty");
}

}  // namespace ember::testing
