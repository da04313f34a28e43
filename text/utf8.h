#pragma once

#include <string>
#include <string_view>

namespace ember::text {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// UTF-8 to code points. Each maximal ill-formed subsequence (Unicode's recommended practice, which
// Python's bytes.decode("utf-8", errors="replace") follows) becomes one U+FFFD: invalid input is
// replaced, never an error, and a valid character after a broken one is kept.
std::u32string decode_utf8(std::string_view bytes);
bool is_valid_utf8(std::string_view bytes);

void append_utf8(std::string& out, char32_t c);
std::string encode_utf8(std::u32string_view text);

}  // namespace ember::text
