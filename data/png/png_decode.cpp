// PNG through libpng's simplified API, which reports errors in png_image::message (no longjmp).
#include <png.h>

#include <cstring>

#include "ember/core/factories.h"
#include "ember/data/image_decode.h"

namespace ember::data {

namespace {

// Frees libpng's state on every way out (png_image_free does nothing once it is freed).
struct FreeImage {
  png_image* image;
  ~FreeImage() { png_image_free(image); }
};

}  // namespace

bool has_png() { return true; }

Tensor decode_png(const std::vector<uint8_t>& bytes, const std::string& path) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  FreeImage free_image{&image};
  EMBER_CHECK(png_image_begin_read_from_memory(&image, bytes.data(), bytes.size()), "decode_image: ", path,
              " is not a valid PNG image: ", image.message);
  check_image_size(path, image.width, image.height);
  // 16-bit samples are sRGB like 8-bit ones (PIL keeps their high byte), not linear light.
  image.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
  // Read with alpha, then dropped as PIL does: without it libpng would composite the image.
  image.format = PNG_FORMAT_RGBA;
  Tensor rgba = empty({int64_t{image.height}, int64_t{image.width}, 4}, kUInt8);
  EMBER_CHECK(png_image_finish_read(&image, nullptr, rgba.data_ptr(), 0, nullptr), "decode_image: ", path,
              " is a corrupt PNG image: ", image.message);
  return rgba.narrow(2, 0, 3);
}

}  // namespace ember::data
