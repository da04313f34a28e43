// Python's unicodedata and str methods through utf8proc. utf8proc follows a newer Unicode than
// some Pythons (2.8: Unicode 15, Python 3.11: 14): characters assigned in between differ.
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <vector>

#include "ember/core/error.h"
#include "ember/text/unicode.h"
#include "ember/text/utf8.h"

namespace ember::text {

namespace {

// utf8proc_decompose on code points: re-encoded to UTF-8 because that is what it takes.
std::vector<utf8proc_int32_t> decompose(std::u32string_view text, int options) {
  const std::string bytes = encode_utf8(text);
  const auto* str = reinterpret_cast<const utf8proc_uint8_t*>(bytes.data());
  const auto len = static_cast<utf8proc_ssize_t>(bytes.size());
  std::vector<utf8proc_int32_t> buf(text.size() + 8);
  auto options_t = static_cast<utf8proc_option_t>(options);
  utf8proc_ssize_t n =
      utf8proc_decompose(str, len, buf.data(), static_cast<utf8proc_ssize_t>(buf.size()), options_t);
  if (n > static_cast<utf8proc_ssize_t>(buf.size())) {
    buf.resize(static_cast<size_t>(n));
    n = utf8proc_decompose(str, len, buf.data(), n, options_t);
  }
  EMBER_CHECK(n >= 0, "text: utf8proc_decompose failed: ", utf8proc_errmsg(n));
  buf.resize(static_cast<size_t>(n));
  return buf;
}

bool all_ascii(std::u32string_view text) {
  return std::all_of(text.begin(), text.end(), [](char32_t c) { return c < 0x80; });
}

bool is_cased(char32_t c) {
  const auto cp = static_cast<utf8proc_int32_t>(c);
  return utf8proc_islower(cp) || utf8proc_isupper(cp) || utf8proc_category(cp) == UTF8PROC_CATEGORY_LT;
}

// Unicode's Case_Ignorable: categories Mn, Me, Cf, Lm, Sk, or Word_Break MidLetter, MidNumLet or
// Single_Quote; utf8proc has no Word_Break, so those 17 code points are listed.
bool is_case_ignorable(char32_t c) {
  static constexpr std::array<char32_t, 17> kWordBreakMid = {0x27,   0x2E,   0x3A,   0xB7,   0x387,  0x55F,
                                                             0x5F4,  0x2018, 0x2019, 0x2024, 0x2027, 0xFE13,
                                                             0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A};
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_SK:
      return true;
    default:
      return std::find(kWordBreakMid.begin(), kWordBreakMid.end(), c) != kWordBreakMid.end();
  }
}

// CPython's handle_capital_sigma: a cased letter (case-ignorables skipped) before position i and
// none after it.
bool is_final_sigma(std::u32string_view text, size_t i) {
  size_t j = i;
  while (j > 0 && is_case_ignorable(text[j - 1])) --j;
  if (j == 0 || !is_cased(text[j - 1])) return false;
  size_t k = i + 1;
  while (k < text.size() && is_case_ignorable(text[k])) ++k;
  return k == text.size() || !is_cased(text[k]);
}

}  // namespace

bool has_utf8proc() { return true; }

std::string_view general_category(char32_t c) {
  return utf8proc_category_string(static_cast<utf8proc_int32_t>(c));
}

bool is_space(char32_t c) {
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
  return p->category == UTF8PROC_CATEGORY_ZS || p->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
         p->bidi_class == UTF8PROC_BIDI_CLASS_B || p->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

std::u32string nfd(std::u32string_view text) {
  if (all_ascii(text)) return std::u32string(text);
  const std::vector<utf8proc_int32_t> cps = decompose(text, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
  return std::u32string(cps.begin(), cps.end());
}

std::u32string nfc(std::u32string_view text) {
  if (all_ascii(text)) return std::u32string(text);
  const int options = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
  std::vector<utf8proc_int32_t> cps = decompose(text, options);
  const utf8proc_ssize_t n = utf8proc_normalize_utf32(cps.data(), static_cast<utf8proc_ssize_t>(cps.size()),
                                                      static_cast<utf8proc_option_t>(options));
  EMBER_CHECK(n >= 0, "text: utf8proc_normalize_utf32 failed: ", utf8proc_errmsg(n));
  return std::u32string(cps.begin(), cps.begin() + n);
}

std::u32string lower(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char32_t c = text[i];
    if (c == 0x130) {  // the one unconditional multi-character lower-case mapping (SpecialCasing.txt)
      out += U"i\u0307";
    } else if (c == 0x3A3) {
      out.push_back(is_final_sigma(text, i) ? 0x3C2 : 0x3C3);
    } else {
      out.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
  }
  return out;
}

}  // namespace ember::text
