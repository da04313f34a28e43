// gzip-compressed files through zlib.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "ember/core/error.h"
#include "ember/data/file_reader.h"

namespace ember::data {

namespace {

class GzipFile : public FileReader {
 public:
  GzipFile(const char* op, std::string path, gzFile f) : op_(op), path_(std::move(path)), f_(f) {}
  ~GzipFile() override { gzclose(f_); }

  size_t read(void* dst, size_t n) override {
    size_t done = 0;
    while (done < n) {
      unsigned step = static_cast<unsigned>(std::min<size_t>(n - done, INT_MAX));
      int got = gzread(f_, static_cast<char*>(dst) + done, step);
      // A stream cut short ends with Z_BUF_ERROR instead of a failed read.
      int err = Z_OK;
      const char* msg = gzerror(f_, &err);
      EMBER_CHECK(got >= 0 && err != Z_BUF_ERROR, op_, ": ", path_,
                  " is a corrupt gzip stream: ", err == Z_ERRNO ? std::strerror(errno) : msg);
      done += static_cast<size_t>(got);
      if (static_cast<unsigned>(got) < step) break;
    }
    return done;
  }
  std::optional<uint64_t> bytes_left() const override { return std::nullopt; }

 private:
  const char* op_;
  std::string path_;
  gzFile f_;
};

}  // namespace

bool has_zlib() { return true; }

std::unique_ptr<FileReader> open_gzip(const char* op, const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  EMBER_CHECK(f, op, ": cannot open ", path, ": ", std::strerror(errno));
  return std::make_unique<GzipFile>(op, path, f);
}

}  // namespace ember::data
