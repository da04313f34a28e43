#include <ember/data/file_reader.h>
#include <ember/data/idx.h>

#include "data/data_files.h"
#include "test_util.h"

namespace ember::testing {

namespace {

// root/<split>-images-idx3-ubyte with n 28x28 images (pattern bytes) and its labels file.
void write_mnist(const TempDir& dir, const std::string& split, const Bytes& labels) {
  write_bytes(dir.new_file(split + "-images-idx3-ubyte"),
              idx_bytes({static_cast<uint32_t>(labels.size()), 28, 28}, pattern(labels.size() * 784)));
  write_bytes(dir.new_file(split + "-labels-idx1-ubyte"),
              idx_bytes({static_cast<uint32_t>(labels.size())}, labels));
}

}  // namespace

TEST(ReadIdx, ReadsPlainFilesOfAnyDims) {
  TempDir dir;
  const std::vector<std::vector<uint32_t>> shapes = {{5}, {2, 3}, {2, 28, 28}, {2, 1, 3, 4}, {0, 7}};
  for (const std::vector<uint32_t>& shape : shapes) {
    size_t n = 1;
    for (uint32_t s : shape) n *= s;
    std::string path = dir.new_file(detail::str_cat("t", shape.size(), "-", n));
    write_bytes(path, idx_bytes(shape, pattern(n, 7)));
    Tensor t = data::read_idx(path);
    EXPECT_EQ(t.dtype(), kUInt8);
    EXPECT_EQ(t.sizes().vec(), std::vector<int64_t>(shape.begin(), shape.end()));
    EXPECT_EQ(bytes_of(t), pattern(n, 7));
  }
}

TEST(ReadIdx, RejectsBadFiles) {
  TempDir dir;
  std::string path = dir.new_file("bad-idx");
  EXPECT_EMBER_ERROR(data::read_idx(path), "read_idx: cannot open ", path.c_str(), "No such file");
  EXPECT_EMBER_ERROR(data::read_idx(dir.path()), "read_idx: ", dir.path().c_str(), "is a directory");
  write_bytes(path, {0, 0, 8});
  EXPECT_EMBER_ERROR(data::read_idx(path), path.c_str(), "is truncated: it ends inside the magic number");
  write_bytes(path, {0x12, 0x34, 0x08, 0x01, 0, 0, 0, 0});
  EXPECT_EMBER_ERROR(data::read_idx(path), path.c_str(), "is not an IDX file: its magic number 0x12340801");
  write_bytes(path, idx_bytes({2}, Bytes(8), 0x0d));
  EXPECT_EMBER_ERROR(data::read_idx(path), path.c_str(),
                     "magic number 0x00000d01: data type 0x0d is not supported");
  write_bytes(path, idx_bytes({}, {}));
  EXPECT_EMBER_ERROR(data::read_idx(path), path.c_str(), "0x00000800, which declares 0 dims");
  write_bytes(path, {0, 0, 8, 3, 0, 0, 0, 2, 0, 0});
  EXPECT_EMBER_ERROR(data::read_idx(path), path.c_str(), "is truncated: it ends inside the header's 3 sizes");
  write_bytes(path, idx_bytes({2, 28, 28}, Bytes(1000)));
  EXPECT_EMBER_ERROR(data::read_idx(path), path.c_str(), "is truncated",
                     "declares sizes [2, 28, 28] (1568 bytes", "only 1000 bytes follow it");
  write_bytes(path, idx_bytes({2, 2}, Bytes(7)));
  EXPECT_EMBER_ERROR(data::read_idx(path), path.c_str(), "has 3 bytes of trailing garbage after the 4 bytes");
  // Hostile headers: sizes the file cannot hold fail before anything is allocated.
  write_bytes(path, idx_bytes({1u << 31, 1u << 31}, Bytes(16)));
  EXPECT_EMBER_ERROR(data::read_idx(path), path.c_str(), "is truncated", "[2147483648, 2147483648]");
  write_bytes(path, idx_bytes({~0u, ~0u, ~0u}, {}));
  EXPECT_EMBER_ERROR(data::read_idx(path), path.c_str(),
                     "[4294967295, 4294967295, 4294967295] of more than 2^63");
  // Found by tools/fuzz (idx): empty, but its strides would overflow.
  write_bytes(path, idx_bytes({0, ~0u, ~0u, ~0u}, {}));
  EXPECT_EMBER_ERROR(
      data::read_idx(path), path.c_str(),
      "[0, 4294967295, 4294967295, 4294967295] of more than 2^63 bytes (zero sizes counted as 1)");
}

TEST(Mnist, ReadsBothSplits) {
  TempDir dir;
  write_mnist(dir, "train", {3, 0, 9, 1});
  write_mnist(dir, "t10k", {7, 7});
  data::MNIST train(dir.path());
  EXPECT_EQ(train.size(), 4);
  EXPECT_EQ(train.num_classes(), 10);
  EXPECT_EQ(train.images().sizes().vec(), (std::vector<int64_t>{4, 1, 28, 28}));
  EXPECT_EQ(train.images().dtype(), kUInt8);
  EXPECT_EQ(bytes_of(train.images()), pattern(4 * 784));
  EXPECT_CLOSE(train.targets(), tensor({3, 0, 9, 1}));
  data::Example e = train.get(2);
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].sizes().vec(), (std::vector<int64_t>{1, 28, 28}));
  const Bytes all = pattern(4 * 784);
  EXPECT_EQ(bytes_of(e[0]), Bytes(all.begin() + 2 * 784, all.begin() + 3 * 784));
  EXPECT_EQ(e[0].data_ptr(), train.images()[2].data_ptr());  // a view, no copy
  EXPECT_EQ(e[1].dim(), 0);
  EXPECT_EQ(e[1].dtype(), kInt64);
  EXPECT_EQ(e[1].item<int64_t>(), 9);
  EXPECT_EQ(train.get(-1)[1].item<int64_t>(), 1);
  EXPECT_EMBER_ERROR(train.get(4), "MNIST: index 4 is out of range for a dataset of size 4");
  data::MNIST test(dir.path(), /*train=*/false);
  EXPECT_EQ(test.size(), 2);
  EXPECT_CLOSE(test.targets(), tensor({7, 7}));
}

TEST(Mnist, RejectsBadFiles) {
  TempDir dir;
  std::string root = dir.path();
  std::string images = dir.new_file("train-images-idx3-ubyte"),
              labels = dir.new_file("train-labels-idx1-ubyte");
  EXPECT_EMBER_ERROR(data::MNIST{root}, "MNIST: missing file: found neither ", images.c_str());
  write_mnist(dir, "train", {1, 2, 3});
  std::filesystem::remove(labels);
  EXPECT_EMBER_ERROR(data::MNIST{root}, "MNIST: missing file", labels.c_str());
  write_mnist(dir, "train", {1, 2, 3});
  write_bytes(images, idx_bytes({3}, {1, 2, 3}));  // a labels file where the images should be
  EXPECT_EMBER_ERROR(data::MNIST{root}, "MNIST: ", images.c_str(),
                     "has magic number 0x00000801, expected 0x00000803");
  write_mnist(dir, "train", {1, 2, 3});
  write_bytes(labels, idx_bytes({3, 1}, {1, 2, 3}));
  EXPECT_EMBER_ERROR(data::MNIST{root}, "MNIST: ", labels.c_str(),
                     "has magic number 0x00000802, expected 0x00000801");
  write_mnist(dir, "train", {1, 2, 3});
  write_bytes(labels, idx_bytes({2}, {1, 2}));
  EXPECT_EMBER_ERROR(data::MNIST{root}, "MNIST: image/label count mismatch: ", images.c_str(),
                     "holds 3 images but ", labels.c_str(), "holds 2 labels");
  write_mnist(dir, "train", {1, 10, 3});
  EXPECT_EMBER_ERROR(data::MNIST{root}, "MNIST: ", labels.c_str(),
                     "label 10 at index 1 is out of range for 10 classes");
  write_mnist(dir, "train", {1, 2, 3});
  write_bytes(images, idx_bytes({3, 28, 28}, pattern(3 * 784 - 1)));
  EXPECT_EMBER_ERROR(data::MNIST{root}, "read_idx: ", images.c_str(), "is truncated");
}

TEST(Mnist, SaysWhenGzipNeedsZlib) {
  if (data::has_zlib()) GTEST_SKIP() << "ember was built with zlib (tests/data/zlib/ reads gzip files)";
  TempDir dir;
  std::string path = dir.new_file("train-images-idx3-ubyte.gz");
  write_bytes(path, {0x1f, 0x8b, 8, 0, 0, 0, 0, 0});
  EXPECT_EMBER_ERROR(data::read_idx(path), "read_idx: ", path.c_str(),
                     "is gzip-compressed and ember was built without zlib");
}

// The Debian package dataset-fashion-mnist, when installed.
TEST(FashionMnist, ReadsTheDebianPackage) {
  const std::string root = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(root))
    GTEST_SKIP() << root << " is absent (apt-get install dataset-fashion-mnist)";
  if (!data::has_zlib()) GTEST_SKIP() << "ember was built without zlib";
  data::MNIST train(root), test(root, /*train=*/false);
  EXPECT_EQ(train.images().sizes().vec(), (std::vector<int64_t>{60000, 1, 28, 28}));
  EXPECT_EQ(test.images().sizes().vec(), (std::vector<int64_t>{10000, 1, 28, 28}));
  for (const data::MNIST* split : {&train, &test}) {
    std::vector<int64_t> counts(10);
    const int64_t* t = split->targets().data_ptr<int64_t>();
    for (int64_t i = 0; i < split->size(); ++i) {
      ASSERT_TRUE(t[i] >= 0 && t[i] < 10) << "label " << t[i] << " at " << i;
      ++counts[static_cast<size_t>(t[i])];
    }
    EXPECT_EQ(counts, std::vector<int64_t>(10, split->size() / 10));  // balanced: 6000 / 1000 per class
  }
}

}  // namespace ember::testing
