#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ember::data {

// Whether ember was built with zlib, so open_file() can read gzip-compressed files.
bool has_zlib();

// A file read front to back. Errors are ember::Errors that start with the reader's name (`op`)
// and name the file.
class FileReader {
 public:
  virtual ~FileReader() = default;
  // Reads up to n bytes into dst; fewer only at the end of the data.
  virtual size_t read(void* dst, size_t n) = 0;
  // The bytes left to read when known without reading them: plain files, not gzip streams.
  virtual std::optional<uint64_t> bytes_left() const = 0;
};

// Opens `path`, decompressing it on the fly when it starts with gzip's magic bytes (its name
// does not matter).
std::unique_ptr<FileReader> open_file(const char* op, const std::string& path);

// The gzip stream in `path` (data/zlib/, or data/no_zlib/ which says ember lacks zlib).
std::unique_ptr<FileReader> open_gzip(const char* op, const std::string& path);

// The rest of the file's (decompressed) bytes.
std::vector<uint8_t> read_to_end(FileReader& file);

}  // namespace ember::data
