// Without libpng: PNG files say what is missing.
#include "ember/core/error.h"
#include "ember/data/image_decode.h"

namespace ember::data {

bool has_png() { return false; }

Tensor decode_png(const std::vector<uint8_t>&, const std::string& path) {
  throw Error("decode_image: " + path + " is a PNG image and ember was built without libpng");
}

}  // namespace ember::data
