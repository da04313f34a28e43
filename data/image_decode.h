#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ember/core/tensor.h"

namespace ember::data {

// Whether ember was built with libpng, and with libjpeg(-turbo).
bool has_png();
bool has_jpeg();

// The PNG or JPEG image in `path` (told apart by its first bytes, not its name) as uint8 [3, H, W]
// RGB. Grayscale, palette and alpha images are converted as PIL's .convert("RGB"): gray values
// repeated, alpha dropped.
Tensor decode_image(const std::string& path);

// The decoders decode_image picks, one per library (data/png/ or data/no_png/, data/jpeg/ or
// data/no_jpeg/): uint8 [H, W, 3] RGB, channels last as the libraries write them; `path` names the
// file in errors.
Tensor decode_png(const std::vector<uint8_t>& bytes, const std::string& path);
Tensor decode_jpeg(const std::vector<uint8_t>& bytes, const std::string& path);

// The decoders' guard against a small file declaring a huge image: more pixels than PIL's
// decompression-bomb limit (2 * 89478485) is an error.
void check_image_size(const std::string& path, int64_t width, int64_t height);

}  // namespace ember::data
