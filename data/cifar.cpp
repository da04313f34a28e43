#include "ember/data/cifar.h"

#include <cstring>
#include <filesystem>
#include <vector>

#include "ember/core/factories.h"
#include "ember/data/file_reader.h"

namespace ember::data {

namespace {

constexpr int64_t kPixels = 3 * 32 * 32;

// The records of `files` (in root) in order: `label_bytes` label bytes, of which the last is the
// label (CIFAR-100's fine one), then the pixels.
VisionDataset read_records(const char* name, const std::string& root, const std::vector<std::string>& files,
                           int64_t label_bytes, int64_t num_classes) {
  const int64_t record = label_bytes + kPixels;
  std::vector<std::vector<uint8_t>> contents;
  int64_t n = 0;
  for (const std::string& file : files) {
    std::string path = (std::filesystem::path(root) / file).string();
    contents.push_back(read_to_end(*open_file(name, path)));
    const int64_t bytes = static_cast<int64_t>(contents.back().size());
    EMBER_CHECK(bytes > 0, name, ": ", path, " is empty");
    EMBER_CHECK(bytes % record == 0, name, ": ", path, " is truncated: its ", bytes,
                " bytes are not a whole number of ", record, "-byte records");
    for (int64_t i = 0; i < bytes / record; ++i) {
      int label = contents.back()[static_cast<size_t>(i * record + label_bytes - 1)];
      EMBER_CHECK(label < num_classes, name, ": ", path, ": record ", i, " has label ", label,
                  ", out of range for ", num_classes, " classes");
    }
    n += bytes / record;
  }
  Tensor images = empty({n, 3, 32, 32}, kUInt8);
  Tensor targets = empty({n}, kInt64);
  uint8_t* img = images.data_ptr<uint8_t>();
  int64_t* tgt = targets.data_ptr<int64_t>();
  for (const std::vector<uint8_t>& bytes : contents)
    for (const uint8_t* r = bytes.data(); r < bytes.data() + bytes.size(); r += record) {
      *tgt++ = r[label_bytes - 1];
      std::memcpy(img, r + label_bytes, kPixels);
      img += kPixels;
    }
  return VisionDataset(name, images, targets, num_classes);
}

}  // namespace

CIFAR10::CIFAR10(const std::string& root, bool train)
    : VisionDataset(read_records(
          "CIFAR10", root,
          train ? std::vector<std::string>{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                           "data_batch_4.bin", "data_batch_5.bin"}
                : std::vector<std::string>{"test_batch.bin"},
          1, 10)) {}

CIFAR100::CIFAR100(const std::string& root, bool train)
    : VisionDataset(read_records("CIFAR100", root, {train ? "train.bin" : "test.bin"}, 2, 100)) {}

}  // namespace ember::data
