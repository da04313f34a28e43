#include "ember/data/idx.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "ember/core/factories.h"
#include "ember/data/file_reader.h"

namespace ember::data {

namespace {

constexpr int64_t kMnistClasses = 10;

uint32_t big_endian32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}

std::string hex(uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%0*x", digits, v);
  return buf;
}

// root/name.gz when present, else root/name.
std::string find_file(const std::string& root, const std::string& name) {
  std::string plain = (std::filesystem::path(root) / name).string();
  std::error_code ec;
  if (std::filesystem::exists(plain + ".gz", ec)) return plain + ".gz";
  EMBER_CHECK(std::filesystem::exists(plain, ec), "MNIST: missing file: found neither ", plain, ".gz nor ",
              plain);
  return plain;
}

VisionDataset read_mnist(const std::string& root, bool train) {
  std::string split = train ? "train" : "t10k";
  std::string images_path = find_file(root, split + "-images-idx3-ubyte");
  std::string labels_path = find_file(root, split + "-labels-idx1-ubyte");
  // read_idx reads only type 0x08, so the magic number is 0x0800 + dims.
  Tensor images = read_idx(images_path);
  EMBER_CHECK(images.dim() == 3, "MNIST: ", images_path, " has magic number ", hex(0x800 + images.dim(), 8),
              ", expected 0x00000803 (uint8 images [N, rows, cols])");
  Tensor labels = read_idx(labels_path);
  EMBER_CHECK(labels.dim() == 1, "MNIST: ", labels_path, " has magic number ", hex(0x800 + labels.dim(), 8),
              ", expected 0x00000801 (uint8 labels [N])");
  EMBER_CHECK(images.size(0) == labels.size(0), "MNIST: image/label count mismatch: ", images_path, " holds ",
              images.size(0), " images but ", labels_path, " holds ", labels.size(0), " labels");
  const uint8_t* l = labels.data_ptr<uint8_t>();
  for (int64_t i = 0; i < labels.numel(); ++i)
    EMBER_CHECK(l[i] < kMnistClasses, "MNIST: ", labels_path, ": label ", int{l[i]}, " at index ", i,
                " is out of range for ", kMnistClasses, " classes");
  return VisionDataset("MNIST", images.unsqueeze(1), labels.to(kInt64), kMnistClasses);
}

}  // namespace

Tensor read_idx(const std::string& path) {
  std::unique_ptr<FileReader> file = open_file("read_idx", path);
  uint8_t magic[4];
  EMBER_CHECK(file->read(magic, 4) == 4, "read_idx: ", path,
              " is truncated: it ends inside the magic number");
  EMBER_CHECK(magic[0] == 0 && magic[1] == 0, "read_idx: ", path, " is not an IDX file: its magic number ",
              hex(big_endian32(magic), 8), " does not start with two zero bytes");
  EMBER_CHECK(magic[2] == 0x08, "read_idx: ", path, " has magic number ", hex(big_endian32(magic), 8),
              ": data type ", hex(magic[2], 2), " is not supported (only 0x08, unsigned byte)");
  const int ndim = magic[3];
  EMBER_CHECK(ndim >= 1, "read_idx: ", path, " has magic number ", hex(big_endian32(magic), 8),
              ", which declares 0 dims");
  std::vector<uint8_t> header(4 * static_cast<size_t>(ndim));
  EMBER_CHECK(file->read(header.data(), header.size()) == header.size(), "read_idx: ", path,
              " is truncated: it ends inside the header's ", ndim, " sizes");
  std::vector<int64_t> sizes;
  // Zeros count as 1: an empty tensor's strides are still products of its other sizes.
  int64_t span = 1;
  bool overflow = false;
  for (int d = 0; d < ndim; ++d) {
    sizes.push_back(big_endian32(&header[4 * static_cast<size_t>(d)]));
    overflow = overflow || __builtin_mul_overflow(span, std::max<int64_t>(sizes.back(), 1), &span);
  }
  EMBER_CHECK(!overflow, "read_idx: ", path, " declares sizes ", IntArrayRef(sizes),
              " of more than 2^63 bytes (zero sizes counted as 1)");
  const int64_t n = std::count(sizes.begin(), sizes.end(), 0) ? 0 : span;
  // Read whole, then checked: the buffer never outgrows the data actually there, whatever the
  // header declares.
  std::vector<uint8_t> data = read_to_end(*file);
  const uint64_t got = data.size(), want = static_cast<uint64_t>(n);
  EMBER_CHECK(got >= want, "read_idx: ", path, " is truncated: its header declares sizes ",
              IntArrayRef(sizes), " (", want, " bytes of data) but only ", got, " bytes follow it");
  EMBER_CHECK(got == want, "read_idx: ", path, " has ", got - want, " bytes of trailing garbage after the ",
              want, " bytes of data its header declares");
  auto* storage = new std::vector<uint8_t>(std::move(data));  // freed with the tensor
  return from_blob(storage->data(), sizes, kUInt8, [storage](void*) { delete storage; });
}

MNIST::MNIST(const std::string& root, bool train) : VisionDataset(read_mnist(root, train)) {}

}  // namespace ember::data
