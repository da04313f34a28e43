#include "ember/core/allocation_context.h"

#include <vector>

namespace ember::detail {

std::atomic<bool> g_record_allocation_context{false};

namespace {
thread_local std::vector<std::string> t_contexts;
}  // namespace

const std::string& current_allocation_context() {
  static const std::string none;
  return t_contexts.empty() ? none : t_contexts.back();
}

void AllocationContext::push(const char* name) {
  t_contexts.emplace_back(name);
  pushed_ = true;
}

void AllocationContext::pop() { t_contexts.pop_back(); }

}  // namespace ember::detail
