// gzip-compressed IDX files, written with zlib.
#include <zlib.h>

#include <fstream>
#include <iterator>

#include <ember/data/file_reader.h>
#include <ember/data/idx.h>

#include "data/data_files.h"
#include "test_util.h"

namespace ember::testing {

namespace {

// The bytes of `bytes` gzip-compressed, as the file holds them.
Bytes write_gzip(const std::string& path, const Bytes& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  EMBER_CHECK(
      f && gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()) &&
          gzclose(f) == Z_OK,
      "write_gzip: cannot write ", path);
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST(ReadIdxGzip, ReadsGzipFilesWhateverTheirName) {
  if (!data::has_zlib()) GTEST_SKIP() << "ember was built without zlib";
  TempDir dir;
  for (const char* name : {"images.gz", "images"}) {
    write_gzip(dir.new_file(name), idx_bytes({3, 28, 28}, pattern(3 * 784, 5)));
    Tensor t = data::read_idx(dir.new_file(name));
    EXPECT_EQ(t.sizes().vec(), (std::vector<int64_t>{3, 28, 28}));
    EXPECT_EQ(bytes_of(t), pattern(3 * 784, 5));
  }
  // Larger than read_idx's first 1 MiB chunk, so its buffer grows.
  write_gzip(dir.new_file("big.gz"), idx_bytes({3000, 28, 28}, pattern(3000 * 784)));
  EXPECT_EQ(bytes_of(data::read_idx(dir.new_file("big.gz"))), pattern(3000 * 784));
}

TEST(MnistGzip, PrefersTheGzFiles) {
  if (!data::has_zlib()) GTEST_SKIP() << "ember was built without zlib";
  TempDir dir;
  write_bytes(dir.new_file("t10k-images-idx3-ubyte"), idx_bytes({2, 28, 28}, pattern(2 * 784)));
  write_bytes(dir.new_file("t10k-labels-idx1-ubyte"), idx_bytes({2}, {1, 2}));
  write_gzip(dir.new_file("t10k-images-idx3-ubyte.gz"), idx_bytes({3, 28, 28}, pattern(3 * 784, 9)));
  write_gzip(dir.new_file("t10k-labels-idx1-ubyte.gz"), idx_bytes({3}, {3, 4, 5}));
  data::MNIST test(dir.path(), /*train=*/false);
  EXPECT_EQ(bytes_of(test.images()), pattern(3 * 784, 9));
  EXPECT_CLOSE(test.targets(), tensor({3, 4, 5}));
}

TEST(ReadIdxGzip, RejectsBadStreams) {
  if (!data::has_zlib()) GTEST_SKIP() << "ember was built without zlib";
  TempDir dir;
  std::string path = dir.new_file("bad.gz");
  write_gzip(path, idx_bytes({2, 28, 28}, Bytes(1000)));
  EXPECT_EMBER_ERROR(data::read_idx(path), "read_idx: ", path.c_str(), "is truncated",
                     "declares sizes [2, 28, 28] (1568 bytes", "only 1000 bytes follow it");
  write_gzip(path, idx_bytes({2, 2}, Bytes(7)));
  EXPECT_EMBER_ERROR(data::read_idx(path), path.c_str(), "has 3 bytes of trailing garbage after the 4 bytes");
  // A hostile header: the buffer grows only as far as the data goes.
  write_gzip(path, idx_bytes({1u << 31, 1u << 31}, Bytes(16)));
  EXPECT_EMBER_ERROR(data::read_idx(path), path.c_str(), "is truncated", "[2147483648, 2147483648]",
                     "only 16 bytes follow it");
  Bytes good = write_gzip(path, idx_bytes({40, 28, 28}, pattern(40 * 784)));
  Bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2));
  write_bytes(path, cut);
  EXPECT_EMBER_ERROR(data::read_idx(path), path.c_str(), "is a corrupt gzip stream");
  Bytes garbled = good;
  for (size_t i = 20; i < 60; ++i) garbled[i] ^= 0x5a;
  write_bytes(path, garbled);
  EXPECT_EMBER_ERROR(data::read_idx(path), path.c_str(), "is a corrupt gzip stream");
}

}  // namespace ember::testing
