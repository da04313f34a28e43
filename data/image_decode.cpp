#include "ember/data/image_decode.h"

#include <algorithm>
#include <cstdio>

#include "ember/core/error.h"
#include "ember/data/file_reader.h"

namespace ember::data {

namespace {

bool starts_with(const std::vector<uint8_t>& bytes, std::initializer_list<uint8_t> magic) {
  return bytes.size() >= magic.size() && std::equal(magic.begin(), magic.end(), bytes.begin());
}

std::string first_bytes(const std::vector<uint8_t>& bytes) {
  std::string out;
  char buf[4];
  for (size_t i = 0; i < std::min<size_t>(bytes.size(), 8); ++i) {
    std::snprintf(buf, sizeof(buf), i ? " %02x" : "%02x", bytes[i]);
    out += buf;
  }
  return out;
}

}  // namespace

void check_image_size(const std::string& path, int64_t width, int64_t height) {
  constexpr int64_t kMaxPixels = 2 * 89478485;
  EMBER_CHECK(width * height <= kMaxPixels, "decode_image: ", path, " declares ", width, " x ", height,
              " pixels, more than the limit of ", kMaxPixels, " (PIL's decompression-bomb limit)");
}

Tensor decode_image(const std::string& path) {
  std::vector<uint8_t> bytes = read_to_end(*open_file("decode_image", path));
  if (starts_with(bytes, {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}))
    return decode_png(bytes, path).permute({2, 0, 1}).contiguous();
  if (starts_with(bytes, {0xff, 0xd8, 0xff})) return decode_jpeg(bytes, path).permute({2, 0, 1}).contiguous();
  throw Error(detail::str_cat("decode_image: ", path,
                              " is neither a PNG nor a JPEG image (it starts with bytes [",
                              first_bytes(bytes), "])"));
}

}  // namespace ember::data
