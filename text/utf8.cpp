#include "ember/text/utf8.h"

namespace ember::text {

namespace {

struct Step {
  char32_t cp;  // kReplacementChar when !valid
  size_t length;
  bool valid;
};

// The code point at bytes[i], or the maximal ill-formed subsequence there.
Step next(std::string_view bytes, size_t i) {
  const auto b = static_cast<unsigned char>(bytes[i]);
  if (b < 0x80) return {b, 1, true};
  // The lead byte fixes the length and the range of the first continuation byte, which rules out
  // overlong forms (E0, F0), surrogates (ED) and code points past U+10FFFF (F4).
  size_t len = 0;
  char32_t cp = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    len = 2, cp = b & 0x1F;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3, cp = b & 0x0F;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4, cp = b & 0x07;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return {kReplacementChar, 1, false};
  }
  size_t k = 1;
  for (; k < len && i + k < bytes.size(); ++k) {
    const auto c = static_cast<unsigned char>(bytes[i + k]);
    if (c < lo || c > hi) break;
    cp = (cp << 6) | (c & 0x3F);
    lo = 0x80, hi = 0xBF;
  }
  if (k < len) return {kReplacementChar, k, false};
  return {cp, k, true};
}

}  // namespace

std::u32string decode_utf8(std::string_view bytes) {
  std::u32string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const Step s = next(bytes, i);
    out.push_back(s.cp);
    i += s.length;
  }
  return out;
}

bool is_valid_utf8(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    const Step s = next(bytes, i);
    if (!s.valid) return false;
    i += s.length;
  }
  return true;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string encode_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) append_utf8(out, c);
  return out;
}

}  // namespace ember::text
