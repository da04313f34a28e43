#include <ember/data/image_decode.h>
#include <ember/data/image_folder.h>

#include "data/data_files.h"
#include "test_util.h"

namespace ember::testing {

using Samples = std::vector<std::pair<std::string, int64_t>>;

TEST(ImageFolder, ListsClassesAndSamplesInTorchvisionOrder) {
  TempDir dir;
  for (const char* name : {"dog/b.png", "dog/a.JPG", "dog/notes.txt", "dog/sub/a.png", "dog/sub b/c.jpeg",
                           "dog/c.Jpeg", "cat/x.png", "empty/readme.md", "bird/0.jpg", "stray.png"})
    write_bytes(dir.new_file(name), {'n', 'o', 't', ' ', 'a', 'n', ' ', 'i', 'm', 'a', 'g', 'e'});
  data::ImageFolder f(dir.path());
  EXPECT_EQ(f.classes(), (std::vector<std::string>{"bird", "cat", "dog", "empty"}));
  EXPECT_EQ(f.class_to_idx(),
            (std::map<std::string, int64_t>{{"bird", 0}, {"cat", 1}, {"dog", 2}, {"empty", 3}}));
  // A folder's own files (sorted by name) come before its subfolders', as sorted(os.walk(...)).
  EXPECT_EQ(f.samples(), (Samples{{dir.new_file("bird/0.jpg"), 0},
                                  {dir.new_file("cat/x.png"), 1},
                                  {dir.new_file("dog/a.JPG"), 2},
                                  {dir.new_file("dog/b.png"), 2},
                                  {dir.new_file("dog/c.Jpeg"), 2},
                                  {dir.new_file("dog/sub/a.png"), 2},
                                  {dir.new_file("dog/sub b/c.jpeg"), 2}}));
  EXPECT_EQ(f.size(), 7);
  EXPECT_EMBER_ERROR(f.get(7), "ImageFolder: index 7 is out of range for a dataset of size 7");
  std::string last = dir.new_file("dog/sub b/c.jpeg");
  EXPECT_EMBER_ERROR(f.get(-1), "decode_image: ", last.c_str(),
                     "is neither a PNG nor a JPEG image (it starts with bytes [6e 6f 74 20 61 6e 20 69])");
}

TEST(ImageFolder, RejectsRootsWithoutImages) {
  TempDir dir;
  std::string missing = dir.new_file("missing");
  EXPECT_EMBER_ERROR(data::ImageFolder{missing}, "ImageFolder: ", missing.c_str(), "is not a directory");
  write_bytes(dir.new_file("a.png"), {});
  EXPECT_EMBER_ERROR(data::ImageFolder{dir.path()}, "ImageFolder: ", dir.path().c_str(),
                     "has no class folders");
  write_bytes(dir.new_file("cat/a.txt"), {});
  std::filesystem::create_directories(dir.new_file("dog"));
  EXPECT_EMBER_ERROR(data::ImageFolder{dir.path()},
                     "ImageFolder: found no .png, .jpg or .jpeg files in the 2 class folders of ",
                     dir.path().c_str());
}

TEST(DecodeImage, RejectsMissingAndUnknownFiles) {
  TempDir dir;
  std::string path = dir.new_file("a.png");
  EXPECT_EMBER_ERROR(data::decode_image(path), "decode_image: cannot open ", path.c_str(), "No such file");
  write_bytes(path, {'G', 'I', 'F', '8', '9', 'a'});
  EXPECT_EMBER_ERROR(data::decode_image(path), "decode_image: ", path.c_str(),
                     "is neither a PNG nor a JPEG image (it starts with bytes [47 49 46 38 39 61])");
  write_bytes(path, {});
  EXPECT_EMBER_ERROR(data::decode_image(path), path.c_str(),
                     "is neither a PNG nor a JPEG image (it starts with bytes [])");
}

TEST(DecodeImage, SaysWhichLibraryIsMissing) {
  if (data::has_png() && data::has_jpeg()) GTEST_SKIP() << "ember was built with libpng and libjpeg";
  TempDir dir;
  std::string png = dir.new_file("a.png"), jpeg = dir.new_file("a.jpg");
  write_bytes(png, {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0});
  write_bytes(jpeg, {0xff, 0xd8, 0xff, 0xe0, 0});
  if (!data::has_png())
    EXPECT_EMBER_ERROR(data::decode_image(png), "decode_image: ", png.c_str(),
                       "is a PNG image and ember was built without libpng");
  if (!data::has_jpeg())
    EXPECT_EMBER_ERROR(data::decode_image(jpeg), "decode_image: ", jpeg.c_str(),
                       "is a JPEG image and ember was built without libjpeg");
}

}  // namespace ember::testing
