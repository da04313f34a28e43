#include "ember/core/op_registry.h"

#include "ember/core/error.h"

namespace ember {
namespace {
std::vector<OpSchema>& ops() {
  static std::vector<OpSchema> v;
  return v;
}
}  // namespace

const std::vector<OpSchema>& registered_ops() { return ops(); }

const OpSchema* find_op(std::string_view name) {
  for (const OpSchema& s : ops())
    if (s.name == name) return &s;
  return nullptr;
}

OpRegistrar::OpRegistrar(std::initializer_list<OpSchema> list) {
  for (const OpSchema& s : list) {
    if (find_op(s.name))
      throw Error(std::string("op registry: '") + std::string(s.name) + "' declared twice");
    ops().push_back(s);
  }
}

}  // namespace ember
