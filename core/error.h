#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ember {

// Every error the public API raises: the message starts with the op and says what was wrong.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// A device allocation that failed even after the allocator released its cached memory; the
// process can go on (free tensors, then retry).
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace ember

// EMBER_CHECK(cond, "op: ", what, ...) throws ember::Error with the concatenated message.
#define EMBER_CHECK(cond, ...)                                                \
  do {                                                                        \
    if (!(cond)) throw ::ember::Error(::ember::detail::str_cat(__VA_ARGS__)); \
  } while (0)
