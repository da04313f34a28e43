#include "ember/core/device.h"

#include "ember/core/error.h"

namespace ember {

Device::Device(const std::string& spec) {
  auto colon = spec.find(':');
  std::string kind = spec.substr(0, colon);
  if (kind == "cpu") {
    type = DeviceType::CPU;
  } else if (kind == "cuda") {
    type = DeviceType::CUDA;
  } else {
    throw Error("Device: expected 'cpu', 'cuda' or 'cuda:N', got '" + spec + "'");
  }
  if (colon != std::string::npos) {
    size_t used = 0;
    int i = -1;
    try {
      i = std::stoi(spec.substr(colon + 1), &used);
    } catch (const std::exception&) {
    }
    EMBER_CHECK(used == spec.size() - colon - 1 && i >= 0 && i < 128, "Device: bad device index in '", spec,
                "'");
    EMBER_CHECK(type == DeviceType::CUDA || i == 0, "Device: cpu has only index 0, got '", spec, "'");
    index = static_cast<int8_t>(i);
  }
}

std::string Device::str() const {
  std::string s = is_cpu() ? "cpu" : "cuda";
  if (index >= 0) {
    s += ':';
    s += std::to_string(index);
  }
  return s;
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace ember
