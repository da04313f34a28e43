// Without libjpeg: JPEG files say what is missing.
#include "ember/core/error.h"
#include "ember/data/image_decode.h"

namespace ember::data {

bool has_jpeg() { return false; }

Tensor decode_jpeg(const std::vector<uint8_t>&, const std::string& path) {
  throw Error("decode_image: " + path + " is a JPEG image and ember was built without libjpeg");
}

}  // namespace ember::data
