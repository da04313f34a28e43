#pragma once

#include <string>
#include <string_view>

namespace ember {

// A file written so that a crash, a kill or a full disk never leaves `path` half-written: the
// bytes go to a temporary file in the same directory, which commit() flushes, fsyncs and renames
// over `path`, then fsyncs the directory. Without commit() (an exception on the way), the
// temporary file is removed and `path` is untouched. A process killed while writing leaves its
// temporary file ("<path>.tmp.<pid>.<n>"): the next AtomicFile for `path` removes those of
// processes that no longer run. Errors start with `op`.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path, std::string op = "save");
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  void write(const void* data, size_t size);
  void commit();

 private:
  void flush();
  void write_fully(const char* p, size_t size);

  std::string path_, op_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
  std::string buffer_;
};

// The whole of `contents` into `path` through an AtomicFile.
void write_file_atomically(const std::string& path, std::string_view contents, const std::string& op);

}  // namespace ember
