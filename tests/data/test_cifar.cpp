#include <ember/data/cifar.h>

#include "data/data_files.h"
#include "test_util.h"

namespace ember::testing {

namespace {

// Records of `label_bytes` label bytes (the last one from `labels`, the others 99) and 3072
// pattern pixels starting at `first` + i.
Bytes records(const Bytes& labels, size_t label_bytes, uint8_t first) {
  Bytes out;
  for (size_t i = 0; i < labels.size(); ++i) {
    out.insert(out.end(), label_bytes - 1, 99);
    out.push_back(labels[i]);
    Bytes pixels = pattern(3072, static_cast<uint8_t>(first + i));
    out.insert(out.end(), pixels.begin(), pixels.end());
  }
  return out;
}

}  // namespace

TEST(Cifar10, ReadsTheFiveTrainBatchesInOrder) {
  TempDir dir;
  const std::vector<Bytes> labels = {{0, 9}, {1}, {2, 3, 4}, {5}, {6, 7}};
  for (size_t b = 0; b < labels.size(); ++b)
    write_bytes(dir.new_file(detail::str_cat("data_batch_", b + 1, ".bin")),
                records(labels[b], 1, static_cast<uint8_t>(10 * b)));
  write_bytes(dir.new_file("test_batch.bin"), records({8}, 1, 100));
  data::CIFAR10 train(dir.path());
  EXPECT_EQ(train.size(), 9);
  EXPECT_EQ(train.num_classes(), 10);
  EXPECT_EQ(train.images().sizes().vec(), (std::vector<int64_t>{9, 3, 32, 32}));
  EXPECT_CLOSE(train.targets(), tensor({0, 9, 1, 2, 3, 4, 5, 6, 7}));
  data::Example e = train.get(3);  // batch 3's first record
  EXPECT_EQ(e[0].sizes().vec(), (std::vector<int64_t>{3, 32, 32}));
  EXPECT_EQ(bytes_of(e[0]), pattern(3072, 20));
  EXPECT_EQ(e[1].dim(), 0);
  EXPECT_EQ(e[1].item<int64_t>(), 2);
  EXPECT_EQ(bytes_of(train.get(-1)[0]), pattern(3072, 41));
  data::CIFAR10 test(dir.path(), /*train=*/false);
  EXPECT_EQ(test.size(), 1);
  EXPECT_EQ(bytes_of(test.images()), pattern(3072, 100));
  EXPECT_EQ(test.get(0)[1].item<int64_t>(), 8);
}

TEST(Cifar100, UsesTheFineLabel) {
  TempDir dir;
  write_bytes(dir.new_file("train.bin"), records({0, 99, 42}, 2, 3));
  write_bytes(dir.new_file("test.bin"), records({17}, 2, 0));
  data::CIFAR100 train(dir.path());
  EXPECT_EQ(train.num_classes(), 100);
  EXPECT_CLOSE(train.targets(), tensor({0, 99, 42}));
  EXPECT_EQ(bytes_of(train.get(1)[0]), pattern(3072, 4));
  EXPECT_CLOSE(data::CIFAR100(dir.path(), false).targets(), tensor({17}));
}

TEST(Cifar, RejectsBadFiles) {
  TempDir dir;
  std::string path = dir.new_file("test_batch.bin");
  EXPECT_EMBER_ERROR((data::CIFAR10(dir.path(), false)), "CIFAR10: cannot open ", path.c_str(),
                     "No such file");
  write_bytes(path, {});
  EXPECT_EMBER_ERROR((data::CIFAR10(dir.path(), false)), "CIFAR10: ", path.c_str(), "is empty");
  Bytes truncated = records({1, 2}, 1, 0);
  truncated.pop_back();
  write_bytes(path, truncated);
  EXPECT_EMBER_ERROR((data::CIFAR10(dir.path(), false)), "CIFAR10: ", path.c_str(),
                     "is truncated: its 6145 bytes are not a whole number of 3073-byte records");
  write_bytes(path, records({1, 10}, 1, 0));
  EXPECT_EMBER_ERROR((data::CIFAR10(dir.path(), false)), "CIFAR10: ", path.c_str(),
                     "record 1 has label 10, out of range for 10 classes");
  std::string path100 = dir.new_file("test.bin");
  write_bytes(path100, records({5, 100}, 2, 0));
  EXPECT_EMBER_ERROR((data::CIFAR100(dir.path(), false)), "CIFAR100: ", path100.c_str(),
                     "record 1 has label 100, out of range for 100 classes");
  write_bytes(path100, records({5}, 1, 0));  // CIFAR-10 records where CIFAR-100's belong
  EXPECT_EMBER_ERROR((data::CIFAR100(dir.path(), false)), "CIFAR100: ", path100.c_str(),
                     "3073 bytes are not a whole number of 3074-byte records");
  for (int b = 1; b <= 4; ++b)
    write_bytes(dir.new_file(detail::str_cat("data_batch_", b, ".bin")), records({1}, 1, 0));
  std::string batch5 = dir.new_file("data_batch_5.bin");
  EXPECT_EMBER_ERROR(data::CIFAR10(dir.path()), "CIFAR10: cannot open ", batch5.c_str());
}

}  // namespace ember::testing
