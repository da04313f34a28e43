// Without zlib: plain files still read, gzip-compressed ones say what is missing.
#include "ember/core/error.h"
#include "ember/data/file_reader.h"

namespace ember::data {

bool has_zlib() { return false; }

std::unique_ptr<FileReader> open_gzip(const char* op, const std::string& path) {
  throw Error(detail::str_cat(op, ": ", path, " is gzip-compressed and ember was built without zlib"));
}

}  // namespace ember::data
