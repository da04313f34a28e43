#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ember/data/dataset.h"

namespace ember::data {

// torchvision's ImageFolder: root/<class>/**/<file>.{png,jpg,jpeg} (extensions in any case).
// Classes are the sorted subfolder names; samples are listed class by class in torchvision's
// order (folders sorted by path, files by name). get(i) decodes sample i: (image uint8 [3, H, W]
// RGB, label int64 scalar).
class ImageFolder : public Dataset {
 public:
  explicit ImageFolder(const std::string& root);

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  Example get(int64_t index) const override;  // negative indices count from the end
  const std::vector<std::string>& classes() const { return classes_; }
  const std::map<std::string, int64_t>& class_to_idx() const { return class_to_idx_; }
  const std::vector<std::pair<std::string, int64_t>>& samples() const { return samples_; }  // (path, class)

 private:
  std::vector<std::string> classes_;
  std::map<std::string, int64_t> class_to_idx_;
  std::vector<std::pair<std::string, int64_t>> samples_;
};

}  // namespace ember::data
