#include "ember/data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "ember/core/factories.h"
#include "ember/data/image_decode.h"

namespace fs = std::filesystem;

namespace ember::data {

namespace {

bool is_image(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

// The image files under `dir`, in torchvision's order: sorted(os.walk(dir)) then sorted names,
// i.e. by (folder, file name), so a folder's own files come before its subfolders'.
std::vector<fs::path> image_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const fs::directory_entry& e :
       fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink))
    if (e.is_regular_file() && is_image(e.path())) files.push_back(e.path());
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    return std::pair(a.parent_path().string(), a.filename().string()) <
           std::pair(b.parent_path().string(), b.filename().string());
  });
  return files;
}

}  // namespace

ImageFolder::ImageFolder(const std::string& root) {
  EMBER_CHECK(fs::is_directory(root), "ImageFolder: ", root, " is not a directory");
  for (const fs::directory_entry& e : fs::directory_iterator(root))
    if (e.is_directory()) classes_.push_back(e.path().filename().string());
  EMBER_CHECK(!classes_.empty(), "ImageFolder: ", root,
              " has no class folders (expected root/<class>/<image>)");
  std::sort(classes_.begin(), classes_.end());
  for (size_t c = 0; c < classes_.size(); ++c) {
    const int64_t label = static_cast<int64_t>(c);
    class_to_idx_[classes_[c]] = label;
    for (const fs::path& p : image_files(fs::path(root) / classes_[c]))
      samples_.emplace_back(p.string(), label);
  }
  EMBER_CHECK(!samples_.empty(), "ImageFolder: found no .png, .jpg or .jpeg files in the ", classes_.size(),
              " class folders of ", root);
}

Example ImageFolder::get(int64_t index) const {
  const auto& [path, label] = samples_[static_cast<size_t>(detail::wrap_index("ImageFolder", index, size()))];
  return {decode_image(path), full({}, label, kInt64)};
}

}  // namespace ember::data
