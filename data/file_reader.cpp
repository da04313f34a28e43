#include "ember/data/file_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "ember/core/error.h"

namespace ember::data {

namespace {

class PlainFile : public FileReader {
 public:
  PlainFile(const char* op, std::string path, std::FILE* f, std::optional<uint64_t> size)
      : op_(op), path_(std::move(path)), f_(f), left_(size) {}
  ~PlainFile() override { std::fclose(f_); }

  size_t read(void* dst, size_t n) override {
    size_t got = std::fread(dst, 1, n, f_);
    EMBER_CHECK(got == n || !std::ferror(f_), op_, ": error reading ", path_, ": ", std::strerror(errno));
    if (left_) *left_ -= std::min<uint64_t>(*left_, got);
    return got;
  }
  std::optional<uint64_t> bytes_left() const override { return left_; }

 private:
  const char* op_;
  std::string path_;
  std::FILE* f_;
  std::optional<uint64_t> left_;  // unknown for pipes and other special files
};

}  // namespace

std::unique_ptr<FileReader> open_file(const char* op, const std::string& path) {
  std::error_code ec;
  EMBER_CHECK(!std::filesystem::is_directory(path, ec), op, ": ", path, " is a directory, not a file");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  EMBER_CHECK(f, op, ": cannot open ", path, ": ", std::strerror(errno));
  unsigned char magic[2] = {0, 0};
  if (std::fread(magic, 1, 2, f) == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    std::fclose(f);
    return open_gzip(op, path);
  }
  std::rewind(f);
  uint64_t size = std::filesystem::file_size(path, ec);
  return std::make_unique<PlainFile>(op, path, f, ec ? std::nullopt : std::optional<uint64_t>(size));
}

std::vector<uint8_t> read_to_end(FileReader& file) {
  constexpr size_t kChunk = size_t{1} << 20;
  // A plain file's size and one byte to see its end: one allocation. A gzip stream's size is
  // unknown: the buffer grows with the data read, to at most about twice its size.
  std::vector<uint8_t> out;
  out.reserve(file.bytes_left().value_or(0) + 1);
  for (;;) {
    const size_t old = out.size();
    if (old == out.capacity()) out.reserve(std::max(2 * old, kChunk));
    out.resize(out.capacity());
    const size_t got = file.read(out.data() + old, out.size() - old);
    out.resize(old + got);
    if (old + got < out.capacity()) return out;
  }
}

}  // namespace ember::data
