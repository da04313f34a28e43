// BertConfig::from_file and to_json_file when CMake did not find nlohmann-json (see bert_config_json.cpp).
#include "ember/examples/models/bert_config.h"

namespace ember::models {

BertConfig BertConfig::from_file(const std::string& path) {
  throw Error("BertConfig: cannot read " + path +
              ": ember_models was built without nlohmann-json (install nlohmann-json3-dev and reconfigure)");
}

void BertConfig::to_json_file(const std::string& path, const std::string&,
                              const std::vector<std::string>&) const {
  throw Error("BertConfig: cannot write " + path +
              ": ember_models was built without nlohmann-json (install nlohmann-json3-dev and reconfigure)");
}

}  // namespace ember::models
