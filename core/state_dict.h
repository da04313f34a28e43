#pragma once

#include <map>
#include <string>

#include "ember/core/ordered_dict.h"
#include "ember/core/tensor.h"

namespace ember {

// The saved state of anything that is not only tensors (optimizers, schedulers, the grad scaler,
// a training checkpoint): named tensors plus named scalar/string values. Numbers are stored as
// text that round-trips exactly ("%.17g"), so a checkpoint restores them bit for bit. It maps
// onto a safetensors file: tensors plus the string-to-string "__metadata__".
struct StateDict {
  OrderedDict<Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

}  // namespace ember
