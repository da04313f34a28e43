// Without nlohmann-json: a TokenizerConfig built in code still works; the file cannot be read.
#include "ember/text/tokenizer_config.h"
#include "ember/core/error.h"

namespace ember::text {

bool has_nlohmann_json() { return false; }

TokenizerConfig read_tokenizer_config(const std::string& path) {
  throw Error(
      detail::str_cat("read_tokenizer_config: cannot read ", path,
                      ": ember built without nlohmann-json (install nlohmann-json3-dev and rebuild)"));
}

}  // namespace ember::text
