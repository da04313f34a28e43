// JPEG decoding, on files written with libjpeg's compressor. JPEG is lossy: the checks allow
// for it with a tolerance, or use a uniform colour that survives exactly up to rounding.
#include <cstddef>
#include <cstdio>  // before jpeglib.h, which uses size_t and FILE
#include <fstream>
#include <iterator>

#include <jpeglib.h>

#include <ember/data/image_decode.h>

#include "data/data_files.h"
#include "test_util.h"

namespace ember::testing {

namespace {

// A w x h JPEG of interleaved `pixels` with 3 (RGB) or 1 (gray) channels.
Bytes write_jpeg(const std::string& path, uint32_t w, uint32_t h, int channels, const Bytes& pixels,
                 int quality) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  EMBER_CHECK(f, "write_jpeg: cannot open ", path);
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = w;
  c.image_height = h;
  c.input_components = channels;
  c.in_color_space = channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  jpeg_start_compress(&c, TRUE);
  for (uint32_t y = 0; y < h; ++y) {
    JSAMPROW row = const_cast<uint8_t*>(pixels.data()) + size_t{y} * w * static_cast<size_t>(channels);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::fclose(f);
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// A smooth w x h RGB image (JPEG keeps it within a few levels).
Bytes gradient(uint32_t w, uint32_t h) {
  Bytes out;
  for (uint32_t y = 0; y < h; ++y)
    for (uint32_t x = 0; x < w; ++x)
      for (uint32_t v : {40 + 4 * x, 60 + 5 * y, 200 - 2 * x - 2 * y}) out.push_back(static_cast<uint8_t>(v));
  return out;
}

Tensor hwc_to_chw(const Bytes& pixels, int64_t h, int64_t w) {
  return from_blob(const_cast<uint8_t*>(pixels.data()), {h, w, 3}, kUInt8)
      .permute({2, 0, 1})
      .to(kFloat32);
}

}  // namespace

TEST(DecodeJpeg, ReadsRgbImages) {
  if (!data::has_jpeg()) GTEST_SKIP() << "ember was built without libjpeg";
  TempDir dir;
  Bytes uniform;
  for (int i = 0; i < 16 * 8; ++i) uniform.insert(uniform.end(), {200, 100, 50});
  write_jpeg(dir.new_file("uniform.jpg"), 16, 8, 3, uniform, 100);
  Tensor img = data::decode_image(dir.new_file("uniform.jpg"));
  EXPECT_EQ(img.dtype(), kUInt8);
  EXPECT_EQ(img.sizes().vec(), (std::vector<int64_t>{3, 8, 16}));
  EXPECT_CLOSE(img.to(kFloat32), hwc_to_chw(uniform, 8, 16), Tolerance{0, 1});
  const Bytes smooth = gradient(32, 24);
  write_jpeg(dir.new_file("smooth.jpeg"), 32, 24, 3, smooth, 95);
  EXPECT_CLOSE(data::decode_image(dir.new_file("smooth.jpeg")).to(kFloat32), hwc_to_chw(smooth, 24, 32),
               Tolerance{0, 8});
}

TEST(DecodeJpeg, RepeatsGrayIntoRgb) {
  if (!data::has_jpeg()) GTEST_SKIP() << "ember was built without libjpeg";
  TempDir dir;
  Bytes gray;
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x) gray.push_back(static_cast<uint8_t>(100 + 3 * x + 2 * y));
  write_jpeg(dir.new_file("gray.jpg"), 8, 8, 1, gray, 100);
  Tensor img = data::decode_image(dir.new_file("gray.jpg"));
  ASSERT_EQ(img.sizes().vec(), (std::vector<int64_t>{3, 8, 8}));
  EXPECT_CLOSE(img[1], img[0]);
  EXPECT_CLOSE(img[2], img[0]);
  EXPECT_CLOSE(img[0].to(kFloat32), from_blob(gray.data(), {8, 8}, kUInt8).to(kFloat32), Tolerance{0, 2});
}

TEST(DecodeJpeg, RejectsCorruptFilesWithoutExiting) {
  if (!data::has_jpeg()) GTEST_SKIP() << "ember was built without libjpeg";
  TempDir dir;
  std::string path = dir.new_file("a.jpg");
  Bytes good = write_jpeg(path, 32, 24, 3, gradient(32, 24), 90);
  write_bytes(path, Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2)));
  EXPECT_EMBER_ERROR(data::decode_image(path), "decode_image: ", path.c_str(), "is a corrupt JPEG image");
  write_bytes(path, {0xff, 0xd8, 0xff, 0x01, 0x02, 0x03, 0x04, 0x05});
  EXPECT_EMBER_ERROR(data::decode_image(path), "decode_image: ", path.c_str(), "is a corrupt JPEG image");
  // A hostile header (SOF0 height and width 60000; libjpeg's own limit is 65500) fails before the pixels are
  // allocated.
  Bytes huge = good;
  const Bytes sof0 = {0xff, 0xc0};
  auto sof = std::search(huge.begin(), huge.end(), sof0.begin(), sof0.end());
  ASSERT_NE(sof, huge.end());
  std::copy_n(Bytes{0xea, 0x60, 0xea, 0x60}.begin(), 4, sof + 5);
  write_bytes(path, huge);
  EXPECT_EMBER_ERROR(data::decode_image(path), "decode_image: ", path.c_str(),
                     "declares 60000 x 60000 pixels, more than the limit");
  write_bytes(path, good);
  EXPECT_EQ(data::decode_image(path).size(1), 24) << "decodes fine after the errors";
}

}  // namespace ember::testing
