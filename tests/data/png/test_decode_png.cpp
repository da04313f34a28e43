// PNG decoding, on files written with libpng's simplified API.
#include <png.h>
#include <zlib.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include <ember/data/image_decode.h>
#include <ember/data/image_folder.h>

#include "data/data_files.h"
#include "test_util.h"

namespace ember::testing {

namespace {

// A w x h PNG of `format` (PNG_FORMAT_*) from `pixels`, row by row; `colormap` for palette images.
Bytes write_png(const std::string& path, uint32_t w, uint32_t h, uint32_t format, const Bytes& pixels,
                const Bytes& colormap = {}) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  image.width = w;
  image.height = h;
  image.format = format;
  image.colormap_entries = static_cast<uint32_t>(colormap.size() / 4);
  EMBER_CHECK(png_image_write_to_file(&image, path.c_str(), 0, pixels.data(), 0,
                                      colormap.empty() ? nullptr : colormap.data()),
              "write_png: ", image.message);
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// [3, h, w] RGB from interleaved pixels of `channels` channels (the first three, or gray repeated).
Tensor chw(const Bytes& pixels, int64_t h, int64_t w, int64_t channels) {
  Tensor out = empty({3, h, w}, kUInt8);
  uint8_t* o = out.data_ptr<uint8_t>();
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t i = 0; i < h * w; ++i)
      o[c * h * w + i] = pixels[static_cast<size_t>(i * channels + (channels >= 3 ? c : 0))];
  return out;
}

}  // namespace

TEST(DecodePng, ConvertsEveryColorTypeToRgb) {
  if (!data::has_png()) GTEST_SKIP() << "ember was built without libpng";
  TempDir dir;
  const uint32_t w = 5, h = 3;
  struct Case {
    const char* name;
    uint32_t format;
    int64_t channels;
  };
  for (Case k : {Case{"rgb", PNG_FORMAT_RGB, 3}, Case{"gray", PNG_FORMAT_GRAY, 1},
                 Case{"rgba", PNG_FORMAT_RGBA, 4}, Case{"gray_alpha", PNG_FORMAT_GA, 2}}) {
    SCOPED_TRACE(k.name);
    Bytes pixels = pattern(w * h * static_cast<size_t>(k.channels), 40);
    if (k.channels % 2 == 0)  // alpha, 0 and 255 included: dropped whatever it is
      for (size_t i = 0; i < w * h; ++i)
        pixels[(i + 1) * static_cast<size_t>(k.channels) - 1] = static_cast<uint8_t>(i * 18);
    std::string path = dir.new_file(std::string(k.name) + ".png");
    write_png(path, w, h, k.format, pixels);
    Tensor img = data::decode_image(path);
    EXPECT_EQ(img.dtype(), kUInt8);
    EXPECT_CLOSE(img, chw(pixels, h, w, k.channels));
  }
}

TEST(DecodePng, ReadsPaletteImagesWithTransparency) {
  if (!data::has_png()) GTEST_SKIP() << "ember was built without libpng";
  TempDir dir;
  const Bytes colormap = {255, 0, 0, 255, 0, 128, 0, 0, 10, 20, 30, 77, 200, 201, 202, 255};  // RGBA
  const Bytes indices = {0, 1, 2, 3, 3, 2, 1, 0};
  std::string path = dir.new_file("palette.png");
  Bytes file = write_png(path, 4, 2, PNG_FORMAT_RGBA_COLORMAP, indices, colormap);
  ASSERT_EQ(file[25], 3) << "IHDR color type: a palette image";
  Bytes rgba;
  for (uint8_t i : indices) rgba.insert(rgba.end(), colormap.begin() + 4 * i, colormap.begin() + 4 * i + 4);
  EXPECT_CLOSE(data::decode_image(path), chw(rgba, 2, 4, 4));
}

TEST(DecodePng, RejectsCorruptFiles) {
  if (!data::has_png()) GTEST_SKIP() << "ember was built without libpng";
  TempDir dir;
  std::string path = dir.new_file("a.png");
  Bytes good = write_png(path, 64, 64, PNG_FORMAT_RGB, pattern(64 * 64 * 3));
  write_bytes(path, Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2)));
  EXPECT_EMBER_ERROR(data::decode_image(path), "decode_image: ", path.c_str(), "is a corrupt PNG image");
  Bytes garbled = good;
  size_t idat = static_cast<size_t>(
      std::search(good.begin(), good.end(), std::begin("IDAT"), std::end("IDAT") - 1) - good.begin());
  garbled[idat + 10] ^= 0xff;
  write_bytes(path, garbled);
  EXPECT_EMBER_ERROR(data::decode_image(path), "decode_image: ", path.c_str(), "is a corrupt PNG image");
  // A hostile header (1e6 x 1e6, libpng's own limit) fails before the pixels are allocated.
  Bytes huge = good;
  for (size_t at : {16, 20})
    std::copy_n(Bytes{0x00, 0x0f, 0x42, 0x40}.begin(), 4, huge.begin() + static_cast<std::ptrdiff_t>(at));
  uint32_t crc = static_cast<uint32_t>(crc32(0, huge.data() + 12, 17));  // over "IHDR" and its 13 bytes
  for (int i = 0; i < 4; ++i) huge[29 + static_cast<size_t>(i)] = static_cast<uint8_t>(crc >> (24 - 8 * i));
  write_bytes(path, huge);
  EXPECT_EMBER_ERROR(data::decode_image(path), "decode_image: ", path.c_str(),
                     "declares 1000000 x 1000000 pixels, more than the limit");
  Bytes header(good.begin(), good.begin() + 8);
  header.resize(40, 7);
  write_bytes(path, header);
  EXPECT_EMBER_ERROR(data::decode_image(path), "decode_image: ", path.c_str(), "is not a valid PNG image");
}

TEST(ImageFolderPng, GetDecodesTheSample) {
  if (!data::has_png()) GTEST_SKIP() << "ember was built without libpng";
  TempDir dir;
  const Bytes cat = pattern(2 * 3 * 3), dog = pattern(4 * 1, 9);
  write_png(dir.new_file("cat/0.png"), 3, 2, PNG_FORMAT_RGB, cat);
  write_png(dir.new_file("dog/0.PNG"), 1, 4, PNG_FORMAT_GRAY, dog);
  data::ImageFolder f(dir.path());
  data::Example e = f.get(1);
  ASSERT_EQ(e.size(), 2u);
  EXPECT_CLOSE(e[0], chw(dog, 4, 1, 1));
  EXPECT_EQ(e[1].dim(), 0);
  EXPECT_EQ(e[1].dtype(), kInt64);
  EXPECT_EQ(e[1].item<int64_t>(), 1);
  EXPECT_CLOSE(f.get(0)[0], chw(cat, 2, 3, 3));
  EXPECT_EQ(f.get(0)[1].item<int64_t>(), 0);
}

}  // namespace ember::testing
