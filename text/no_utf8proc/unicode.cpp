// Without utf8proc: BertTokenizer's constructor refuses (has_utf8proc()), and any direct call
// says what is missing.
#include "ember/text/unicode.h"

#include "ember/core/error.h"

namespace ember::text {

namespace {
[[noreturn]] void missing(const char* what) {
  throw Error(detail::str_cat("text::", what,
                              ": ember built without utf8proc (install libutf8proc-dev and rebuild)"));
}
}  // namespace

bool has_utf8proc() { return false; }
std::string_view general_category(char32_t) { missing("general_category"); }
bool is_space(char32_t) { missing("is_space"); }
std::u32string nfc(std::u32string_view) { missing("nfc"); }
std::u32string nfd(std::u32string_view) { missing("nfd"); }
std::u32string lower(std::u32string_view) { missing("lower"); }

}  // namespace ember::text
